#include "platform/nvjitlink_library.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/nvrtc_locate.h"

namespace fleetjit {
namespace {

bool IsRegularFile(const std::string& path, struct stat* st = nullptr) {
  struct stat local;
  if (st == nullptr) st = &local;
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<std::string> ResolveNvJitLinkLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library) {
  std::vector<std::string> dirs;
  if (!explicit_path.empty()) {
    if (IsRegularFile(explicit_path)) return explicit_path;
    if (!IsDirectory(explicit_path)) {
      return absl::UnavailableError(absl::StrCat(
          "nvJitLink library '", explicit_path,
          "' (FLEETJIT_NVJITLINK) is neither a file nor a folder"));
    }
    dirs.push_back(explicit_path);
  } else {
    dirs = LibrarySearchDirs();
    size_t slash = nvrtc_library.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      std::string beside = nvrtc_library.substr(0, slash);
      bool known = false;
      for (const std::string& d : dirs) known = known || d == beside;
      if (!known) dirs.push_back(beside);
    }
  }
  for (const char* soname : kNvJitLinkSonames) {
    for (const std::string& dir : dirs) {
      std::string path = absl::StrCat(dir, "/", soname);
      if (IsRegularFile(path)) return path;
    }
  }
  return absl::UnavailableError(absl::StrCat(
      "nvJitLink (", absl::StrJoin(kNvJitLinkSonames, ", "),
      ", needed to link device code) not found in ", absl::StrJoin(dirs, ":"),
      "; install the CUDA toolkit's nvJitLink (e.g. the cuda-nvjitlink "
      "package, or the nvidia-nvjitlink wheel) or set FLEETJIT_NVJITLINK to "
      "the library or its folder"));
}

absl::StatusOr<std::string> LinkerIdentity(const std::string& resolved_path) {
  struct stat st;
  if (!IsRegularFile(resolved_path, &st)) {
    return absl::NotFoundError(absl::StrCat(
        "nvJitLink library '", resolved_path, "' is not a regular file"));
  }
  std::string name = Basename(resolved_path);
  if (char* real = ::realpath(resolved_path.c_str(), nullptr)) {
    std::string real_name = Basename(real);
    ::free(real);
    // The fully versioned file (libnvJitLink.so.13.0.88) names more.
    if (absl::StartsWith(real_name, "libnvJitLink.so.") &&
        real_name.size() > name.size()) {
      name = real_name;
    }
  }
  return absl::StrCat("nvjitlink ", name,
                      " size=", static_cast<uint64_t>(st.st_size));
}

absl::Status CheckNvJitLink(int result, const char* call) {
  if (result == kNvJitLinkSuccess) return absl::OkStatus();
  // nvJitLinkResult's names, in nvJitLink.h's order.
  static constexpr const char* kNames[] = {
      "NVJITLINK_SUCCESS",
      "NVJITLINK_ERROR_UNRECOGNIZED_OPTION",
      "NVJITLINK_ERROR_MISSING_ARCH",
      "NVJITLINK_ERROR_INVALID_INPUT",
      "NVJITLINK_ERROR_PTX_COMPILE",
      "NVJITLINK_ERROR_NVVM_COMPILE",
      "NVJITLINK_ERROR_INTERNAL",
      "NVJITLINK_ERROR_THREADPOOL",
      "NVJITLINK_ERROR_UNRECOGNIZED_INPUT",
      "NVJITLINK_ERROR_FINALIZE",
      "NVJITLINK_ERROR_NULL_INPUT",
      "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS",
      "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE",
      "NVJITLINK_ERROR_ARCH_MISMATCH",
      "NVJITLINK_ERROR_OUTDATED_LIBRARY",
      "NVJITLINK_ERROR_MISSING_FATBIN",
      "NVJITLINK_ERROR_UNRECOGNIZED_ARCH",
      "NVJITLINK_ERROR_UNSUPPORTED_ARCH",
      "NVJITLINK_ERROR_LTO_NOT_ENABLED",
  };
  constexpr int kCount = sizeof(kNames) / sizeof(kNames[0]);
  const std::string text = absl::StrCat(
      call, ": ",
      result > 0 && result < kCount ? kNames[result] : "nvJitLink error ",
      result > 0 && result < kCount ? "" : absl::StrCat(result));
  // The options are the caller's (fj_link_options.link_options): an unknown
  // or clashing one is their input, not a fleetjit bug.
  constexpr int kUnrecognizedOption = 1, kIncompatibleOptions = 11;
  if (result == kUnrecognizedOption || result == kIncompatibleOptions) {
    return absl::InvalidArgumentError(
        absl::StrCat(text, " (a link option nvJitLink does not take)"));
  }
  return absl::InternalError(text);
}

absl::StatusOr<const NvJitLinkApi*> NvJitLinkLibrary::Get() {
  absl::MutexLock lock(&mu_);
  if (tried_) {
    if (!error_.ok()) return error_;
    return &api_;
  }
  tried_ = true;
  // Never dlclose'd, like NVRTC: its thread pool may outlive a link.
  void* handle = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    error_ = absl::UnavailableError(
        absl::StrCat("cannot load nvJitLink (needed to link device code): ",
                     err ? err : path_,
                     "; install the CUDA toolkit's nvJitLink or set "
                     "FLEETJIT_NVJITLINK"));
    return error_;
  }
  NvJitLinkApi api;
  std::string missing;
#define FJ_NVJITLINK(name, type)                                         \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name)); \
  if (api.name == nullptr) {                                             \
    absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name);       \
  }
#include "platform/nvjitlink_symbols.inc"
#undef FJ_NVJITLINK
  if (!missing.empty()) {
    error_ = absl::UnavailableError(
        absl::StrCat("nvJitLink '", path_, "' lacks ", missing,
                     "; install the CUDA toolkit's nvJitLink 12 or later"));
    return error_;
  }
  absl::Status version = CheckNvJitLink(
      api.nvJitLinkVersion(&api.major, &api.minor), "nvJitLinkVersion");
  if (!version.ok()) {
    error_ = absl::UnavailableError(
        absl::StrCat("nvJitLink '", path_, "': ", version.message()));
    return error_;
  }
  api.library_path = path_;
  api_ = std::move(api);
  return &api_;
}

}  // namespace fleetjit
