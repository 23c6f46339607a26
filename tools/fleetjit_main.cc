// fleetjit: the command-line front end of the runtime.
#include <cstdio>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace {

void Usage() {
  std::printf(
      "usage: fleetjit <command> [options]\n"
      "  info [--json] [--target sm_XX,...] [--impl X]   devices and copy plans\n"
      "  build [--target sm_80,...] FILE.cu [--emit ptx|cubin] [-o DIR] [--impl X]\n"
      "                                        build for the GPU or named targets\n"
      "  demo [--target ...]                   device report + bundled example\n"
      "  selftest [--json]                     conformance matrix on the live GPU\n"
      "  cache stats|ls|clear|verify [--json]  the module cache\n"
      "  version\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    Usage();
    return args.empty() ? fleetjit::cli::kExitUsage : 0;
  }
  std::string command = args[0];
  args.erase(args.begin());
  using namespace fleetjit::cli;  // NOLINT
  if (command == "info") return RunInfo(args);
  if (command == "build") return RunBuild(args);
  if (command == "demo") return RunDemo(args);
  if (command == "selftest") return RunSelftest(args);
  if (command == "cache") return fleetjit::RunCacheCommand(args, stdout);
  if (command == "version") {
    uint32_t v = fj_version();
    std::printf("fleetjit %u.%u (header %d.%d)\n", v >> 16, v & 0xffff, FJ_VERSION_MAJOR,
                FJ_VERSION_MINOR);
    return 0;
  }
  std::fprintf(stderr, "fleetjit: unknown command '%s'\n", command.c_str());
  Usage();
  return kExitUsage;
}
