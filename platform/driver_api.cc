#include "platform/driver_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/process_id.h"
#include "base/status_macros.h"
#include "platform/cu_errors.h"

namespace fleetjit {
namespace {

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

constexpr absl::string_view kInstallHint =
    "install the NVIDIA driver (libcuda.so.1) or set FLEETJIT_LIBCUDA; "
    "builds for a named target still work without it";

}  // namespace

void DriverApiDeleter::operator()(DriverApi* api) const {
  // dlclose is deliberately skipped: the driver keeps threads and atexit
  // handlers of its own, and unloading it under them crashes at exit. The
  // handle is reference-counted by the loader, so a later dlopen reuses it.
  delete api;
}

absl::StatusOr<DriverApiPtr> LoadDriverApi(absl::string_view path) {
  std::string lib = path.empty() ? "libcuda.so.1" : std::string(path);
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::UnavailableError(
        absl::StrCat("cannot load the CUDA driver '", lib,
                     "': ", err ? err : "unknown", "; ", kInstallHint));
  }
  DriverApiPtr api(new DriverApi);
  api->handle = handle;
  api->library_path = lib;
  api->loader_pid = ProcessId();

  auto get_proc =
      reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "the CUDA driver '", lib,
        "' is older than CUDA 12 (no cuGetProcAddress_v2); ", kInstallHint));
  }
  std::string missing;
#define FJ_CU(name, version, required)                                      \
  {                                                                         \
    void* fn = nullptr;                                                     \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;     \
    CUresult r =                                                            \
        get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found); \
    if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && fn) {  \
      api->name = reinterpret_cast<decltype(api->name)>(fn);                \
    } else if (required) {                                                  \
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name);        \
    }                                                                       \
  }
#include "platform/driver_symbols.inc"
#undef FJ_CU
  if (!missing.empty()) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver '", lib,
                     "' lacks entry points: ", missing, "; ", kInstallHint));
  }
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(handle, "cuInit"));
  if (init == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver '", lib, "' has no cuInit"));
  }
  FJ_RETURN_IF_ERROR(CheckCu(*api, init(0), "cuInit"),
                     "initialising the CUDA driver");
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(*api, cuDriverGetVersion, &api->driver_version),
                     "reading the driver version");
  return api;
}

__attribute__((hot)) bool IsForkedChild(const DriverApi& api) {
  if (api.loader_pid == 0) return false;
  return api.loader_pid != ProcessId();
}

absl::Status CheckCu(const DriverApi& api, CUresult result,
                     absl::string_view call) {
  if (IsForkedChild(api)) {
    return absl::FailedPreconditionError(absl::StrCat(
        call,
        ": called in a fork() child of the process that initialised "
        "CUDA; CUDA is not fork-safe: create the runtime after fork()"));
  }
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr ||
      api.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (api.cuGetErrorString == nullptr ||
      api.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string error = absl::StrCat(name ? name : "CUDA_ERROR", "(",
                                   static_cast<int>(result), ")");
  // The table decides the public code (carried explicitly) and the absl
  // code that goes with it; poisoning reads the same table (IsStickyError).
  const CuErrorRow row = DescribeCuError(result);
  absl::Status status(
      AbslCodeFor(row.code),
      absl::StrCat(call, ": ", error, ": ", text ? text : "no description"));
  SetPublicCode(status, row.code);
  SetDetail(status, "cuda_call", call);
  SetDetail(status, "cuda_error", error);
  return status;
}

absl::StatusOr<std::optional<CUstreamCaptureMode>> EnterRelaxedCaptureMode(
    const DriverApi& api) {
  if (api.cuThreadExchangeStreamCaptureMode == nullptr) return std::nullopt;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuThreadExchangeStreamCaptureMode, &mode),
                     "entering relaxed stream-capture mode");
  return mode;
}

absl::Status LeaveRelaxedCaptureMode(
    const DriverApi& api, std::optional<CUstreamCaptureMode> previous) {
  if (!previous.has_value() || api.cuThreadExchangeStreamCaptureMode == nullptr)
    return absl::OkStatus();
  CUstreamCaptureMode mode = *previous;
  return Annotate(FJ_CU_CALL(api, cuThreadExchangeStreamCaptureMode, &mode),
                  "restoring the thread's stream-capture mode");
}

}  // namespace fleetjit
