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
// A tensor of the wire becomes the C++ runtime's DlTensor (dl_tensor.h) in
// one place, DlTensorOf below, which capi/ uses for fj_copy_desc and
// fj_prefetch_desc too. Everything else the runtime takes is a C++ type
// (the copy kernels launch with already-encoded parameters, launch.h's
// LaunchEncoded); capi/convert*.cc converts.
#ifndef FLEETJIT_RUNTIME_LAUNCH_WIRE_H_
#define FLEETJIT_RUNTIME_LAUNCH_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "fleetjit/copy/tensor_param.h"
#include "fleetjit/fleetjit.h"
#include "runtime/launch/dl_tensor.h"

namespace fleetjit {

// The first version of fj_arg; a smaller struct_size is INVALID_ARGUMENT.
inline constexpr size_t kMinArgStructSize = sizeof(fj_arg);

// The C enums the runtime reads as its own C++ ones (fj::oob_mode,
// fj::swizzle_mode of include/fleetjit/copy/tensor_param.h).
static_assert(int{FJ_OOB_PROMISE_IN_BOUNDS} == fj::oob_promise_in_bounds &&
              int{FJ_OOB_ZEROS} == fj::oob_zeros &&
              int{FJ_OOB_NAN} == fj::oob_nan);
static_assert(int{FJ_SWIZZLE_NONE} == fj::swizzle_none &&
              int{FJ_SWIZZLE_32B} == fj::swizzle_32b &&
              int{FJ_SWIZZLE_64B} == fj::swizzle_64b &&
              int{FJ_SWIZZLE_128B} == fj::swizzle_128b);
static_assert(FJ_TP_MAX_RANK == sizeof(fj_tensor_arg{}.box) / sizeof(uint32_t));

// The C++ value of a caller's fj_tensor (its shape and strides borrowed).
inline DlTensor DlTensorOf(const fj_tensor& t) {
  DlTensor out;
  out.data = reinterpret_cast<uintptr_t>(t.data);
  out.device_type = t.device.device_type;
  out.device_id = t.device.device_id;
  out.ndim = t.ndim;
  out.dtype = DlDtype{t.dtype.code, t.dtype.bits, t.dtype.lanes};
  out.shape = t.shape;
  out.strides = t.strides;
  out.byte_offset = t.byte_offset;
  return out;
}

// The same for an optional tensor: nullopt for NULL.
inline std::optional<DlTensor> DlTensorOf(const fj_tensor* t) {
  if (t == nullptr) return std::nullopt;
  return DlTensorOf(*t);
}

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

// The problem that fj_tune's arguments describe, as text for the key:
// integer scalars by value, each tensor's dtype, shape, strides, box, fill
// and swizzle. Addresses, floating-point scalars and by-value bytes are
// not in it (a new buffer or another alpha is the same problem). So two
// problems of one kernel whose grids are the same (a persistent kernel
// over another shape) tune apart. `stride` is the caller's
// sizeof(fj_arg); an argument it cannot read safely (a NULL tensor, a
// short struct_size, a rank out of range) is named as such: the launch
// refuses it anyway.
std::string CanonicalWorkload(const fj_arg* args, size_t num_args,
                              size_t stride);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_WIRE_H_
