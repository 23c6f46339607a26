// Helpers for the CPU tests of the launch path: kernel signatures built by
// hand, a fake cuTensorMapEncodeTiled that checks the driver's documented
// rules and writes a digest of its inputs, and DLPack tensors the test owns.
// Seeded random sources: tests/common/seed.h (SeededRng).
#ifndef FLEETJIT_TESTS_RUNTIME_LAUNCH_LAUNCH_TEST_UTIL_H_
#define FLEETJIT_TESTS_RUNTIME_LAUNCH_LAUNCH_TEST_UTIL_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fleetjit/copy/tensor_param.h"
#include "fleetjit/fleetjit.h"
#include "jit/artifact.h"
#include "platform/driver_api.h"
#include "tests/common/seed.h"

namespace fleetjit::testing {

// A parameter as a test declares it; offsets are laid out like PTX does.
struct Param {
  jit::ParamKind kind;
  uint32_t size;
  uint32_t align;
  int32_t tensor_rank = 0;
  int32_t tensor_dtype = -1;
};

inline Param I(uint32_t size) { return {jit::ParamKind::kSigned, size, size}; }
inline Param U(uint32_t size) {
  return {jit::ParamKind::kUnsigned, size, size};
}
inline Param F(uint32_t size) { return {jit::ParamKind::kFloat, size, size}; }
inline Param BF16() { return {jit::ParamKind::kBFloat, 2, 2}; }
inline Param Ptr() { return {jit::ParamKind::kPointer, 8, 8}; }
inline Param Struct(uint32_t size, uint32_t align) {
  return {jit::ParamKind::kStruct, size, align};
}
inline Param Unknown(uint32_t size, uint32_t align) {
  return {jit::ParamKind::kUnknown, size, align};
}
inline Param Tensor(int32_t rank = 0, int32_t dtype = -1) {
  return {jit::ParamKind::kTensor, 320, 64, rank, dtype};
}

inline jit::KernelEntry MakeEntry(const std::string& name,
                                  const std::vector<Param>& params,
                                  uint32_t trailing = 0) {
  jit::KernelEntry e;
  e.name = name;
  e.lowered_name = name;
  uint32_t offset = 0;
  for (const Param& p : params) {
    offset = (offset + p.align - 1) / p.align * p.align;
    jit::ParamSpec spec;
    spec.kind = p.kind;
    spec.offset = offset;
    spec.size = p.size;
    spec.align = p.align;
    spec.tensor_rank = p.tensor_rank;
    spec.tensor_dtype = p.tensor_dtype;
    e.params.push_back(spec);
    offset += p.size;
  }
  e.param_bytes = offset + trailing;
  return e;
}

// --- A fake cuTensorMapEncodeTiled -----------------------------------------

struct FakeEncodeCall {
  CUtensorMapDataType dtype;
  uint32_t rank;
  uint64_t address;
  uint64_t dims[5];
  uint64_t strides[4];
  uint32_t box[5];
  uint32_t element_strides[5];
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill fill;
};

inline std::atomic<uint64_t> g_fake_encode_calls{0};
inline std::atomic<uint64_t> g_fake_encode_rule_violations{0};
inline thread_local FakeEncodeCall t_last_encode{};

// Checks the rules of cuTensorMapEncodeTiled (cuda.h) and returns
// CUDA_ERROR_INVALID_VALUE, counting a violation, when one is broken;
// otherwise writes a digest of every input into the 128-byte map.
inline CUresult FakeEncodeTiled(
    CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
    const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
    const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
    CUtensorMapFloatOOBfill fill) {
  g_fake_encode_calls.fetch_add(1);
  FakeEncodeCall c{};
  c.dtype = dtype;
  c.rank = rank;
  c.address = reinterpret_cast<uintptr_t>(address);
  for (uint32_t i = 0; i < rank && i < 5; ++i) {
    c.dims[i] = dims[i];
    c.box[i] = box[i];
    c.element_strides[i] = element_strides[i];
    if (i + 1 < rank) c.strides[i] = strides[i];
  }
  c.interleave = interleave;
  c.swizzle = swizzle;
  c.l2 = l2;
  c.fill = fill;
  t_last_encode = c;
  static const int kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  bool ok = reinterpret_cast<uintptr_t>(map) % 64 == 0 && rank >= 1 &&
            rank <= 5 && c.address % 16 == 0 && static_cast<int>(dtype) >= 0 &&
            static_cast<int>(dtype) < 13;
  const int elem = ok ? kBytes[dtype] : 1;
  for (uint32_t i = 0; ok && i < rank; ++i) {
    ok = dims[i] >= 1 && dims[i] <= (uint64_t{1} << 32) && box[i] >= 1 &&
         box[i] <= 256 && element_strides[i] >= 1 && element_strides[i] <= 8;
    if (ok && i + 1 < rank) {
      ok = strides[i] % 16 == 0 && strides[i] < (uint64_t{1} << 40);
    }
  }
  if (ok) ok = (uint64_t{box[0]} * elem) % 16 == 0;
  // A swizzled map's inner box is at most the swizzle width.
  if (ok && swizzle != CU_TENSOR_MAP_SWIZZLE_NONE) {
    ok = swizzle <= CU_TENSOR_MAP_SWIZZLE_128B &&
         uint64_t{box[0]} * elem <= (uint64_t{16} << swizzle);
  }
  if (ok && fill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA) {
    ok = dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 ||
         dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
         dtype == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 ||
         dtype == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  if (!ok) {
    g_fake_encode_rule_violations.fetch_add(1);
    return CUDA_ERROR_INVALID_VALUE;
  }
  // FNV-1a over the call record, spread over the 128 bytes.
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(&c);
  for (size_t i = 0; i < sizeof(c); ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  auto* out = reinterpret_cast<unsigned char*>(map);
  for (int i = 0; i < 128; ++i) {
    h = (h ^ static_cast<unsigned>(i)) * 0x100000001b3ull;
    out[i] = static_cast<unsigned char>(h >> 56);
  }
  return CUDA_SUCCESS;
}

// Always refuses, like a driver that rejects a map fleetjit thought valid.
inline CUresult RefusingEncodeTiled(CUtensorMap*, CUtensorMapDataType,
                                    cuuint32_t, void*, const cuuint64_t*,
                                    const cuuint64_t*, const cuuint32_t*,
                                    const cuuint32_t*, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                                    CUtensorMapFloatOOBfill) {
  return CUDA_ERROR_INVALID_VALUE;
}

// A DriverApi with nothing but the fake encoder (there is no libcuda in CI).
inline DriverApi FakeDriver() {
  DriverApi api;
  api.cuTensorMapEncodeTiled = &FakeEncodeTiled;
  return api;
}

// A DLPack tensor whose arrays the test owns.
struct TestTensor {
  int64_t shape[5] = {};
  int64_t strides[5] = {};
  fj_tensor tensor{};
  fj_tensor_arg arg{};

  TestTensor() = default;
  TestTensor(const TestTensor&) = delete;
  TestTensor& operator=(const TestTensor&) = delete;

  // A compact (or, with pad > 0, row-padded) tensor at `address`.
  void Set(uint64_t address, int ndim, uint8_t code, uint8_t bits,
           const std::vector<int64_t>& dims, bool explicit_strides,
           int64_t pad = 0) {
    tensor = fj_tensor{};
    tensor.data = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
    tensor.device = {2, 0};
    tensor.ndim = ndim;
    tensor.dtype = {code, bits, 1};
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
      shape[i] = dims[i];
      strides[i] = s;
      s *= dims[i] + (i == ndim - 1 ? pad : 0);
    }
    tensor.shape = shape;
    tensor.strides = explicit_strides ? strides : nullptr;
    arg = fj_tensor_arg{};
    arg.struct_size = sizeof(fj_tensor_arg);
    arg.tensor = &tensor;
    arg.oob = FJ_OOB_ZEROS;
  }
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_RUNTIME_LAUNCH_LAUNCH_TEST_UTIL_H_
