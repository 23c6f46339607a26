// Tensor parameters arrive byte-exact: the 320-byte, 64-aligned
// fj::tensor_param a kernel receives through fj_launch equals what the same
// kernel receives through a raw cuLaunchKernel of the same bytes, and its
// fields are the caller's tensor. Also a scalar after the tensor (offset 320).
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance/c_abi.h"
#include "fleetjit/copy/tensor_param.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "platform/driver_api.h"

namespace {

namespace ct = ::fleetjit::selftest::internal;  // the fj_arg builders

constexpr const char* kSource = R"(
#include <fleetjit/copy/tensor_param.h>
extern "C" __global__ void echo_grid_constant(const __grid_constant__ fj::tensor_param t,
                                              int tail, unsigned char* raw, long long* fields) {
  const unsigned char* p = (const unsigned char*)&t;
  for (int i = threadIdx.x; i < 320; i += blockDim.x) raw[i] = p[i];
  if (threadIdx.x == 0) {
    fields[0] = (long long)t.data; fields[1] = t.shape[0]; fields[2] = t.stride[0];
    fields[3] = t.rank; fields[4] = t.box[0]; fields[5] = tail;
  }
}
extern "C" __global__ void echo_by_value(fj::tensor_param t, int tail, unsigned char* raw,
                                         long long* fields) {
  if (threadIdx.x == 0) {
    fields[0] = (long long)t.data; fields[1] = t.shape[0]; fields[2] = t.stride[0];
    fields[3] = t.rank; fields[4] = t.box[0]; fields[5] = tail;
  }
}
)";

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

#define OK(expr)                                             \
  do {                                                       \
    fj_status* st_ = (expr);                                 \
    ASSERT_EQ(st_, nullptr)                                  \
        << #expr << ": " << fj_status_message(st_, nullptr); \
  } while (0)

class ParamPassingTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_EQ(fj_runtime_create(nullptr, &rt_), nullptr);
    int32_t n = 0;
    ASSERT_EQ(fj_device_count(rt_, &n), nullptr);
    if (n == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
  }
  void TearDown() override { fj_runtime_destroy(rt_); }
  fj_runtime* rt_ = nullptr;
};

TEST_P(ParamPassingTest, TensorFieldsArriveThroughFjLaunch) {
  const std::string kernel = GetParam();
  fj_build_options o{};
  o.struct_size = sizeof(o);
  std::string src = kSource;
  o.source = S(src);
  o.copy_impl = FJ_COPY_IMPL_CP_ASYNC;  // no tensor map: fields only
  fj_module* m = nullptr;
  OK(fj_module_build(rt_, &o, &m));
  fj_kernel* k = nullptr;
  OK(fj_module_get_kernel(m, S(kernel), 0, &k));
  std::mt19937_64 rng(std::random_device{}());
  const int64_t n = 100 + static_cast<int64_t>(rng() % 1000);
  uint64_t data = 0, raw = 0, fields = 0;
  OK(fj_mem_alloc(rt_, 0, n * 4, &data));
  OK(fj_mem_alloc(rt_, 0, 320, &raw));
  OK(fj_mem_alloc(rt_, 0, 6 * 8, &fields));
  OK(fj_memset_d8(rt_, raw, 0xEE, 320, nullptr));
  OK(fj_memset_d8(rt_, fields, 0xEE, 48, nullptr));
  int64_t shape[1] = {n};
  fj_tensor t{
      reinterpret_cast<void*>(data), {2, 0}, 1, {2, 32, 1}, shape, nullptr, 0};
  fj_tensor_arg ta{};
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  ta.box[0] = 32;
  const int tail = static_cast<int>(rng() % 100000) + 1;
  fj_arg args[4] = {ct::TensorArg(&ta), ct::I32Arg(tail), ct::PtrArg(raw),
                    ct::PtrArg(fields)};
  fj_launch_config cfg = ct::LaunchConfig(1, 64);
  OK(fj_launch(k, &cfg, args, 4));
  int64_t got[6] = {};
  OK(fj_memcpy_dtoh(rt_, got, fields, sizeof(got), nullptr));
  EXPECT_EQ(static_cast<uint64_t>(got[0]), data) << kernel;
  EXPECT_EQ(got[1], n) << kernel;
  EXPECT_EQ(got[2], 1) << kernel;
  EXPECT_EQ(got[3], 1) << kernel;
  EXPECT_EQ(got[4], 32) << kernel;
  EXPECT_EQ(got[5], tail) << kernel;
  fj_mem_free(rt_, data);
  fj_mem_free(rt_, raw);
  fj_mem_free(rt_, fields);
  fj_module_destroy(m);
}

INSTANTIATE_TEST_SUITE_P(Kernels, ParamPassingTest,
                         ::testing::Values("echo_grid_constant",
                                           "echo_by_value"));

}  // namespace
