#include "jit/fatbin.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit::jit {
namespace {

// Destroys the handle on every path.
struct FatbinGuard {
  const NvFatbinApi* api;
  NvFatbinHandle handle = nullptr;
  ~FatbinGuard() {
    if (handle != nullptr) (void)api->nvFatbinDestroy(&handle);
  }
};

}  // namespace

std::string NvFatbinArch(const Target& target) {
  std::string arch = absl::StrCat(target.arch);
  if (target.suffix != '\0') arch.push_back(target.suffix);
  return arch;
}

absl::StatusOr<std::string> MakeFatbin(NvFatbinLibrary& library,
                                       const std::vector<FatbinInput>& inputs,
                                       absl::string_view identifier) {
  if (inputs.empty()) {
    return absl::InvalidArgumentError("a fatbin needs at least one image");
  }
  for (const FatbinInput& in : inputs) {
    if (in.image.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the image for ", in.target.Name(), " is empty: nothing to add"));
    }
  }
  FJ_ASSIGN_OR_RETURN(const NvFatbinApi* api, library.Get(), "making a fatbin");
  const std::string id(identifier);
  // Uncompressed: the image reader lists a fatbin's kernels from its cubins.
  const char* options[] = {"-64", "-compress=false"};
  FatbinGuard fatbin{api};
  FJ_RETURN_IF_ERROR(
      CheckNvFatbin(*api,
                    api->nvFatbinCreate(&fatbin.handle, options,
                                        sizeof(options) / sizeof(options[0])),
                    "nvFatbinCreate"),
      "making a fatbin");
  for (const FatbinInput& in : inputs) {
    const std::string arch = NvFatbinArch(in.target);
    const std::string context =
        absl::StrCat("adding the ", in.target.ptx ? "PTX" : "cubin", " for ",
                     in.target.Name(), " to the fatbin");
    if (in.target.ptx) {
      // nvFatbin reads the PTX's length from `size`; the text needs no NUL.
      FJ_RETURN_IF_ERROR(
          CheckNvFatbin(*api,
                        api->nvFatbinAddPTX(fatbin.handle, in.image.data(),
                                            in.image.size(), arch.c_str(),
                                            id.c_str(), ""),
                        "nvFatbinAddPTX"),
          context);
    } else {
      FJ_RETURN_IF_ERROR(
          CheckNvFatbin(
              *api,
              api->nvFatbinAddCubin(fatbin.handle, in.image.data(),
                                    in.image.size(), arch.c_str(), id.c_str()),
              "nvFatbinAddCubin"),
          context);
    }
  }
  size_t size = 0;
  FJ_RETURN_IF_ERROR(
      CheckNvFatbin(*api, api->nvFatbinSize(fatbin.handle, &size),
                    "nvFatbinSize"),
      "making a fatbin");
  std::string out(size, '\0');
  FJ_RETURN_IF_ERROR(
      CheckNvFatbin(*api, api->nvFatbinGet(fatbin.handle, out.data()),
                    "nvFatbinGet"),
      "making a fatbin");
  return out;
}

}  // namespace fleetjit::jit
