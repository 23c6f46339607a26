// The launch wire format: the one place the runtime speaks the C ABI's
// structs, and its only include of <fleetjit/fleetjit.h>.
//
// A launch's arguments are an array of fj_arg, `stride` bytes apart (the
// caller's struct_size), read in place: the generic packer (PackParams,
// launch.h) and the JIT-built thunks (jit/thunk/thunk_abi.h) both take the
// caller's array as it is, with no copy and no conversion, so the fast path
// allocates nothing. Each fj_arg is
//   kind FJ_ARG_BYTES:  `size` bytes at v.bytes, copied to the parameter;
//   kind FJ_ARG_TENSOR: v.tensor, an fj_tensor_arg (box, oob) over an
//                       fj_tensor (DLPack: data + byte_offset, shape and
//                       strides outermost-first), encoded by the tensor
//                       encoder (tensor_encoder.h) into the kernel's
//                       parameter.
// The copy kernels (runtime/copy/) speak it too, through the builders below.
// Everything else the runtime takes is a C++ type; capi/convert.* converts.
#ifndef FLEETJIT_RUNTIME_LAUNCH_WIRE_H_
#define FLEETJIT_RUNTIME_LAUNCH_WIRE_H_

#include <cstddef>
#include <cstdint>

#include "fleetjit/fleetjit.h"

namespace fleetjit {

// The first version of fj_arg; a smaller struct_size is INVALID_ARGUMENT.
inline constexpr size_t kMinArgStructSize = sizeof(fj_arg);

// An FJ_ARG_TENSOR argument over `a` (which outlives the launch call).
inline fj_arg WireTensorArg(const fj_tensor_arg* a) {
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = FJ_ARG_TENSOR;
  arg.v.tensor = a;
  return arg;
}

// An FJ_ARG_BYTES argument of `size` bytes at `p`.
inline fj_arg WireBytesArg(const void* p, uint32_t size) {
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = FJ_ARG_BYTES;
  arg.size = size;
  arg.v.bytes = p;
  return arg;
}

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_WIRE_H_
