// nvFatbin (libnvfatbin, CUDA 12.4 and later), found and loaded lazily as
// NVRTC and nvJitLink are: only what makes a fatbin (`fleetjit build --emit
// fatbin`) loads it. Nothing links against it: its types are declared here,
// with the values nvFatbin.h gives them.
#ifndef FLEETJIT_PLATFORM_NVFATBIN_LIBRARY_H_
#define FLEETJIT_PLATFORM_NVFATBIN_LIBRARY_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/lazy_library.h"

namespace fleetjit {

using NvFatbinHandle = struct nvFatbinOpaque*;

inline constexpr int kNvFatbinSuccess = 0;

struct NvFatbinApi {
#define FJ_NVFATBIN(name, type) \
  using name##_fn = type;       \
  name##_fn name = nullptr;
#include "platform/nvfatbin_symbols.inc"
#undef FJ_NVFATBIN
  unsigned major = 0;
  unsigned minor = 0;
  std::string library_path;
};

// The sonames searched, in order.
inline constexpr const char* kNvFatbinSonames[] = {
    "libnvfatbin.so.13", "libnvfatbin.so.12", "libnvfatbin.so"};

// The file a load of nvFatbin would use, found without dlopen.
// `explicit_path`: a file is used as is; a folder is the only place
// searched. Empty: the folders NVRTC is searched in (LibrarySearchDirs,
// platform/nvrtc_locate.h: $LD_LIBRARY_PATH, ld.so.conf, /usr/local/cuda,
// the system's), then the folder of `nvrtc_library` (the toolkit ships it
// beside NVRTC). UNAVAILABLE names the library, every folder searched and
// what to install.
absl::StatusOr<std::string> ResolveNvFatbinLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library);

// OK for NVFATBIN_SUCCESS, else INTERNAL naming `call` with nvFatbin's own
// text for `result`.
absl::Status CheckNvFatbin(const NvFatbinApi& api, int result,
                           const char* call);

class NvFatbinLibrary {
 public:
  explicit NvFatbinLibrary(std::string path) : path_(std::move(path)) {}

  // Loads on first call (any thread; once). UNAVAILABLE when the file does
  // not load or lacks an entry point; the outcome is kept.
  absl::StatusOr<const NvFatbinApi*> Get();

 private:
  const std::string path_;
  LazyTable<NvFatbinApi> table_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_NVFATBIN_LIBRARY_H_
