// The calling convention between the launcher and a JIT-built launch thunk.
//
// A thunk is generated per kernel signature and copy implementation (see
// thunk_codegen.h). It is a plain C function:
//
//   int32_t fj_thunk_<hash>(const fj_arg* args, size_t n, size_t stride,
//                           uint8_t* buffer, void* ctx);
//
// It checks the argument count, each argument's struct_size and kind, and
// stores each value at its constant offset in `buffer` (param_bytes long;
// the gaps between parameters are zeroed), exactly as the generic packer
// does. Tensor arguments go through ctx->encode_tensor. It returns
//   0                 the buffer is packed;
//   kThunkBadCount    n is not the kernel's parameter count;
//   i + 1             argument i was rejected.
// On a non-zero return the launcher reruns the generic packer, which
// produces the detailed status. The launcher has already checked that
// `args` is non-NULL when n > 0 and that stride >= sizeof(fj_arg).
#ifndef FLEETJIT_JIT_THUNK_THUNK_ABI_H_
#define FLEETJIT_JIT_THUNK_THUNK_ABI_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "fleetjit/fleetjit.h"

extern "C" {

// Encodes tensor argument `arg_index` into the 320 bytes at `dst`; returns 0
// on success. `declared_rank` 0 and `declared_dtype` -1 mean "any";
// `copy_impl` is jit::CopyImpl's value.
typedef int32_t (*FjThunkEncodeTensorFn)(void* encoder, uint32_t arg_index,
                                         const fj_tensor_arg* arg,
                                         int32_t declared_rank,
                                         int32_t declared_dtype,
                                         int32_t copy_impl, uint8_t* dst);

// What `ctx` points to. The thunk reads both fields once, and only when the
// kernel has a tensor parameter.
struct FjThunkContext {
  FjThunkEncodeTensorFn encode_tensor;
  void* encoder;
};

typedef int32_t (*FjThunkFn)(const fj_arg* args, size_t n, size_t stride,
                             uint8_t* buffer, void* ctx);

}  // extern "C"

namespace fleetjit {

inline constexpr int32_t kThunkBadCount = -1;

// A thunk ready to call, owned by the ThunkJit that loaded it.
struct LaunchThunk {
  FjThunkFn fn = nullptr;
  std::string symbol;
};

}  // namespace fleetjit

#endif  // FLEETJIT_JIT_THUNK_THUNK_ABI_H_
