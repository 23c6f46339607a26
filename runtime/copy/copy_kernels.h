// The device kernels of fj_copy and fj_prefetch (runtime/copy/kernels/),
// embedded in the library by cmake/embed.cmake, built through a
// KernelSource (the runtime's builder and loader) like any module, so they
// are cached in memory and on disk per target and copy implementation, and
// launched by CopyKernels.
//
//   tile_copy.cu  fj_tile_copy: a window of a tensor into another, tile by
//                 tile through <fleetjit/copy.cuh> (one module per element
//                 width and rank: -DFJ_EB, -DFJ_RANK)
//   prefetch.cu   fj_prefetch_rows: fj::prefetch_l2 over rows of bytes
#ifndef FLEETJIT_RUNTIME_COPY_COPY_KERNELS_H_
#define FLEETJIT_RUNTIME_COPY_COPY_KERNELS_H_

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/copy/copy_request.h"
#include "runtime/device/device.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module.h"

namespace fleetjit::copy {

struct EmbeddedKernel {
  absl::string_view path;  // relative to runtime/copy/kernels/
  absl::string_view content;
};
extern const EmbeddedKernel kCopyKernels[];
extern const size_t kCopyKernelsCount;

// The kernel source `file` ("tile_copy.cu"); INTERNAL if not embedded.
absl::StatusOr<absl::string_view> CopyKernelSource(absl::string_view file);

// Parameter blocks, byte for byte the structs the kernels declare.
struct CopyKernelArgs {
  int64_t tiles[5];
  int64_t total;
  int32_t start[5];
  int32_t index_bytes;
  uint64_t index;
  int64_t index_stride;
  int64_t src_rows;
  int32_t scatter_bytes;
  int32_t unused;
  uint64_t scatter;
  int64_t scatter_stride;
  int64_t dst_rows;
};
static_assert(sizeof(CopyKernelArgs) == 128, "matches fj_copy_args");

struct PrefetchKernelArgs {
  uint64_t base;
  uint64_t row_bytes;
  int64_t count[4];
  int64_t stride[4];
  uint64_t piece;
  int64_t pieces_per_row;
  int64_t total;
};
static_assert(sizeof(PrefetchKernelArgs) == 104, "matches fj_prefetch_args");

inline constexpr absl::string_view kTileCopyKernel = "fj_tile_copy";
inline constexpr absl::string_view kPrefetchKernel = "fj_prefetch_rows";
// Pipeline depth of the copy kernel (FJ_STAGES).
inline constexpr int kCopyStages = 2;
// The copy kernel's launch per implementation: the longest tile row, the
// largest tile, persistent CTAs per SM and threads per CTA. From
// bench/copy_bench's sweep on the H200 (2026-11-30): tma is best with few
// large tiles (one thread issues them), cp_async and sync with more, smaller
// CTAs (their threads do the copying). These are the shipped shapes: each
// device's own are tuned once per device model
// (runtime/tuning/copy_window_tune.cc, docs/tuning.md) and set with
// CopyKernels::SetShape.
struct CopyLaunchShape {
  uint32_t max_row_bytes;
  uint32_t max_tile_bytes;
  int ctas_per_sm;
  int threads;
  bool operator==(const CopyLaunchShape& o) const {
    return max_row_bytes == o.max_row_bytes &&
           max_tile_bytes == o.max_tile_bytes && ctas_per_sm == o.ctas_per_sm &&
           threads == o.threads;
  }
};
inline constexpr CopyLaunchShape CopyShapeFor(jit::CopyImpl impl) {
  // sync: whole 16 KiB rows (its loads are the threads' own, a long row
  // walks in few steps); cp_async: 1 KiB x 16 rows. On the H200's 2 GiB
  // window (bench/results/2026-12-04-h200-window-rows-a45d140.txt) these took
  // sync from 0.856 to 0.898 of a contiguous copy and cp_async from 0.885
  // to 0.920 against the earlier shared {512, 32768, 3, 128}.
  switch (impl) {
    case jit::CopyImpl::kTma:
      return CopyLaunchShape{1024, 65536, 1, 256};
    case jit::CopyImpl::kCpAsync:
      return CopyLaunchShape{1024, 16384, 4, 128};
    default:
      return CopyLaunchShape{16384, 16384, 4, 128};
  }
}

// The build of the copy kernel for `elem_bytes` (1, 2, 4, 8) and `rank`
// (1..5) on `device` (or `target` when set), under `impl` (unset = the
// runtime's choice).
absl::StatusOr<BuildSpec> TileCopyBuild(int elem_bytes, int rank, int device,
                                        std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target = {});
// The build of the prefetch kernel.
absl::StatusOr<BuildSpec> PrefetchBuild(int device,
                                        std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target = {});

// What the copy kernels ask of the runtime that owns them (the facade
// implements it with its builder and loader, runtime/runtime.cc).
class KernelSource {
 public:
  virtual ~KernelSource() = default;
  // A launchable kernel: `kernel` of the embedded source `spec` (one of the
  // builds above), built like any module and loaded on spec.device. Its
  // errors say which step failed ("building the copy kernel", "loading the
  // copy kernel").
  virtual absl::StatusOr<LoadedKernel*> KernelFor(const BuildSpec& spec,
                                                  absl::string_view kernel) = 0;
  // The copy implementation builds for `device` get when none is asked for:
  // the device's plan under the runtime's overrides.
  virtual absl::StatusOr<jit::CopyImpl> DefaultImpl(int device) const = 0;
  // Called once per (device, impl), by the first copy that launches there
  // with the shipped shape: the runtime looks up (or tunes, in the
  // background) the device's own shape and hands it to SetShape. Must not
  // block the copy.
  virtual void ShapeWanted(int device, jit::CopyImpl impl) {}
};

// The copy and prefetch kernels of one runtime: each (device, impl, element
// width, rank) built and loaded once, then launched. Thread-safe.
class CopyKernels {
 public:
  // `devices` and `source` outlive this.
  CopyKernels(const DeviceList& devices, KernelSource& source)
      : devices_(devices), source_(source) {}

  // Launches fj_tile_copy for `v` on `device`'s `stream`, with src read at
  // `src_address`. `host_operand`: an operand is host memory (or staged
  // there), so tma gives way to cp_async. The tensors are encoded here
  // (TensorEncoder::EncodeDescribed) and launched with LaunchEncoded.
  // `shape`: launch with it instead of the device's (the tuner's
  // candidates); it applies when `v`'s implementation stays the one
  // launched.
  absl::Status LaunchCopy(const ValidatedCopy& v, uint64_t src_address,
                          bool host_operand, int device, CUstream stream,
                          std::optional<CopyLaunchShape> shape = {});
  // Launches fj_prefetch_rows over `rows` on `device`'s `stream`.
  absl::Status LaunchPrefetch(const PrefetchRows& rows, int device,
                              CUstream stream);
  // The launch shape of copies on `device` under `impl`: the one SetShape
  // gave (a tuned shape), else the shipped CopyShapeFor(impl).
  CopyLaunchShape ShapeFor(int device, jit::CopyImpl impl);
  void SetShape(int device, jit::CopyImpl impl, const CopyLaunchShape& shape);
  // fj_tile_copy launches so far.
  uint64_t copies_launched() const {
    return n_copies_.load(std::memory_order_relaxed);
  }

 private:
  absl::StatusOr<LoadedKernel*> Kernel(int device, jit::CopyImpl impl,
                                       int elem_bytes, int rank);

  // How many CTAs of `k` with `threads` and `shared_bytes` of dynamic SMEM
  // fit on one SM at once (the driver's occupancy), cached; 0 when this
  // driver cannot say.
  absl::StatusOr<int> ResidentPerSm(LoadedKernel& k, int threads,
                                    uint32_t shared_bytes);

  const DeviceList& devices_;
  KernelSource& source_;
  absl::Mutex mu_;
  // (device, impl, elem_bytes, rank); rank 0 = the prefetch kernel.
  std::map<std::tuple<int, int, int, int>, LoadedKernel*> kernels_
      ABSL_GUARDED_BY(mu_);
  // (kernel, threads, dynamic SMEM) -> CTAs resident per SM (0: unknown).
  std::map<std::tuple<const LoadedKernel*, int, uint32_t>, int> resident_
      ABSL_GUARDED_BY(mu_);
  // (device, impl) -> shape; an entry is made by the first ShapeFor (the
  // shipped shape, ShapeWanted called) and replaced by SetShape.
  std::map<std::pair<int, int>, CopyLaunchShape> shapes_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> n_copies_{0};
};

}  // namespace fleetjit::copy

#endif  // FLEETJIT_RUNTIME_COPY_COPY_KERNELS_H_
