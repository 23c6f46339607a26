#include "tests/hardening/driver_scenario.h"

#include <cstring>
#include <mutex>

#include "tests/common/test_paths.h"

namespace fleetjit::testing {
namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

// Two kernels in one module: a launch with more than 48 KiB of dynamic
// shared memory opts in through cuFuncSetAttribute.
constexpr const char* kSource = R"(
extern "C" __global__ void scale(const float* in, float* out, float a, int n) {
  extern __shared__ float stage[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { stage[threadIdx.x] = in[i]; out[i] = a * stage[threadIdx.x]; }
}
extern "C" __global__ void fill(int* out, int v) { out[threadIdx.x] = v; }
)";

struct LogSink {
  std::mutex mu;
  std::vector<std::string> lines;
};

void CaptureLog(void* user, int32_t, fj_str message) {
  auto* sink = static_cast<LogSink*>(user);
  std::lock_guard<std::mutex> lock(sink->mu);
  sink->lines.emplace_back(message.data, message.size);
}

class Session {
 public:
  explicit Session(ScenarioResult& result) : result_(result) {}

  // Takes `status`; records it under `step` if it is an error.
  bool Ok(const char* step, fj_status* status) {
    ++result_.steps;
    if (status == nullptr) return true;
    StepFailure f;
    f.step = step;
    f.code = fj_status_code(status);
    f.message = fj_status_message(status, nullptr);
    const char* call = fj_status_detail(status, S("cuda_call"), nullptr);
    f.cuda_call = call == nullptr ? "" : call;
    fj_status_free(status);
    result_.failures.push_back(std::move(f));
    return false;
  }

 private:
  ScenarioResult& result_;
};

fj_tensor Vector(uint64_t address, int64_t* shape) {
  fj_tensor t{};
  t.data = reinterpret_cast<void*>(address);
  t.device = {2, 0};  // kDLCUDA, device 0
  t.ndim = 1;
  t.dtype = {2, 32, 1};  // float32
  t.shape = shape;
  return t;
}

}  // namespace

std::string FakeDriverPath() {
  return BesideExecutable("../lib/libfj_fake_cuda.so", FJ_FAKE_CUDA_PATH);
}

ScenarioResult RunDriverScenario(const std::string& cache_dir, std::mt19937_64& rng) {
  ScenarioResult result;
  Session s(result);
  LogSink sink;
  const std::string driver = FakeDriverPath();
  const std::string target = "compute_90";

  // 1. The runtime and its device.
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = S(driver);
  ro.cache_dir = S(cache_dir);
  ro.log_fn = CaptureLog;
  ro.log_user = &sink;
  ro.log_level = FJ_LOG_DEBUG;
  fj_runtime* rt = nullptr;
  if (!s.Ok("fj_runtime_create", fj_runtime_create(&ro, &rt))) return result;
  if (const char* why = fj_runtime_driver_error(rt); why != nullptr && *why != '\0') {
    result.failures.push_back({"fj_runtime_driver_error", FJ_UNAVAILABLE, why, ""});
  }
  int32_t devices = 0;
  s.Ok("fj_device_count", fj_device_count(rt, &devices));
  fj_device_info info{};
  info.struct_size = sizeof(info);
  s.Ok("fj_device_info_get", fj_device_info_get(rt, 0, &info));

  // 2. Memory: random input, poisoned output.
  const int n = 1000 + static_cast<int>(rng() % 3000);
  const uint64_t bytes = sizeof(float) * static_cast<uint64_t>(n);
  std::vector<float> host_in(n), host_out(n);
  std::uniform_real_distribution<float> value(-100.f, 100.f);
  for (float& v : host_in) v = value(rng);
  uint64_t in = 0, out = 0;
  const bool have_in = s.Ok("fj_mem_alloc(in)", fj_mem_alloc(rt, 0, bytes, &in));
  const bool have_out = s.Ok("fj_mem_alloc(out)", fj_mem_alloc(rt, 0, bytes, &out));

  // 3. Builds: compiled (no cache), through the cache (compiled on the
  //    first run, a disk hit later), and the first one's image imported.
  fj_build_options bo{};
  bo.struct_size = sizeof(bo);
  bo.source = S(kSource);
  bo.name = S("faults.cu");
  bo.target = S(target);
  bo.flags = FJ_BUILD_NO_CACHE;
  fj_module* compiled = nullptr;
  fj_module* cached = nullptr;
  fj_module* imported = nullptr;
  s.Ok("fj_module_build(no cache)", fj_module_build(rt, &bo, &compiled));
  bo.flags = 0;
  s.Ok("fj_module_build(cached)", fj_module_build(rt, &bo, &cached));
  if (compiled != nullptr) {
    const void* image = nullptr;
    size_t image_size = 0;
    if (s.Ok("fj_module_image", fj_module_image(compiled, &image, &image_size))) {
      fj_module_load_options lo{};
      lo.struct_size = sizeof(lo);
      lo.image = image;
      lo.image_size = image_size;
      lo.kind = FJ_IMAGE_PTX;
      lo.name = S("imported.ptx");
      s.Ok("fj_module_load", fj_module_load(rt, &lo, &imported));
    }
  }

  // 4. Kernels from each module.
  fj_kernel* scale = nullptr;
  fj_kernel* fill = nullptr;
  fj_kernel* fill_imported = nullptr;
  if (compiled != nullptr) {
    s.Ok("fj_module_get_kernel(scale)", fj_module_get_kernel(compiled, S("scale"), 0, &scale));
  }
  if (cached != nullptr) {
    s.Ok("fj_module_get_kernel(fill)", fj_module_get_kernel(cached, S("fill"), 0, &fill));
  }
  if (imported != nullptr) {
    s.Ok("fj_module_get_kernel(imported)",
         fj_module_get_kernel(imported, S("fill"), 0, &fill_imported));
  }

  // 5. A stream; copies and launches on it and without one.
  fj_stream* stream = nullptr;
  s.Ok("fj_stream_create", fj_stream_create(rt, 0, &stream));
  bool copied = have_in && have_out && stream != nullptr;
  if (copied) {
    copied &= s.Ok("fj_memcpy_htod", fj_memcpy_htod(rt, in, host_in.data(), bytes, stream));
    copied &= s.Ok("fj_memset_d8", fj_memset_d8(rt, out, 0xAB, bytes, nullptr));
  }
  if (scale != nullptr && have_in && have_out) {
    fj_arg args[4] = {};
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_POINTER;
    args[0].v.pointer = in;
    args[1].kind = FJ_ARG_POINTER;
    args[1].v.pointer = out;
    args[2].kind = FJ_ARG_F32;
    args[2].v.f32 = 2.0f;
    args[3].kind = FJ_ARG_I32;
    args[3].v.i32 = n;
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = static_cast<uint32_t>((n + 255) / 256);
    cfg.block[0] = 256;
    cfg.shared_bytes = 64 << 10;  // past 48 KiB: opted in
    cfg.stream = stream;
    s.Ok("fj_launch(scale)", fj_launch(scale, &cfg, args, 4));
  }
  for (fj_kernel* k : {fill, fill_imported}) {
    if (k == nullptr || !have_out) continue;
    fj_arg args[2] = {};
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_POINTER;
    args[0].v.pointer = out;
    args[1].kind = FJ_ARG_I32;
    args[1].v.i32 = 7;
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 1;
    cfg.block[0] = 32;
    s.Ok("fj_launch(fill)", fj_launch(k, &cfg, args, 2));
  }
  // The fake's launches compute nothing: the data checks go through copies.
  if (copied) {
    copied &= s.Ok("fj_memcpy_dtod", fj_memcpy_dtod(rt, out, in, bytes, stream));
    std::fill(host_out.begin(), host_out.end(), -1.f);
    copied &= s.Ok("fj_memcpy_dtoh", fj_memcpy_dtoh(rt, host_out.data(), out, bytes, stream));
    copied &= s.Ok("fj_stream_synchronize", fj_stream_synchronize(stream));
    if (copied && std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
      result.data_error = "dtod/dtoh: output differs from the input";
    }
  }
  if (copied) {
    // A dense tensor copy (the driver's copy engine), after poisoning.
    copied &= s.Ok("fj_memset_d8(poison)", fj_memset_d8(rt, out, 0xCD, bytes, stream));
    int64_t shape[1] = {n};
    fj_tensor src = Vector(in, shape), dst = Vector(out, shape);
    fj_copy_desc cd{};
    cd.struct_size = sizeof(cd);
    cd.src = &src;
    cd.dst = &dst;
    copied &= s.Ok("fj_copy", fj_copy(rt, &cd, stream));
    copied &= s.Ok("fj_stream_synchronize(copy)", fj_stream_synchronize(stream));
    std::fill(host_out.begin(), host_out.end(), -1.f);
    copied &= s.Ok("fj_memcpy_dtoh(copy)", fj_memcpy_dtoh(rt, host_out.data(), out, bytes, nullptr));
    if (copied && result.data_error.empty() &&
        std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
      result.data_error = "fj_copy: output differs from the input";
    }
  }
  result.data_checked = copied;

  // 6. Everything destroyed, explicitly, then the runtime.
  s.Ok("fj_stream_destroy", fj_stream_destroy(stream));
  s.Ok("fj_module_destroy(imported)", fj_module_destroy(imported));
  s.Ok("fj_module_destroy(cached)", fj_module_destroy(cached));
  s.Ok("fj_module_destroy(compiled)", fj_module_destroy(compiled));
  if (have_in) s.Ok("fj_mem_free(in)", fj_mem_free(rt, in));
  if (have_out) s.Ok("fj_mem_free(out)", fj_mem_free(rt, out));
  s.Ok("fj_runtime_destroy", fj_runtime_destroy(rt));
  std::lock_guard<std::mutex> lock(sink.mu);
  result.log_lines = sink.lines;
  return result;
}

}  // namespace fleetjit::testing
