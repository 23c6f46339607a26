// Build time: what the copy layer and fleetjit add to an NVRTC compile.
//  1. bare NVRTC, a plain copy kernel with no includes        (anchor)
//  2. fleetjit cold build of that kernel (cache miss), to the returned
//     module: what a caller waits for                         goal <= 1.05x
//     and, separately, to the end of its background work (launch thunk
//     object + disk publication, which no longer delay the caller)
//  3. the same kernel written with <fleetjit/copy.cuh>, bare NVRTC + the
//     embedded headers                                          goal <= 1.25x
//  4. fleetjit cold build of the copy.cuh kernel
//  5. a libcu++ <cuda/barrier> + memcpy_async kernel (what users would
//     include instead; docs/measurements.md: 1.05-1.57 s)
//  6. row 3 through an NVRTC precompiled header (made once in this
//     process: jit/nvrtc_pch.h), and rows 3 and 6 for a kernel that also
//     includes <cuda_fp16.h> and <cuda_bf16.h> (-I/usr/local/cuda/include)
//  7. fleetjit cold builds of examples/saxpy.cu (anchor) and
//     examples/pipelined_tiles.cu (a real user of the layer)  goal <= 3x
// Medians of 7 compiles for sm_90 (no GPU needed). Every compiled source is
// unique (a counter in a comment) so no cache can answer.
#include <nvrtc.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "jit/embedded.h"
#include "jit/nvrtc_pch.h"
#include "platform/nvrtc_library.h"
#include "runtime/runtime.h"
#include "tools/bundled_kernels.h"
#include "jit/target.h"

namespace fleetjit::bench {
namespace {

constexpr const char* kPlain = measure::kPlainKernel;  // as `fleetjit bench build`

constexpr const char* kWithLayer = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void copy(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out, int tiles_x) {
  __shared__ __align__(128) float tile[64 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::coords at = fj::at((blockIdx.x % tiles_x) * 64, (blockIdx.x / tiles_x) * 32);
  fj::load_tile(tile, in, at, bar);
  bar.arrive();
  bar.wait(0);
  fj::store_tile(out, at, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

constexpr const char* kLibcuxx = R"(
#include <cuda/barrier>
#include <cooperative_groups.h>
extern "C" __global__ void copy(const float* in, float* out, int n) {
  __shared__ float tile[1024];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  auto block = cooperative_groups::this_thread_block();
  if (block.thread_rank() == 0) init(&bar, block.size());
  block.sync();
  cuda::memcpy_async(block, tile, in + blockIdx.x * 1024, sizeof(tile), bar);
  bar.arrive_and_wait();
  for (int i = threadIdx.x; i < 1024; i += blockDim.x) out[blockIdx.x * 1024 + i] = tile[i];
}
)";

std::string Unique(const char* source) { return measure::UniqueSource(source); }

// One bare NVRTC compile to a cubin for sm_90 (measure::BareNvrtcMs, as
// `fleetjit bench build`), with the embedded headers when `headers`;
// returns ms, or -1 on failure.
double BareNvrtc(const NvrtcApi& api, const std::string& source, bool headers,
                 const std::vector<std::string>& extra = {},
                 bool* pch_created = nullptr) {
  std::vector<measure::Header> files;
  if (headers) {
    for (size_t i = 0; i < jit::kEmbeddedHeadersCount; ++i) {
      files.push_back({jit::kEmbeddedHeaders[i].path.data(),
                       jit::kEmbeddedHeaders[i].content.data()});
    }
  }
  std::vector<std::string> opts = {"-arch=sm_90", "-std=c++17", "-DFJ_COPY_IMPL=2"};
  opts.insert(opts.end(), extra.begin(), extra.end());
  absl::StatusOr<double> ms = measure::BareNvrtcMs(api, source, opts, files, pch_created);
  if (!ms.ok()) {
    std::fprintf(stderr, "%s\n", std::string(ms.status().message()).c_str());
    return -1;
  }
  return *ms;
}

// Medians of `reps` bare compiles of `source` (with the embedded headers)
// through a PCH made here first: {created ok, median ms}. -1 when NVRTC has
// no PCH support or could not make one.
double BareWithPch(const NvrtcApi& api, const std::string& source,
                   std::vector<std::string> extra, int reps) {
  if (!jit::NvrtcHasPch(api)) return -1;
  char dir[] = "/tmp/fleetjit-bench-pch-XXXXXX";
  if (mkdtemp(dir) == nullptr) return -1;
  const std::string file = std::string(dir) + "/h.pch";
  extra.push_back("--pch-messages=false");
  std::vector<std::string> create = extra, use = extra;
  create.push_back("--create-pch=" + file);
  use.push_back("--use-pch=" + file);
  bool created = false;
  BareNvrtc(api, Unique(source.c_str()), true, create, &created);
  std::vector<double> times;
  for (int i = 0; created && i < reps; ++i) {
    times.push_back(BareNvrtc(api, Unique(source.c_str()), true, use));
  }
  std::remove(file.c_str());
  rmdir(dir);
  return created ? Median(times) : -1;
}

struct ColdTimes {
  double returned_ms;  // Build() call to a returned module: what a caller waits for
  double done_ms;      // Build() call to the end of its background work
                       // (thunk object generated + disk entry published)
  double own_ms;       // returned_ms minus the NVRTC build inside it (jit::
                       // BuildModule, artifact.compile_ms): fleetjit's own
                       // work on the caller's path, free of NVRTC's noise
};

// Through the C++ runtime (the C ABI's fj_module_build is a thin shim over
// Runtime::Build, a few µs), which can also wait for the background work.
ColdTimes FleetjitCold(fleetjit::Runtime& rt, const std::string& source) {
  fleetjit::BuildSpec spec;
  spec.source = source;
  spec.name = "bench.cu";
  spec.target = *fleetjit::jit::ParseTarget("sm_90");
  double t0 = NowMs();
  auto record = rt.BuildRecord(spec);
  double returned = NowMs() - t0;
  if (!record.ok()) {
    std::fprintf(stderr, "build_bench: fleetjit build: %s\n",
                 std::string(record.status().message()).c_str());
    std::exit(1);
  }
  // Waited for here so it never overlaps the next measurement.
  rt.WaitForBackgroundWork();
  double done = NowMs() - t0;
  if (record->source != fleetjit::CacheSource::kCompiled) {
    std::fprintf(stderr, "build_bench: expected a cold build, got a cache hit\n");
    std::exit(1);
  }
  return {returned, done, returned - record->artifact->compile_ms};
}

}  // namespace
}  // namespace fleetjit::bench

int main() {
  using namespace fleetjit::bench;  // NOLINT
  auto api_or = fleetjit::NvrtcLibrary::Default().Get();
  if (!api_or.ok()) {
    std::printf("build_bench: no NVRTC: %s\n", std::string(api_or.status().message()).c_str());
    return 0;
  }
  const fleetjit::NvrtcApi& api = **api_or;
  fleetjit::RuntimeOptions options;
  (void)fleetjit::ApplyCacheEnvironment(options.cache, options.env_overrides);  // FLEETJIT_CACHE_DIR
  auto rt_or = fleetjit::Runtime::Create(options);
  if (!rt_or.ok()) {
    std::printf("build_bench: runtime: %s\n", std::string(rt_or.status().message()).c_str());
    return 1;
  }
  fleetjit::Runtime& rt = **rt_or;
  const int reps = 7;
  // Warm NVRTC itself (its first compile pays its own start-up), and the
  // thunk generator (its first run creates LLVM's target machine).
  BareNvrtc(api, Unique(kPlain), false);
  FleetjitCold(rt, Unique(kPlain));
  FleetjitCold(rt, Unique(kWithLayer));
  std::vector<double> bare, cold, cold_done, cold_own, layer_bare, layer_cold, layer_done;
  std::vector<double> include_only, include_fp16, saxpy_cold, tiles_cold;
  const std::string with_include = std::string("#include <fleetjit/copy.cuh>\n") + kPlain;
  const std::string with_fp16 = std::string(
                                    "#include <fleetjit/copy.cuh>\n#include <cuda_fp16.h>\n"
                                    "#include <cuda_bf16.h>\n") +
                                kPlain;
  const std::vector<std::string> cuda_include = {"-I/usr/local/cuda/include"};
  const fleetjit::cli::BundledKernel* saxpy =
      fleetjit::cli::FindBundledKernel("examples/saxpy.cu");
  const fleetjit::cli::BundledKernel* tiles =
      fleetjit::cli::FindBundledKernel("examples/pipelined_tiles.cu");
  if (saxpy == nullptr || tiles == nullptr) {
    std::fprintf(stderr, "build_bench: the examples are not embedded\n");
    return 1;
  }
  const std::string saxpy_source(saxpy->content), tiles_source(tiles->content);
  FleetjitCold(rt, Unique(tiles_source.c_str()));
  for (int i = 0; i < reps; ++i) {
    bare.push_back(BareNvrtc(api, Unique(kPlain), false));
    include_only.push_back(BareNvrtc(api, Unique(with_include.c_str()), true));
    include_fp16.push_back(BareNvrtc(api, Unique(with_fp16.c_str()), true, cuda_include));
    saxpy_cold.push_back(FleetjitCold(rt, Unique(saxpy_source.c_str())).returned_ms);
    tiles_cold.push_back(FleetjitCold(rt, Unique(tiles_source.c_str())).returned_ms);
    ColdTimes c = FleetjitCold(rt, Unique(kPlain));
    cold.push_back(c.returned_ms);
    cold_done.push_back(c.done_ms);
    cold_own.push_back(c.own_ms);
    layer_bare.push_back(BareNvrtc(api, Unique(kWithLayer), true));
    ColdTimes l = FleetjitCold(rt, Unique(kWithLayer));
    layer_cold.push_back(l.returned_ms);
    layer_done.push_back(l.done_ms);
  }
  double b = Median(bare);
  std::printf("build_bench: NVRTC %d.%d, target sm_90, median of %d\n", api.major, api.minor, reps);
  std::printf("%-60s %9.2f ms  1.00x\n", "bare NVRTC, plain kernel, no includes (anchor)", b);
  std::printf("%-60s %9.2f ms  %.3fx  (goal <= 1.05x)\n",
              "fleetjit cold build, plain kernel (module returned)", Median(cold),
              Median(cold) / b);
  std::printf("%-60s %9.2f ms  %.3fx  (thunk + disk publish, off the caller's path)\n",
              "  ... until its background work is done", Median(cold_done),
              Median(cold_done) / b);
  std::vector<double> cold_nvrtc;
  for (size_t i = 0; i < cold.size(); ++i) cold_nvrtc.push_back(cold[i] - cold_own[i]);
  std::printf("%-60s %9.2f ms  %.3fx  (NVRTC with the embedded headers, PTX + cubin, PTX parameter parse)\n",
              "  ... of which its NVRTC build (jit::BuildModule)", Median(cold_nvrtc),
              Median(cold_nvrtc) / b);
  std::printf("%-60s %9.3f ms  %.3fx  (key, cache lookup, device layouts, queueing)\n",
              "  ... of which fleetjit's own work (outside NVRTC build)", Median(cold_own),
              Median(cold_own) / b);
  std::printf("%-60s %9.2f ms  %.3fx  (goal <= 1.25x: the header's own cost)\n",
              "bare NVRTC, the plain kernel + #include <fleetjit/copy.cuh>", Median(include_only),
              Median(include_only) / b);
  const double include_pch = BareWithPch(api, with_include, {}, reps);
  if (include_pch > 0) {
    std::printf("%-60s %9.2f ms  %.3fx  (PCH made once in-process; off by default)\n",
                "  ... the same through a precompiled header", include_pch, include_pch / b);
  } else {
    std::printf("  ... through a precompiled header: not measured (NVRTC < 12.8)\n");
  }
  std::printf("%-60s %9.2f ms  %.3fx\n",
              "bare NVRTC, + copy.cuh, <cuda_fp16.h>, <cuda_bf16.h>", Median(include_fp16),
              Median(include_fp16) / b);
  const double fp16_pch = BareWithPch(api, with_fp16, cuda_include, reps);
  if (fp16_pch > 0) {
    std::printf("%-60s %9.2f ms  %.3fx\n", "  ... the same through a precompiled header",
                fp16_pch, fp16_pch / b);
  }
  std::printf("%-60s %9.2f ms  %.3fx\n", "fleetjit cold build, examples/saxpy.cu (anchor 2)",
              Median(saxpy_cold), Median(saxpy_cold) / b);
  std::printf("%-60s %9.2f ms  %.3fx  vs saxpy (anchor 2, %.2f ms)  (goal <= 3x)\n",
              "fleetjit cold build, examples/pipelined_tiles.cu", Median(tiles_cold),
              Median(tiles_cold) / Median(saxpy_cold), Median(saxpy_cold));
  std::printf("%-60s %9.2f ms  %.3fx  (a TMA tile copy: the layer's code generation too)\n",
              "bare NVRTC, tile-copy kernel using <fleetjit/copy.cuh>",
              Median(layer_bare), Median(layer_bare) / b);
  std::printf("%-60s %9.2f ms  %.3fx\n", "fleetjit cold build, copy.cuh kernel (module returned)",
              Median(layer_cold), Median(layer_cold) / b);
  std::printf("%-60s %9.2f ms  %.3fx\n", "  ... until its background work is done",
              Median(layer_done), Median(layer_done) / b);
  std::vector<std::string> cccl = {"-I/usr/local/cuda/include/cccl", "-I/usr/local/cuda/include"};
  double libcuxx = BareNvrtc(api, Unique(kLibcuxx), false, cccl);
  if (libcuxx > 0) {
    std::printf("%-52s %9.2f ms  %.3fx  (one compile)\n", "bare NVRTC, libcu++ <cuda/barrier> kernel",
                libcuxx, libcuxx / b);
  } else {
    std::printf("libcu++ kernel: not measured (CCCL headers not found)\n");
  }
  return 0;
}
