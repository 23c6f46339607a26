// The FJ_TENSOR parameters of extern "C" kernels, read from their source.
//
// A C++ kernel's mangled name carries the element type and rank of each
// fj::tensor<T, R> parameter (ApplyCxxSignature); an extern "C" kernel's
// name carries nothing, so before this a launch could pass an f32 tensor to
// an `FJ_TENSOR(unsigned short, 2)`. The build therefore reads the kernel's
// declaration in the source it compiled: the parameter list of the
// `__global__` function of that name, and in it `FJ_TENSOR(T, R)` (or
// `fj::tensor<T, R>`) at each position the PTX says is a tensor. T and R go
// through the source's own object-like #defines, typedefs and
// using-aliases and the build's -D options. Nothing is guessed: a kernel
// declared by a function-like macro, declared twice with different
// parameters, whose parameter count differs from the PTX's, or a T that
// does not resolve to a known type, keeps the PTX facts (no check), as
// before.
//
// What is declared (tensor_dtype of jit::ParamSpec): a floating-point or
// signed type names its dtype (float f32, __half / half f16, __nv_bfloat16
// bf16, __nv_fp8_e4m3 / __nv_fp8_e5m2, double, signed char / short / int /
// long long and the <stdint.h> names); an unsigned integer type (unsigned
// char / short / int / long long, uintN_t) is a container of raw bits and
// declares its size only, so a bf16 tensor may reach an
// FJ_TENSOR(unsigned short, R) as the examples once taught, but an f32
// tensor may not; CUDA's vector types (float4, __half2, ...) declare their
// size. ApplyCxxSignature follows the same rules (DeclaredTensorDtype).
#ifndef FLEETJIT_JIT_SOURCE_SIGNATURE_H_
#define FLEETJIT_JIT_SOURCE_SIGNATURE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "jit/artifact.h"

namespace fleetjit::jit {

// What a tensor parameter declaring element type `type` (a C++ type as the
// demangler or a source writes it, after aliases) declares:
// ParamSpec::tensor_dtype's encoding (a dtype_code, -1 - bytes for a size
// only, -1 for nothing).
int DeclaredTensorDtype(absl::string_view type);

// Fills tensor_dtype and tensor_rank of the tensor parameters of the
// extern "C" kernel `lowered_name` from its declaration in `source` (built
// with NVRTC `options`). A mangled name, or a declaration not found or not
// unambiguous, leaves `params` as they are.
void ApplySourceSignature(absl::string_view source,
                          const std::vector<std::string>& options,
                          absl::string_view lowered_name,
                          std::vector<ParamSpec>& params);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_SOURCE_SIGNATURE_H_
