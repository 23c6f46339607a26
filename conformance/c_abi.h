// Internal to the conformance runner: the few C ABI helpers it drives the
// matrix with. The runner sits above libfleetjit.so.1 and reaches the
// runtime only through <fleetjit/fleetjit.h>.
//
// The fj_arg builders are inline, so the tests and benchmarks (which sit
// above the runner) share them by including this header, without linking
// the runner: this is their one home.
#ifndef FLEETJIT_CONFORMANCE_C_ABI_H_
#define FLEETJIT_CONFORMANCE_C_ABI_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

// Returns the status of `expr` from the enclosing function when it is not
// OK, with `context` (may be "") put in front of its message.
#define FJ_CT_RETURN_IF_ERROR(expr, context)                            \
  do {                                                                  \
    absl::Status fj_ct_status_ = (expr);                                \
    if (!fj_ct_status_.ok()) {                                          \
      return ::fleetjit::selftest::internal::WithContext(fj_ct_status_, \
                                                         context);      \
    }                                                                   \
  } while (0)

namespace fleetjit::selftest::internal {

// `status` with "context: " put in front of its message (unchanged if
// context is empty).
absl::Status WithContext(const absl::Status& status, absl::string_view context);

// Converts (and frees) a C ABI status; the message keeps the C code name.
absl::Status Fj(fj_status* s, absl::string_view what);

// A view of `s`; `s` must outlive it.
fj_str Str(const std::string& s);

// Launch arguments: an fj_arg of `kind` with its struct_size set and its
// value zero; the others also set the value.
inline fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(fj_arg);
  a.kind = kind;
  return a;
}
inline fj_arg PtrArg(uint64_t p) {
  fj_arg a = Arg(FJ_ARG_POINTER);
  a.v.pointer = p;
  return a;
}
inline fj_arg I32Arg(int32_t v) {
  fj_arg a = Arg(FJ_ARG_I32);
  a.v.i32 = v;
  return a;
}
inline fj_arg F32Arg(float v) {
  fj_arg a = Arg(FJ_ARG_F32);
  a.v.f32 = v;
  return a;
}
inline fj_arg TensorArg(const fj_tensor_arg* t) {
  fj_arg a = Arg(FJ_ARG_TENSOR);
  a.v.tensor = t;
  return a;
}

// A 1-D launch of `grid` blocks of `block` threads on the default stream.
inline fj_launch_config LaunchConfig(uint32_t grid, uint32_t block,
                                     uint32_t shared_bytes = 0) {
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = grid;
  c.block[0] = block;
  c.shared_bytes = shared_bytes;
  return c;
}

}  // namespace fleetjit::selftest::internal

#endif  // FLEETJIT_CONFORMANCE_C_ABI_H_
