// The CUDA driver API, loaded at run time.
//
// libcuda.so.1 is dlopen'ed by LoadDriverApi() (never at library load) and
// every entry point is resolved through cuGetProcAddress with a pinned API
// version (driver_symbols.inc). No driver, an old driver or no GPU are
// statuses, not crashes. Every call goes through CheckCu(), which names the
// call and carries the driver's own error text; FJ_CU_CALL names the entry
// point once, making the call and checking it:
//
//   FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuMemAlloc, &p, n),
//                      "allocating the output");
//
// A call whose message says more than the entry point's name (which
// attribute, which buffer) spells it out with CheckCu.
#ifndef FLEETJIT_PLATFORM_DRIVER_API_H_
#define FLEETJIT_PLATFORM_DRIVER_API_H_

#include <cuda.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

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

// FJ_CU_CALL(api, cuXxx, args...): calls `api.cuXxx(args...)` (`api` a
// DriverApi lvalue, e.g. `*driver_`) and returns CheckCu's status for it,
// named "cuXxx": the entry point is typed once, so the message cannot drift
// from the call. `api` is evaluated twice.
#define FJ_CU_CALL(api, name, ...) \
  ::fleetjit::CheckCu((api), (api).name(__VA_ARGS__), #name)

// FJ_CU_RETURN_IF_ERROR(api, cuXxx, args...): FJ_CU_CALL, returning its
// status from the enclosing function on failure (FJ_RETURN_IF_ERROR without
// a context).
#define FJ_CU_RETURN_IF_ERROR(api, name, ...) \
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, name, __VA_ARGS__))

// True when this process is a fork() child of the one that loaded CUDA.
bool IsForkedChild(const DriverApi& api);

// Stream capture (docs/launch.md, "Graph capture"). While a stream
// captures in CU_STREAM_CAPTURE_MODE_GLOBAL (the default) or THREAD_LOCAL,
// the driver refuses "potentially unsafe" calls (cuMemAlloc, cuModuleUnload,
// synchronisations, ...) with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidates the capture: global mode from any thread whose interaction
// mode is GLOBAL, the others from the capturing thread. A thread in
// CU_STREAM_CAPTURE_MODE_RELAXED is not prohibited (cuThreadExchange-
// StreamCaptureMode). fleetjit's own driver work that joins no stream of
// the caller (loading and unloading modules, the background tuning of its
// copy kernels) runs in relaxed mode, so it never counts against a capture.
//
// Sets this thread's interaction mode to RELAXED (returning the one it
// had) and back. Without the entry point (a test double) nothing is done:
// nullopt.
absl::StatusOr<std::optional<CUstreamCaptureMode>> EnterRelaxedCaptureMode(
    const DriverApi& api);
absl::Status LeaveRelaxedCaptureMode(
    const DriverApi& api, std::optional<CUstreamCaptureMode> previous);

// Runs `fn` (returning absl::Status or absl::StatusOr<T>) in relaxed mode,
// restoring the thread's mode after it. A null `api` runs `fn` as it is.
// The status is fn's, else the failure to set or restore the mode.
//
//   return WithRelaxedCaptureMode(driver_, [&] { return Load(...); });
template <typename Fn>
auto WithRelaxedCaptureMode(const DriverApi* api, Fn&& fn) -> decltype(fn()) {
  using Result = decltype(fn());
  if (api == nullptr) return fn();
  absl::StatusOr<std::optional<CUstreamCaptureMode>> previous =
      EnterRelaxedCaptureMode(*api);
  if (!previous.ok()) return Result(previous.status());
  Result result = fn();
  absl::Status left = LeaveRelaxedCaptureMode(*api, *previous);
  if (!left.ok() && result.ok()) return Result(std::move(left));
  return result;
}

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_DRIVER_API_H_
