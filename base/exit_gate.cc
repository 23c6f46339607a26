#include "base/exit_gate.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fleetjit {
namespace {

// Constant-initialised: nothing runs at library load.
std::atomic<int> active{0};
std::atomic<bool> closing{false};
// The first passes released re-register the handler (bounded: atexit has a
// slot per registration, never freed).
std::atomic<int> re_registrations_left{4};

// A fork() child has none of the parent's other threads, so none of
// their passes.
void ForgetPassesInChild() { active.store(0, std::memory_order_relaxed); }

void Drain() {
  closing.store(true, std::memory_order_seq_cst);
  const auto deadline =
      std::chrono::steady_clock::now() + ExitGate::kDrainLimit;
  while (active.load(std::memory_order_seq_cst) > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// exit() runs the calling thread's thread_local destructors before any
// atexit handler (glibc's __run_exit_handlers), so a watch living in the
// main thread drains first, whoever registered exit handlers since. Only
// the main thread: another thread's thread_local destructors also run when
// that thread simply ends.
struct MainThreadWatch {
  ~MainThreadWatch() { Drain(); }
};

}  // namespace

void ExitGate::WatchCallingThread() {
  if (static_cast<pid_t>(syscall(SYS_gettid)) != getpid()) return;
  static thread_local MainThreadWatch watch;
  (void)&watch;
}

ExitGate::Pass::~Pass() {
  if (!held_) return;
  active.fetch_sub(1, std::memory_order_seq_cst);
  if (re_registrations_left.load(std::memory_order_relaxed) > 0 &&
      re_registrations_left.fetch_sub(1, std::memory_order_relaxed) > 0) {
    RunBeforeExistingExitHandlers();
  }
}

absl::StatusOr<ExitGate::Pass> ExitGate::Enter(absl::string_view what) {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, ForgetPassesInChild);
    RunBeforeExistingExitHandlers();
    return true;
  }();
  (void)registered;
  // Dekker with Drain: either it sees this pass, or this sees it closing.
  active.fetch_add(1, std::memory_order_seq_cst);
  if (closing.load(std::memory_order_seq_cst)) {
    active.fetch_sub(1, std::memory_order_seq_cst);
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": the process is exiting; not started"));
  }
  return Pass();
}

void ExitGate::RunBeforeExistingExitHandlers() {
  if (!closing.load(std::memory_order_relaxed)) atexit(Drain);
}

bool ExitGate::closed() { return closing.load(std::memory_order_seq_cst); }

}  // namespace fleetjit
