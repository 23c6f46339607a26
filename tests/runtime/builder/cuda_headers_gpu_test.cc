// Kernels that include CUDA's own headers, built with no include option and
// run on the GPU through the C ABI: an fp16/bf16 axpy (<cuda_fp16.h>,
// <cuda_bf16.h>) and a CUB BlockReduce sum (<cub/block/block_reduce.cuh>),
// each checked on random data against a host reference. The inputs are
// chosen so every result is exact in its type. Without a GPU every test
// skips and says why.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"

namespace {

constexpr const char* kHalfSource = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy_half(const __half* x, __nv_bfloat16* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __half2float(x[i]) + __bfloat162float(y[i]));
}
)";

constexpr const char* kCubSource = R"(
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage temp;
  float sum = Reduce(temp).Sum(in[blockIdx.x * 256 + threadIdx.x]);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";

std::string Message(fj_status* s) {
  std::string m = s == nullptr ? "" : fj_status_message(s, nullptr);
  fj_status_free(s);
  return m;
}

#define FJ_OK_OR_FAIL(expr)                                 \
  do {                                                      \
    fj_status* s_ = (expr);                                 \
    ASSERT_EQ(s_, nullptr) << #expr << ": " << Message(s_); \
  } while (0)

fj_str Str(const std::string& s) { return {s.data(), s.size()}; }

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Exact for the values used here (normal halves, or zero).
uint16_t ToHalf(float f) {
  uint32_t u = Bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if ((u & 0x7fffffff) == 0) return sign;
  int exp = static_cast<int>((u >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3ff));
}
uint16_t ToBf16(float f) { return static_cast<uint16_t>(Bits(f) >> 16); }
float FromBf16(uint16_t b) { return FromBits(static_cast<uint32_t>(b) << 16); }

class CudaHeadersGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    ASSERT_EQ(fj_runtime_create(&o, &rt_), nullptr);
    int32_t count = 0;
    ASSERT_EQ(fj_device_count(rt_, &count), nullptr);
    if (count == 0) {
      GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    }
  }
  void TearDown() override {
    for (uint64_t a : allocations_) fj_status_free(fj_mem_free(rt_, a));
    fj_status_free(fj_runtime_destroy(rt_));
  }
  uint64_t Alloc(size_t bytes) {
    uint64_t a = 0;
    fj_status* s = fj_mem_alloc(rt_, 0, bytes, &a);
    EXPECT_EQ(s, nullptr) << Message(s);
    allocations_.push_back(a);
    return a;
  }
  // Builds `source` for the live device, with no include option.
  fj_kernel* Build(const char* source, const char* kernel, fj_module** module) {
    std::string src = source;
    fj_build_options b{};
    b.struct_size = sizeof(b);
    b.source = Str(src);
    b.name = Str(std::string(kernel) + ".cu");
    fj_status* s = fj_module_build(rt_, &b, module);
    EXPECT_EQ(s, nullptr) << Message(s);
    if (*module == nullptr) return nullptr;
    fj_module_info info{};
    info.struct_size = sizeof(info);
    fj_status_free(fj_module_info_get(*module, &info));
    std::printf("[ info     ] %s: %s, NVRTC %.0f ms\n", kernel, info.target,
                info.compile_ms);
    fj_kernel* k = nullptr;
    s = fj_module_get_kernel(*module, Str(kernel), 0, &k);
    EXPECT_EQ(s, nullptr) << Message(s);
    return k;
  }
  fj_runtime* rt_ = nullptr;
  std::vector<uint64_t> allocations_;
};

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

TEST_F(CudaHeadersGpu, Fp16Bf16AxpyMatchesTheHost) {
  fj_module* module = nullptr;
  fj_kernel* k = Build(kHalfSource, "axpy_half", &module);
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(20250901);
  const int n = 10000 + static_cast<int>(rng() % 5000);
  const float a = 2.0f;
  std::vector<uint16_t> x(n), y(n);
  std::vector<float> want(n);
  for (int i = 0; i < n; ++i) {
    float xf = static_cast<float>(static_cast<int>(rng() % 65) - 32) /
               2;  // exact in fp16
    float yf =
        static_cast<float>(static_cast<int>(rng() % 65) - 32);  // exact in bf16
    x[i] = ToHalf(xf);
    y[i] = ToBf16(yf);
    want[i] = a * xf + yf;  // an integer in [-64, 64]: exact in bf16
  }
  uint64_t dx = Alloc(n * 2), dy = Alloc(n * 2);
  FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, dx, x.data(), n * 2, nullptr));
  FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, dy, y.data(), n * 2, nullptr));
  fj_arg args[4] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER), Arg(FJ_ARG_F32),
                    Arg(FJ_ARG_I32)};
  args[0].v.pointer = dx;
  args[1].v.pointer = dy;
  args[2].v.f32 = a;
  args[3].v.i32 = n;
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = (n + 255) / 256;
  c.block[0] = 256;
  FJ_OK_OR_FAIL(fj_launch(k, &c, args, 4));
  std::vector<uint16_t> got(n);
  FJ_OK_OR_FAIL(fj_memcpy_dtoh(rt_, got.data(), dy, n * 2, nullptr));
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    if (FromBf16(got[i]) != want[i] && ++wrong <= 5) {
      ADD_FAILURE() << "y[" << i << "] = " << FromBf16(got[i]) << ", want "
                    << want[i];
    }
  }
  EXPECT_EQ(wrong, 0);
  fj_status_free(fj_module_destroy(module));
}

TEST_F(CudaHeadersGpu, CubBlockReduceMatchesTheHost) {
  fj_module* module = nullptr;
  fj_kernel* k = Build(kCubSource, "block_sum", &module);
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(7);
  const int blocks = 100 + static_cast<int>(rng() % 400);
  std::vector<float> in(blocks * 256), want(blocks, 0.0f);
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < 256; ++t) {
      float v = static_cast<float>(static_cast<int>(rng() % 201) -
                                   100);  // sums stay exact
      in[b * 256 + t] = v;
      want[b] += v;
    }
  }
  uint64_t din = Alloc(in.size() * 4), dout = Alloc(blocks * 4);
  FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, din, in.data(), in.size() * 4, nullptr));
  fj_arg args[2] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER)};
  args[0].v.pointer = din;
  args[1].v.pointer = dout;
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = static_cast<uint32_t>(blocks);
  c.block[0] = 256;
  FJ_OK_OR_FAIL(fj_launch(k, &c, args, 2));
  std::vector<float> got(blocks);
  FJ_OK_OR_FAIL(fj_memcpy_dtoh(rt_, got.data(), dout, blocks * 4, nullptr));
  for (int b = 0; b < blocks; ++b) {
    ASSERT_EQ(got[b], want[b]) << "block " << b;
  }
  fj_status_free(fj_module_destroy(module));
}

}  // namespace
