// Runs the built `fleetjit` binary (build/bin/fleetjit, found beside the
// test binary first: tests/common/test_paths.h) as a child process and
// captures its exit code, stdout and stderr separately.
#ifndef FLEETJIT_TESTS_TOOLS_CLI_PROCESS_H_
#define FLEETJIT_TESTS_TOOLS_CLI_PROCESS_H_

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/test_paths.h"

namespace fleetjit::testing {

struct CliRun {
  int code = -1;  // exit status; -1 if it did not exit normally
  std::string out, err;
};

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base ? base : "/tmp") + "/fjcli.XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string CliPath() {
  return BesideExecutable("../bin/fleetjit", FJ_CLI_PATH);
}

// Runs `fleetjit args...` with `env` set (value) or removed (nullopt) in
// its environment.
inline CliRun RunCli(
    const std::vector<std::string>& args,
    const std::vector<std::pair<std::string, std::optional<std::string>>>& env =
        {}) {
  ScratchDir dir;
  const std::string out_path = dir.Sub("out"), err_path = dir.Sub("err");
  std::vector<std::string> argv = {CliPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int out =
        ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err =
        ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    for (const auto& [name, value] : env) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
    std::vector<char*> p;
    for (std::string& a : argv) p.push_back(a.data());
    p.push_back(nullptr);
    ::execv(p[0], p.data());
    ::_exit(126);
  }
  CliRun run;
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    run.code = WEXITSTATUS(status);
  }
  run.out = Slurp(out_path);
  run.err = Slurp(err_path);
  return run;
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_TOOLS_CLI_PROCESS_H_
