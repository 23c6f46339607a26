#include "conformance/c_abi.h"

#include "absl/strings/str_cat.h"

namespace fleetjit::selftest::internal {

absl::Status WithContext(const absl::Status& status,
                         absl::string_view context) {
  if (context.empty()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

namespace {

// No default: -Wswitch names a code added to fj_code without a twin here.
absl::StatusCode CodeOf(fj_code c) {
  switch (c) {
    case FJ_OK:
      return absl::StatusCode::kOk;
    case FJ_INVALID_ARGUMENT:
      return absl::StatusCode::kInvalidArgument;
    case FJ_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case FJ_UNAVAILABLE:
      return absl::StatusCode::kUnavailable;
    case FJ_FAILED_PRECONDITION:
      return absl::StatusCode::kFailedPrecondition;
    case FJ_BUILD_ERROR:
      return absl::StatusCode::kAborted;
    case FJ_CUDA_ERROR:
      return absl::StatusCode::kInternal;
    case FJ_RESOURCE_EXHAUSTED:
      return absl::StatusCode::kResourceExhausted;
    case FJ_OUT_OF_RANGE:
      return absl::StatusCode::kOutOfRange;
    case FJ_INTERNAL:
      return absl::StatusCode::kInternal;
    case FJ_DEADLINE_EXCEEDED:
      return absl::StatusCode::kDeadlineExceeded;
  }
  return absl::StatusCode::kInternal;  // a newer library's code
}

}  // namespace

// Converts (and frees) a C ABI status; the message keeps the C code name.
absl::Status Fj(fj_status* s, absl::string_view what) {
  if (s == nullptr) return absl::OkStatus();
  const fj_code code = fj_status_code(s);
  std::string msg = absl::StrCat(what, ": ", fj_code_name(code), ": ",
                                 fj_status_message(s, nullptr));
  static constexpr char kLog[] = "build_log";
  const char* log =
      fj_status_detail(s, fj_str{kLog, sizeof(kLog) - 1}, nullptr);
  if (log != nullptr && *log != '\0') {
    std::string l(log);
    if (l.size() > 3000) l = l.substr(0, 3000) + "\n[... build log truncated]";
    absl::StrAppend(&msg, "\nbuild log:\n", l);
  }
  fj_status_free(s);
  return absl::Status(CodeOf(code), msg);
}

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }

}  // namespace fleetjit::selftest::internal
