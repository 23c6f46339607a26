// Status propagation for fleetjit's C++ core.
//
// The core returns absl::Status / absl::StatusOr<T> and propagates failures
// with these two macros, keeping the code and every payload (build log, CUDA
// error). An optional context prefixes the message with what the caller was
// doing; without one (or with "") the status passes through unchanged:
//
//   absl::Status Module::Load(Context& ctx) {
//     FJ_RETURN_IF_ERROR(ctx.MakeCurrent(), "loading module 'saxpy.cu'");
//     FJ_ASSIGN_OR_RETURN(CUfunction f, GetFunction("saxpy"));
//     ...
//   }
//
// gives messages such as
//   "loading module 'saxpy.cu': cuCtxSetCurrent: CUDA_ERROR_...: ...".
#ifndef FLEETJIT_BASE_STATUS_MACROS_H_
#define FLEETJIT_BASE_STATUS_MACROS_H_

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

// Returns `status` with "context: " in front of its message; code and
// payloads unchanged. An OK status, or an empty context, leaves it as it is.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

namespace status_internal {
// The macros' optional context: none is "", one is itself; a second is a
// compile error.
inline absl::string_view Context() { return {}; }
inline absl::string_view Context(absl::string_view context) { return context; }
}  // namespace status_internal

// Payload keys (type URLs) used for structured details. The C ABI exposes
// them by their short name through fj_status_detail.
inline constexpr absl::string_view kPayloadPrefix = "fleetjit/";
// Attaches a named detail ("build_log", "cuda_error", ...).
void SetDetail(absl::Status& status, absl::string_view key,
               absl::string_view value);

// The public code (an fj_code of <fleetjit/fleetjit.h>, as an int: base
// knows no C header) decided where the error arose, e.g. by CheckCu from
// the CUresult table, or by the NVRTC build for a rejected source. Carried
// explicitly so the C ABI never guesses it from the absl code or the
// payloads; kept by Annotate like every payload, and not exposed as a
// detail (its URL is outside kPayloadPrefix). A status without one gets
// the code of its absl code (capi/status.cc, CodeOf: the one decision).
void SetPublicCode(absl::Status& status, int code);
// A public code that only its origin can decide, for layers that do not
// include the C header (its value is fj_code's; capi/status.cc asserts it).
enum class PublicCode : int { kBuildError = 5 };
inline void SetPublicCode(absl::Status& status, PublicCode code) {
  SetPublicCode(status, static_cast<int>(code));
}
// The code SetPublicCode stored, if any.
std::optional<int> PublicCodeOf(const absl::Status& status);

}  // namespace fleetjit

#define FJ_STATUS_CONCAT_INNER_(a, b) a##b
#define FJ_STATUS_CONCAT_(a, b) FJ_STATUS_CONCAT_INNER_(a, b)

// FJ_RETURN_IF_ERROR(expr[, context]): evaluates `expr` (an absl::Status);
// on failure returns it, annotated with `context` if one is given.
#define FJ_RETURN_IF_ERROR(expr, ...)                                     \
  do {                                                                    \
    ::absl::Status fj_status_ = (expr);                                   \
    if (!fj_status_.ok()) {                                               \
      return ::fleetjit::Annotate(                                        \
          fj_status_, ::fleetjit::status_internal::Context(__VA_ARGS__)); \
    }                                                                     \
  } while (0)

// FJ_ASSIGN_OR_RETURN(lhs, expr[, context]): evaluates `expr` (an
// absl::StatusOr<T>); on failure returns its status, annotated with
// `context` if one is given, else moves the value into `lhs` (a declaration
// or lvalue).
#define FJ_ASSIGN_OR_RETURN(lhs, expr, ...)                                 \
  FJ_ASSIGN_OR_RETURN_IMPL_(FJ_STATUS_CONCAT_(fj_statusor_, __LINE__), lhs, \
                            expr,                                           \
                            ::fleetjit::status_internal::Context(__VA_ARGS__))
#define FJ_ASSIGN_OR_RETURN_IMPL_(var, lhs, expr, context) \
  auto var = (expr);                                       \
  if (!var.ok()) {                                         \
    return ::fleetjit::Annotate(var.status(), (context));  \
  }                                                        \
  lhs = std::move(var).value()

#endif  // FLEETJIT_BASE_STATUS_MACROS_H_
