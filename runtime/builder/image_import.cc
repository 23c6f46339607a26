#include "runtime/builder/image_import.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "jit/param_layout.h"
#include "runtime/load/param_relayout.h"

namespace fleetjit {
namespace {

// The largest power of two (<= 16) dividing `offset`: what the driver's
// placement tells of a parameter's alignment.
uint32_t AlignOf(size_t offset) {
  uint32_t align = 16;
  while (align > 1 && offset % align != 0) align /= 2;
  return align;
}

}  // namespace

absl::Status ReadDriverParams(const DriverApi& api, Device& device,
                              jit::Artifact& artifact) {
  if (api.cuFuncGetParamInfo == nullptr) {
    return absl::FailedPreconditionError(
        "reading a cubin's kernel parameters needs cuFuncGetParamInfo (a CUDA "
        "12.4+ "
        "driver); load the PTX instead");
  }
  return ForEachKernelFunction(
      api, device, artifact, "read its kernels' parameters",
      [&](jit::KernelEntry& entry, CUfunction function) -> absl::Status {
        entry.params.clear();
        // The driver answers CUDA_ERROR_INVALID_VALUE past the last
        // parameter; any other error is one (a shorter list would pass the
        // wrong launches).
        for (size_t i = 0;; ++i) {
          size_t offset = 0, size = 0;
          const CUresult r =
              api.cuFuncGetParamInfo(function, i, &offset, &size);
          if (r == CUDA_ERROR_INVALID_VALUE) break;
          FJ_RETURN_IF_ERROR(
              CheckCu(api, r, "cuFuncGetParamInfo"),
              absl::StrCat("kernel '", entry.name, "', parameter ", i));
          jit::ParamSpec p;
          p.offset = static_cast<uint32_t>(offset);
          p.size = static_cast<uint32_t>(size);
          p.align = AlignOf(offset);
          entry.params.push_back(p);
        }
        entry.param_bytes = jit::ParamBufferBytes(entry.params);
        return absl::OkStatus();
      });
}

absl::StatusOr<ModuleRecord> ImportImage(const DriverApi* driver,
                                         const DeviceList& devices,
                                         const ImageSpec& spec) {
  std::string context = absl::StrCat("loading the image '", spec.name, "'");
  FJ_ASSIGN_OR_RETURN(
      jit::Artifact artifact,
      jit::ArtifactFromImage(spec.image, spec.kind, spec.target), context);
  bool binary = !artifact.is_ptx;
  if (binary) {
    // No PTX: the driver says what the parameters are, on a device the
    // image runs on.
    if (driver == nullptr || devices.count() == 0) {
      return Annotate(
          devices.driver_status().ok()
              ? absl::UnavailableError(
                    "no GPU: a cubin's parameters come from the driver")
              : devices.driver_status(),
          context);
    }
    Device* device = nullptr;
    for (int d = 0; d < devices.count() && device == nullptr; ++d) {
      if (jit::TargetRunsOn(artifact.target, devices.get(d).facts().arch())) {
        device = &devices.get(d);
      }
    }
    if (device == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(context, ": built for ", artifact.target.Name(),
                       ", which runs on no device here"));
    }
    FJ_RETURN_IF_ERROR(ReadDriverParams(*driver, *device, artifact), context);
  }
  ModuleRecord record;
  record.key = absl::StrCat("image-", Sha256::Hex(Sha256::Hash(spec.image)));
  record.name = spec.name;
  record.source = CacheSource::kCompiled;
  record.artifact = std::make_shared<const jit::Artifact>(std::move(artifact));
  return record;
}

}  // namespace fleetjit
