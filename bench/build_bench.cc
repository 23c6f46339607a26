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
//
// `build_bench --fresh N [--dir D]`: what a server's first build costs, in
// fresh processes. Spawns N children per row, rows interleaved, each child
// one runtime and one Build (NVRTC loaded and started in it), its module
// cold, and reports medians of the Build call's wall time, of the child's
// whole life (spawn to exit) and of its CPU time (getrusage of the child:
// steadier than wall time on a shared machine):
//  - examples/saxpy.cu (the anchor);
//  - examples/pipelined_tiles.cu with the PCH file warm (the disk tier holds
//    it, jit/nvrtc_pch.h), absent (an empty cache: the child creates it),
//    and with FLEETJIT_PCH=0;
//  - saxpy + #include <fleetjit/copy.cuh> (the header alone), PCH warm,
//    absent and off;
//  - pipelined_tiles and examples/transpose.cu with the PCH warm, whole and
//    with the copy layer's slow-path library on disk
//    (FLEETJIT_SLOW_PATH_LIBRARY, docs/slow-path-library.md).
// The goal (issue 20): a kernel that includes <fleetjit/copy.cuh> builds in
// a fresh process in at most 1.5x saxpy's time.
#include <nvrtc.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "jit/embedded.h"
#include "jit/nvrtc_pch.h"
#include "jit/target.h"
#include "platform/nvrtc_library.h"
#include "reference/bundled_kernels.h"
#include "runtime/runtime.h"

extern char** environ;

namespace fleetjit::bench {
namespace {

constexpr const char* kPlain =
    measure::kPlainKernel;  // as `fleetjit bench build`

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
  std::vector<std::string> opts = {"-arch=sm_90", "-std=c++17",
                                   "-DFJ_COPY_IMPL=2"};
  opts.insert(opts.end(), extra.begin(), extra.end());
  absl::StatusOr<double> ms =
      measure::BareNvrtcMs(api, source, opts, files, pch_created);
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
  double returned_ms;  // Build() call to a returned module: what a caller waits
                       // for
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
    std::fprintf(stderr,
                 "build_bench: expected a cold build, got a cache hit\n");
    std::exit(1);
  }
  return {returned, done, returned - record->artifact->compile_ms};
}

// --- fresh-process mode -----------------------------------------------

std::string FreshSource(const std::string& kind) {
  const fleetjit::bundled::BundledKernel* k =
      fleetjit::bundled::FindBundledKernel(
          kind == "tiles"       ? "examples/pipelined_tiles.cu"
          : kind == "transpose" ? "examples/transpose.cu"
                                : "examples/saxpy.cu");
  if (k == nullptr) return "";
  std::string source(k->content);
  if (kind == "include") source = "#include <fleetjit/copy.cuh>\n" + source;
  return Unique(source.c_str());
}

// The child: one Build of `kind` on the cache at `dir` (with the copy
// layer's slow-path library when `library`, docs/slow-path-library.md);
// writes "<build ms> <pch file_used> <pch created>" to `out`.
int FreshChild(const std::string& kind, const std::string& dir, bool pch,
               bool library, const std::string& out) {
  fleetjit::RuntimeOptions options;
  options.cache.dir = dir;
  options.pch = pch;
  options.slow_path_library = library;
  const std::string source = FreshSource(kind);
  double t0 = NowMs();
  auto rt = fleetjit::Runtime::Create(options);
  if (!rt.ok()) return 1;
  fleetjit::BuildSpec spec;
  spec.source = source;
  spec.name = kind + ".cu";
  spec.target = *fleetjit::jit::ParseTarget("sm_90");
  double b0 = NowMs();
  auto record = (*rt)->BuildRecord(spec);
  double build = NowMs() - b0;
  if (!record.ok() || record->source != fleetjit::CacheSource::kCompiled) {
    std::fprintf(stderr, "build_bench child: %s\n",
                 record.ok() ? "not a cold build"
                             : std::string(record.status().message()).c_str());
    return 1;
  }
  (*rt)->WaitForBackgroundWork();
  const fleetjit::jit::PchStats s = fleetjit::jit::GetPchStats();
  std::ofstream(out) << build << " " << s.file_used << " " << s.created << " "
                     << NowMs() - t0 << "\n";
  return 0;
}

struct FreshRun {
  double build_ms = -1, life_ms = -1, cpu_ms = -1;
  int file_used = 0, created = 0;
};

FreshRun SpawnChild(const std::string& self, const std::string& kind,
                    const std::string& dir, bool pch, bool library = false) {
  FreshRun r;
  const std::string out = dir + "/.bench-report";
  std::string a0 = self, a1 = "--child", a2 = kind, a3 = dir,
              a4 = pch ? "1" : "0", a5 = out, a6 = library ? "1" : "0";
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data(),
                  a4.data(), a5.data(), a6.data(), nullptr};
  double t0 = NowMs();
  pid_t pid = -1;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, environ) != 0) {
    return r;
  }
  int status = 0;
  struct rusage usage;
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "build_bench: a %s child failed\n", kind.c_str());
    std::exit(1);
  }
  r.life_ms = NowMs() - t0;
  r.cpu_ms = (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
             (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
  std::ifstream in(out);
  double ignored = 0;
  in >> r.build_ms >> r.file_used >> r.created >> ignored;
  std::remove(out.c_str());
  return r;
}

int FreshMain(const std::string& self, int n, std::string root) {
  if (root.empty()) {
    char tmpl[] = "/tmp/fleetjit-bench-fresh-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    root = tmpl;
  }
  // warm: a cache that holds the PCHs (made by one priming child per
  // kernel); each absent run gets an empty cache.
  const std::string warm = root + "/warm";
  std::filesystem::create_directories(warm);
  SpawnChild(self, "tiles", warm, true);
  SpawnChild(self, "include", warm, true);
  SpawnChild(self, "transpose", warm, true);
  // The slow-path libraries these kernels link (each priming child's exit
  // waits for the one it queued).
  SpawnChild(self, "tiles", warm, true, true);
  SpawnChild(self, "transpose", warm, true, true);
  struct Row {
    const char* label;
    const char* kind;
    enum { kWarm, kAbsent, kOff } pch;
    std::vector<FreshRun> runs;
    bool library = false;
  } rows[] = {
      {"examples/saxpy.cu (anchor)", "saxpy", Row::kAbsent, {}},
      {"examples/pipelined_tiles.cu, PCH file warm", "tiles", Row::kWarm, {}},
      {"examples/pipelined_tiles.cu, PCH file absent",
       "tiles",
       Row::kAbsent,
       {}},
      {"examples/pipelined_tiles.cu, FLEETJIT_PCH=0", "tiles", Row::kOff, {}},
      {"saxpy + #include <fleetjit/copy.cuh>, PCH file warm",
       "include",
       Row::kWarm,
       {}},
      {"saxpy + #include <fleetjit/copy.cuh>, PCH file absent",
       "include",
       Row::kAbsent,
       {}},
      {"saxpy + #include <fleetjit/copy.cuh>, FLEETJIT_PCH=0",
       "include",
       Row::kOff,
       {}},
      {"examples/pipelined_tiles.cu, PCH + slow-path library",
       "tiles",
       Row::kWarm,
       {},
       true},
      {"examples/transpose.cu, PCH file warm", "transpose", Row::kWarm, {}},
      {"examples/transpose.cu, PCH + slow-path library",
       "transpose",
       Row::kWarm,
       {},
       true},
  };
  int fresh_dirs = 0;
  for (int i = 0; i < n; ++i) {
    for (Row& row : rows) {
      std::string dir = warm;
      if (row.pch != Row::kWarm) {
        dir = root + "/cold-" + std::to_string(fresh_dirs++);
        std::filesystem::create_directories(dir);
      }
      row.runs.push_back(
          SpawnChild(self, row.kind, dir, row.pch != Row::kOff, row.library));
      if (dir != warm) std::filesystem::remove_all(dir);
    }
  }
  auto median = [](const std::vector<FreshRun>& runs, double FreshRun::*field) {
    std::vector<double> v;
    for (const FreshRun& r : runs) v.push_back(r.*field);
    return Median(v);
  };
  const Row& anchor = rows[0];
  const double a_build = median(anchor.runs, &FreshRun::build_ms),
               a_life = median(anchor.runs, &FreshRun::life_ms),
               a_cpu = median(anchor.runs, &FreshRun::cpu_ms);
  std::printf(
      "build_bench --fresh: %d fresh processes per row (interleaved), "
      "target sm_90, medians; ratios to the anchor\n",
      n);
  std::printf("%-54s %17s %17s %17s %s\n", "", "Build() wall", "process wall",
              "process CPU", "PCH used/made");
  for (const Row& row : rows) {
    const double b = median(row.runs, &FreshRun::build_ms),
                 l = median(row.runs, &FreshRun::life_ms),
                 c = median(row.runs, &FreshRun::cpu_ms);
    int used = 0, made = 0;
    for (const FreshRun& r : row.runs) {
      used += r.file_used;
      made += r.created;
    }
    std::printf(
        "%-54s %8.1f ms %5.2fx %8.1f ms %5.2fx %8.1f ms %5.2fx %d/%d of %zu\n",
        row.label, b, b / a_build, l, l / a_life, c, c / a_cpu, used, made,
        row.runs.size());
  }
  std::printf(
      "goal: a kernel including <fleetjit/copy.cuh> <= 1.5x saxpy "
      "(fresh process, PCH file warm); the slow-path library rows: "
      "FLEETJIT_SLOW_PATH_LIBRARY=1, libraries on disk "
      "(docs/slow-path-library.md)\n");
  std::filesystem::remove_all(root);
  return 0;
}

}  // namespace
}  // namespace fleetjit::bench

int main(int argc, char** argv) {
  if (argc == 7 && std::strcmp(argv[1], "--child") == 0) {
    return fleetjit::bench::FreshChild(argv[2], argv[3],
                                       std::strcmp(argv[4], "1") == 0,
                                       std::strcmp(argv[6], "1") == 0, argv[5]);
  }
  if (argc >= 3 && std::strcmp(argv[1], "--fresh") == 0) {
    std::string dir =
        argc >= 5 && std::strcmp(argv[3], "--dir") == 0 ? argv[4] : "";
    return fleetjit::bench::FreshMain(
        std::filesystem::read_symlink("/proc/self/exe").string(),
        std::atoi(argv[2]), dir);
  }
  using namespace fleetjit::bench;  // NOLINT
  auto api_or = fleetjit::NvrtcLibrary::Default().Get();
  if (!api_or.ok()) {
    std::printf("build_bench: no NVRTC: %s\n",
                std::string(api_or.status().message()).c_str());
    return 0;
  }
  const fleetjit::NvrtcApi& api = **api_or;
  fleetjit::RuntimeOptions options;
  (void)fleetjit::ApplyCacheEnvironment(
      options.cache, options.env_overrides);  // FLEETJIT_CACHE_DIR
  auto rt_or = fleetjit::Runtime::Create(options);
  if (!rt_or.ok()) {
    std::printf("build_bench: runtime: %s\n",
                std::string(rt_or.status().message()).c_str());
    return 1;
  }
  fleetjit::Runtime& rt = **rt_or;
  const int reps = 7;
  // Warm NVRTC itself (its first compile pays its own start-up), and the
  // thunk generator (its first run creates LLVM's target machine).
  BareNvrtc(api, Unique(kPlain), false);
  FleetjitCold(rt, Unique(kPlain));
  FleetjitCold(rt, Unique(kWithLayer));
  std::vector<double> bare, cold, cold_done, cold_own, layer_bare, layer_cold,
      layer_done;
  std::vector<double> include_only, include_fp16, saxpy_cold, tiles_cold;
  const std::string with_include =
      std::string("#include <fleetjit/copy.cuh>\n") + kPlain;
  const std::string with_fp16 =
      std::string(
          "#include <fleetjit/copy.cuh>\n#include <cuda_fp16.h>\n"
          "#include <cuda_bf16.h>\n") +
      kPlain;
  const std::vector<std::string> cuda_include = {"-I/usr/local/cuda/include"};
  const fleetjit::bundled::BundledKernel* saxpy =
      fleetjit::bundled::FindBundledKernel("examples/saxpy.cu");
  const fleetjit::bundled::BundledKernel* tiles =
      fleetjit::bundled::FindBundledKernel("examples/pipelined_tiles.cu");
  if (saxpy == nullptr || tiles == nullptr) {
    std::fprintf(stderr, "build_bench: the examples are not embedded\n");
    return 1;
  }
  const std::string saxpy_source(saxpy->content), tiles_source(tiles->content);
  FleetjitCold(rt, Unique(tiles_source.c_str()));
  for (int i = 0; i < reps; ++i) {
    bare.push_back(BareNvrtc(api, Unique(kPlain), false));
    include_only.push_back(BareNvrtc(api, Unique(with_include.c_str()), true));
    include_fp16.push_back(
        BareNvrtc(api, Unique(with_fp16.c_str()), true, cuda_include));
    saxpy_cold.push_back(
        FleetjitCold(rt, Unique(saxpy_source.c_str())).returned_ms);
    tiles_cold.push_back(
        FleetjitCold(rt, Unique(tiles_source.c_str())).returned_ms);
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
  std::printf("build_bench: NVRTC %d.%d, target sm_90, median of %d\n",
              api.major, api.minor, reps);
  std::printf("%-60s %9.2f ms  1.00x\n",
              "bare NVRTC, plain kernel, no includes (anchor)", b);
  std::printf("%-60s %9.2f ms  %.3fx  (goal <= 1.05x)\n",
              "fleetjit cold build, plain kernel (module returned)",
              Median(cold), Median(cold) / b);
  std::printf(
      "%-60s %9.2f ms  %.3fx  (thunk + disk publish, off the caller's path)\n",
      "  ... until its background work is done", Median(cold_done),
      Median(cold_done) / b);
  std::vector<double> cold_nvrtc;
  for (size_t i = 0; i < cold.size(); ++i)
    cold_nvrtc.push_back(cold[i] - cold_own[i]);
  std::printf(
      "%-60s %9.2f ms  %.3fx  (NVRTC with the embedded headers, PTX + cubin, "
      "PTX parameter parse)\n",
      "  ... of which its NVRTC build (jit::BuildModule)", Median(cold_nvrtc),
      Median(cold_nvrtc) / b);
  std::printf(
      "%-60s %9.3f ms  %.3fx  (key, cache lookup, device layouts, queueing)\n",
      "  ... of which fleetjit's own work (outside NVRTC build)",
      Median(cold_own), Median(cold_own) / b);
  std::printf("%-60s %9.2f ms  %.3fx  (goal <= 1.25x: the header's own cost)\n",
              "bare NVRTC, the plain kernel + #include <fleetjit/copy.cuh>",
              Median(include_only), Median(include_only) / b);
  const double include_pch = BareWithPch(api, with_include, {}, reps);
  if (include_pch > 0) {
    std::printf(
        "%-60s %9.2f ms  %.3fx  (PCH made once in-process; off by default)\n",
        "  ... the same through a precompiled header", include_pch,
        include_pch / b);
  } else {
    std::printf(
        "  ... through a precompiled header: not measured (NVRTC < 12.8)\n");
  }
  std::printf("%-60s %9.2f ms  %.3fx\n",
              "bare NVRTC, + copy.cuh, <cuda_fp16.h>, <cuda_bf16.h>",
              Median(include_fp16), Median(include_fp16) / b);
  const double fp16_pch = BareWithPch(api, with_fp16, cuda_include, reps);
  if (fp16_pch > 0) {
    std::printf("%-60s %9.2f ms  %.3fx\n",
                "  ... the same through a precompiled header", fp16_pch,
                fp16_pch / b);
  }
  std::printf("%-60s %9.2f ms  %.3fx\n",
              "fleetjit cold build, examples/saxpy.cu (anchor 2)",
              Median(saxpy_cold), Median(saxpy_cold) / b);
  std::printf(
      "%-60s %9.2f ms  %.3fx  vs saxpy (anchor 2, %.2f ms)  (goal <= 3x)\n",
      "fleetjit cold build, examples/pipelined_tiles.cu", Median(tiles_cold),
      Median(tiles_cold) / Median(saxpy_cold), Median(saxpy_cold));
  std::printf(
      "%-60s %9.2f ms  %.3fx  (a TMA tile copy: the layer's code generation "
      "too)\n",
      "bare NVRTC, tile-copy kernel using <fleetjit/copy.cuh>",
      Median(layer_bare), Median(layer_bare) / b);
  std::printf("%-60s %9.2f ms  %.3fx\n",
              "fleetjit cold build, copy.cuh kernel (module returned)",
              Median(layer_cold), Median(layer_cold) / b);
  std::printf("%-60s %9.2f ms  %.3fx\n",
              "  ... until its background work is done", Median(layer_done),
              Median(layer_done) / b);
  std::vector<std::string> cccl = {"-I/usr/local/cuda/include/cccl",
                                   "-I/usr/local/cuda/include"};
  double libcuxx = BareNvrtc(api, Unique(kLibcuxx), false, cccl);
  if (libcuxx > 0) {
    std::printf("%-52s %9.2f ms  %.3fx  (one compile)\n",
                "bare NVRTC, libcu++ <cuda/barrier> kernel", libcuxx,
                libcuxx / b);
  } else {
    std::printf("libcu++ kernel: not measured (CCCL headers not found)\n");
  }
  return 0;
}
