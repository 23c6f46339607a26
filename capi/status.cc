#include "capi/status.h"

#include <new>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "base/raw_enum.h"
#include "base/status_macros.h"

namespace fleetjit::capi {
namespace {

// Built on first use (nothing runs at load time) and never freed.
fj_status* OutOfMemory() {
  static fj_status status{
      FJ_RESOURCE_EXHAUSTED, "fleetjit: out of host memory", {}};
  return &status;
}

}  // namespace

static_assert(static_cast<int>(PublicCode::kBuildError) == FJ_BUILD_ERROR);

// No default: -Wswitch names an absl code added here without a decision.
fj_code CodeOfAbsl(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return FJ_OK;
    case absl::StatusCode::kInvalidArgument:
      return FJ_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound:
      return FJ_NOT_FOUND;
    case absl::StatusCode::kUnavailable:
      return FJ_UNAVAILABLE;
    case absl::StatusCode::kFailedPrecondition:
      return FJ_FAILED_PRECONDITION;
    case absl::StatusCode::kResourceExhausted:
      return FJ_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kOutOfRange:
      return FJ_OUT_OF_RANGE;
    case absl::StatusCode::kDeadlineExceeded:
      return FJ_DEADLINE_EXCEEDED;
    // The rest have no public twin. Those the core makes stay inside it
    // (kCancelled: a build given up; kDataLoss, kPermissionDenied: a cache
    // entry refused and rebuilt; kUnimplemented: a Redis reply type), so
    // one that reaches a caller is fleetjit's bug.
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kUnauthenticated:
      return FJ_INTERNAL;
    case absl::StatusCode::
        kDoNotUseReservedForFutureExpansionUseDefaultInSwitchInstead_:
      return FJ_INTERNAL;
  }
  return FJ_INTERNAL;  // a value outside the enum
}

fj_code CodeOf(const absl::Status& status) {
  if (status.ok()) return FJ_OK;
  // Decided where the error arose (CheckCu from the CUresult table, the
  // NVRTC build for a rejected source).
  if (std::optional<int> code = PublicCodeOf(status)) {
    if (*code > FJ_OK && *code <= FJ_CODE_LAST) {
      return static_cast<fj_code>(*code);
    }
  }
  return CodeOfAbsl(status.code());
}

__attribute__((hot)) fj_status* ToFjStatus(const absl::Status& status) {
  if (status.ok()) return nullptr;
  try {
    // The message is read as a C string: a NUL it echoes from the caller's
    // input (a target, a kernel name) would cut it short, so it reads "\0".
    auto* out = new fj_status{
        CodeOf(status),
        absl::StrReplaceAll(status.message(), {{std::string(1, '\0'), "\\0"}}),
        {}};
    status.ForEachPayload([out](absl::string_view url,
                                const absl::Cord& value) {
      if (absl::StartsWith(url, kPayloadPrefix)) {
        out->details.emplace_back(
            std::string(url.substr(kPayloadPrefix.size())), std::string(value));
      }
    });
    return out;
  } catch (...) {
    return OutOfMemory();
  }
}

}  // namespace fleetjit::capi

extern "C" {

FJ_API fj_code fj_status_code(const fj_status* status) {
  return status == nullptr ? FJ_OK : status->code;
}

FJ_API const char* fj_status_message(const fj_status* status,
                                     size_t* out_size) {
  const char* text = status == nullptr ? "" : status->message.c_str();
  if (out_size != nullptr) {
    *out_size = status == nullptr ? 0 : status->message.size();
  }
  return text;
}

FJ_API const char* fj_status_detail(const fj_status* status, fj_str key,
                                    size_t* out_size) {
  if (status == nullptr || (key.data == nullptr && key.size != 0))
    return nullptr;
  absl::string_view k(key.data == nullptr ? "" : key.data, key.size);
  for (const auto& [name, value] : status->details) {
    if (name == k) {
      if (out_size != nullptr) *out_size = value.size();
      return value.c_str();
    }
  }
  return nullptr;
}

FJ_API void fj_status_free(fj_status* status) {
  if (status != fleetjit::capi::OutOfMemory()) delete status;
}

FJ_API const char* fj_code_name(fj_code code) {
  switch (fleetjit::RawEnum(code)) {  // any int may arrive
    case FJ_OK:
      return "OK";
    case FJ_INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case FJ_NOT_FOUND:
      return "NOT_FOUND";
    case FJ_UNAVAILABLE:
      return "UNAVAILABLE";
    case FJ_FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case FJ_BUILD_ERROR:
      return "BUILD_ERROR";
    case FJ_CUDA_ERROR:
      return "CUDA_ERROR";
    case FJ_RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case FJ_OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case FJ_INTERNAL:
      return "INTERNAL";
    case FJ_DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
  }
  return "UNKNOWN";
}

}  // extern "C"
