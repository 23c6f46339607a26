#include "platform/cu_errors.h"

namespace fleetjit {
namespace {

constexpr CuErrorStickiness kSticky = CuErrorStickiness::kSticky;
constexpr CuErrorStickiness kRecoverable = CuErrorStickiness::kRecoverable;

// Constant-initialised: nothing runs at library load.
constexpr CuErrorRow kRows[] = {
#define FJ_CU_ERROR(result, code, stickiness) \
  {result, #result, code, stickiness},
#include "platform/cu_errors.inc"
#undef FJ_CU_ERROR
};

}  // namespace

absl::Span<const CuErrorRow> CuErrorTable() { return kRows; }

CuErrorRow DescribeCuError(CUresult result) {
  // A switch, so the compiler builds the lookup and rejects a duplicate row.
  switch (result) {
#define FJ_CU_ERROR(r, code, stickiness) \
  case r:                                \
    return CuErrorRow{r, #r, code, stickiness};
#include "platform/cu_errors.inc"
#undef FJ_CU_ERROR
    default:
      break;
  }
  return CuErrorRow{result, "CUDA_ERROR", FJ_CUDA_ERROR, kRecoverable};
}

// No default: -Wswitch names a code added to fj_code without a decision.
absl::StatusCode AbslCodeFor(fj_code code) {
  switch (code) {
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
    case FJ_RESOURCE_EXHAUSTED:
      return absl::StatusCode::kResourceExhausted;
    case FJ_OUT_OF_RANGE:
      return absl::StatusCode::kOutOfRange;
    case FJ_DEADLINE_EXCEEDED:
      return absl::StatusCode::kDeadlineExceeded;
    case FJ_BUILD_ERROR:
    case FJ_CUDA_ERROR:
    case FJ_INTERNAL:
      return absl::StatusCode::kInternal;
  }
  return absl::StatusCode::kInternal;
}

}  // namespace fleetjit
