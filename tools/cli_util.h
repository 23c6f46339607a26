// Helpers over the C ABI shared by the fleetjit CLI's subcommands. The
// parsing and output conventions are in tools/cli_app.h.
#ifndef FLEETJIT_TOOLS_CLI_UTIL_H_
#define FLEETJIT_TOOLS_CLI_UTIL_H_

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "tools/cli_app.h"

namespace fleetjit::cli {

// Views of strings that outlive the call using them. The const char*
// overload keeps literals from binding to a temporary std::string.
fj_str Str(const std::string& s);
fj_str Str(const char* s);

// Prints FailureText to stderr, frees the status and returns true if
// `status` is an error.
bool Failed(fj_status* status, const char* what);
// "fleetjit: <what>: <CODE>: <message>\n" (the message carries the build
// log) of an error `status`, which stays the caller's.
std::string FailureText(fj_status* status, const char* what);

// "compiled", "memory hit", "disk hit", "remote hit" (fj_module_info).
const char* CacheResultName(fj_cache_result result);

// Creates a runtime from `options` (nullptr: the defaults; the FLEETJIT_*
// variables override them). On failure prints why and returns nullptr with
// *exit_code set: kExitUsage when a FLEETJIT_* variable is malformed (as
// README and docs/configuration.md promise), else kExitFailure.
fj_runtime* CreateRuntime(int* exit_code,
                          const fj_runtime_options* options = nullptr);

// Checks each of `targets` (the words of --target) with the planner's parser
// (fj_copy_plan_for_target), then against the architectures the NVRTC the
// runtime would load builds (nvrtcGetSupportedArchs; skipped where no NVRTC
// loads, since a cache may still serve). On the first unknown or
// unsupported one prints "<command>: --target <value>: <why>" and returns
// false (exit kExitUsage).
bool TargetsAreValid(const std::vector<std::string>& targets,
                     const char* command);
// TargetsAreValid's two halves: the names' form, and the NVRTC's list (for
// names whose form was checked).
bool TargetNamesAreValid(const std::vector<std::string>& targets,
                         const char* command);
bool TargetsBuildWithNvrtc(const std::vector<std::string>& targets,
                           const char* command);

// The implementation named `name` ("sync", "cp_async", "tma"), or nullopt.
std::optional<fj_copy_impl> CopyImplNamed(const std::string& name);

// The bytes of file `path`; false with errno set when it cannot be read
// (EISDIR for a directory, which a stream would read as empty).
bool ReadFile(const std::string& path, std::string* out);

// "fleetjit CLI 1.3.0" (the release: the header's major.minor and the patch
// of CMakeLists.txt) and the loaded library's version (fj_version()).
std::string VersionText();

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_CLI_UTIL_H_
