// Finding NVRTC and naming it, without loading it.
//
// The cache key must name the compiler (a different NVRTC can emit a
// different image), but a cache hit must not pay for loading NVRTC: dlopen
// of libnvrtc plus nvrtcVersion() costs milliseconds and maps tens of MB,
// and on a GPU host that serves from a pre-filled cache NVRTC may not even
// be installed. So the identity comes from the library file the loader
// would open: its version (from the fully versioned file name the soname
// link points to, or else from the libnvrtc-builtins.so.MAJOR.MINOR that
// ships beside it) and its size in bytes. The same package gives the same
// name and size on every machine, so a cache directory copied between
// hosts keeps hitting; a different build (even a patch release that kept
// the file name) almost surely differs in size. Hashing the file's content
// would be exact but costs tens of milliseconds per process for a library of
// ~100 MB; the modification time is not used because copies and reinstalls
// change it.
#ifndef FLEETJIT_PLATFORM_NVRTC_LOCATE_H_
#define FLEETJIT_PLATFORM_NVRTC_LOCATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fleetjit {

// The file a load of NVRTC would use, found without dlopen: `explicit_path`
// if non-empty (UNAVAILABLE if it is not a readable file), else the first of
// libnvrtc.so.13, then libnvrtc.so.12, in the directories of
// $LD_LIBRARY_PATH, those listed in /etc/ld.so.conf.d/*.conf,
// /usr/local/cuda/lib64, /usr/local/cuda/lib and the standard library
// directories. The runtime's NVRTC loader dlopens exactly this path.
// UNAVAILABLE (a missing dependency, as fleetjit.h's FJ_UNAVAILABLE says)
// lists where it looked and what to install.
absl::StatusOr<std::string> ResolveNvrtcLibrary(
    const std::string& explicit_path);

// The folders ResolveNvrtcLibrary searches, in order (also where nvJitLink
// is looked for: platform/nvjitlink_library.h).
std::vector<std::string> LibrarySearchDirs();

// The compiler identity of a resolved NVRTC library, e.g.
// "nvrtc 13.0.88 libnvrtc.so.13 size=123456789": the version (from the
// fully versioned real file name, else from the sibling
// libnvrtc-builtins.so.MAJOR.MINOR, else the soname's major only), the
// soname (so that an explicit path to the versioned file and the soname link
// give the same identity), and the real file's size. NOT_FOUND if the path
// does not name a regular file.
absl::StatusOr<std::string> CompilerIdentity(
    const std::string& resolved_nvrtc_path);

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_NVRTC_LOCATE_H_
