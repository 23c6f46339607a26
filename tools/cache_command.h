// `fleetjit cache stats|ls|clear|verify|export [--json] [--dir DIR]`: inspect
// and manage the module cache's disk directory, and export it as a bundle.
//
//   stats   entries and bytes on disk, the cap, and this process's counters
//           (a fresh process has served nothing: a runtime's own counters
//           come from fj_cache_stats_get)
//   ls      every entry: digest, target, copy implementation, size, last
//           use, compiler, and any problem the cheap checks find
//   verify  ls with full checks (checksum, payload, key hash); exit 1 if
//           any entry is bad (the runtime deletes and rebuilds such entries
//           when it meets them)
//   clear   delete every entry
//   export FILE [--target LIST]
//           write the entries (modules and tuning results; not precompiled
//           headers) into one bundle for servers (cache_bundle.h), signed
//           with the fleet key when one is set; exit 1 if an entry had to
//           be skipped (named on stderr)
//
// ls and verify with --bundle FILE list a bundle's entries instead, checked
// as a runtime checks them.
//
// The directory is --dir, else the runtime's default (FLEETJIT_CACHE_DIR,
// XDG_CACHE_HOME/fleetjit, ~/.cache/fleetjit). The cap and the directory
// come from the runtime's own parser of the FLEETJIT_* variables
// (ApplyEnvironment); a malformed value is reported, never ignored.
#ifndef FLEETJIT_TOOLS_CACHE_COMMAND_H_
#define FLEETJIT_TOOLS_CACHE_COMMAND_H_

#include <cstdio>
#include <string>
#include <vector>

namespace fleetjit {

// `args` are the words after "cache". Writes to `out` (--help too; errors
// to stderr) and returns the exit code: 0 ok, 1 failure or bad entries,
// 2 usage or a malformed FLEETJIT_* variable.
int RunCacheCommand(const std::vector<std::string>& args, std::FILE* out);

}  // namespace fleetjit

#endif  // FLEETJIT_TOOLS_CACHE_COMMAND_H_
