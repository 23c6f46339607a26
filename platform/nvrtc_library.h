// NVRTC, loaded lazily: a process that never builds never loads it.
//
// NvrtcLibrary resolves its entry points the first time Get() is called
// (from any thread; loading happens once). The library file is the one the
// runtime resolved for its cache key (see nvrtc_locate.h), so the compiler
// that runs is the compiler the key names.
#ifndef FLEETJIT_PLATFORM_NVRTC_LIBRARY_H_
#define FLEETJIT_PLATFORM_NVRTC_LIBRARY_H_

#include <nvrtc.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/lazy_library.h"

namespace fleetjit {

struct NvrtcApi {
#define FJ_NVRTC(name, required) decltype(&::name) name = nullptr;
#include "platform/nvrtc_symbols.inc"
#undef FJ_NVRTC
  int major = 0;
  int minor = 0;
  std::string library_path;
  // What nvrtcGetSupportedArchs lists, ascending (e.g. 75 ... 121 for NVRTC
  // 13.0): the only architectures a build may name (jit/nvrtc_build.h,
  // CheckTargetSupported). Empty only for an NVRTC without the call.
  std::vector<int> supported_archs;
};

// The oldest NVRTC fleetjit builds with: sm_90 targets and the C++17 the
// embedded headers need.
inline constexpr int kMinNvrtcMajor = 12;

// OK for NVRTC_SUCCESS, else INTERNAL naming `call` with NVRTC's text.
absl::Status CheckNvrtc(const NvrtcApi& api, nvrtcResult result,
                        const char* call);

class NvrtcLibrary {
 public:
  // `candidates`: files to try in order (absolute paths or sonames). Empty
  // means the defaults: libnvrtc.so.13, libnvrtc.so.12, then the same under
  // /usr/local/cuda/lib64. `expected_version` ("13", "13.0.88"; "" or
  // "unknown" = any): the version the cache key names for the library
  // (CompilerIdentity); one whose nvrtcVersion() disagrees is refused, so
  // the key never names another compiler than the one that ran.
  explicit NvrtcLibrary(std::vector<std::string> candidates = {},
                        std::string expected_version = "");

  // Loads on first call; UNAVAILABLE (with what to install) if no candidate
  // loads, FAILED_PRECONDITION if the only ones that load report the wrong
  // version (older than kMinNvrtcMajor, or not `expected_version`). The
  // result is cached, success or failure.
  absl::StatusOr<const NvrtcApi*> Get();
  bool loaded() const;

  // The process-wide default instance (used by tools and tests).
  static NvrtcLibrary& Default();

 private:
  // Why a library reporting `major`.`minor` is refused, or "".
  std::string WrongVersion(int major, int minor) const;
  // The first candidate that loads with the right version (Get's one try).
  absl::StatusOr<NvrtcApi> Load() const;

  std::vector<std::string> candidates_;
  std::string expected_version_;
  LazyTable<NvrtcApi> table_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_NVRTC_LIBRARY_H_
