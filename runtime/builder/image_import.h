// Modules built elsewhere (fj_module_load): an image handed over by the
// caller (`fleetjit build -o`, nvcc, another process) becomes a
// ModuleRecord like a build's, so kernels load and launch through the usual
// loader with checked arguments.
//
// PTX is read on the CPU (names and layouts from the text). A cubin or
// fatbin carries no PTX: its kernel names come from the ELF symbol table
// (jit/image_reader.h) and its parameters (count, sizes, offsets) from the
// driver at import (cuModuleGetFunction + cuFuncGetParamInfo, CUDA 12.4+),
// so importing one needs the driver and a device the image runs on.
//
// Imports are not cached by build key: the record's key is "image-" plus
// the image's SHA-256, so importing one image twice shares its loaded copy
// per device, and nothing is written to any cache tier.
#ifndef FLEETJIT_RUNTIME_BUILDER_IMAGE_IMPORT_H_
#define FLEETJIT_RUNTIME_BUILDER_IMAGE_IMPORT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "jit/artifact.h"
#include "jit/image_reader.h"
#include "jit/target.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"
#include "runtime/load/module.h"

namespace fleetjit {

struct ImageSpec {
  std::string image;  // a copy of the caller's bytes
  jit::ImageKind kind = jit::ImageKind::kAuto;
  std::string name = "image";
  std::optional<jit::Target> target;  // else what the image says
};

// Reads `spec.image` and, for a cubin or fatbin, the kernels' parameters
// from the driver (`driver` null: the devices' UNAVAILABLE status).
absl::StatusOr<ModuleRecord> ImportImage(const DriverApi* driver,
                                         const DeviceList& devices,
                                         const ImageSpec& spec);

// Fills the parameters of `artifact`'s kernels from the driver, loading the
// image on `device` (made current) and unloading it again. Parameters are
// of unknown kind: launches check their count and sizes.
absl::Status ReadDriverParams(const DriverApi& api, Device& device,
                              jit::Artifact& artifact);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_BUILDER_IMAGE_IMPORT_H_
