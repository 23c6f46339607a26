// Measuring fleetjit next to its anchor (what a user would call instead),
// shared by the benchmarks (bench/) and `fleetjit bench` (tools/), so both
// time the same way:
//
//   - GPU work (copies): TimeMs runs the work `batch` times back to back,
//     then synchronises, on the host clock; a sample is that time divided
//     by `batch`, and the figure is the median of `samples` samples, after
//     `warmup` (two) untimed runs.
//   - Latency tails (cache hits, remote fetches): Percentile over samples.
//   - Host costs (launches): InterleavedMedians times every case in turn,
//     one batch each per round, so clock and thermal drift hit all alike.
//   - Compiles: each compile gets a source no cache has seen (UniqueSource);
//     BareNvrtcMs is the anchor, one plain NVRTC compile.
//
//   double anchor = TimeMs([&] { memcpy_async(); }, sync);
//   double ours = TimeMs([&] { fj_copy(...); }, sync);
//   printf("%.3fx\n", anchor / ours);  // bandwidth relative to the anchor
#ifndef FLEETJIT_REFERENCE_MEASURE_H_
#define FLEETJIT_REFERENCE_MEASURE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::measure {

// Milliseconds on the steady clock.
double NowMs();
// The median (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v);
// The nearest-rank percentile: the value at index min(n - 1, p * n) of the
// sorted samples (p = 0.99 for p99); 0 for none.
double Percentile(std::vector<double> v, double p);

// Runs body(t) for t = 0 .. threads-1, each on its own thread, released
// together (each waits until every one has started, so none runs alone
// while the others are still being created), and joins them.
void OnThreadsTogether(int threads, const std::function<void(int)>& body);

// Milliseconds per run of `run`: the median over `samples` of `batch` runs
// followed by `sync`, after `warmup` untimed runs and a `sync` (see above).
double TimeMs(const std::function<void()>& run,
              const std::function<void()>& sync, int samples = 10,
              int batch = 5, int warmup = 2);

// Microseconds per call of each of `cases`: `rounds` rounds (after `warmup`
// untimed ones), each timing `batch` calls of every case in turn and then
// calling `settle` untimed (e.g. a synchronisation, so queues never fill).
// Returns the median per case, in the order given.
std::vector<double> InterleavedMedians(
    const std::vector<std::function<void()>>& cases,
    const std::function<void()>& settle, int rounds, int warmup, int batch);

// `source` with a trailing comment no earlier call in any process made
// (a counter, the process id and the time), so no cache answers for it.
std::string UniqueSource(absl::string_view source);

// A plain copy kernel with no includes: what the build benches compile with
// bare NVRTC (the anchor) and with fleetjit.
inline constexpr char kPlainKernel[] = R"(
extern "C" __global__ void copy(const float4* in, float4* out, int n) {
  __shared__ float4 tile[256];
  for (int i = blockIdx.x * 256 + threadIdx.x; i < n; i += gridDim.x * 256) {
    tile[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = tile[threadIdx.x];
    __syncthreads();
  }
}
)";

// An NVRTC input header: name and contents.
struct Header {
  const char* name;
  const char* content;
};

// One plain NVRTC compile of `source` with `options` (e.g. "-arch=sm_90"),
// to its cubin, or its PTX when no -arch=sm_* option is given: milliseconds
// from nvrtcCreateProgram to the image in hand. `pch_created` (if not
// null) says whether the compile made the precompiled header it was asked
// for. A compile error is INTERNAL with NVRTC's log.
absl::StatusOr<double> BareNvrtcMs(const NvrtcApi& api,
                                   const std::string& source,
                                   const std::vector<std::string>& options,
                                   const std::vector<Header>& headers = {},
                                   bool* pch_created = nullptr);

}  // namespace fleetjit::measure

#endif  // FLEETJIT_REFERENCE_MEASURE_H_
