// Builds, module loads and first launches while the caller's stream
// captures a CUDA graph (docs/launch.md, "Graph capture"), on the fake
// driver, which follows the capture rules cuStreamBeginCapture and
// cuThreadExchangeStreamCaptureMode document (tests/common/fake_cuda,
// section 2b): a launch of a kernel got before the capture is captured and
// loads nothing; a build, a get_kernel and an async build inside a capture
// (any mode, this thread or another) leave it intact on a CUDA 12.3+
// driver, because fleetjit's module work runs in relaxed mode (without it
// the build's unload invalidates the capture: the control case); on an
// older driver a capture fleetjit can see refuses the load before the
// driver is called, and one it cannot see gets the driver's refusal as
// FJ_FAILED_PRECONDITION; a staged fj_copy, which synchronises, is refused
// on a capturing stream; fj_tune on another thread (relaxed too) leaves a
// global capture intact. tests/capi/capture_gpu_test.cc runs the GPU cases.
#include <cuda.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using ::fleetjit::testing::Code;
using ::fleetjit::testing::S;

constexpr char kSource[] = R"(
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

// The status's code and message, freeing it ("OK" for NULL).
std::string Describe(fj_status* st) {
  std::string out = fj_code_name(fj_status_code(st));
  if (st != nullptr) out += std::string(": ") + fj_status_message(st, nullptr);
  fj_status_free(st);
  return out;
}

// The fake driver's entry points, as a caller that captures would use
// them (through cuGetProcAddress, as the runtime finds them too).
template <typename F>
F Proc(const char* name) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found{};
  if (cuGetProcAddress(name, &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
      CUDA_SUCCESS) {
    return nullptr;
  }
  return reinterpret_cast<F>(fn);
}

struct RawDriver {
  decltype(&::cuDevicePrimaryCtxRetain) retain =
      Proc<decltype(retain)>("cuDevicePrimaryCtxRetain");
  decltype(&::cuDevicePrimaryCtxRelease) release =
      Proc<decltype(release)>("cuDevicePrimaryCtxRelease");
  decltype(&::cuCtxSetCurrent) set_current =
      Proc<decltype(set_current)>("cuCtxSetCurrent");
  decltype(&::cuStreamBeginCapture) begin =
      Proc<decltype(begin)>("cuStreamBeginCapture");
  decltype(&::cuStreamEndCapture) end =
      Proc<decltype(end)>("cuStreamEndCapture");
  decltype(&::cuStreamIsCapturing) is_capturing =
      Proc<decltype(is_capturing)>("cuStreamIsCapturing");
  decltype(&::cuGraphDestroy) destroy_graph =
      Proc<decltype(destroy_graph)>("cuGraphDestroy");
};

// Driver calls made between two snapshots of the fake's counters.
std::map<std::string, uint64_t> CallsSince(
    const std::map<std::string, uint64_t>& before) {
  std::map<std::string, uint64_t> made;
  for (const auto& [name, n] : fjfake_call_counts()) {
    auto it = before.find(name);
    const uint64_t was = it == before.end() ? 0 : it->second;
    if (n > was) made[name] = n - was;
  }
  return made;
}

bool HaveNvrtc() {
  fj_runtime* rt = nullptr;
  if (Code(fj_runtime_create(nullptr, &rt)) != FJ_OK) return false;
  std::string target = "compute_90";
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = fj_str{kSource, std::strlen(kSource)};
  o.target = S(target);
  o.flags = FJ_BUILD_NO_CACHE;
  fj_module* m = nullptr;
  const bool ok = Code(fj_module_build(rt, &o, &m)) == FJ_OK;
  fj_module_destroy(m);
  fj_runtime_destroy(rt);
  return ok;
}

// A runtime on the fake driver (one device, sm_90; or two without P2P),
// a raw stream of the caller's wrapped as an fj_stream, and device memory
// for the kernel. `before_runtime` runs after the fake's reset and before
// the runtime loads it (a driver version, a hidden entry point).
class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed";
  }
  void Start(void (*before_runtime)() = nullptr, int devices = 1,
             bool blocking = false) {
    fjfake_reset(devices);
    if (before_runtime != nullptr) before_runtime();
    const std::string driver = ::fleetjit::testing::FakeDriverPath();
    fj_runtime_options ro{};
    ro.struct_size = sizeof(ro);
    ro.libcuda_path = fj_str{driver.data(), driver.size()};
    ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    FJ_ASSERT_OK(fj_runtime_create(&ro, &rt_));
    int32_t n = 0;
    FJ_ASSERT_OK(fj_device_count(rt_, &n));
    ASSERT_EQ(n, devices) << "the fake driver did not load";
    // The caller's own context and stream (what PyTorch would hold).
    ASSERT_NE(raw_.begin, nullptr);
    ASSERT_EQ(raw_.retain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(raw_.set_current(ctx_), CUDA_SUCCESS);
    raw_stream_ =
        blocking ? fjfake_create_blocking_stream(0) : fjfake_create_stream(0);
    ASSERT_NE(raw_stream_, 0u);
    FJ_ASSERT_OK(fj_stream_wrap(rt_, 0, raw_stream_, &stream_));
    FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &x_));
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Describe(fj_runtime_destroy(rt_)), "OK");
    if (raw_stream_ != 0) fjfake_destroy_stream(raw_stream_);
    if (ctx_ != nullptr) raw_.release(0);
    fjfake_reset(1);
  }

  CUstream Raw() const { return reinterpret_cast<CUstream>(raw_stream_); }
  CUstreamCaptureStatus CaptureStatus(CUstream s) {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_EQ(raw_.is_capturing(s, &status), CUDA_SUCCESS);
    return status;
  }
  // Ends the capture on `s`: the graph's captured work, or -1 when the
  // capture was invalidated.
  int64_t EndCapture(CUstream s) {
    CUgraph graph = nullptr;
    const CUresult r = raw_.end(s, &graph);
    if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) return -1;
    EXPECT_EQ(r, CUDA_SUCCESS);
    const int64_t nodes = fjfake_graph_nodes(reinterpret_cast<uint64_t>(graph));
    EXPECT_EQ(raw_.destroy_graph(graph), CUDA_SUCCESS);
    return nodes;
  }

  // Builds kSource for compute_90 (the fake loads PTX; its sm_90 device
  // runs it, so a compile also loads the image to read the parameter
  // layout). `cached` false: NVRTC runs.
  fj_status* Build(fj_module** out, bool cached = false) {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = fj_str{kSource, std::strlen(kSource)};
    o.name = S(name_);
    o.target = S(target_);
    o.flags = cached ? 0 : FJ_BUILD_NO_CACHE;
    return fj_module_build(rt_, &o, out);
  }
  fj_status* GetKernel(fj_module* m, fj_kernel** out) {
    return fj_module_get_kernel(m, S(kernel_), 0, out);
  }
  fj_status* Launch(fj_kernel* k, fj_stream* stream) {
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 4;
    cfg.block[0] = 256;
    cfg.stream = stream;
    fj_arg a[3] = {};
    for (fj_arg& arg : a) arg.struct_size = sizeof(fj_arg);
    a[0].kind = FJ_ARG_POINTER;
    a[0].v.pointer = x_;
    a[1].kind = FJ_ARG_F32;
    a[1].v.f32 = 2.0f;
    a[2].kind = FJ_ARG_I32;
    a[2].v.i32 = 1024;
    return fj_launch(k, &cfg, a, 3);
  }

  RawDriver raw_;
  CUcontext ctx_ = nullptr;
  uint64_t raw_stream_ = 0;
  fj_runtime* rt_ = nullptr;
  fj_stream* stream_ = nullptr;
  uint64_t x_ = 0;
  std::string name_ = "capture_test.cu", target_ = "compute_90",
              kernel_ = "scale";
};

TEST_F(CaptureTest, KernelsGotBeforeTheCaptureLaunchInsideItLoadingNothing) {
  Start();
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(Build(&m));
  FJ_ASSERT_OK(GetKernel(m, &k));
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const auto before = fjfake_call_counts();
  // The kernel's first launch is the first captured one.
  for (int i = 0; i < 3; ++i) FJ_ASSERT_OK(Launch(k, stream_));
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  // Only capture-safe calls: the launches (and, at most, the thread's
  // context read and set).
  const std::set<std::string> allowed = {"cuLaunchKernelEx", "cuCtxGetCurrent",
                                         "cuCtxSetCurrent",
                                         "cuStreamIsCapturing"};
  const auto made = CallsSince(before);
  for (const auto& [name, n] : made) {
    EXPECT_TRUE(allowed.count(name)) << name << " x" << n << " during capture";
  }
  EXPECT_EQ(made.count("cuLaunchKernelEx") ? made.at("cuLaunchKernelEx") : 0,
            3u);
  // get_kernel left the function whole (cuFuncLoad): no launch loaded code.
  EXPECT_EQ(fjfake_launch_loads(), 0u);
  EXPECT_EQ(EndCapture(Raw()), 3);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

// A cold build (NVRTC, then the image loaded and unloaded to read its
// parameter layout), get_kernel (the image loaded) and a launch, all
// inside the capture, in each capture mode.
class CaptureModeTest
    : public CaptureTest,
      public ::testing::WithParamInterface<CUstreamCaptureMode> {};

TEST_P(CaptureModeTest, ABuildAndAGetKernelInsideTheCaptureLeaveItIntact) {
  Start();
  ASSERT_EQ(raw_.begin(Raw(), GetParam()), CUDA_SUCCESS);
  const auto before = fjfake_call_counts();
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(Build(&m));
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  FJ_ASSERT_OK(GetKernel(m, &k));
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  FJ_ASSERT_OK(Launch(k, stream_));
  const auto made = CallsSince(before);
  // The module work really happened during the capture, the unload
  // included, each time in relaxed mode (set and restored).
  EXPECT_EQ(made.at("cuModuleLoadData"), 2u);
  EXPECT_EQ(made.at("cuModuleUnload"), 1u);
  EXPECT_EQ(made.at("cuThreadExchangeStreamCaptureMode"), 4u);
  EXPECT_EQ(fjfake_launch_loads(), 0u);
  EXPECT_EQ(EndCapture(Raw()), 1);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

INSTANTIATE_TEST_SUITE_P(Modes, CaptureModeTest,
                         ::testing::Values(CU_STREAM_CAPTURE_MODE_GLOBAL,
                                           CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                           CU_STREAM_CAPTURE_MODE_RELAXED));

TEST_F(CaptureTest, ThePerThreadDefaultStreamCapturesABuildAndItsLaunch) {
  // CU_STREAM_PER_THREAD, wrapped: the other stream a caller may capture.
  Start();
  fj_stream* per_thread = nullptr;
  FJ_ASSERT_OK(fj_stream_wrap(
      rt_, 0, reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD), &per_thread));
  ASSERT_EQ(raw_.begin(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(Build(&m));
  FJ_ASSERT_OK(GetKernel(m, &k));
  FJ_ASSERT_OK(Launch(k, per_thread));
  FJ_ASSERT_OK(Launch(k, per_thread));
  EXPECT_EQ(CaptureStatus(CU_STREAM_PER_THREAD),
            CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(EndCapture(CU_STREAM_PER_THREAD), 2);
  FJ_ASSERT_OK(fj_stream_destroy(per_thread));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(CaptureTest, WithoutRelaxedModeTheBuildsUnloadWouldInvalidateIt) {
  // The control: a driver without cuThreadExchangeStreamCaptureMode leaves
  // the runtime's calls in the thread's GLOBAL mode, and the fake enforces
  // the rule that relaxed mode lifts.
  Start([] { ASSERT_EQ(fjfake_hide("cuThreadExchangeStreamCaptureMode"), 0); });
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  fj_module* m = nullptr;
  // The unload's failure is only logged: the build itself succeeds.
  FJ_ASSERT_OK(Build(&m));
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(EndCapture(Raw()), -1);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(CaptureTest, BuildsOnOtherThreadsLeaveAGlobalCaptureIntact) {
  Start();
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  // A server thread building and loading while this one captures: in
  // global mode any other thread's unsafe call would invalidate it.
  std::string other;
  std::thread([&] {
    fj_module* m = nullptr;
    fj_kernel* k = nullptr;
    other = Describe(Build(&m));
    if (other == "OK") other = Describe(GetKernel(m, &k));
    fj_module_destroy(m);
  }).join();
  EXPECT_EQ(other, "OK");
  // An asynchronous build: on the runtime's own pool thread.
  fj_build_options o{};
  o.struct_size = sizeof(o);
  std::string source = std::string(kSource) + "// async\n";
  o.source = S(source);
  o.target = S(target_);
  o.flags = FJ_BUILD_NO_CACHE;
  fj_build* b = nullptr;
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_module_build_async(rt_, &o, &b));
  FJ_ASSERT_OK(fj_build_take(b, &m));
  FJ_ASSERT_OK(fj_build_destroy(b));
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(GetKernel(m, &k));
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(EndCapture(Raw()), 0);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

// Before CUDA 12.3 the driver refuses module loads during a capture.
void OldDriver() { fjfake_set_driver_version(12020); }

TEST_F(CaptureTest, OnAnOldDriverAVisibleCaptureRefusesTheLoadAndSurvives) {
  Start(OldDriver);
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  // Before the capture (its layout read loads), into the memory tier.
  FJ_ASSERT_OK(Build(&m, /*cached=*/true));
  // The calling thread's per-thread default stream, wrapped and captured.
  fj_stream* per_thread = nullptr;
  FJ_ASSERT_OK(fj_stream_wrap(
      rt_, 0, reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD), &per_thread));
  ASSERT_EQ(raw_.begin(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  const uint64_t loads = fjfake_calls("cuModuleLoadData");
  fj_status* st = GetKernel(m, &k);
  EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
  const std::string message = Describe(st);
  EXPECT_NE(message.find("per-thread default stream is capturing"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("CUDA 12.2"), std::string::npos) << message;
  EXPECT_NE(message.find("before cuStreamBeginCapture"), std::string::npos)
      << message;
  // Refused before the driver: the capture goes on.
  EXPECT_EQ(fjfake_calls("cuModuleLoadData"), loads);
  // A cold build needs a load too (its parameter layout): refused alike.
  fj_module* cold = nullptr;
  st = Build(&cold);
  EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
  EXPECT_NE(Describe(st).find("before cuStreamBeginCapture"),
            std::string::npos);
  // A build the cache serves loads nothing: it works.
  fj_module* hit = nullptr;
  FJ_ASSERT_OK(Build(&hit, /*cached=*/true));
  EXPECT_EQ(CaptureStatus(CU_STREAM_PER_THREAD),
            CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(EndCapture(CU_STREAM_PER_THREAD), 0);
  // After the capture the same call loads.
  FJ_ASSERT_OK(GetKernel(m, &k));
  FJ_ASSERT_OK(fj_stream_destroy(per_thread));
  for (fj_module* mod : {m, hit, cold}) FJ_ASSERT_OK(fj_module_destroy(mod));
}

TEST_F(CaptureTest, OnAnOldDriverABlockingStreamsCaptureIsSeenThroughLegacy) {
  Start(OldDriver, 1, /*blocking=*/true);
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(Build(&m));
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
            CUDA_SUCCESS);
  const uint64_t loads = fjfake_calls("cuModuleLoadData");
  fj_status* st = GetKernel(m, &k);
  EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
  const std::string message = Describe(st);
  EXPECT_NE(message.find("a blocking stream"), std::string::npos) << message;
  EXPECT_EQ(fjfake_calls("cuModuleLoadData"), loads);
  EXPECT_EQ(EndCapture(Raw()), 0);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(CaptureTest, OnAnOldDriverAnUnseenCaptureGetsTheDriversRefusal) {
  // A non-blocking stream's capture is invisible from fleetjit: the driver
  // refuses the load (and invalidates the capture, as it would without
  // fleetjit); the status says why and what to do.
  Start(OldDriver);
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(Build(&m));
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  fj_status* st = GetKernel(m, &k);
  EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
  const char* error = fj_status_detail(st, fj_str{"cuda_error", 10}, nullptr);
  EXPECT_NE(error, nullptr);
  if (error != nullptr) {
    EXPECT_NE(std::string(error).find("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"),
              std::string::npos);
  }
  const std::string message = Describe(st);
  EXPECT_NE(message.find("cuModuleLoadData"), std::string::npos) << message;
  EXPECT_NE(message.find("before cuStreamBeginCapture"), std::string::npos)
      << message;
  EXPECT_EQ(EndCapture(Raw()), -1);
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(CaptureTest, ATuningOnAnotherThreadLeavesAGlobalCaptureIntact) {
  // fj_tune allocates copies of the outputs and synchronises its own
  // stream: in relaxed mode, so a global capture elsewhere survives it.
  Start();
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const uint64_t allocs = fjfake_calls("cuMemAlloc");
  std::string tuned;
  std::thread([&] {
    std::string macro = "-DFJ_CAPTURE_TEST=1", block_x = "block.x";
    fj_str macros[1] = {S(macro)};
    fj_build_options build{};
    build.struct_size = sizeof(build);
    build.source = fj_str{kSource, std::strlen(kSource)};
    build.target = S(target_);
    fj_tune_shape shapes[2] = {};
    for (int i = 0; i < 2; ++i) {
      shapes[i].struct_size = sizeof(fj_tune_shape);
      shapes[i].block[0] = 128u << i;
    }
    fj_arg a[3] = {};
    for (fj_arg& arg : a) arg.struct_size = sizeof(fj_arg);
    a[0].kind = FJ_ARG_POINTER;
    a[0].v.pointer = x_;
    a[1].kind = FJ_ARG_F32;
    a[1].v.f32 = 1.0f;
    a[2].kind = FJ_ARG_I32;
    a[2].v.i32 = 1024;
    uint64_t out_bytes = 4096;
    fj_tune_options o{};
    o.struct_size = sizeof(o);
    o.build = &build;
    o.kernel = S(kernel_);
    o.macro_sets = macros;
    o.num_macro_sets = 1;
    o.shapes = shapes;
    o.num_shapes = 2;
    o.grid_extent[0] = 1024;
    o.grid_divisor[0] = S(block_x);
    o.args = a;
    o.num_args = 3;
    o.output_addresses = &x_;
    o.output_bytes = &out_bytes;
    o.num_outputs = 1;
    fj_tune_result* result = nullptr;
    tuned = Describe(fj_tune(rt_, &o, &result));
    fj_tune_result_free(result);
  }).join();
  EXPECT_EQ(tuned, "OK");
  EXPECT_GT(fjfake_calls("cuMemAlloc"), allocs) << "the tuning allocated";
  EXPECT_EQ(CaptureStatus(Raw()), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(EndCapture(Raw()), 0);
}

TEST_F(CaptureTest, AStagedCopyIsRefusedOnACapturingStream) {
  // Two GPUs with no P2P path: a window of GPU 1's tensor into GPU 0's is
  // staged through host memory and waits for the caller's stream.
  Start([] { fjfake_set_p2p_devices(0); }, 2);
  uint64_t src = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 1, 64 * 4, &src));
  int64_t shape[2] = {8, 8};
  fj_tensor s{}, d{};
  s.data = reinterpret_cast<void*>(src);
  s.device = {2, 1};  // kDLCUDA, GPU 1
  s.ndim = 2;
  s.dtype = {2, 32, 1};
  s.shape = shape;
  d = s;
  d.data = reinterpret_cast<void*>(x_);
  d.device = {2, 0};
  fj_copy_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.src = &s;
  desc.dst = &d;
  desc.src_start[0] = -1;  // a window leaving src: the copy kernel's route
  desc.oob = FJ_OOB_ZEROS;
  ASSERT_EQ(raw_.begin(Raw(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const uint64_t syncs = fjfake_calls("cuStreamSynchronize");
  fj_status* st = fj_copy(rt_, &desc, stream_);
  EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
  const std::string message = Describe(st);
  EXPECT_NE(message.find("capturing a CUDA graph"), std::string::npos)
      << message;
  EXPECT_NE(message.find("outside the capture"), std::string::npos) << message;
  EXPECT_EQ(fjfake_calls("cuStreamSynchronize"), syncs);
  EXPECT_EQ(EndCapture(Raw()), 0);
  FJ_ASSERT_OK(fj_mem_free(rt_, src));
}

}  // namespace
