// fleetjit: the command-line front end of the runtime.
//
// `fleetjit <command> [options]`; every command answers --help. The top
// level only dispatches: `--help`/`help [command]`, `--version`/`version`,
// and the commands of kCommands, each of which parses its own flags.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

int RunCache(std::vector<std::string> args) {
  return fleetjit::RunCacheCommand(args, stdout);
}

struct Command {
  const char* name;
  const char* summary;
  int (*run)(std::vector<std::string> args);
};

constexpr Command kCommands[] = {
    {"info", "devices and copy plans (or the plan of named targets)", RunInfo},
    {"build", "build FILE.cu for the GPU or named targets (warms the cache)",
     RunBuild},
    {"demo", "device report + the bundled examples", RunDemo},
    {"selftest", "copy-layer conformance matrix on each GPU (--device)",
     RunSelftest},
    {"matrix", "run your test command under every copy implementation/target",
     RunMatrix},
    {"cache", "the module cache: stats, ls, clear, verify", RunCache},
    {"bench", "copy|launch|build: this node's figures next to raw CUDA/NVRTC",
     RunBench},
    {"tune",
     "tune FILE.cu over --space SPACE.json (or print the stored result)",
     RunTune},
};

void Usage(std::FILE* out) {
  std::fprintf(out, "usage: fleetjit <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-9s %s\n", c.name, c.summary);
  }
  std::fprintf(out,
               "  %-9s the CLI's and the library's versions (also --version)\n"
               "\n'fleetjit <command> --help' shows a command's options.\n",
               "version");
}

}  // namespace
}  // namespace fleetjit::cli

int main(int argc, char** argv) {
  using namespace fleetjit::cli;  // NOLINT
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    Usage(stderr);
    return kExitUsage;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (command == "-h" || command == "--help" ||
      (command == "help" && args.empty())) {
    Usage(stdout);
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    std::fputs(VersionText().c_str(), stdout);
    return kExitOk;
  }
  const bool help = command == "help";
  const std::string name = help ? args[0] : command;
  for (const Command& c : kCommands) {
    if (name == c.name) {
      return help ? c.run({"--help"}) : c.run(std::move(args));
    }
  }
  std::fprintf(stderr, "fleetjit: unknown command '%s'\n", name.c_str());
  Usage(stderr);
  return kExitUsage;
}
