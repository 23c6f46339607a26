// Which caller arguments a kernel parameter accepts.
//
// One table, used by both launch paths: the generic packer
// (runtime/launch/launch.cc) interprets it on every launch, and the thunk
// generator (thunk_codegen.cc) compiles it into unrolled checks, one
// branch per argument. Since both read the same answer, a call the thunk
// accepts is exactly a call the generic path accepts.
//
// The rules (spec.size must equal the argument's size in every case):
//   kSigned / kUnsigned  any integer kind of that size, signed or unsigned:
//                        the bits are copied, C's conversion is not applied
//   kFloat               FJ_ARG_F16 (2), FJ_ARG_F32 (4), FJ_ARG_F64 (8)
//   kBFloat              FJ_ARG_BF16
//   kPointer             FJ_ARG_POINTER
//   kTensor              FJ_ARG_TENSOR (the parameter is 320 bytes)
//   kStruct              FJ_ARG_BYTES of exactly that size; FJ_ARG_C64
//                        (8 bytes, in fj_arg.v) and FJ_ARG_C128 (16 bytes
//                        at fj_arg.v.bytes) when it has their size
//   kUnknown             any scalar kind of that size (pointers and C64
//                        included), FJ_ARG_C128 at 16 bytes, FJ_ARG_BYTES of
//                        that size, and FJ_ARG_TENSOR when the parameter is
//                        320 bytes
#ifndef FLEETJIT_JIT_THUNK_ARG_RULES_H_
#define FLEETJIT_JIT_THUNK_ARG_RULES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"

namespace fleetjit::jit {

// The largest parameter buffer a launch packs (CUDA 12.1+ allows 32764 B).
inline constexpr uint32_t kMaxParamBytes = 32 * 1024;

struct AcceptedArgs {
  uint32_t scalar_kinds = 0;  // bit k set: fj_arg_kind k, value in fj_arg.v
  bool bytes = false;         // FJ_ARG_BYTES, fj_arg.size == spec.size
  bool c128 = false;          // FJ_ARG_C128: 16 bytes at fj_arg.v.bytes
  bool tensor = false;        // FJ_ARG_TENSOR
};

AcceptedArgs AcceptedArgsFor(const ParamSpec& spec);

// The value size of a scalar fj_arg_kind (1, 2, 4 or 8; C64 is 8); 0 for
// BYTES, TENSOR, C128 and unknown kinds.
uint32_t ScalarKindBytes(int kind);
// "FJ_ARG_I32"; "kind N" when out of range.
std::string ArgKindName(int kind);
// What a parameter expects, for messages: "float (4-byte float)".
std::string DescribeParam(const ParamSpec& spec);

// Checks a kernel's parameter table once: each parameter lies inside
// param_bytes, none overlap, param_bytes <= kMaxParamBytes, tensors are
// 320 bytes. A kernel that fails gets no thunk and its launches fail with
// this status (INTERNAL: the layout came from fleetjit's own PTX reader).
absl::Status ValidateKernelLayout(const KernelEntry& entry);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_THUNK_ARG_RULES_H_
