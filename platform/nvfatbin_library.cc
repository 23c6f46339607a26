#include "platform/nvfatbin_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/lazy_library.h"

namespace fleetjit {
namespace {

constexpr const char* kInstallHint =
    "install the CUDA toolkit's nvFatbin (12.4 or later: the cuda-nvfatbin "
    "package of NVIDIA's repository, Debian's libnvfatbin12, or the "
    "nvidia-nvfatbin wheel) where the loader finds it, e.g. in a folder of "
    "LD_LIBRARY_PATH";

}  // namespace

absl::StatusOr<std::string> ResolveNvFatbinLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library) {
  LibrarySearch search =
      FindLibraryBesideNvrtc(explicit_path, nvrtc_library, kNvFatbinSonames);
  if (search.neither_file_nor_folder) {
    return absl::UnavailableError(
        absl::StrCat("nvFatbin library '", explicit_path,
                     "' is neither a file nor a folder; ", kInstallHint));
  }
  if (!search.path.empty()) return search.path;
  return absl::UnavailableError(
      absl::StrCat("nvFatbin (", absl::StrJoin(kNvFatbinSonames, ", "),
                   ", needed to make a fatbin) not found in ",
                   absl::StrJoin(search.dirs, ":"), "; ", kInstallHint));
}

absl::Status CheckNvFatbin(const NvFatbinApi& api, int result,
                           const char* call) {
  if (result == kNvFatbinSuccess) return absl::OkStatus();
  const char* text = api.nvFatbinGetErrorString != nullptr
                         ? api.nvFatbinGetErrorString(result)
                         : nullptr;
  return absl::InternalError(
      absl::StrCat(call, ": ", text != nullptr ? text : "nvFatbin error", " (",
                   result, ")"));
}

absl::StatusOr<const NvFatbinApi*> NvFatbinLibrary::Get() {
  return table_.Get([this]() -> absl::StatusOr<NvFatbinApi> {
    std::string error;
    void* handle = OpenLibrary(path_, &error);
    if (handle == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "cannot load nvFatbin (needed to make a fatbin): ", error, "; ",
          kInstallHint));
    }
    NvFatbinApi api;
    SymbolResolver resolve(handle);
#define FJ_NVFATBIN(name, type) resolve(api.name, #name);
#include "platform/nvfatbin_symbols.inc"
#undef FJ_NVFATBIN
    if (!resolve.missing().empty()) {
      dlclose(handle);
      return absl::UnavailableError(absl::StrCat("nvFatbin '", path_,
                                                 "' lacks ", resolve.missing(),
                                                 "; ", kInstallHint));
    }
    absl::Status version = CheckNvFatbin(
        api, api.nvFatbinVersion(&api.major, &api.minor), "nvFatbinVersion");
    if (!version.ok()) {
      dlclose(handle);
      return absl::UnavailableError(
          absl::StrCat("nvFatbin '", path_, "': ", version.message()));
    }
    api.library_path = path_;
    return api;
  });
}

}  // namespace fleetjit
