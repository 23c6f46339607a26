#include "tests/hardening/driver_scenario.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/test_paths.h"

namespace fleetjit::testing {
namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }
// Literals: a temporary std::string would die before the struct is used.
fj_str S(const char* s) { return fj_str{s, std::strlen(s)}; }

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

// A tensor parameter: its launch encodes a TMA descriptor on sm_90.
constexpr const char* kTensorSource = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void tiles(FJ_TENSOR(float, 2) t, float v) {}
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
    if (result_.fired_in.empty() && fjfake_faults_fired() > 0)
      result_.fired_in = step;
    std::vector<uint64_t> calls(fjfake_symbol_count());
    for (int i = 0; i < fjfake_symbol_count(); ++i)
      calls[i] = fjfake_calls(fjfake_symbol_name(i));
    result_.step_calls.emplace_back(step, std::move(calls));
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

ScenarioResult RunDriverScenario(const std::string& cache_dir,
                                 std::mt19937_64& rng) {
  ScenarioResult result;
  Session s(result);
  LogSink sink;
  const std::string driver = FakeDriverPath();
  const std::string target = "compute_90";

  // 1. The runtime and its device. fj_copy's shape tuning (a background
  // job of driver calls) stays off: the scenario injects faults by call.
  setenv("FLEETJIT_COPY_TUNE", "0", 1);
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = S(driver);
  ro.cache_dir = S(cache_dir);
  ro.log_fn = CaptureLog;
  ro.log_user = &sink;
  ro.log_level = FJ_LOG_DEBUG;
  fj_runtime* rt = nullptr;
  if (!s.Ok("fj_runtime_create", fj_runtime_create(&ro, &rt))) return result;
  if (const char* why = fj_runtime_driver_error(rt);
      why != nullptr && *why != '\0') {
    result.failures.push_back(
        {"fj_runtime_driver_error", FJ_UNAVAILABLE, why, ""});
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
  const bool have_in =
      s.Ok("fj_mem_alloc(in)", fj_mem_alloc(rt, 0, bytes, &in));
  const bool have_out =
      s.Ok("fj_mem_alloc(out)", fj_mem_alloc(rt, 0, bytes, &out));

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
    if (s.Ok("fj_module_image",
             fj_module_image(compiled, &image, &image_size))) {
      fj_module_load_options lo{};
      lo.struct_size = sizeof(lo);
      lo.image = image;
      lo.image_size = image_size;
      lo.kind = FJ_IMAGE_PTX;
      lo.name = S("imported.ptx");
      s.Ok("fj_module_load", fj_module_load(rt, &lo, &imported));
    }
  }

  // A cubin built elsewhere: its parameters come from the driver.
  fj_module* cubin = nullptr;
  {
    const std::string sm = "sm_90";
    fj_build_options co = bo;
    co.target = S(sm);
    fj_module* built = nullptr;
    if (s.Ok("fj_module_build(cubin)", fj_module_build(rt, &co, &built))) {
      const void* image = nullptr;
      size_t image_size = 0;
      if (s.Ok("fj_module_image(cubin)",
               fj_module_image(built, &image, &image_size))) {
        fj_module_load_options lo{};
        lo.struct_size = sizeof(lo);
        lo.image = image;
        lo.image_size = image_size;
        lo.kind = FJ_IMAGE_CUBIN;
        lo.name = S("imported.cubin");
        s.Ok("fj_module_load(cubin)", fj_module_load(rt, &lo, &cubin));
      }
    }
    s.Ok("fj_module_destroy(built cubin)", fj_module_destroy(built));
  }

  // 4. Kernels from each module.
  fj_kernel* scale = nullptr;
  fj_kernel* fill = nullptr;
  fj_kernel* fill_imported = nullptr;
  if (compiled != nullptr) {
    s.Ok("fj_module_get_kernel(scale)",
         fj_module_get_kernel(compiled, S("scale"), 0, &scale));
  }
  if (cached != nullptr) {
    s.Ok("fj_module_get_kernel(fill)",
         fj_module_get_kernel(cached, S("fill"), 0, &fill));
  }
  if (imported != nullptr) {
    s.Ok("fj_module_get_kernel(imported)",
         fj_module_get_kernel(imported, S("fill"), 0, &fill_imported));
  }
  fj_kernel* fill_cubin = nullptr;
  if (cubin != nullptr) {
    s.Ok("fj_module_get_kernel(cubin)",
         fj_module_get_kernel(cubin, S("fill"), 0, &fill_cubin));
  }

  // 5. A stream; copies and launches on it and without one.
  fj_stream* stream = nullptr;
  s.Ok("fj_stream_create", fj_stream_create(rt, 0, &stream));
  bool copied = have_in && have_out && stream != nullptr;
  if (copied) {
    copied &= s.Ok("fj_memcpy_htod",
                   fj_memcpy_htod(rt, in, host_in.data(), bytes, stream));
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
  for (fj_kernel* k : {fill, fill_imported, fill_cubin}) {
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
    copied &=
        s.Ok("fj_memcpy_dtod", fj_memcpy_dtod(rt, out, in, bytes, stream));
    std::fill(host_out.begin(), host_out.end(), -1.f);
    copied &= s.Ok("fj_memcpy_dtoh",
                   fj_memcpy_dtoh(rt, host_out.data(), out, bytes, stream));
    copied &= s.Ok("fj_stream_synchronize", fj_stream_synchronize(stream));
    if (copied && std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
      result.data_error = "dtod/dtoh: output differs from the input";
    }
  }
  if (copied) {
    // A dense tensor copy (the driver's copy engine), after poisoning.
    copied &= s.Ok("fj_memset_d8(poison)",
                   fj_memset_d8(rt, out, 0xCD, bytes, stream));
    int64_t shape[1] = {n};
    fj_tensor src = Vector(in, shape), dst = Vector(out, shape);
    fj_copy_desc cd{};
    cd.struct_size = sizeof(cd);
    cd.src = &src;
    cd.dst = &dst;
    copied &= s.Ok("fj_copy", fj_copy(rt, &cd, stream));
    copied &=
        s.Ok("fj_stream_synchronize(copy)", fj_stream_synchronize(stream));
    std::fill(host_out.begin(), host_out.end(), -1.f);
    copied &= s.Ok("fj_memcpy_dtoh(copy)",
                   fj_memcpy_dtoh(rt, host_out.data(), out, bytes, nullptr));
    if (copied && result.data_error.empty() &&
        std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
      result.data_error = "fj_copy: output differs from the input";
    }
  }
  // 6. Three GPUs: 0 and 1 joined by P2P, 2 reached only through pinned
  //    host memory. Copies from each into device 0, checked.
  uint64_t peer = 0, far = 0;
  const bool have_peer =
      s.Ok("fj_mem_alloc(peer)", fj_mem_alloc(rt, 1, bytes, &peer));
  const bool have_far =
      s.Ok("fj_mem_alloc(far)", fj_mem_alloc(rt, 2, bytes, &far));
  auto copy_into_out = [&](const char* what, uint64_t from, int from_device) {
    if (!copied) return;
    copied &= s.Ok(what, fj_memset_d8(rt, out, 0xEE, bytes, stream));
    int64_t shape[1] = {n};
    fj_tensor src = Vector(from, shape), dst = Vector(out, shape);
    src.device.device_id = from_device;
    fj_copy_desc cd{};
    cd.struct_size = sizeof(cd);
    cd.src = &src;
    cd.dst = &dst;
    copied &= s.Ok(what, fj_copy(rt, &cd, stream));
    copied &= s.Ok(what, fj_stream_synchronize(stream));
    std::fill(host_out.begin(), host_out.end(), -1.f);
    copied &=
        s.Ok(what, fj_memcpy_dtoh(rt, host_out.data(), out, bytes, nullptr));
    if (copied && result.data_error.empty() &&
        std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
      result.data_error = std::string(what) + ": output differs from the input";
    }
  };
  if (have_peer && have_far) {
    copied &= s.Ok("fj_memcpy_htod(peer)",
                   fj_memcpy_htod(rt, peer, host_in.data(), bytes, nullptr));
    copied &= s.Ok("fj_memcpy_htod(far)",
                   fj_memcpy_htod(rt, far, host_in.data(), bytes, nullptr));
    int32_t can = 0;
    s.Ok("fj_peer_query", fj_peer_query(rt, 0, 1, &can));
    if (s.Ok("fj_peer_enable", fj_peer_enable(rt, 0, 1))) {
      copy_into_out("fj_copy(peer)", peer, 1);
      // Warming GPU 1's L2 for GPU 0: a kernel on GPU 1, ordered by events.
      fj_prefetch_desc pd{};
      pd.struct_size = sizeof(pd);
      pd.address = peer;
      pd.bytes = bytes;
      pd.mode = FJ_PREFETCH_WARM_OWNER_L2;
      pd.reader_device = 0;
      if (stream != nullptr) s.Ok("fj_prefetch", fj_prefetch(rt, &pd, stream));
      s.Ok("fj_peer_disable", fj_peer_disable(rt, 0, 1));
    }
    copy_into_out("fj_copy(far)", far, 2);
    if (stream != nullptr) {
      // A window that needs the copy kernel (it starts before the data:
      // zeros fill it), whose source GPU 0 cannot reach: staged through
      // pinned host memory. The fake's kernels compute nothing, so only its
      // status is checked.
      int64_t shape[1] = {n};
      fj_tensor src = Vector(far, shape), dst = Vector(out, shape);
      src.device.device_id = 2;
      fj_copy_desc cd{};
      cd.struct_size = sizeof(cd);
      cd.src = &src;
      cd.dst = &dst;
      cd.src_start[0] = -1;
      cd.oob = FJ_OOB_ZEROS;
      s.Ok("fj_copy(staged)", fj_copy(rt, &cd, stream));
    }
  } else {
    copied = false;
  }
  if (copied) {
    // Synchronous device-to-device, then the caller's own stream wrapped.
    copied &= s.Ok("fj_memcpy_dtod(sync)",
                   fj_memcpy_dtod(rt, out, in, bytes, nullptr));
    const uint64_t raw = fjfake_create_stream(0);
    fj_stream* wrapped = nullptr;
    if (raw != 0 &&
        s.Ok("fj_stream_wrap", fj_stream_wrap(rt, 0, raw, &wrapped))) {
      std::fill(host_out.begin(), host_out.end(), -1.f);
      copied &= s.Ok("fj_memcpy_dtoh(wrapped)",
                     fj_memcpy_dtoh(rt, host_out.data(), out, bytes, wrapped));
      copied &= s.Ok("fj_stream_synchronize(wrapped)",
                     fj_stream_synchronize(wrapped));
      s.Ok("fj_stream_destroy(wrapped)", fj_stream_destroy(wrapped));
      if (copied && result.data_error.empty() &&
          std::memcmp(host_out.data(), host_in.data(), bytes) != 0) {
        result.data_error =
            "dtod/wrapped stream: output differs from the input";
      }
    }
    if (raw != 0) fjfake_destroy_stream(raw);
  }
  result.data_checked = copied;

  // 7. A kernel with a tensor parameter (a TMA descriptor per launch).
  fj_module* tensors = nullptr;
  fj_build_options to{};
  to.struct_size = sizeof(to);
  to.source = S(kTensorSource);
  to.name = S("tensors.cu");
  to.target = S(target);
  fj_kernel* tiles = nullptr;
  if (s.Ok("fj_module_build(tensors)", fj_module_build(rt, &to, &tensors)) &&
      s.Ok("fj_module_get_kernel(tiles)",
           fj_module_get_kernel(tensors, S("tiles"), 0, &tiles)) &&
      have_in) {
    int64_t shape[2] = {n / 64, 64};
    fj_tensor t = Vector(in, shape);
    t.ndim = 2;
    fj_tensor_arg ta{};
    ta.struct_size = sizeof(ta);
    ta.tensor = &t;
    ta.box[0] = 8;
    ta.box[1] = 32;
    ta.oob = FJ_OOB_ZEROS;
    fj_arg args[2] = {};
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_TENSOR;
    args[0].v.tensor = &ta;
    args[1].kind = FJ_ARG_F32;
    args[1].v.f32 = 1.5f;
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 4;
    cfg.block[0] = 128;
    cfg.stream = stream;
    s.Ok("fj_launch(tiles)", fj_launch(tiles, &cfg, args, 2));
  }

  // 8. Everything destroyed, explicitly, then the runtime.
  s.Ok("fj_module_destroy(tensors)", fj_module_destroy(tensors));
  if (have_peer) s.Ok("fj_mem_free(peer)", fj_mem_free(rt, peer));
  if (have_far) s.Ok("fj_mem_free(far)", fj_mem_free(rt, far));
  s.Ok("fj_stream_destroy", fj_stream_destroy(stream));
  s.Ok("fj_module_destroy(imported)", fj_module_destroy(imported));
  s.Ok("fj_module_destroy(cubin)", fj_module_destroy(cubin));
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
