// jit/source_signature.h: the FJ_TENSOR types of extern "C" kernels, read
// from the source (no NVRTC needed: the PTX facts are given).
#include "jit/source_signature.h"

#include "fleetjit/copy/tensor_param.h"
#include "gtest/gtest.h"

namespace fleetjit::jit {
namespace {

// The PTX facts of a kernel with `kinds` parameters (tensors where true).
std::vector<ParamSpec> Params(std::initializer_list<bool> tensors) {
  std::vector<ParamSpec> out;
  for (bool t : tensors) {
    ParamSpec p;
    p.kind = t ? ParamKind::kTensor : ParamKind::kUnknown;
    p.size = t ? 320 : 8;
    out.push_back(p);
  }
  return out;
}

TEST(SourceSignatureTest, ElementTypesDeclareADtypeOrASize) {
  EXPECT_EQ(DeclaredTensorDtype("float"), fj::dtype_f32);
  EXPECT_EQ(DeclaredTensorDtype("const float"), fj::dtype_f32);
  EXPECT_EQ(DeclaredTensorDtype("__nv_bfloat16"), fj::dtype_bf16);
  EXPECT_EQ(DeclaredTensorDtype("__half"), fj::dtype_f16);
  EXPECT_EQ(DeclaredTensorDtype("__nv_fp8_e4m3"), fj::dtype_f8e4m3);
  EXPECT_EQ(DeclaredTensorDtype("int"), fj::dtype_i32);
  EXPECT_EQ(DeclaredTensorDtype("int64_t"), fj::dtype_i64);
  EXPECT_EQ(DeclaredTensorDtype("signed char"), fj::dtype_i8);
  // Unsigned integers are raw bits: their size only.
  EXPECT_EQ(DeclaredTensorDtype("unsigned short"), -1 - 2);
  EXPECT_EQ(DeclaredTensorDtype("uint8_t"), -1 - 1);
  EXPECT_EQ(DeclaredTensorDtype("unsigned int"), -1 - 4);
  EXPECT_EQ(DeclaredTensorDtype("unsigned long long"), -1 - 8);
  // Vector types their size; anything else nothing.
  EXPECT_EQ(DeclaredTensorDtype("float4"), -1 - 16);
  EXPECT_EQ(DeclaredTensorDtype("__half2"), -1 - 4);
  EXPECT_EQ(DeclaredTensorDtype("Pair"), -1);
}

TEST(SourceSignatureTest, ReadsTheKernelsDeclaration) {
  const char* src = R"src(
#include <fleetjit/copy.cuh>
// k(FJ_TENSOR(double, 2) wrong, int n) in a comment is not a declaration.
#define ELEM unsigned short
#define RANK_OF_KV 3
typedef __nv_bfloat16 bf16_t;
using f16_t = __half;
__device__ int k(int n);  // not the kernel: no __global__
extern "C" __global__ void __launch_bounds__(256, 2)
k(FJ_TENSOR(float, 2) a, const int* __restrict__ p,
  FJ_TENSOR(ELEM, RANK_OF_KV) b, FJ_TENSOR(bf16_t, 1) c,
  const __grid_constant__ fj::tensor<f16_t, 4> d, FJ_TENSOR(T, R) e) {
  const char* s = "k(FJ_TENSOR(double, 1) x)";
}
)src";
  std::vector<ParamSpec> p = Params({true, false, true, true, true, true});
  ApplySourceSignature(src, {"-DT=int", "-DR=5", "-DFJ_COPY_IMPL=2"}, "k", p);
  EXPECT_EQ(p[0].tensor_dtype, fj::dtype_f32);
  EXPECT_EQ(p[0].tensor_rank, 2);
  EXPECT_EQ(p[0].type_name, "FJ_TENSOR(float, 2)");
  EXPECT_EQ(p[1].tensor_dtype, -1);  // not a tensor
  EXPECT_EQ(p[2].tensor_dtype, -1 - 2);
  EXPECT_EQ(p[2].tensor_rank, 3);
  EXPECT_EQ(p[3].tensor_dtype, fj::dtype_bf16);
  EXPECT_EQ(p[3].tensor_rank, 1);
  EXPECT_EQ(p[4].tensor_dtype, fj::dtype_f16);
  EXPECT_EQ(p[4].tensor_rank, 4);
  EXPECT_EQ(p[5].tensor_dtype, fj::dtype_i32);
  EXPECT_EQ(p[5].tensor_rank, 5);
}

TEST(SourceSignatureTest, WhatItCannotReadStaysUnchecked) {
  // A mangled name: the C++ signature's business.
  std::vector<ParamSpec> p = Params({true});
  ApplySourceSignature("__global__ void _Z1k(FJ_TENSOR(float, 1) t) {}", {},
                       "_Z1k", p);
  EXPECT_EQ(p[0].tensor_dtype, -1);
  // A count that differs from the PTX's.
  p = Params({true});
  ApplySourceSignature(
      "extern \"C\" __global__ void k(FJ_TENSOR(float, 1) t, int n) {}", {},
      "k", p);
  EXPECT_EQ(p[0].tensor_dtype, -1);
  EXPECT_EQ(p[0].tensor_rank, 0);
  // Two declarations that disagree (#if branches the scan cannot tell).
  p = Params({true});
  ApplySourceSignature(R"(
#if A
extern "C" __global__ void k(FJ_TENSOR(float, 1) t) {}
#else
extern "C" __global__ void k(FJ_TENSOR(double, 1) t) {}
#endif
)",
                       {}, "k", p);
  EXPECT_EQ(p[0].tensor_dtype, -1);
  // A type defined twice differently resolves to nothing, the rank stays.
  p = Params({true});
  ApplySourceSignature(R"(
#if A
typedef float elem;
#else
typedef double elem;
#endif
extern "C" __global__ void k(FJ_TENSOR(elem, 2) t) {}
)",
                       {}, "k", p);
  EXPECT_EQ(p[0].tensor_dtype, -1);
  EXPECT_EQ(p[0].tensor_rank, 2);
  // A kernel a function-like macro declares.
  p = Params({true});
  ApplySourceSignature(R"(
#define K(name, T) extern "C" __global__ void name(FJ_TENSOR(T, 1) t) {}
K(k, float)
)",
                       {}, "k", p);
  EXPECT_EQ(p[0].tensor_dtype, -1);
}

}  // namespace
}  // namespace fleetjit::jit
