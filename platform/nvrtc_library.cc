#include "platform/nvrtc_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fleetjit {

absl::Status CheckNvrtc(const NvrtcApi& api, nvrtcResult result,
                        const char* call) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  const char* text =
      api.nvrtcGetErrorString ? api.nvrtcGetErrorString(result) : nullptr;
  return absl::InternalError(absl::StrCat(call, ": ", text ? text : "error ",
                                          static_cast<int>(result)));
}

NvrtcLibrary::NvrtcLibrary(std::vector<std::string> candidates)
    : candidates_(std::move(candidates)) {
  if (candidates_.empty()) {
    candidates_ = {"libnvrtc.so.13", "libnvrtc.so.12",
                   "/usr/local/cuda/lib64/libnvrtc.so.13",
                   "/usr/local/cuda/lib64/libnvrtc.so.12"};
  }
}

NvrtcLibrary& NvrtcLibrary::Default() {
  static NvrtcLibrary* library = new NvrtcLibrary();  // never destroyed
  return *library;
}

bool NvrtcLibrary::loaded() const {
  absl::MutexLock lock(&mu_);
  return tried_ && error_.ok();
}

absl::StatusOr<const NvrtcApi*> NvrtcLibrary::Get() {
  absl::MutexLock lock(&mu_);
  if (tried_) {
    if (!error_.ok()) return error_;
    return &api_;
  }
  tried_ = true;
  std::vector<std::string> errors;
  for (const std::string& candidate : candidates_) {
    // Never dlclose'd: NVRTC keeps state that its own exit handlers touch.
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = dlerror();
      errors.push_back(err ? err : candidate);
      continue;
    }
    NvrtcApi api;
    std::string missing;
#define FJ_NVRTC(name, required)                                           \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));   \
  if (api.name == nullptr && required) {                                   \
    absl::StrAppend(&missing, missing.empty() ? "" : ", ", #name);         \
  }
#include "platform/nvrtc_symbols.inc"
#undef FJ_NVRTC
    if (!missing.empty()) {
      errors.push_back(absl::StrCat(candidate, " lacks ", missing));
      continue;
    }
    absl::Status version =
        CheckNvrtc(api, api.nvrtcVersion(&api.major, &api.minor), "nvrtcVersion");
    if (!version.ok()) {
      errors.push_back(absl::StrCat(candidate, ": ", version.message()));
      continue;
    }
    api.library_path = candidate;
    api_ = std::move(api);
    return &api_;
  }
  error_ = absl::UnavailableError(absl::StrCat(
      "cannot load NVRTC (needed to compile; cache hits do not need it): ",
      absl::StrJoin(errors, "; "),
      "; install the CUDA toolkit's NVRTC (libnvrtc.so.13 or .12) or set "
      "FLEETJIT_LIBNVRTC"));
  return error_;
}

}  // namespace fleetjit
