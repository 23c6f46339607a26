// fj_module_load on the GPU: saxpy built here as PTX and as a cubin for the
// live device (what `fleetjit build -o` writes), loaded back from the bytes
// alone, launched with random data and checked against a host reference;
// a launch with wrong arguments (count, size, an fj_arg stride not aligned
// for fj_arg) is refused before the driver is called.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/seed.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;
using fleetjit::testing::SaxpySource;

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

class ModuleLoadGpuTest : public fleetjit::testing::CapiRuntimeTest<
                              ::testing::TestWithParam<fj_output>> {
 protected:
  void SetUp() override {
    CapiRuntimeTest::SetUp();
    if (HasFatalFailure()) return;
    if (gpus_ == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
  }
};

TEST_P(ModuleLoadGpuTest, LoadsAndLaunchesSaxpyFromItsImage) {
  std::mt19937_64 rng =
      fleetjit::testing::SeededRng("LoadsAndLaunchesSaxpyFromItsImage");
  // 1. Build for the live device (PTX or cubin) and keep only the bytes.
  fj_build_options b = BuildOptions(SaxpySource(), "");
  b.output = GetParam();
  b.flags = FJ_BUILD_NO_CACHE;
  fj_module* built = nullptr;
  FJ_ASSERT_OK(fj_module_build(rt_, &b, &built));
  const void* data = nullptr;
  size_t size = 0;
  FJ_ASSERT_OK(fj_module_image(built, &data, &size));
  std::string image(static_cast<const char*>(data), size);
  FJ_ASSERT_OK(fj_module_destroy(built));

  // 2. Load the bytes (sniffed), as another process would.
  fj_module_load_options o{};
  o.struct_size = sizeof(o);
  o.image = image.data();
  o.image_size = image.size();
  std::string name = GetParam() == FJ_OUTPUT_PTX ? "saxpy.ptx" : "saxpy.cubin";
  o.name = S(name);
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_module_load(rt_, &o, &m));
  fj_kernel* k = nullptr;
  FJ_ASSERT_OK(fj_module_get_kernel(m, S(std::string("saxpy")), 0, &k));
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_kernel_info_get(k, &info));
  EXPECT_EQ(info.num_params, 4);
  EXPECT_EQ(info.param_bytes, 24u);  // y, x: 8 + 8; a, n: 4 + 4

  // 3. Random data, launch, compare with the host.
  const int n = 10007;
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> x(n), y(n), want(n), got(n);
  for (int i = 0; i < n; ++i) x[i] = dist(rng), y[i] = dist(rng);
  float a = dist(rng);
  for (int i = 0; i < n; ++i) want[i] = a * x[i] + y[i];
  uint64_t dx = 0, dy = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, n * 4, &dx));
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, n * 4, &dy));
  FJ_ASSERT_OK(fj_memcpy_htod(rt_, dx, x.data(), n * 4, nullptr));
  FJ_ASSERT_OK(fj_memcpy_htod(rt_, dy, y.data(), n * 4, nullptr));
  fj_arg args[4] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER), Arg(FJ_ARG_F32),
                    Arg(FJ_ARG_I32)};
  args[0].v.pointer = dy;
  args[1].v.pointer = dx;
  args[2].v.f32 = a;
  args[3].v.i32 = n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = (n + 255) / 256;
  cfg.block[0] = 256;
  FJ_ASSERT_OK(fj_launch(k, &cfg, args, 4));
  FJ_ASSERT_OK(fj_memcpy_dtoh(rt_, got.data(), dy, n * 4, nullptr));
  for (int i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])))
        << "at " << i;
  }

  // 4. Wrong arguments are refused: count, and size (a double for a float).
  EXPECT_EQ(Code(fj_launch(k, &cfg, args, 3)), FJ_INVALID_ARGUMENT);
  fj_arg wrong[4] = {args[0], args[1], args[2], args[3]};
  wrong[2] = Arg(FJ_ARG_F64);
  wrong[2].v.f64 = a;
  EXPECT_EQ(Code(fj_launch(k, &cfg, wrong, 4)), FJ_INVALID_ARGUMENT);
  // An array whose stride is not a multiple of alignof(fj_arg) is refused
  // before any element past the first is read.
  const size_t odd = sizeof(fj_arg) + 4;
  alignas(fj_arg) unsigned char packed[4 * (sizeof(fj_arg) + 4)];
  for (int i = 0; i < 4; ++i) {
    fj_arg a = args[i];
    a.struct_size = odd;
    std::memcpy(packed + i * odd, &a, sizeof(a));
  }
  EXPECT_EQ(
      Code(fj_launch(k, &cfg, reinterpret_cast<const fj_arg*>(packed), 4)),
      FJ_INVALID_ARGUMENT);
  FJ_ASSERT_OK(fj_mem_free(rt_, dx));
  FJ_ASSERT_OK(fj_mem_free(rt_, dy));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

INSTANTIATE_TEST_SUITE_P(Images, ModuleLoadGpuTest,
                         ::testing::Values(FJ_OUTPUT_PTX, FJ_OUTPUT_CUBIN),
                         [](const auto& info) {
                           return std::string(
                               info.param == FJ_OUTPUT_PTX ? "Ptx" : "Cubin");
                         });

}  // namespace
