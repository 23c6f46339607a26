// hiredis, the Redis client library, loaded with dlopen on first use.
//
// Why dlopen rather than linking: the remote cache tier is optional and
// most hosts (the GPU hosts included) have no hiredis installed. Linked,
// libfleetjit.so.1 would need libhiredis.so.0.14 at load time everywhere,
// or a copy shipped beside it; loaded lazily, a host without hiredis runs
// normally and only a configured remote tier reports UNAVAILABLE (saying
// what to install). This is how libcuda and NVRTC are loaded too, and it
// costs nothing until a remote tier is configured.
//
// The soname is pinned (libhiredis.so.0.14, Debian 12's libhiredis0.14):
// the types come from that version's <hiredis/hiredis.h>, and hiredis 1.x
// changed struct redisReply, so another major version is never loaded.
// FLEETJIT_LIBHIREDIS names another file of the same ABI.
#ifndef FLEETJIT_PLATFORM_HIREDIS_API_H_
#define FLEETJIT_PLATFORM_HIREDIS_API_H_

#include <hiredis/hiredis.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

struct HiredisApi {
#define FJ_HIREDIS(name) decltype(&::name) name = nullptr;
#include "platform/hiredis_symbols.inc"
#undef FJ_HIREDIS
};

// The process-wide table, loaded on the first call from `file` ("" =
// libhiredis.so.0.14; the runtime passes FLEETJIT_LIBHIREDIS, read by
// runtime/config.cc), thread-safe; the outcome, success or failure, is kept
// and later calls' `file` is ignored. UNAVAILABLE names the file tried and
// the package to install.
absl::StatusOr<const HiredisApi*> LoadHiredis(absl::string_view file = "");

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_HIREDIS_API_H_
