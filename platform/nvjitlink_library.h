// nvJitLink, found and loaded lazily as NVRTC is: a process that never links
// device code never loads it (it maps about 100 MB).
//
// ResolveNvJitLinkLibrary finds the file without loading it (the cache key
// names it, and a cache hit must not pay for the load); NvJitLinkLibrary
// dlopens exactly that file on the first Get(). Nothing links against
// libnvJitLink: its types are declared here, with the values nvJitLink.h
// gives them.
#ifndef FLEETJIT_PLATFORM_NVJITLINK_LIBRARY_H_
#define FLEETJIT_PLATFORM_NVJITLINK_LIBRARY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "platform/lazy_library.h"

namespace fleetjit {

using NvJitLinkHandle = struct nvJitLink*;

// nvJitLinkResult values fleetjit tells apart, and nvJitLinkInputType.
inline constexpr int kNvJitLinkSuccess = 0;
enum class NvJitLinkInput : int {
  kCubin = 1,
  kPtx = 2,
  kLtoIr = 3,
  kFatbin = 4,
  kLibrary = 6,  // an archive of device objects (libcudadevrt.a)
};

struct NvJitLinkApi {
#define FJ_NVJITLINK(name, type) \
  using name##_fn = type;        \
  name##_fn name = nullptr;
#include "platform/nvjitlink_symbols.inc"
#undef FJ_NVJITLINK
  unsigned major = 0;
  unsigned minor = 0;
  std::string library_path;
};

// The sonames searched, in order.
inline constexpr const char* kNvJitLinkSonames[] = {
    "libnvJitLink.so.13", "libnvJitLink.so.12", "libnvJitLink.so"};

// The file a load of nvJitLink would use, found without dlopen.
// `explicit_path` (FLEETJIT_NVJITLINK): a file is used as is; a folder is
// the only place searched. Empty: the folders NVRTC is searched in
// (LibrarySearchDirs, platform/nvrtc_locate.h), then the folder of
// `nvrtc_library` (nvJitLink ships beside NVRTC). UNAVAILABLE names the
// library and every folder searched.
absl::StatusOr<std::string> ResolveNvJitLinkLibrary(
    const std::string& explicit_path, const std::string& nvrtc_library);

// "nvjitlink libnvJitLink.so.13 size=N": the soname (the real file's
// versioned name when it has one) and its size, as CompilerIdentity names
// NVRTC. NOT_FOUND if the path is not a regular file.
absl::StatusOr<std::string> LinkerIdentity(const std::string& resolved_path);

// OK for NVJITLINK_SUCCESS, else INTERNAL naming `call` and the result.
absl::Status CheckNvJitLink(int result, const char* call);

class NvJitLinkLibrary {
 public:
  explicit NvJitLinkLibrary(std::string path) : path_(std::move(path)) {}

  // Loads on first call (any thread; once). UNAVAILABLE when the file does
  // not load or lacks an entry point; the outcome is kept.
  absl::StatusOr<const NvJitLinkApi*> Get();

 private:
  const std::string path_;
  LazyTable<NvJitLinkApi> table_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_NVJITLINK_LIBRARY_H_
