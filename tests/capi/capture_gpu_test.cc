// Graph capture on a real GPU, through the C ABI, on the caller's own
// stream (created with the raw driver, dlopen'ed here as a framework would,
// and wrapped with fj_stream_wrap): docs/launch.md, "Graph capture".
//  - Kernels built moments before the capture, never launched, have their
//    first launches inside it; the graph is instantiated and replayed, and
//    the results match a host reference (random inputs, a poisoned
//    output, which also shows nothing ran during the capture).
//  - A build and its first fj_module_get_kernel inside the capture (global
//    and thread-local modes): from CUDA 12.3 on they work and the capture
//    goes on (its graph replays right); before, they are
//    FJ_FAILED_PRECONDITION saying to build before the capture.
//  - A build on another thread while this one captures in global mode
//    leaves the capture intact.
// tests/capi/capture_test.cc runs the same cases on the fake driver.
// Without a GPU every test skips.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

std::string Take(fj_status* st) {
  std::string m = st == nullptr
                      ? ""
                      : std::string(fj_code_name(fj_status_code(st))) + ": " +
                            fj_status_message(st, nullptr);
  fj_status_free(st);
  return m;
}
#define FJ_OK_OR_FAIL(call) ASSERT_EQ(Take(call), "")

// The driver calls a caller that captures makes, found as the runtime
// finds its own (cuGetProcAddress, CUDA 12.0 prototypes).
struct RawDriver {
  void* lib = nullptr;
  decltype(&::cuDriverGetVersion) cuDriverGetVersion = nullptr;
  decltype(&::cuDeviceGet) cuDeviceGet = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) cuDevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) cuDevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) cuCtxSetCurrent = nullptr;
  decltype(&::cuStreamCreate) cuStreamCreate = nullptr;
  decltype(&::cuStreamDestroy) cuStreamDestroy = nullptr;
  decltype(&::cuStreamSynchronize) cuStreamSynchronize = nullptr;
  decltype(&::cuStreamBeginCapture) cuStreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) cuStreamEndCapture = nullptr;
  decltype(&::cuStreamIsCapturing) cuStreamIsCapturing = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) cuGraphInstantiateWithFlags =
      nullptr;
  decltype(&::cuGraphLaunch) cuGraphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) cuGraphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) cuGraphDestroy = nullptr;

  bool Load() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
    auto get_proc =
        reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit"));
    if (get_proc == nullptr || init == nullptr || init(0) != CUDA_SUCCESS)
      return false;
    bool ok = true;
    auto get = [&](auto& fn, const char* name) {
      void* p = nullptr;
      CUdriverProcAddressQueryResult found{};
      ok = ok &&
           get_proc(name, &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
               CUDA_SUCCESS &&
           p != nullptr;
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    get(cuDriverGetVersion, "cuDriverGetVersion");
    get(cuDeviceGet, "cuDeviceGet");
    get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    get(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
    get(cuCtxSetCurrent, "cuCtxSetCurrent");
    get(cuStreamCreate, "cuStreamCreate");
    get(cuStreamDestroy, "cuStreamDestroy");
    get(cuStreamSynchronize, "cuStreamSynchronize");
    get(cuStreamBeginCapture, "cuStreamBeginCapture");
    get(cuStreamEndCapture, "cuStreamEndCapture");
    get(cuStreamIsCapturing, "cuStreamIsCapturing");
    get(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
    get(cuGraphLaunch, "cuGraphLaunch");
    get(cuGraphExecDestroy, "cuGraphExecDestroy");
    get(cuGraphDestroy, "cuGraphDestroy");
    return ok;
  }
};

// Two kernels, each its own module: the second reads what the first wrote,
// so the graph's order shows in the result.
constexpr char kAxpySource[] = R"(
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    y[i] += a * x[i];
  }
}
)";
constexpr char kCombineSource[] = R"(
extern "C" __global__ void combine(float* z, const float* y, const float* x,
                                   float b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    z[i] = y[i] * b - x[i];
  }
}
)";

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

class CaptureGpuTest : public ::testing::Test {
 protected:
  static constexpr int kN = (1 << 16) + 37;
  static constexpr float kA = 3.0f, kB = 2.0f;

  void SetUp() override {
    FJ_OK_OR_FAIL(fj_runtime_create(nullptr, &rt_));
    int32_t n = 0;
    FJ_OK_OR_FAIL(fj_device_count(rt_, &n));
    if (n == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    ASSERT_TRUE(drv_.Load()) << "libcuda.so.1 could not be opened directly";
    ASSERT_EQ(drv_.cuDriverGetVersion(&driver_version_), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuStreamCreate(&raw_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    FJ_OK_OR_FAIL(
        fj_stream_wrap(rt_, 0, reinterpret_cast<uintptr_t>(raw_), &stream_));
    // Small integers as floats: every sum below is exact.
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_int_distribution<int> small(-8, 8);
    x_.resize(kN);
    y0_.resize(kN);
    for (int i = 0; i < kN; ++i) {
      x_[i] = static_cast<float>(small(rng));
      y0_[i] = static_cast<float>(small(rng));
    }
    for (uint64_t* p : {&dx_, &dy_, &dz_})
      FJ_OK_OR_FAIL(fj_mem_alloc(rt_, 0, uint64_t{kN} * 4, p));
    FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, dx_, x_.data(), kN * 4, nullptr));
    FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, dy_, y0_.data(), kN * 4, nullptr));
    FJ_OK_OR_FAIL(fj_memset_d8(rt_, dz_, 0xFF, kN * 4, nullptr));  // NaN
  }
  void TearDown() override {
    if (rt_ != nullptr) {
      for (fj_module* m : modules_) EXPECT_EQ(Take(fj_module_destroy(m)), "");
      for (uint64_t p : {dx_, dy_, dz_}) fj_mem_free(rt_, p);
      EXPECT_EQ(Take(fj_runtime_destroy(rt_)), "");
    }
    if (raw_ != nullptr) {
      drv_.cuCtxSetCurrent(ctx_);
      EXPECT_EQ(drv_.cuStreamDestroy(raw_), CUDA_SUCCESS);
    }
    if (ctx_ != nullptr) drv_.cuDevicePrimaryCtxRelease(dev_);
  }

  // Builds `source` now (no cache: NVRTC runs, and the image is loaded and
  // unloaded to read its parameter layout) and gets `kernel` from it.
  fj_status* BuildAndGet(const char* source, const char* kernel,
                         fj_kernel** out) {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = fj_str{source, std::strlen(source)};
    o.name = fj_str{"capture_gpu_test.cu", 19};
    o.flags = FJ_BUILD_NO_CACHE;
    fj_module* m = nullptr;
    if (fj_status* st = fj_module_build(rt_, &o, &m); st != nullptr) return st;
    modules_.push_back(m);
    return fj_module_get_kernel(m, fj_str{kernel, std::strlen(kernel)}, 0, out);
  }
  fj_launch_config Config() const {
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 96;
    cfg.block[0] = 256;
    cfg.stream = stream_;
    return cfg;
  }
  fj_status* LaunchAxpy(fj_kernel* k) {
    fj_arg a[4] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER), Arg(FJ_ARG_F32),
                   Arg(FJ_ARG_I32)};
    a[0].v.pointer = dy_;
    a[1].v.pointer = dx_;
    a[2].v.f32 = kA;
    a[3].v.i32 = kN;
    const fj_launch_config cfg = Config();
    return fj_launch(k, &cfg, a, 4);
  }
  fj_status* LaunchCombine(fj_kernel* k) {
    fj_arg a[5] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER),
                   Arg(FJ_ARG_POINTER), Arg(FJ_ARG_F32), Arg(FJ_ARG_I32)};
    a[0].v.pointer = dz_;
    a[1].v.pointer = dy_;
    a[2].v.pointer = dx_;
    a[3].v.f32 = kB;
    a[4].v.i32 = kN;
    const fj_launch_config cfg = Config();
    return fj_launch(k, &cfg, a, 5);
  }
  CUstreamCaptureStatus Capturing() {
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    EXPECT_EQ(drv_.cuStreamIsCapturing(raw_, &status), CUDA_SUCCESS);
    return status;
  }
  std::vector<float> Download(uint64_t p) {
    std::vector<float> host(kN);
    EXPECT_EQ(Take(fj_memcpy_dtoh(rt_, host.data(), p, kN * 4, nullptr)), "");
    return host;
  }
  // Nothing a captured launch would change has changed.
  void ExpectNothingRan(bool combine) {
    EXPECT_EQ(Download(dy_), y0_) << "a captured launch ran";
    if (!combine) return;
    const std::vector<float> z = Download(dz_);
    std::vector<uint32_t> bits(kN);
    std::memcpy(bits.data(), z.data(), kN * 4);
    EXPECT_EQ(bits, std::vector<uint32_t>(kN, 0xFFFFFFFFu))
        << "a captured launch ran";
  }
  // Instantiates `graph`, replays it `replays` times on the raw stream and
  // checks y (and z, when `combine`) against the host reference.
  void ReplayAndCheck(CUgraph graph, int replays, bool combine) {
    ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    CUgraphExec exec = nullptr;
    ASSERT_EQ(drv_.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
    for (int r = 0; r < replays; ++r)
      ASSERT_EQ(drv_.cuGraphLaunch(exec, raw_), CUDA_SUCCESS);
    ASSERT_EQ(drv_.cuStreamSynchronize(raw_), CUDA_SUCCESS);
    EXPECT_EQ(drv_.cuGraphExecDestroy(exec), CUDA_SUCCESS);
    EXPECT_EQ(drv_.cuGraphDestroy(graph), CUDA_SUCCESS);
    const std::vector<float> y = Download(dy_), z = Download(dz_);
    int bad = 0;
    for (int i = 0; i < kN; ++i) {
      const float want_y = y0_[i] + replays * kA * x_[i];
      bad += y[i] != want_y;
      if (combine) bad += z[i] != want_y * kB - x_[i];
    }
    EXPECT_EQ(bad, 0) << "elements differ from the host reference after "
                      << replays << " replays";
  }

  fj_runtime* rt_ = nullptr;
  RawDriver drv_;
  int driver_version_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream raw_ = nullptr;
  fj_stream* stream_ = nullptr;
  std::vector<fj_module*> modules_;
  std::vector<float> x_, y0_;
  uint64_t dx_ = 0, dy_ = 0, dz_ = 0;
};

TEST_F(CaptureGpuTest, KernelsBuiltMomentsBeforeHaveTheirFirstLaunchInside) {
  fj_kernel *axpy = nullptr, *combine = nullptr;
  FJ_OK_OR_FAIL(BuildAndGet(kAxpySource, "axpy", &axpy));
  FJ_OK_OR_FAIL(BuildAndGet(kCombineSource, "combine", &combine));
  ASSERT_EQ(drv_.cuStreamBeginCapture(raw_, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  // Neither kernel has been launched before: these are their first.
  FJ_OK_OR_FAIL(LaunchAxpy(axpy));
  FJ_OK_OR_FAIL(LaunchCombine(combine));
  EXPECT_EQ(Capturing(), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph graph = nullptr;
  ASSERT_EQ(drv_.cuStreamEndCapture(raw_, &graph), CUDA_SUCCESS);
  ASSERT_NE(graph, nullptr);
  ExpectNothingRan(/*combine=*/true);
  ReplayAndCheck(graph, 3, /*combine=*/true);
}

class CaptureModeGpuTest
    : public CaptureGpuTest,
      public ::testing::WithParamInterface<CUstreamCaptureMode> {};

TEST_P(CaptureModeGpuTest, ABuildAndItsFirstGetKernelInsideTheCapture) {
  ASSERT_EQ(drv_.cuStreamBeginCapture(raw_, GetParam()), CUDA_SUCCESS);
  fj_kernel *axpy = nullptr, *combine = nullptr;
  fj_status* st = BuildAndGet(kAxpySource, "axpy", &axpy);
  if (driver_version_ < 12030) {
    // The documented outcome before CUDA 12.3: refused, saying why. The
    // raw stream is non-blocking, so fleetjit cannot see its capture and
    // the driver's refusal has invalidated it.
    EXPECT_EQ(fj_status_code(st), FJ_FAILED_PRECONDITION);
    EXPECT_NE(Take(st).find("before cuStreamBeginCapture"), std::string::npos);
    CUgraph graph = nullptr;
    drv_.cuStreamEndCapture(raw_, &graph);
    if (graph != nullptr) drv_.cuGraphDestroy(graph);
    return;
  }
  // From CUDA 12.3 on: the build, its parameter read (a module load and
  // unload) and the first get_kernel (a load) leave the capture intact.
  FJ_OK_OR_FAIL(st);
  EXPECT_EQ(Capturing(), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  FJ_OK_OR_FAIL(LaunchAxpy(axpy));
  FJ_OK_OR_FAIL(BuildAndGet(kCombineSource, "combine", &combine));
  EXPECT_EQ(Capturing(), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  FJ_OK_OR_FAIL(LaunchCombine(combine));
  CUgraph graph = nullptr;
  ASSERT_EQ(drv_.cuStreamEndCapture(raw_, &graph), CUDA_SUCCESS)
      << "a build inside the capture invalidated it";
  ASSERT_NE(graph, nullptr);
  ExpectNothingRan(/*combine=*/true);
  ReplayAndCheck(graph, 2, /*combine=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, CaptureModeGpuTest,
    ::testing::Values(CU_STREAM_CAPTURE_MODE_GLOBAL,
                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));

TEST_F(CaptureGpuTest, ABuildOnAnotherThreadLeavesAGlobalCaptureIntact) {
  if (driver_version_ < 12030) {
    GTEST_SKIP() << "the driver (" << driver_version_
                 << ") refuses module loads during a capture; what it does "
                    "to another thread's capture is not documented";
  }
  fj_kernel *axpy = nullptr, *combine = nullptr;
  FJ_OK_OR_FAIL(BuildAndGet(kAxpySource, "axpy", &axpy));
  ASSERT_EQ(drv_.cuStreamBeginCapture(raw_, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  FJ_OK_OR_FAIL(LaunchAxpy(axpy));
  // In global mode, a potentially unsafe call from any thread that is not
  // relaxed would invalidate this capture.
  std::string other;
  std::thread([&] {
    other = Take(BuildAndGet(kCombineSource, "combine", &combine));
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(Capturing(), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph graph = nullptr;
  ASSERT_EQ(drv_.cuStreamEndCapture(raw_, &graph), CUDA_SUCCESS);
  ExpectNothingRan(/*combine=*/false);
  ReplayAndCheck(graph, 4, /*combine=*/false);
  if (combine == nullptr) return;
  // The kernel built during the capture works after it, on the stream.
  FJ_OK_OR_FAIL(LaunchCombine(combine));
  ASSERT_EQ(drv_.cuStreamSynchronize(raw_), CUDA_SUCCESS);
  const std::vector<float> z = Download(dz_);
  int bad = 0;
  for (int i = 0; i < kN; ++i)
    bad += z[i] != (y0_[i] + 4 * kA * x_[i]) * kB - x_[i];
  EXPECT_EQ(bad, 0);
}

}  // namespace
