// The problem an argument list describes, for fj_tune's key (wire.h).
#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/launch/wire.h"

namespace fleetjit {

std::string CanonicalWorkload(const fj_arg* args, size_t num_args,
                              size_t stride) {
  std::string out;
  if (args == nullptr || num_args == 0) return out;
  if (stride < sizeof(fj_arg)) return "arguments unreadable";
  const auto* base = reinterpret_cast<const unsigned char*>(args);
  for (size_t i = 0; i < num_args; ++i) {
    const auto* a = reinterpret_cast<const fj_arg*>(base + i * stride);
    absl::StrAppend(&out, i == 0 ? "" : "; ", static_cast<int>(a->kind));
    switch (a->kind) {
      case FJ_ARG_I8:
        absl::StrAppend(&out, "=", a->v.i8);
        break;
      case FJ_ARG_I16:
        absl::StrAppend(&out, "=", a->v.i16);
        break;
      case FJ_ARG_I32:
        absl::StrAppend(&out, "=", a->v.i32);
        break;
      case FJ_ARG_I64:
        absl::StrAppend(&out, "=", a->v.i64);
        break;
      case FJ_ARG_U8:
        absl::StrAppend(&out, "=", a->v.u8);
        break;
      case FJ_ARG_U16:
        absl::StrAppend(&out, "=", a->v.u16);
        break;
      case FJ_ARG_U32:
        absl::StrAppend(&out, "=", a->v.u32);
        break;
      case FJ_ARG_U64:
        absl::StrAppend(&out, "=", a->v.u64);
        break;
      case FJ_ARG_BYTES:
        absl::StrAppend(&out, "/", a->size);
        break;
      case FJ_ARG_TENSOR: {
        const fj_tensor_arg* t = a->v.tensor;
        if (t == nullptr || t->struct_size < offsetof(fj_tensor_arg, swizzle) ||
            t->tensor == nullptr || t->tensor->ndim < 0 ||
            t->tensor->ndim >
                static_cast<int>(sizeof(t->box) / sizeof(t->box[0])) ||
            (t->tensor->ndim > 0 && t->tensor->shape == nullptr)) {
          absl::StrAppend(&out, " unreadable");
          break;
        }
        const fj_tensor& x = *t->tensor;
        absl::StrAppend(&out, " dtype ", x.dtype.code, ":", x.dtype.bits, ":",
                        x.dtype.lanes, " shape");
        for (int d = 0; d < x.ndim; ++d) absl::StrAppend(&out, " ", x.shape[d]);
        if (x.strides != nullptr) {
          absl::StrAppend(&out, " strides");
          for (int d = 0; d < x.ndim; ++d)
            absl::StrAppend(&out, " ", x.strides[d]);
        }
        absl::StrAppend(&out, " box");
        for (int d = 0; d < x.ndim; ++d) absl::StrAppend(&out, " ", t->box[d]);
        const int swizzle = t->struct_size >= offsetof(fj_tensor_arg, swizzle) +
                                                  sizeof(t->swizzle)
                                ? static_cast<int>(t->swizzle)
                                : 0;
        absl::StrAppend(&out, " oob ", static_cast<int>(t->oob), " swizzle ",
                        swizzle);
        break;
      }
      default:  // pointers, floating-point scalars: not the problem's size
        break;
    }
  }
  return out;
}

}  // namespace fleetjit
