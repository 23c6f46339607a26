// Internal to the conformance runner: the few C ABI helpers it drives the
// matrix with. The runner sits above libfleetjit.so.1 and reaches the
// runtime only through <fleetjit/fleetjit.h>.
#ifndef FLEETJIT_CONFORMANCE_C_ABI_H_
#define FLEETJIT_CONFORMANCE_C_ABI_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

// Returns the status of `expr` from the enclosing function when it is not
// OK, with `context` (may be "") put in front of its message.
#define FJ_CT_RETURN_IF_ERROR(expr, context)                                  \
  do {                                                                        \
    absl::Status fj_ct_status_ = (expr);                                      \
    if (!fj_ct_status_.ok()) {                                                \
      return ::fleetjit::selftest::internal::WithContext(fj_ct_status_, context); \
    }                                                                         \
  } while (0)

namespace fleetjit::selftest::internal {

// `status` with "context: " put in front of its message (unchanged if
// context is empty).
absl::Status WithContext(const absl::Status& status, absl::string_view context);

// Converts (and frees) a C ABI status; the message keeps the C code name.
absl::Status Fj(fj_status* s, absl::string_view what);

// A view of `s`; `s` must outlive it.
fj_str Str(const std::string& s);

// Launch arguments.
fj_arg PtrArg(uint64_t p);
fj_arg I32Arg(int32_t v);
fj_arg TensorArg(const fj_tensor_arg* t);

}  // namespace fleetjit::selftest::internal

#endif  // FLEETJIT_CONFORMANCE_C_ABI_H_
