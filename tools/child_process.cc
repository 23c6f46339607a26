#include "tools/child_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

extern char** environ;

namespace fleetjit::cli {
namespace {

// The parent's environment with `changes` applied, built before fork() so
// the child only has to exec.
std::vector<std::string> ChildEnvironment(
    const std::vector<EnvChange>& changes) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const absl::string_view name = entry.substr(0, entry.find('='));
    bool changed = false;
    for (const EnvChange& c : changes) changed |= name == c.first;
    if (!changed) out.emplace_back(entry);
  }
  for (const auto& [name, value] : changes) {
    if (value.has_value()) out.push_back(absl::StrCat(name, "=", *value));
  }
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child, after fork(): async-signal-safe calls only until exec.
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, int out_fd) {
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(out_fd, STDERR_FILENO);
  ::execvpe(argv[0], argv, envp);
  const char* parts[] = {"fleetjit matrix: cannot run '", argv[0],
                         "': ", std::strerror(errno), "\n"};
  for (const char* p : parts) (void)!::write(STDERR_FILENO, p, std::strlen(p));
  ::_exit(127);
}

}  // namespace

std::string ChildResult::StatusText() const {
  return signal != 0 ? absl::StrCat("signal ", signal)
                     : absl::StrCat(exit_code);
}

absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     const std::vector<EnvChange>& env,
                                     std::FILE* echo, size_t tail_bytes) {
  if (argv.empty()) return absl::InvalidArgumentError("no command to run");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<std::string> args = argv;
  std::vector<std::string> environment = ChildEnvironment(env);
  const std::vector<char*> arg_ptrs = Pointers(args);
  const std::vector<char*> env_ptrs = Pointers(environment);
  if (echo != nullptr) std::fflush(echo);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    ExecChild(arg_ptrs.data(), env_ptrs.data(), fds[1]);
  }
  ::close(fds[1]);
  ChildResult result;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (echo != nullptr) {
      std::fwrite(buffer, 1, static_cast<size_t>(n), echo);
      std::fflush(echo);
    }
    result.output_tail.append(buffer, static_cast<size_t>(n));
    if (result.output_tail.size() > 2 * tail_bytes) {
      result.output_tail.erase(0, result.output_tail.size() - tail_bytes);
    }
  }
  ::close(fds[0]);
  if (result.output_tail.size() > tail_bytes) {
    result.output_tail.erase(0, result.output_tail.size() - tail_bytes);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  return result;
}

std::string LastLines(const std::string& text, int max_lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;  // ends the last line
  for (int i = 0; i < max_lines; ++i) {
    if (pos == 0) return text;
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

}  // namespace fleetjit::cli
