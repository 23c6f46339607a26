// fj_module_link on the GPU (since 1.3): a kernel split over two sources
// (relocatable device code and LTO-IR), a kernel from a prebuilt cubin
// whose parameters the driver gives, and dynamic parallelism through
// libcudadevrt. Each launches on fresh random inputs into a poisoned output
// and is compared with a host reference.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/seed.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

// out[i] = fj_link_combine(x[i], y[i], a), the function in the other source.
constexpr char kKernel[] =
    "extern \"C\" __device__ float fj_link_combine(float x, float y, float "
    "a);\n"
    "extern \"C\" __global__ void combine(float* out, const float* x,\n"
    "                                     const float* y, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = fj_link_combine(x[i], y[i], a);\n"
    "}\n";
constexpr char kCombine[] =
    "extern \"C\" __device__ float fj_link_combine(float x, float y, float a) "
    "{\n"
    "  return a * x + y * y;\n"
    "}\n";

// The parent launches the child over the whole array (dynamic parallelism).
constexpr char kParentChild[] =
    "extern \"C\" __global__ void dp_child(float* out, const float* x, int n,\n"
    "                                      float a) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = a * x[i] + i;\n"
    "}\n"
    "extern \"C\" __global__ void dp_parent(float* out, const float* x, int "
    "n,\n"
    "                                       float a) {\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0)\n"
    "    dp_child<<<(n + 255) / 256, 256>>>(out, x, n, a);\n"
    "}\n";

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

fj_link_input Input(fj_link_input_kind kind, const std::string& name,
                    const std::string& data) {
  fj_link_input in{};
  in.struct_size = sizeof(in);
  in.kind = kind;
  in.name = S(name);
  in.data = data.data();
  in.size = data.size();
  return in;
}

class LinkGpuTest : public fleetjit::testing::CapiRuntimeTest<> {
 protected:
  void SetUp() override {
    CapiRuntimeTest::SetUp();
    if (HasFatalFailure()) return;
    if (gpus_ == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
  }

  // Links `inputs` for the live device (uncached: each test links).
  fj_module* Link(std::vector<fj_link_input> inputs, uint32_t flags) {
    fj_link_options o{};
    o.struct_size = sizeof(o);
    o.inputs = inputs.data();
    o.num_inputs = inputs.size();
    o.flags = flags | FJ_LINK_NO_CACHE;
    fj_module* m = nullptr;
    fj_status* st = fj_module_link(rt_, &o, &m);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    return m;
  }

  uint64_t Upload(const std::vector<float>& v) {
    uint64_t d = 0;
    EXPECT_EQ(Code(fj_mem_alloc(rt_, 0, v.size() * 4, &d)), FJ_OK);
    EXPECT_EQ(Code(fj_memcpy_htod(rt_, d, v.data(), v.size() * 4, nullptr)),
              FJ_OK);
    return d;
  }

  // Runs `combine` of `m` on random data and checks it against the host.
  void CheckCombine(fj_module* m, const char* seed_name) {
    std::mt19937_64 rng = fleetjit::testing::SeededRng(seed_name);
    fj_kernel* k = nullptr;
    FJ_ASSERT_OK(fj_module_get_kernel(m, S(std::string("combine")), 0, &k));
    const int n = 50000 + static_cast<int>(rng() % 1000);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    std::vector<float> x(n), y(n), got(n, 0.0f);
    for (int i = 0; i < n; ++i) x[i] = dist(rng), y[i] = dist(rng);
    const float a = dist(rng);
    uint64_t dx = Upload(x), dy = Upload(y), dout = 0;
    FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, n * 4, &dout));
    FJ_ASSERT_OK(fj_memset_d8(rt_, dout, 0xFF, n * 4, nullptr));  // NaN
    fj_arg args[5] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER),
                      Arg(FJ_ARG_POINTER), Arg(FJ_ARG_F32), Arg(FJ_ARG_I32)};
    args[0].v.pointer = dout;
    args[1].v.pointer = dx;
    args[2].v.pointer = dy;
    args[3].v.f32 = a;
    args[4].v.i32 = n;
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = (n + 255) / 256;
    cfg.block[0] = 256;
    FJ_ASSERT_OK(fj_launch(k, &cfg, args, 5));
    FJ_ASSERT_OK(fj_memcpy_dtoh(rt_, got.data(), dout, n * 4, nullptr));
    for (int i = 0; i < n; ++i) {
      const float want = a * x[i] + y[i] * y[i];
      ASSERT_NEAR(got[i], want, 1e-5f * (1.0f + std::fabs(want))) << "at " << i;
    }
    // The layout is checked: a launch with one argument short is refused.
    EXPECT_EQ(Code(fj_launch(k, &cfg, args, 4)), FJ_INVALID_ARGUMENT);
    for (uint64_t d : {dx, dy, dout}) FJ_ASSERT_OK(fj_mem_free(rt_, d));
  }
};

TEST_F(LinkGpuTest, KernelSplitOverTwoSourcesGivesTheRightAnswer) {
  fj_module* m = Link({Input(FJ_LINK_SOURCE, "kernel.cu", kKernel),
                       Input(FJ_LINK_SOURCE, "combine.cu", kCombine)},
                      0);
  ASSERT_NE(m, nullptr);
  CheckCombine(m, "KernelSplitOverTwoSourcesGivesTheRightAnswer");
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(LinkGpuTest, LtoLinkRuns) {
  fj_module* m = Link({Input(FJ_LINK_SOURCE, "kernel.cu", kKernel),
                       Input(FJ_LINK_SOURCE, "combine.cu", kCombine)},
                      FJ_LINK_LTO);
  ASSERT_NE(m, nullptr);
  CheckCombine(m, "LtoLinkRuns");
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(LinkGpuTest, KernelOfAPrebuiltCubinTakesItsLayoutFromTheDriver) {
  // The kernel as a relocatable cubin (no PTX travels with it), built for
  // the device's target by name: a -dc image is not loadable on its own, so
  // a build for the device itself would fail at cuModuleGetFunction.
  fj_device_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_device_info_get(rt_, 0, &info));
  std::string target =
      "sm_" + std::to_string(info.cc_major * 10 + info.cc_minor);
  fj_build_options b{};
  b.struct_size = sizeof(b);
  std::string source = kKernel;
  b.source = S(source);
  b.target = S(target);
  std::string dc = "-dc";
  fj_str opt = S(dc);
  b.nvrtc_options = &opt;
  b.num_nvrtc_options = 1;
  b.output = FJ_OUTPUT_CUBIN;
  b.flags = FJ_BUILD_NO_CACHE;
  fj_module* built = nullptr;
  FJ_ASSERT_OK(fj_module_build(rt_, &b, &built));
  const void* data = nullptr;
  size_t size = 0;
  FJ_ASSERT_OK(fj_module_image(built, &data, &size));
  std::string cubin(static_cast<const char*>(data), size);
  FJ_ASSERT_OK(fj_module_destroy(built));
  fj_module* m = Link({Input(FJ_LINK_CUBIN, "kernel.cubin", cubin),
                       Input(FJ_LINK_SOURCE, "combine.cu", kCombine)},
                      0);
  ASSERT_NE(m, nullptr);
  CheckCombine(m, "KernelOfAPrebuiltCubinTakesItsLayoutFromTheDriver");
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(LinkGpuTest, DynamicParallelismGivesTheRightAnswer) {
  std::mt19937_64 rng =
      fleetjit::testing::SeededRng("DynamicParallelismGivesTheRightAnswer");
  fj_module* m =
      Link({Input(FJ_LINK_SOURCE, "dp.cu", kParentChild)}, FJ_LINK_DEVRT);
  ASSERT_NE(m, nullptr);
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(fj_module_get_kernel(m, S(std::string("dp_parent")), 0, &k));
  const int n = 30000 + static_cast<int>(rng() % 1000);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(n), got(n, 0.0f);
  for (float& v : x) v = dist(rng);
  const float a = dist(rng);
  uint64_t dx = Upload(x), dout = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, n * 4, &dout));
  FJ_ASSERT_OK(fj_memset_d8(rt_, dout, 0xFF, n * 4, nullptr));
  fj_arg args[4] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER), Arg(FJ_ARG_I32),
                    Arg(FJ_ARG_F32)};
  args[0].v.pointer = dout;
  args[1].v.pointer = dx;
  args[2].v.i32 = n;
  args[3].v.f32 = a;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  FJ_ASSERT_OK(fj_launch(k, &cfg, args, 4));
  // The child grid completes before the parent's grid does.
  FJ_ASSERT_OK(fj_memcpy_dtoh(rt_, got.data(), dout, n * 4, nullptr));
  for (int i = 0; i < n; ++i) {
    const float want = a * x[i] + static_cast<float>(i);
    ASSERT_NEAR(got[i], want, 1e-5f * (1.0f + std::fabs(want))) << "at " << i;
  }
  FJ_ASSERT_OK(fj_mem_free(rt_, dx));
  FJ_ASSERT_OK(fj_mem_free(rt_, dout));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

}  // namespace
