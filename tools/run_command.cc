// fleetjit demo: the main job on an embedded default. Prints the device
// report, then builds the bundled example kernel for the live GPU, runs it
// on fresh random data and checks the result against the host; with no GPU
// it builds the example for a fleet of named targets instead.
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {

bool LoadKernelSource(const std::string& file, std::string* source);

namespace {

constexpr const char* kExample = "examples/saxpy.cu";

fj_arg PointerArg(uint64_t p) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = FJ_ARG_POINTER;
  a.v.pointer = p;
  return a;
}

// Builds, runs and checks saxpy on device 0. Returns an exit code.
int RunSaxpy(fj_runtime* rt, const std::string& source) {
  const int n = 1 << 22;
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(source);
  std::string name = kExample;
  o.name = Str(name);
  fj_module* module = nullptr;
  if (Failed(fj_module_build(rt, &o, &module), "building the example")) return kExitFailure;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  fj_module_info_get(module, &info);
  std::printf("built %s for %s (copy implementation %s) in %.1f ms (%s)\n", kExample,
              info.target, fj_copy_impl_name(info.copy_impl), info.build_ms,
              info.cache_result == FJ_CACHE_COMPILED ? "compiled"
              : info.cache_result == FJ_CACHE_DISK_HIT ? "disk cache hit"
                                                       : "memory cache hit");
  fj_kernel* kernel = nullptr;
  if (Failed(fj_module_get_kernel(module, Str("saxpy"), 0, &kernel), "loading saxpy")) {
    return kExitFailure;
  }
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4.f, 4.f);
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
  }
  const float a = dist(rng);
  uint64_t dx = 0, dy = 0;
  const uint64_t bytes = uint64_t{n} * sizeof(float);
  if (Failed(fj_mem_alloc(rt, 0, bytes, &dx), "allocating") ||
      Failed(fj_mem_alloc(rt, 0, bytes, &dy), "allocating") ||
      Failed(fj_memcpy_htod(rt, dx, x.data(), bytes, nullptr), "copying x") ||
      Failed(fj_memcpy_htod(rt, dy, y.data(), bytes, nullptr), "copying y")) {
    return kExitFailure;
  }
  fj_arg args[4] = {PointerArg(dy), PointerArg(dx), {}, {}};
  args[2].struct_size = sizeof(fj_arg);
  args[2].kind = FJ_ARG_F32;
  args[2].v.f32 = a;
  args[3].struct_size = sizeof(fj_arg);
  args[3].kind = FJ_ARG_I32;
  args[3].v.i32 = n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.block[0] = 256;
  cfg.grid[0] = (n + 255) / 256;
  fj_stream* stream = nullptr;
  if (Failed(fj_stream_create(rt, 0, &stream), "creating a stream")) return kExitFailure;
  cfg.stream = stream;
  auto t0 = std::chrono::steady_clock::now();
  if (Failed(fj_launch(kernel, &cfg, args, 4), "launching saxpy") ||
      Failed(fj_stream_synchronize(stream), "running saxpy")) {
    return kExitFailure;
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (Failed(fj_memcpy_dtoh(rt, out.data(), dy, bytes, nullptr), "reading y")) return kExitFailure;
  int bad = 0;
  double max_err = 0;
  for (int i = 0; i < n; ++i) {
    float ref = a * x[i] + y[i];
    double err = std::fabs(double(out[i]) - ref);
    max_err = std::max(max_err, err);
    if (!(err <= 1e-5 * (1 + std::fabs(ref)))) ++bad;
  }
  std::printf("saxpy on %d random floats: launch+sync %.3f ms, max |error| %.2e, %s\n", n, ms,
              max_err, bad == 0 ? "PASS" : "FAIL");
  fj_mem_free(rt, dx);
  fj_mem_free(rt, dy);
  fj_stream_destroy(stream);
  fj_module_destroy(module);
  return bad == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunDemo(std::vector<std::string> args) {
  std::string targets = TakeFlag(args, "--target");
  if (!args.empty()) {
    std::fprintf(stderr, "usage: fleetjit demo [--target sm_75,sm_80,sm_90]\n");
    return kExitUsage;
  }
  std::printf("== device report\n");
  int rc = RunInfo({});
  if (rc != kExitOk) return rc;
  std::string source;
  if (!LoadKernelSource(kExample, &source)) {
    std::fprintf(stderr, "fleetjit demo: the bundled %s is missing\n", kExample);
    return kExitFailure;
  }
  fj_runtime* rt = CreateRuntime();
  if (rt == nullptr) return kExitFailure;
  int32_t count = 0;
  fj_device_count(rt, &count);
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  if (count > 0 && targets.empty()) {
    std::printf("== bundled example on the live GPU\n");
    rt = CreateRuntime();
    if (rt == nullptr) return kExitFailure;
    rc = RunSaxpy(rt, source);
    Failed(fj_runtime_destroy(rt), "destroying the runtime");
    return rc;
  }
  if (targets.empty()) targets = "sm_75,sm_80,sm_90";
  std::printf("== bundled example built for a fleet (%s)\n",
              count == 0 ? "no GPU here" : "targets named");
  return RunBuild({"--target", targets, kExample});
}

}  // namespace fleetjit::cli
