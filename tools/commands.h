// The fleetjit CLI's subcommands. Each takes the words after its name,
// parses them with CLI11 (tools/cli_app.h) and returns the exit code.
#ifndef FLEETJIT_TOOLS_COMMANDS_H_
#define FLEETJIT_TOOLS_COMMANDS_H_

#include <cstdio>
#include <string>
#include <vector>

namespace fleetjit::cli {

int RunInfo(std::vector<std::string> args);
int RunBuild(std::vector<std::string> args);
int RunDemo(std::vector<std::string> args);
int RunSelftest(std::vector<std::string> args);
int RunMatrix(std::vector<std::string> args);
int RunBench(std::vector<std::string> args);
int RunTune(std::vector<std::string> args);  // tools/tune_command.cc

// "glibc >= 2.36, libstdc++ >= ...": what the shipped libraries need
// (tools/floor.cc).
const char* LibraryFloor();

}  // namespace fleetjit::cli

// Owned by tools/cache_command.cc.
namespace fleetjit {
int RunCacheCommand(const std::vector<std::string>& args, std::FILE* out);
}

#endif  // FLEETJIT_TOOLS_COMMANDS_H_
