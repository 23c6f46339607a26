// Runs a command as a child process with a few environment variables
// changed, and keeps the tail of what it printed: what `fleetjit matrix`
// needs of each variant.
#ifndef FLEETJIT_TOOLS_CHILD_PROCESS_H_
#define FLEETJIT_TOOLS_CHILD_PROCESS_H_

#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace fleetjit::cli {

// A variable to set (value) or to remove from the child's environment
// (nullopt).
using EnvChange = std::pair<std::string, std::optional<std::string>>;

struct ChildResult {
  int exit_code = -1;       // the exit status, or -1 when killed by a signal
  int signal = 0;           // the signal that ended it, else 0
  double seconds = 0;       // wall time
  std::string output_tail;  // the last bytes of stdout and stderr, merged
  bool passed() const { return exit_code == 0; }
  // "0", "1", "signal 11".
  std::string StatusText() const;
};

// Runs argv[0] (searched in PATH) with `argv`, the parent's environment
// plus `env`, stdin inherited and stdout + stderr merged into a pipe. What
// the child prints is copied to `echo` as it comes (unless null), and its
// last `tail_bytes` bytes are kept. A command that cannot be started exits
// 127 with the reason in its output, like a shell's. An error only when no
// child could be created.
absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     const std::vector<EnvChange>& env,
                                     std::FILE* echo, size_t tail_bytes);

// The last `max_lines` lines of `text`.
std::string LastLines(const std::string& text, int max_lines);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_CHILD_PROCESS_H_
