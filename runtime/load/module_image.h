// Loading a module image while a stream may be capturing a CUDA graph
// (docs/launch.md, "Graph capture").
//
// What the driver does: from CUDA 12.3 on, cuModuleLoadData during a
// stream capture is allowed (it is not captured: the module is loaded at
// once); before 12.3 it is refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
// and the refusal invalidates the capture. Unloading a module is a
// "potentially unsafe" call that invalidates a capture unless the thread
// is in relaxed mode. So the loader and the parameter reads do all their
// module work in relaxed mode (WithRelaxedCaptureMode, platform/
// driver_api.h), and load images through LoadModuleImage:
//
//   FJ_ASSIGN_OR_RETURN(CUmodule m, LoadModuleImage(api, image.data()),
//                       "loading 'saxpy.cu'");
#ifndef FLEETJIT_RUNTIME_LOAD_MODULE_IMAGE_H_
#define FLEETJIT_RUNTIME_LOAD_MODULE_IMAGE_H_

#include <cuda.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/driver_api.h"

namespace fleetjit {

// The first driver (cuDriverGetVersion) that loads modules during a
// stream capture: CUDA 12.3.
inline constexpr int kCaptureLoadDriverVersion = 12030;

// A stream capture in progress that this thread can see in its current
// context, described ("the calling thread's per-thread default stream is
// capturing"); empty when it sees none. It sees the per-thread default
// stream (CU_STREAM_PER_THREAD) and any blocking stream of the context
// (through the legacy stream, which answers
// CUDA_ERROR_STREAM_CAPTURE_IMPLICIT then, leaving that capture intact).
// A capture on a stream created CU_STREAM_NON_BLOCKING is not visible
// from here; neither is anything when the driver lacks cuStreamIsCapturing.
// A query that fails otherwise is its status.
absl::StatusOr<std::string> VisibleCapture(const DriverApi& api);

// cuModuleLoadData of `image` into the current context. On a driver older
// than kCaptureLoadDriverVersion, a visible capture (VisibleCapture) makes
// it FAILED_PRECONDITION before the driver is called, so that capture
// stays intact. A load the driver refuses because a stream is capturing
// (CUDA_ERROR_STREAM_CAPTURE_*) is FAILED_PRECONDITION too, keeping the
// driver's error in the message and the cuda_call / cuda_error details.
// Both say what to do: build the module and get its kernels before
// cuStreamBeginCapture. Call it in relaxed mode.
absl::StatusOr<CUmodule> LoadModuleImage(const DriverApi& api,
                                         const void* image);

// True for the CUresults a stream capture causes
// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ... _WRONG_THREAD,
// CUDA_ERROR_CAPTURED_EVENT).
bool IsStreamCaptureError(CUresult result);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LOAD_MODULE_IMAGE_H_
