// Child processes for the tests that need a second process (a fresh
// runtime, a crash, a cache shared across processes): the environment a
// child gets, a posix_spawn of it, and its exit code.
#ifndef FLEETJIT_TESTS_COMMON_PROCESS_H_
#define FLEETJIT_TESTS_COMMON_PROCESS_H_

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fleetjit::testing {

// This process's environment with `env`'s entries ("NAME=value")
// replacing same-named ones, less the variables named in `drop`.
inline std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& env,
    const std::vector<std::string>& drop = {}) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const std::string& override_entry : env) {
      const std::string name =
          override_entry.substr(0, override_entry.find('=') + 1);
      replaced |= entry.compare(0, name.size(), name) == 0;
    }
    for (const std::string& name : drop)
      replaced |= entry.rfind(name + "=", 0) == 0;
    if (!replaced) environment.push_back(entry);
  }
  environment.insert(environment.end(), env.begin(), env.end());
  return environment;
}

// Starts `argv` (argv[0] a path) with ChildEnvironment(env, drop), and
// `actions` (may be null) for its file descriptors. Returns the pid, or -1.
inline pid_t Spawn(const std::vector<std::string>& argv,
                   const std::vector<std::string>& env = {},
                   const std::vector<std::string>& drop = {},
                   const posix_spawn_file_actions_t* actions = nullptr) {
  const std::vector<std::string> environment = ChildEnvironment(env, drop);
  std::vector<char*> args, envp;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : environment) {
    envp.push_back(const_cast<char*>(e.c_str()));
  }
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0].c_str(), actions, nullptr, args.data(),
                    envp.data()) != 0) {
    return -1;
  }
  return pid;
}

// A waitpid status as an exit code: the code, 128 + signal, or -1.
inline int ExitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// The exit code of `pid`, or 128 + signal; -1 when it cannot be waited for.
inline int Wait(pid_t pid) {
  if (pid <= 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return ExitCode(status);
}

// What WaitWithin returns for a process still running at its limit.
constexpr int kWaitTimedOut = -2;

// Wait() for at most `limit`. A process still running then is killed and
// reaped, and the result is kWaitTimedOut. With `stacks` it first gets
// SIGQUIT and 15 s to print every thread's stack (tests/common/stack_dump.cc,
// which a forked child inherits), so a hang shows where it hung.
inline int WaitWithin(pid_t pid, std::chrono::milliseconds limit,
                      bool stacks = false) {
  if (pid <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return ExitCode(status);
    if (done < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (stacks) {
    std::fprintf(stderr, "process %d ran past its limit; its threads:\n",
                 static_cast<int>(pid));
    ::kill(pid, SIGQUIT);
    std::this_thread::sleep_for(std::chrono::seconds(15));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return kWaitTimedOut;
}

// Runs `child` (returning an exit code) in a forked child and waits for it
// as WaitWithin(limit, stacks=true) does: its exit code, 128 + signal, or
// kWaitTimedOut for a child that hung (its stacks printed, then killed), so
// a hang fails the test with the stacks instead of running into CTest's
// timeout with nothing to show. The default limit is far above the usual
// (fork_test's children take 0.3 s, under ASan too).
template <typename Fn>
int InChild(Fn child,
            std::chrono::milliseconds limit = std::chrono::minutes(2)) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  return WaitWithin(pid, limit, /*stacks=*/true);
}

// The path of this test binary (to start itself as a child).
inline std::string SelfExecutable() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_PROCESS_H_
