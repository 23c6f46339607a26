// The runtime's background worker: one thread, started on the first job,
// running jobs in order. Never detached: ~BackgroundWorker finishes the
// queue and joins, and its owner destroys it before anything its jobs use.
//
// Process exit with a runtime never destroyed: an atexit handler
// (registered once, when the first worker is created, i.e. after LLVM's
// static objects exist, so it runs before their destructors) drops every
// worker's queued jobs and waits for the one running, so no thread is
// inside LLVM while the process tears LLVM down. What was dropped is only
// lost work (see Runtime::BuildRecord). A forked child never sees the parent's
// thread: it runs its own jobs inline and drops inherited ones.
//
// fork() while a job runs: the child would inherit the locks the job held
// at that instant, in LLVM (its pass registry, taken while a first thunk
// generation registers passes), abseil and the runtime, owned by a thread
// the child does not have; the child's first thunk generation, or the
// destruction of the parent's runtime, then waits forever (fork_test hung
// so on the H200 host). So a pthread_atfork prepare handler (registered
// with the first worker) lets each worker finish the job it runs and
// start none until fork() returns (kForkWaitLimit at most, after which
// the fork goes ahead as before); the child forgets the queued jobs, the
// parent's worker resumes them. A thread that a job has just started is
// waited for too, until it parks in its loop: while it starts (its TLS,
// the allocator's per-thread state, its first lock) it holds locks of the
// C library's, the sanitizers' or abseil's that the child would inherit
// held (fork_test's ForkAsAWorkerThreadStartsLeavesTheChildWhole hung so
// under ASan in 4 runs of 5). A fork() from inside a job (say, a log
// callback) does not wait for itself. Threads that are not workers are the
// caller's: fork() while another thread is inside a fleetjit call is not
// supported.
#ifndef FLEETJIT_RUNTIME_BUILDER_BACKGROUND_WORKER_H_
#define FLEETJIT_RUNTIME_BUILDER_BACKGROUND_WORKER_H_

#include <sys/types.h>

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fleetjit {

class BackgroundWorker {
 public:
  BackgroundWorker();
  ~BackgroundWorker();  // runs the queue to its end, then joins
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Queues `job` (starting the thread on the first one). Dropped at process
  // exit; run inline in a forked child.
  void Post(std::function<void()> job);
  // Blocks until the jobs queued so far are done; releases a hold.
  void WaitIdle();
  // Tests: while held, jobs are queued but not started.
  void SetHold(bool hold);

  // How long fork() waits for a running job.
  static constexpr absl::Duration kForkWaitLimit = absl::Seconds(10);

 private:
  static void StopAllAtExit();
  static void PrepareForkAll();
  static void AfterForkInParentAll();
  static void AfterForkInChildAll();
  void StopAtExit();
  void PrepareFork();
  void AfterFork(bool in_child);
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;     // ~: drain, then end
  bool exiting_ ABSL_GUARDED_BY(mu_) = false;  // exit(): drop, end
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  bool forking_ ABSL_GUARDED_BY(mu_) =
      false;  // fork() in progress: start nothing
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // the thread reached Loop
  std::thread thread_;
  pid_t pid_ = 0;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_BUILDER_BACKGROUND_WORKER_H_
