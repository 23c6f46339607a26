// The CUDA driver API, loaded at run time.
//
// libcuda.so.1 is dlopen'ed by LoadDriverApi() (never at library load) and
// every entry point is resolved through cuGetProcAddress with a pinned API
// version (driver_symbols.inc). No driver, an old driver or no GPU are
// statuses, not crashes. Every call goes through CheckCu(), which names the
// call and carries the driver's own error text:
//
//   FJ_RETURN_IF_ERROR(CheckCu(api, api.cuMemAlloc(&p, n), "cuMemAlloc"),
//                      "allocating the output");
#ifndef FLEETJIT_PLATFORM_DRIVER_API_H_
#define FLEETJIT_PLATFORM_DRIVER_API_H_

#include <cuda.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

struct DriverApi {
#define FJ_CU(name, version, required) decltype(&::name) name = nullptr;
#include "platform/driver_symbols.inc"
#undef FJ_CU
  int driver_version = 0;  // cuDriverGetVersion, e.g. 13000
  std::string library_path;
  void* handle = nullptr;  // dlopen handle
  int loader_pid = 0;      // getpid() at load: CUDA is not fork-safe
};

struct DriverApiDeleter {
  void operator()(DriverApi* api) const;
};
using DriverApiPtr = std::unique_ptr<DriverApi, DriverApiDeleter>;

// Loads libcuda (`path`, or "libcuda.so.1" when empty), resolves every entry
// point and calls cuInit(0). UNAVAILABLE, with what to install, when the
// library or a required entry point is missing or cuInit fails.
absl::StatusOr<DriverApiPtr> LoadDriverApi(absl::string_view path);

// OK for CUDA_SUCCESS; otherwise a status naming `call`, with the driver's
// error name and text (and details "cuda_call", "cuda_error"), whose public
// fj_code (PublicCodeOf) and absl code come from the CUresult table
// (platform/cu_errors.inc). Fails with
// FAILED_PRECONDITION in a forked child: CUDA is not fork-safe.
absl::Status CheckCu(const DriverApi& api, CUresult result,
                     absl::string_view call);

// True when this process is a fork() child of the one that loaded CUDA.
bool IsForkedChild(const DriverApi& api);

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_DRIVER_API_H_
