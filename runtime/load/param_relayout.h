// Kernel parameter offsets are the driver's to choose: a 64-byte-aligned
// tensor parameter moves with the architecture's parameter bank (offset 48
// on sm_90, not 0). These read the driver's layout (cuFuncGetParamInfo,
// CUDA 12.4+) so packing matches what the kernel reads: at build time when
// the image runs on a local device, and at load time otherwise.
#ifndef FLEETJIT_RUNTIME_LOAD_PARAM_RELAYOUT_H_
#define FLEETJIT_RUNTIME_LOAD_PARAM_RELAYOUT_H_

#include <cuda.h>

#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"

namespace fleetjit {

// The parameter layout the driver uses for `function`, when it differs
// from `entry`'s (nullopt when equal, or when the driver cannot say).
// INTERNAL when a parameter's size disagrees with the PTX.
absl::StatusOr<std::optional<std::vector<jit::ParamSpec>>> DriverParamLayout(
    const DriverApi& api, CUfunction function, const jit::KernelEntry& entry);

// Loads `artifact`'s image on `device` (made current here), calls
// `fn(entry, function)` for each of its kernels until one fails (a kernel
// the image lacks fails, naming it), and unloads the image again. `purpose`
// ends the messages: "loading the image to <purpose>", "a module loaded to
// <purpose>". Serves the parameter reads at build (image_import) and load.
// Loads through LoadModuleImage and does its module work in relaxed
// stream-capture mode (module_image.h): a capture in progress survives it.
absl::Status ForEachKernelFunction(
    const DriverApi& api, Device& device, jit::Artifact& artifact,
    absl::string_view purpose,
    absl::FunctionRef<absl::Status(jit::KernelEntry&, CUfunction)> fn);

// Loads `artifact` on `device` (made current here), rewrites its kernels'
// parameter offsets to the driver's, and unloads it again.
absl::Status AdoptDeviceParamLayouts(const DriverApi& api, Device& device,
                                     jit::Artifact& artifact);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LOAD_PARAM_RELAYOUT_H_
