// The conventions every `fleetjit` subcommand follows, in one place:
//
//   - Flags are parsed by CLI11 (<CLI/CLI.hpp>). Each subcommand builds a
//     CLI::App named "fleetjit <command>" and hands it its words through
//     ParseCommandLine(), so `--help` prints that command's options on
//     stdout and exits 0, and a bad flag or value is named on stderr and
//     exits 2 (kExitUsage).
//   - JSON output is built as a nlohmann::ordered_json (keys keep their
//     insertion order) and printed with DumpJson(), which replaces invalid
//     UTF-8 (paths are bytes, not text) with U+FFFD: the output is always
//     valid UTF-8 and valid JSON.
//
// Example:
//   CLI::App app("List the widgets.", "fleetjit widgets");
//   bool json = false;
//   app.add_flag("--json", json, "print one JSON object");
//   if (auto rc = ParseCommandLine(app, args)) return *rc;
//   nlohmann::ordered_json j = {{"widgets", 3}};
//   if (json) std::printf("%s\n", DumpJson(j).c_str());
//
// Nothing here calls the C ABI, so cache_command.cc's test can link it
// without libfleetjit.so.1.
#ifndef FLEETJIT_TOOLS_CLI_APP_H_
#define FLEETJIT_TOOLS_CLI_APP_H_

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fleetjit::cli {

// Exit codes shared by the subcommands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;  // bad flag, value or configuration
inline constexpr int kExitNoGpu = 3;  // the command needs a GPU

// Parses `args` (the words after the subcommand's name) into `app`.
// Returns the exit code when the command must stop now: kExitOk after
// printing the help to `help_out` (--help), kExitUsage after naming the bad
// argument on stderr. Returns nullopt when the command should run.
std::optional<int> ParseCommandLine(CLI::App& app,
                                    std::vector<std::string> args,
                                    std::FILE* help_out = stdout);

// `j` as one line of JSON; invalid UTF-8 in strings becomes U+FFFD.
std::string DumpJson(const nlohmann::ordered_json& j);

// Splits "a,b,,c" into {"a", "b", "c"}.
std::vector<std::string> SplitComma(const std::string& s);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_CLI_APP_H_
