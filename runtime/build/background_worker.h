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
#ifndef FLEETJIT_RUNTIME_BUILD_BACKGROUND_WORKER_H_
#define FLEETJIT_RUNTIME_BUILD_BACKGROUND_WORKER_H_

#include <sys/types.h>

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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

 private:
  static void StopAllAtExit();
  void StopAtExit();
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;     // ~: drain, then end
  bool exiting_ ABSL_GUARDED_BY(mu_) = false;  // exit(): drop, end
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  pid_t pid_ = 0;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_BUILD_BACKGROUND_WORKER_H_
