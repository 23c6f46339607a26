#include "platform/nvfatbin_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/nvrtc_locate.h"

namespace fleetjit {
namespace {

constexpr const char* kInstallHint =
    "install the CUDA toolkit's nvFatbin (12.4 or later: the cuda-nvfatbin "
    "package of NVIDIA's repository, Debian's libnvfatbin12, or the "
    "nvidia-nvfatbin wheel) where the loader finds it, e.g. in a folder of "
    "LD_LIBRARY_PATH";

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::StatusOr<std::string> ResolveNvFatbinLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library) {
  std::vector<std::string> dirs;
  if (!explicit_path.empty()) {
    if (IsRegularFile(explicit_path)) return explicit_path;
    if (!IsDirectory(explicit_path)) {
      return absl::UnavailableError(
          absl::StrCat("nvFatbin library '", explicit_path,
                       "' is neither a file nor a folder; ", kInstallHint));
    }
    dirs.push_back(explicit_path);
  } else {
    dirs = LibrarySearchDirs();
    const size_t slash = nvrtc_library.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      std::string beside = nvrtc_library.substr(0, slash);
      bool known = false;
      for (const std::string& d : dirs) known = known || d == beside;
      if (!known) dirs.push_back(std::move(beside));
    }
  }
  for (const char* soname : kNvFatbinSonames) {
    for (const std::string& dir : dirs) {
      std::string path = absl::StrCat(dir, "/", soname);
      if (IsRegularFile(path)) return path;
    }
  }
  return absl::UnavailableError(
      absl::StrCat("nvFatbin (", absl::StrJoin(kNvFatbinSonames, ", "),
                   ", needed to make a fatbin) not found in ",
                   absl::StrJoin(dirs, ":"), "; ", kInstallHint));
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
  absl::MutexLock lock(&mu_);
  if (tried_) {
    if (!error_.ok()) return error_;
    return &api_;
  }
  tried_ = true;
  void* handle = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    error_ = absl::UnavailableError(
        absl::StrCat("cannot load nvFatbin (needed to make a fatbin): ",
                     err != nullptr ? err : path_, "; ", kInstallHint));
    return error_;
  }
  NvFatbinApi api;
  std::string missing;
#define FJ_NVFATBIN(name, type)                                          \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name)); \
  if (api.name == nullptr) {                                             \
    absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name);       \
  }
#include "platform/nvfatbin_symbols.inc"
#undef FJ_NVFATBIN
  if (!missing.empty()) {
    dlclose(handle);
    error_ = absl::UnavailableError(absl::StrCat(
        "nvFatbin '", path_, "' lacks ", missing, "; ", kInstallHint));
    return error_;
  }
  absl::Status version = CheckNvFatbin(
      api, api.nvFatbinVersion(&api.major, &api.minor), "nvFatbinVersion");
  if (!version.ok()) {
    dlclose(handle);
    error_ = absl::UnavailableError(
        absl::StrCat("nvFatbin '", path_, "': ", version.message()));
    return error_;
  }
  api.library_path = path_;
  api_ = std::move(api);
  return &api_;
}

}  // namespace fleetjit
