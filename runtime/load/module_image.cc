#include "runtime/load/module_image.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit {
namespace {

constexpr absl::string_view kBuildBeforeCapture =
    "build the module and get its kernels (fj_module_get_kernel) before "
    "cuStreamBeginCapture; launches of kernels already got are captured "
    "like any launch";

std::string DriverName(int version) {
  return absl::StrCat("CUDA ", version / 1000, ".", (version % 1000) / 10);
}

}  // namespace

bool IsStreamCaptureError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<std::string> VisibleCapture(const DriverApi& api) {
  if (api.cuStreamIsCapturing == nullptr) return "";
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(api, cuStreamIsCapturing, CU_STREAM_PER_THREAD, &status),
      "asking whether the per-thread default stream captures");
  if (status != CU_STREAM_CAPTURE_STATUS_NONE) {
    return "the calling thread's per-thread default stream is capturing";
  }
  const CUresult r = api.cuStreamIsCapturing(CU_STREAM_LEGACY, &status);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    return "a blocking stream of this device's context is capturing (the "
           "legacy stream reports CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)";
  }
  FJ_RETURN_IF_ERROR(CheckCu(api, r, "cuStreamIsCapturing"),
                     "asking whether a blocking stream captures");
  return "";
}

absl::StatusOr<CUmodule> LoadModuleImage(const DriverApi& api,
                                         const void* image) {
  if (api.driver_version < kCaptureLoadDriverVersion) {
    FJ_ASSIGN_OR_RETURN(const std::string capture, VisibleCapture(api));
    if (!capture.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot load a module now: ", capture, ", and this driver (",
          DriverName(api.driver_version),
          ") refuses module loads during a stream capture (from CUDA 12.3 "
          "on it allows them), which would also invalidate the capture; ",
          kBuildBeforeCapture));
    }
  }
  CUmodule module = nullptr;
  const CUresult r = api.cuModuleLoadData(&module, image);
  absl::Status status = CheckCu(api, r, "cuModuleLoadData");
  if (status.ok()) return module;
  if (!IsStreamCaptureError(r)) return status;
  // The driver's error, recoded: the state forbids the call.
  absl::Status refused = absl::FailedPreconditionError(absl::StrCat(
      status.message(), "; the driver (", DriverName(api.driver_version),
      ") refuses module loads while a stream is capturing: ",
      kBuildBeforeCapture));
  status.ForEachPayload(
      [&refused](absl::string_view url, const absl::Cord& payload) {
        if (absl::StartsWith(url, kPayloadPrefix))
          refused.SetPayload(url, payload);
      });
  return refused;
}

}  // namespace fleetjit
