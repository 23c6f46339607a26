#include "runtime/load/param_relayout.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "jit/param_layout.h"
#include "runtime/load/module_image.h"

namespace fleetjit {

absl::StatusOr<std::optional<std::vector<jit::ParamSpec>>> DriverParamLayout(
    const DriverApi& api, CUfunction function, const jit::KernelEntry& entry) {
  if (api.cuFuncGetParamInfo == nullptr) return std::nullopt;
  std::vector<jit::ParamSpec> params = entry.params;
  bool differs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    size_t offset = 0, size = 0;
    FJ_RETURN_IF_ERROR(
        FJ_CU_CALL(api, cuFuncGetParamInfo, function, i, &offset, &size),
        absl::StrCat("parameter ", i));
    if (size != params[i].size) {
      return absl::InternalError(
          absl::StrCat("parameter ", i, " of ", entry.name, ": the PTX says ",
                       params[i].size, " bytes, the driver ", size));
    }
    differs = differs || offset != params[i].offset;
    params[i].offset = static_cast<uint32_t>(offset);
  }
  if (!differs) return std::nullopt;
  return params;
}

namespace {
absl::Status ForEachKernelFunctionRelaxed(
    const DriverApi& api, Device& device, jit::Artifact& artifact,
    absl::string_view purpose,
    absl::FunctionRef<absl::Status(jit::KernelEntry&, CUfunction)> fn) {
  FJ_RETURN_IF_ERROR(device.MakeCurrent().status());
  FJ_ASSIGN_OR_RETURN(CUmodule module,
                      LoadModuleImage(api, artifact.image.data()),
                      absl::StrCat("loading the image to ", purpose));
  absl::Status status;
  for (jit::KernelEntry& entry : artifact.kernels) {
    CUfunction function = nullptr;
    status = FJ_CU_CALL(api, cuModuleGetFunction, &function, module,
                        entry.lowered_name.c_str());
    if (!status.ok()) {
      status = Annotate(status, absl::StrCat("kernel '", entry.name, "'"));
      break;
    }
    status = fn(entry, function);
    if (!status.ok()) break;
  }
  device.LogReleaseFailure(FJ_CU_CALL(api, cuModuleUnload, module),
                           absl::StrCat("a module loaded to ", purpose));
  return status;
}
}  // namespace

absl::Status ForEachKernelFunction(
    const DriverApi& api, Device& device, jit::Artifact& artifact,
    absl::string_view purpose,
    absl::FunctionRef<absl::Status(jit::KernelEntry&, CUfunction)> fn) {
  // Relaxed: the load and the unload are no part of any stream's capture;
  // an unload in another mode would invalidate one (module_image.h).
  return WithRelaxedCaptureMode(&api, [&] {
    return ForEachKernelFunctionRelaxed(api, device, artifact, purpose, fn);
  });
}

absl::Status AdoptDeviceParamLayouts(const DriverApi& api, Device& device,
                                     jit::Artifact& artifact) {
  return ForEachKernelFunction(
      api, device, artifact, "read its parameter layouts",
      [&](jit::KernelEntry& entry, CUfunction function) -> absl::Status {
        FJ_ASSIGN_OR_RETURN(auto relaid,
                            DriverParamLayout(api, function, entry));
        if (relaid.has_value()) {
          entry.params = std::move(*relaid);
          entry.param_bytes = jit::ParamBufferBytes(entry.params);
        }
        return absl::OkStatus();
      });
}

}  // namespace fleetjit
