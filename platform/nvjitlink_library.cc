#include "platform/nvjitlink_library.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/lazy_library.h"

namespace fleetjit {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::StatusOr<std::string> ResolveNvJitLinkLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library) {
  LibrarySearch search =
      FindLibraryBesideNvrtc(explicit_path, nvrtc_library, kNvJitLinkSonames);
  if (search.neither_file_nor_folder) {
    return absl::UnavailableError(
        absl::StrCat("nvJitLink library '", explicit_path,
                     "' (FLEETJIT_NVJITLINK) is neither a file nor a folder"));
  }
  if (!search.path.empty()) return search.path;
  return absl::UnavailableError(absl::StrCat(
      "nvJitLink (", absl::StrJoin(kNvJitLinkSonames, ", "),
      ", needed to link device code) not found in ",
      absl::StrJoin(search.dirs, ":"),
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
  return table_.Get([this]() -> absl::StatusOr<NvJitLinkApi> {
    // Never dlclose'd, like NVRTC: its thread pool may outlive a link.
    std::string error;
    void* handle = OpenLibrary(path_, &error);
    if (handle == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "cannot load nvJitLink (needed to link device code): ", error,
          "; install the CUDA toolkit's nvJitLink or set "
          "FLEETJIT_NVJITLINK"));
    }
    NvJitLinkApi api;
    SymbolResolver resolve(handle);
#define FJ_NVJITLINK(name, type) resolve(api.name, #name);
#include "platform/nvjitlink_symbols.inc"
#undef FJ_NVJITLINK
    if (!resolve.missing().empty()) {
      return absl::UnavailableError(
          absl::StrCat("nvJitLink '", path_, "' lacks ", resolve.missing(),
                       "; install the CUDA toolkit's nvJitLink 12 or later"));
    }
    absl::Status version = CheckNvJitLink(
        api.nvJitLinkVersion(&api.major, &api.minor), "nvJitLinkVersion");
    if (!version.ok()) {
      return absl::UnavailableError(
          absl::StrCat("nvJitLink '", path_, "': ", version.message()));
    }
    api.library_path = path_;
    return api;
  });
}

}  // namespace fleetjit
