// Small helpers shared by the fleetjit CLI's subcommands.
#ifndef FLEETJIT_TOOLS_CLI_UTIL_H_
#define FLEETJIT_TOOLS_CLI_UTIL_H_

#include <cstdio>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"

namespace fleetjit::cli {

// Exit codes shared by the subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNoGpu = 3;  // selftest / demo needs a GPU

// Views of strings that outlive the call using them. The const char*
// overload keeps literals from binding to a temporary std::string.
fj_str Str(const std::string& s);
fj_str Str(const char* s);
std::string JsonEscape(const std::string& s);
std::vector<std::string> SplitComma(const std::string& s);

// Prints "fleetjit: <what>: <CODE>: <message>" (plus the build log) to
// stderr, frees the status and returns true if `status` is an error.
bool Failed(fj_status* status, const char* what);

// Returns the value after flag `name` (e.g. "--target") and removes both
// from args; "" if absent. Accepts "--target=x" too.
std::string TakeFlag(std::vector<std::string>& args, const std::string& name,
                     bool* present = nullptr);
bool TakeSwitch(std::vector<std::string>& args, const std::string& name);

// Creates a runtime with defaults (env overrides apply); nullptr on error.
fj_runtime* CreateRuntime();

bool ReadFile(const std::string& path, std::string* out);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_CLI_UTIL_H_
