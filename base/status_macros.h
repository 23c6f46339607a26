// Status propagation for fleetjit's C++ core.
//
// The core returns absl::Status / absl::StatusOr<T> and propagates failures
// with these two macros, which prefix the message with what the caller was
// doing, keeping the code and every payload (build log, CUDA error):
//
//   absl::Status Module::Load(Context& ctx) {
//     FJ_RETURN_IF_ERROR(ctx.MakeCurrent(), "loading module 'saxpy.cu'");
//     FJ_ASSIGN_OR_RETURN(CUfunction f, GetFunction("saxpy"),
//                         "looking up kernel");
//     ...
//   }
//
// gives messages such as
//   "loading module 'saxpy.cu': cuCtxSetCurrent: CUDA_ERROR_...: ...".
#ifndef FLEETJIT_BASE_STATUS_MACROS_H_
#define FLEETJIT_BASE_STATUS_MACROS_H_

#include "absl/strings/string_view.h"
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fleetjit {

// Returns `status` with "context: " in front of its message; code and
// payloads unchanged. An OK status stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// Payload keys (type URLs) used for structured details. The C ABI exposes
// them by their short name through fj_status_detail.
inline constexpr absl::string_view kPayloadPrefix = "fleetjit/";
// Attaches a named detail ("build_log", "cuda_error", ...).
void SetDetail(absl::Status& status, absl::string_view key,
               absl::string_view value);

// The public code (an fj_code of <fleetjit/fleetjit.h>, as an int: base
// knows no C header) decided where the error arose, e.g. by CheckCu from
// the CUresult table. Carried explicitly so the C ABI never guesses it from
// the absl code; kept by Annotate like every payload, and not exposed as
// a detail (its URL is outside kPayloadPrefix).
void SetPublicCode(absl::Status& status, int code);
// The code SetPublicCode stored, if any.
std::optional<int> PublicCodeOf(const absl::Status& status);

}  // namespace fleetjit

#define FJ_STATUS_CONCAT_INNER_(a, b) a##b
#define FJ_STATUS_CONCAT_(a, b) FJ_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); on failure returns it annotated.
#define FJ_RETURN_IF_ERROR(expr, context)                       \
  do {                                                          \
    ::absl::Status fj_status_ = (expr);                         \
    if (!fj_status_.ok()) {                                     \
      return ::fleetjit::Annotate(fj_status_, (context));       \
    }                                                           \
  } while (0)

// Evaluates `expr` (an absl::StatusOr<T>); on failure returns its status
// annotated, else moves the value into `lhs` (a declaration or lvalue).
#define FJ_ASSIGN_OR_RETURN(lhs, expr, context)                              \
  FJ_ASSIGN_OR_RETURN_IMPL_(FJ_STATUS_CONCAT_(fj_statusor_, __LINE__), lhs, \
                            expr, context)
#define FJ_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr, context)   \
  auto var = (expr);                                         \
  if (!var.ok()) {                                           \
    return ::fleetjit::Annotate(var.status(), (context));    \
  }                                                          \
  lhs = std::move(var).value()

#endif  // FLEETJIT_BASE_STATUS_MACROS_H_
