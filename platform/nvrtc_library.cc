#include "platform/nvrtc_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/exit_gate.h"
#include "base/status_macros.h"
#include "platform/lazy_library.h"

namespace fleetjit {

absl::Status CheckNvrtc(const NvrtcApi& api, nvrtcResult result,
                        const char* call) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  const char* text =
      api.nvrtcGetErrorString ? api.nvrtcGetErrorString(result) : nullptr;
  return absl::InternalError(absl::StrCat(call, ": ", text ? text : "error ",
                                          static_cast<int>(result)));
}

NvrtcLibrary::NvrtcLibrary(std::vector<std::string> candidates,
                           std::string expected_version)
    : candidates_(std::move(candidates)),
      expected_version_(std::move(expected_version)) {
  if (candidates_.empty()) {
    candidates_ = {"libnvrtc.so.13", "libnvrtc.so.12",
                   "/usr/local/cuda/lib64/libnvrtc.so.13",
                   "/usr/local/cuda/lib64/libnvrtc.so.12"};
  }
}

std::string NvrtcLibrary::WrongVersion(int major, int minor) const {
  if (major < kMinNvrtcMajor) {
    return absl::StrCat("fleetjit needs NVRTC ", kMinNvrtcMajor, " or later");
  }
  // "13" or "13.0.88": compare the components the identity has.
  std::vector<std::string> parts = absl::StrSplit(expected_version_, '.');
  int expected[2] = {-1, -1};
  for (size_t i = 0; i < 2 && i < parts.size(); ++i) {
    if (!absl::SimpleAtoi(parts[i], &expected[i])) expected[i] = -1;
  }
  if ((expected[0] >= 0 && expected[0] != major) ||
      (expected[1] >= 0 && expected[1] != minor)) {
    return absl::StrCat("its file name says ", expected_version_,
                        ", so the cache key would name another compiler than "
                        "the one that runs; install a matching library");
  }
  return "";
}

namespace {

// exit() must wait for the compiles in flight before NVRTC's destructors
// run (base/exit_gate.h), so its handler must come after theirs. NVRTC
// registers some at load and more during its first compile: one compile
// of an empty kernel here (about 50 ms, of which the first real compile
// then saves about 30) brings them all in before the handler. Once per
// library file and process.
void WarmUpOncePerProcess(const NvrtcApi& api) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* warmed = new std::vector<std::string>();
  {
    absl::MutexLock lock(&mu);
    for (const std::string& path : *warmed) {
      if (path == api.library_path) return;
    }
    warmed->push_back(api.library_path);
  }
  nvrtcProgram program = nullptr;
  if (api.nvrtcCreateProgram(
          &program, "extern \"C\" __global__ void fj_warm_up() {}",
          "fleetjit_warm_up.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS) {
    (void)api.nvrtcCompileProgram(program, 0,
                                  nullptr);  // a warm-up: any outcome
    (void)api.nvrtcDestroyProgram(&program);
  }
  ExitGate::RunBeforeExistingExitHandlers();
}

// Fills api.supported_archs from nvrtcGetNumSupportedArchs and
// nvrtcGetSupportedArchs (NVRTC 11.2 and later; an older one leaves it
// empty).
absl::Status ReadSupportedArchs(NvrtcApi& api) {
  if (api.nvrtcGetNumSupportedArchs == nullptr ||
      api.nvrtcGetSupportedArchs == nullptr) {
    return absl::OkStatus();
  }
  int count = 0;
  FJ_RETURN_IF_ERROR(CheckNvrtc(api, api.nvrtcGetNumSupportedArchs(&count),
                                "nvrtcGetNumSupportedArchs"));
  if (count <= 0 || count > 1024) {
    return absl::InternalError(absl::StrCat(
        "nvrtcGetNumSupportedArchs reported ", count, " architectures"));
  }
  std::vector<int> archs(static_cast<size_t>(count));
  FJ_RETURN_IF_ERROR(CheckNvrtc(api, api.nvrtcGetSupportedArchs(archs.data()),
                                "nvrtcGetSupportedArchs"));
  std::sort(archs.begin(), archs.end());
  api.supported_archs = std::move(archs);
  return absl::OkStatus();
}

}  // namespace

namespace {

// NVRTC dlopens libnvrtc-builtins.so.MAJOR.MINOR by name, which the loader
// finds only on its own search path: a libnvrtc found beside the toolkit
// (CUDA_HOME, /usr/local/cuda/lib64) without that folder on the search
// path then fails every compile with NVRTC_ERROR_BUILTIN_OPERATION_FAILURE
// (seen in a Debian 11 root with the toolkit mounted). Loaded from beside
// the library first, NVRTC's dlopen finds it by its soname. Never closed.
void PreloadBuiltins(const void* nvrtc_symbol, int major, int minor) {
  Dl_info info;
  if (dladdr(nvrtc_symbol, &info) == 0 || info.dli_fname == nullptr) return;
  const std::string library = info.dli_fname;
  const size_t slash = library.rfind('/');
  if (slash == std::string::npos) return;
  const std::string builtins = absl::StrCat(
      library.substr(0, slash), "/libnvrtc-builtins.so.", major, ".", minor);
  if (access(builtins.c_str(), R_OK) == 0) {
    dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);  // best effort
  }
}

}  // namespace

NvrtcLibrary& NvrtcLibrary::Default() {
  static NvrtcLibrary* library = new NvrtcLibrary();  // never destroyed
  return *library;
}

bool NvrtcLibrary::loaded() const { return table_.loaded(); }

absl::StatusOr<const NvrtcApi*> NvrtcLibrary::Get() {
  return table_.Get([this] { return Load(); });
}

absl::StatusOr<NvrtcApi> NvrtcLibrary::Load() const {
  std::vector<std::string> errors;
  bool only_wrong_versions = true;
  for (const std::string& candidate : candidates_) {
    // Never dlclose'd: NVRTC keeps state that its own exit handlers touch.
    std::string error;
    void* handle = OpenLibrary(candidate, &error);
    if (handle == nullptr) {
      errors.push_back(std::move(error));
      only_wrong_versions = false;
      continue;
    }
    NvrtcApi api;
    SymbolResolver resolve(handle);
#define FJ_NVRTC(name, required) resolve(api.name, #name, required);
#include "platform/nvrtc_symbols.inc"
#undef FJ_NVRTC
    if (!resolve.missing().empty()) {
      errors.push_back(absl::StrCat(candidate, " lacks ", resolve.missing()));
      only_wrong_versions = false;
      continue;
    }
    absl::Status version = CheckNvrtc(
        api, api.nvrtcVersion(&api.major, &api.minor), "nvrtcVersion");
    if (!version.ok()) {
      errors.push_back(absl::StrCat(candidate, ": ", version.message()));
      only_wrong_versions = false;
      continue;
    }
    if (absl::Status archs = ReadSupportedArchs(api); !archs.ok()) {
      errors.push_back(absl::StrCat(candidate, ": ", archs.message()));
      only_wrong_versions = false;
      continue;
    }
    if (std::string wrong = WrongVersion(api.major, api.minor);
        !wrong.empty()) {
      errors.push_back(absl::StrCat(candidate, " reports NVRTC ", api.major,
                                    ".", api.minor, ": ", wrong));
      continue;
    }
    api.library_path = candidate;
    PreloadBuiltins(reinterpret_cast<const void*>(api.nvrtcVersion), api.major,
                    api.minor);
    WarmUpOncePerProcess(api);
    return api;
  }
  std::string message = absl::StrCat(
      "cannot load NVRTC (needed to compile; cache hits do not need it): ",
      absl::StrJoin(errors, "; "),
      "; install the CUDA toolkit's NVRTC (libnvrtc.so.13 or .12) or set "
      "FLEETJIT_LIBNVRTC");
  return only_wrong_versions && !errors.empty()
             ? absl::FailedPreconditionError(message)
             : absl::UnavailableError(message);
}

}  // namespace fleetjit
