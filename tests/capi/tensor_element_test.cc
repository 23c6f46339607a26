// A C++ kernel's FJ_TENSOR(T, R) carries sizeof(T) in its mangled
// signature (fj::tensor<T, R, B>, <fleetjit/copy.cuh>), so fj_launch
// refuses a tensor whose elements have another size even when T is the
// caller's own struct, and accepts one whose elements have T's size. On the
// fake driver (tests/common/fake_cuda), with the real NVRTC, no GPU.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

constexpr char kSource[] = R"(
#include <fleetjit/copy.cuh>
struct Pair { float a, b; };
struct Rgb { unsigned char r, g, b; };
__global__ void pairs(FJ_TENSOR(Pair, 2) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
__global__ void colours(FJ_TENSOR(Rgb, 1) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
)";

class TensorElementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fleetjit::testing::CreateFakeRuntime(&rt_));
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    o.name_expressions = exprs_;
    o.num_name_expressions = 2;
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
    FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 1 << 20, &memory_));
  }
  void TearDown() override {
    if (memory_ != 0) EXPECT_EQ(Code(fj_mem_free(rt_, memory_)), FJ_OK);
    if (module_ != nullptr) EXPECT_EQ(Code(fj_module_destroy(module_)), FJ_OK);
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    fjfake_reset(1);
  }

  // fj_launch of `kernel` with a rank-`rank` tensor of DLPack dtype
  // (`code`, `bits`) over the allocation, and an int* output.
  fj_status* Launch(const std::string& kernel, int rank, uint8_t code,
                    uint8_t bits) {
    fj_kernel* k = nullptr;
    fj_status* st = fj_module_get_kernel(module_, S(kernel), 0, &k);
    if (st != nullptr) return st;
    int64_t shape[2] = {64, 64};
    fj_tensor t{reinterpret_cast<void*>(static_cast<uintptr_t>(memory_)),
                {2, 0},
                rank,
                {code, bits, 1},
                shape,
                nullptr,
                0};
    fj_tensor_arg arg{};
    arg.struct_size = sizeof(arg);
    arg.tensor = &t;
    arg.box[0] = 16;
    if (rank == 2) arg.box[1] = 16;
    fj_arg args[2] = {};
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_TENSOR;
    args[0].v.tensor = &arg;
    args[1].kind = FJ_ARG_POINTER;
    args[1].v.pointer = memory_ + (1 << 19);
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 1;
    cfg.block[0] = 32;
    return fj_launch(k, &cfg, args, 2);
  }

  std::string source_ = kSource, target_ = "compute_90";
  std::string e0_ = "pairs", e1_ = "colours";
  fj_str exprs_[2] = {S(e0_), S(e1_)};
  fj_runtime* rt_ = nullptr;
  fj_module* module_ = nullptr;
  uint64_t memory_ = 0;
};

TEST_F(TensorElementTest, AStructElementOfAnotherSizeIsRefusedNamingBoth) {
  // Pair is 8 bytes: f32 (4) and f16 (2) are refused, f64 and i64 pass.
  for (auto [code, bits] : {std::pair<int, int>{2, 32}, {2, 16}}) {
    fj_status* st = Launch("pairs", 2, code, bits);
    ASSERT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT)
        << fj_status_message(st, nullptr);
    const std::string m = fj_status_message(st, nullptr);
    EXPECT_TRUE(absl::StrContains(m, "8-byte elements")) << m;
    EXPECT_TRUE(absl::StrContains(m, "argument 0")) << m;
    fj_status_free(st);
  }
  for (auto [code, bits] : {std::pair<int, int>{2, 64}, {0, 64}}) {
    fj_status* st = Launch("pairs", 2, code, bits);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
  }
  // A 3-byte struct: only 1-byte elements of 3x the count could be it, and
  // no DLPack dtype has 3 bytes, so every dtype is refused.
  fj_status* st = Launch("colours", 1, 1, 8);
  ASSERT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
  EXPECT_TRUE(
      absl::StrContains(fj_status_message(st, nullptr), "3-byte elements"))
      << fj_status_message(st, nullptr);
  fj_status_free(st);
}

// An extern "C" kernel's name carries no types: the build reads its
// FJ_TENSOR declarations from the source (jit/source_signature.h), so the
// launch checks them as it does a C++ kernel's. Before, any tensor of the
// right rank-less shape launched: an f32 tensor reached an
// FJ_TENSOR(unsigned short, 2).
constexpr char kExternC[] = R"(
#include <fleetjit/copy.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define ROWS_T float
typedef __half half_t;
extern "C" __global__ void raw16(FJ_TENSOR(unsigned short, 2) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
extern "C" __global__ void __launch_bounds__(128)
    bf16(FJ_TENSOR(__nv_bfloat16, 2) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
extern "C" __global__ void aliased(FJ_TENSOR(half_t, 2) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
extern "C" {
__global__ void macro_t(FJ_TENSOR(ROWS_T, RANK) t, int* out) {
  if (threadIdx.x == 0) out[0] = t.box(0);
}
}
// Declared by a macro: not read, so not checked (as before).
#define MAKE(name, T) \
  extern "C" __global__ void name(FJ_TENSOR(T, 2) t, int* out) { out[0] = 1; }
MAKE(from_macro, float)
)";

class ExternCTensorTest : public TensorElementTest {
 protected:
  void SetUp() override {
    source_ = kExternC;
    exprs_[0] = S(rank_option_);
    ASSERT_TRUE(fleetjit::testing::CreateFakeRuntime(&rt_));
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    o.nvrtc_options = exprs_;
    o.num_nvrtc_options = 1;
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
    FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 1 << 20, &memory_));
  }
  // The status message of a launch that must be refused ("" if it was not).
  std::string Refused(const std::string& kernel, int rank, uint8_t code,
                      uint8_t bits) {
    fj_status* st = Launch(kernel, rank, code, bits);
    std::string m = st == nullptr ? "" : fj_status_message(st, nullptr);
    EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT)
        << kernel << " " << int{code} << "/" << int{bits} << ": " << m;
    fj_status_free(st);
    return m;
  }
  void Accepted(const std::string& kernel, int rank, uint8_t code,
                uint8_t bits) {
    fj_status* st = Launch(kernel, rank, code, bits);
    EXPECT_EQ(fj_status_code(st), FJ_OK)
        << kernel << " " << int{code} << "/" << int{bits} << ": "
        << (st == nullptr ? "" : fj_status_message(st, nullptr));
    fj_status_free(st);
  }
  std::string rank_option_ = "-DRANK=2";
};

TEST_F(ExternCTensorTest, AnUnsignedElementTypeChecksTheElementSize) {
  // unsigned short holds 2-byte raw bits: bf16, f16, u16, i16 launch...
  for (auto [code, bits] : {std::pair<int, int>{4, 16}, {2, 16}, {1, 16}}) {
    Accepted("raw16", 2, code, bits);
  }
  // ...an f32 tensor, the issue's case, does not.
  const std::string m = Refused("raw16", 2, 2, 32);
  EXPECT_TRUE(absl::StrContains(m, "2-byte elements")) << m;
  EXPECT_TRUE(absl::StrContains(m, "f32")) << m;
  EXPECT_TRUE(absl::StrContains(m, "argument 0")) << m;
  // The rank is declared too.
  EXPECT_TRUE(absl::StrContains(Refused("raw16", 1, 4, 16), "rank-2")) << m;
}

TEST_F(ExternCTensorTest, Bf16AndHalfNameTheirDtype) {
  Accepted("bf16", 2, 4, 16);
  std::string m = Refused("bf16", 2, 2, 16);  // f16 into __nv_bfloat16
  EXPECT_TRUE(absl::StrContains(m, "declares dtype bf16")) << m;
  EXPECT_TRUE(absl::StrContains(m, "passed f16")) << m;
  Refused("bf16", 2, 1, 16);  // u16
  // A typedef of __half.
  Accepted("aliased", 2, 2, 16);
  m = Refused("aliased", 2, 4, 16);
  EXPECT_TRUE(absl::StrContains(m, "declares dtype f16")) << m;
}

TEST_F(ExternCTensorTest, MacrosAndOptionsResolve) {
  // #define ROWS_T float, and RANK from -DRANK=2.
  Accepted("macro_t", 2, 2, 32);
  EXPECT_TRUE(absl::StrContains(Refused("macro_t", 2, 4, 16), "dtype f32"));
  EXPECT_TRUE(absl::StrContains(Refused("macro_t", 1, 2, 32), "rank-2"));
  // A kernel a function-like macro declares is not read: unchecked.
  Accepted("from_macro", 2, 4, 16);
}

}  // namespace
