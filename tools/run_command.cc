// fleetjit demo: the main job on an embedded default. Prints the device
// report, then builds the bundled example kernel for the live GPU, runs it
// on fresh random data and checks the result against the host; with no GPU
// it builds the example for a fleet of named targets instead.
#include <chrono>
#include <cmath>
#include <cstring>
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
  if (Failed(fj_module_build(rt, &o, &module), "building the example"))
    return kExitFailure;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  fj_module_info_get(module, &info);
  std::printf("built %s for %s (copy implementation %s) in %.1f ms (%s)\n",
              kExample, info.target, fj_copy_impl_name(info.copy_impl),
              info.build_ms,
              info.cache_result == FJ_CACHE_COMPILED   ? "compiled"
              : info.cache_result == FJ_CACHE_DISK_HIT ? "disk cache hit"
                                                       : "memory cache hit");
  fj_kernel* kernel = nullptr;
  if (Failed(fj_module_get_kernel(module, Str("saxpy"), 0, &kernel),
             "loading saxpy")) {
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
  if (Failed(fj_stream_create(rt, 0, &stream), "creating a stream"))
    return kExitFailure;
  cfg.stream = stream;
  auto t0 = std::chrono::steady_clock::now();
  if (Failed(fj_launch(kernel, &cfg, args, 4), "launching saxpy") ||
      Failed(fj_stream_synchronize(stream), "running saxpy")) {
    return kExitFailure;
  }
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
  if (Failed(fj_memcpy_dtoh(rt, out.data(), dy, bytes, nullptr), "reading y"))
    return kExitFailure;
  int bad = 0;
  double max_err = 0;
  for (int i = 0; i < n; ++i) {
    float ref = a * x[i] + y[i];
    double err = std::fabs(double(out[i]) - ref);
    max_err = std::max(max_err, err);
    if (!(err <= 1e-5 * (1 + std::fabs(ref)))) ++bad;
  }
  std::printf(
      "saxpy on %d random floats: launch+sync %.3f ms, max |error| %.2e, %s\n",
      n, ms, max_err, bad == 0 ? "PASS" : "FAIL");
  fj_mem_free(rt, dx);
  fj_mem_free(rt, dy);
  fj_stream_destroy(stream);
  fj_module_destroy(module);
  return bad == 0 ? kExitOk : kExitFailure;
}

// The bundled tiled_copy example: a ragged 2-D tensor copied tile by tile
// into a larger, poisoned output, which must come back zero-padded.
int RunTiledCopy(fj_runtime* rt) {
  const char* file = "examples/tiled_copy.cu";
  std::string source;
  if (!LoadKernelSource(file, &source)) {
    std::fprintf(stderr, "fleetjit demo: the bundled %s is missing\n", file);
    return kExitFailure;
  }
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(source);
  std::string name = file;
  o.name = Str(name);
  fj_module* module = nullptr;
  if (Failed(fj_module_build(rt, &o, &module), "building tiled_copy"))
    return kExitFailure;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  fj_module_info_get(module, &info);
  fj_kernel* kernel = nullptr;
  if (Failed(fj_module_get_kernel(module, Str("tiled_copy"), 0, &kernel),
             "loading tiled_copy")) {
    return kExitFailure;
  }
  // 1. A ragged input (not a multiple of the tile) and a larger output.
  int64_t in_shape[2] = {1000, 1500}, out_shape[2] = {1040, 1536};
  const uint32_t box_y = 32, box_x = 64;
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> in(in_shape[0] * in_shape[1]),
      out(out_shape[0] * out_shape[1]);
  for (float& v : in) v = dist(rng);
  uint64_t din = 0, dout = 0;
  if (Failed(fj_mem_alloc(rt, 0, in.size() * 4, &din), "allocating") ||
      Failed(fj_mem_alloc(rt, 0, out.size() * 4, &dout), "allocating") ||
      Failed(fj_memcpy_htod(rt, din, in.data(), in.size() * 4, nullptr),
             "copying in") ||
      Failed(fj_memset_d8(rt, dout, 0xC3, out.size() * 4, nullptr),
             "poisoning out")) {
    return kExitFailure;
  }
  // 2. Tensor arguments: DLPack layout plus the tile box and OOB mode.
  fj_tensor tin{reinterpret_cast<void*>(din),
                {2, 0},
                2,
                {2, 32, 1},
                in_shape,
                nullptr,
                0};
  fj_tensor tout{reinterpret_cast<void*>(dout),
                 {2, 0},
                 2,
                 {2, 32, 1},
                 out_shape,
                 nullptr,
                 0};
  fj_tensor_arg ain{}, aout{};
  ain.struct_size = aout.struct_size = sizeof(fj_tensor_arg);
  ain.tensor = &tin;
  aout.tensor = &tout;
  ain.box[0] = aout.box[0] = box_y;
  ain.box[1] = aout.box[1] = box_x;
  ain.oob = FJ_OOB_ZEROS;
  fj_arg args[2] = {};
  for (fj_arg& a : args) {
    a.struct_size = sizeof(fj_arg);
    a.kind = FJ_ARG_TENSOR;
  }
  args[0].v.tensor = &ain;
  args[1].v.tensor = &aout;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = static_cast<uint32_t>((out_shape[1] + box_x - 1) / box_x);
  cfg.grid[1] = static_cast<uint32_t>((out_shape[0] + box_y - 1) / box_y);
  cfg.block[0] = 256;
  cfg.shared_bytes = box_x * box_y * 4 + 128;
  if (Failed(fj_launch(kernel, &cfg, args, 2), "launching tiled_copy") ||
      Failed(fj_memcpy_dtoh(rt, out.data(), dout, out.size() * 4, nullptr),
             "reading out")) {
    return kExitFailure;
  }
  // 3. Inside `in`: a copy; outside: zeros.
  int64_t bad = 0;
  for (int64_t y = 0; y < out_shape[0]; ++y) {
    for (int64_t x = 0; x < out_shape[1]; ++x) {
      float want =
          y < in_shape[0] && x < in_shape[1] ? in[y * in_shape[1] + x] : 0.f;
      if (std::memcmp(&out[y * out_shape[1] + x], &want, 4) != 0) ++bad;
    }
  }
  std::printf(
      "tiled_copy (%s) of a ragged %lldx%lld tensor into %lldx%lld, %ux%u "
      "tiles: %s\n",
      fj_copy_impl_name(info.copy_impl), (long long)in_shape[0],
      (long long)in_shape[1], (long long)out_shape[0], (long long)out_shape[1],
      box_y, box_x, bad == 0 ? "PASS" : "FAIL");
  fj_mem_free(rt, din);
  fj_mem_free(rt, dout);
  fj_module_destroy(module);
  return bad == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunDemo(std::vector<std::string> args) {
  std::string targets;
  CLI::App app(
      "The main job on an embedded default: the device report, then the "
      "bundled examples built, run and checked on the live GPU; with no GPU "
      "(or --target) the examples built for a fleet of targets.",
      "fleetjit demo");
  app.add_option("--target", targets,
                 "build for these targets instead (default with no GPU: "
                 "sm_75,sm_80,sm_90)");
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  std::printf("== device report\n");
  int rc = RunInfo({});
  if (rc != kExitOk) return rc;
  std::string source;
  if (!LoadKernelSource(kExample, &source)) {
    std::fprintf(stderr, "fleetjit demo: the bundled %s is missing\n",
                 kExample);
    return kExitFailure;
  }
  fj_runtime* rt = CreateRuntime(&rc);
  if (rt == nullptr) return rc;
  int32_t count = 0;
  fj_device_count(rt, &count);
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  if (count > 0 && targets.empty()) {
    std::printf("== bundled example on the live GPU\n");
    rt = CreateRuntime(&rc);
    if (rt == nullptr) return rc;
    rc = RunSaxpy(rt, source);
    if (rc == kExitOk) rc = RunTiledCopy(rt);
    Failed(fj_runtime_destroy(rt), "destroying the runtime");
    return rc;
  }
  if (targets.empty()) targets = "sm_75,sm_80,sm_90";
  std::printf("== bundled example built for a fleet (%s)\n",
              count == 0 ? "no GPU here" : "targets named");
  // The copy-layer example shows each target's implementation.
  return RunBuild({"--target", targets, "examples/tiled_copy.cu"});
}

}  // namespace fleetjit::cli
