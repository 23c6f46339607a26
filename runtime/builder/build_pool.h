// Builds that do not block the caller (fj_module_build_async): a bounded
// pool of threads owned by the runtime runs them, each through the same
// ModuleBuilder::BuildRecord as a blocking build, so the module cache's single
// flight holds across both (64 callers of one source, blocking or not,
// compile once).
//
//   std::shared_ptr<BuildJob> job = pool.Submit([=] { return BuildRecord(spec);
//   }); job->Wait(absl::InfiniteDuration()); absl::StatusOr<ModuleRecord>
//   record = job->Take();  // once
//
// A job whose every holder gave up interest (Abandon) before it started is
// skipped; one already running finishes and its result is dropped (what it
// built stays in the module cache). ~BuildPool cancels the queued jobs
// (CANCELLED) and joins the running ones: a compile cannot be interrupted,
// so destruction waits at most for the builds in progress.
//
// fork(): a child inherits every lock a running build holds (NVRTC's, the
// module cache's, LLVM's) but not the thread that would release it, so a
// build in the child would wait forever. A pthread_atfork prepare handler
// (registered with the first pool) therefore stops every pool from starting
// builds and waits for the running ones to finish (kForkWaitLimit at most,
// after which the fork goes ahead as before), and holds the pools' locks
// across fork() so none is inherited mid-change. In the parent the pools
// resume. In the child the pools have no threads: they forget the parent's
// and start their own on the next Submit, which also runs the builds the
// parent had queued (their jobs finish in the child's memory as usual).
// Threads still starting are waited for until they reach their loop, for
// the reason background_worker.h gives. A fork() from inside a build (a log
// callback, say) does not wait for itself.
#ifndef FLEETJIT_RUNTIME_BUILDER_BUILD_POOL_H_
#define FLEETJIT_RUNTIME_BUILDER_BUILD_POOL_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/load/module.h"

namespace fleetjit {

// The shared state of one asynchronous build.
class BuildJob {
 public:
  // True once the result is in.
  bool done() const;
  // Waits up to `timeout` (absl::InfiniteDuration(): forever); true if done.
  bool Wait(absl::Duration timeout) const;
  // Waits, then hands over the result; FAILED_PRECONDITION on a second call.
  absl::StatusOr<ModuleRecord> Take();
  // The caller lost interest: skipped if not started yet.
  void Abandon() { abandoned_.store(true, std::memory_order_relaxed); }
  bool abandoned() const { return abandoned_.load(std::memory_order_relaxed); }

  void Finish(absl::StatusOr<ModuleRecord> result);

 private:
  mutable absl::Mutex mu_;
  std::optional<absl::StatusOr<ModuleRecord>> result_ ABSL_GUARDED_BY(mu_);
  bool taken_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> abandoned_{false};
};

class BuildPool {
 public:
  // At most `max_threads` builds run at once; threads start on demand.
  explicit BuildPool(int max_threads);
  ~BuildPool();  // cancels what is queued, joins what runs
  BuildPool(const BuildPool&) = delete;
  BuildPool& operator=(const BuildPool&) = delete;

  // The default bound: min(hardware threads, 8), at least 1.
  static int DefaultThreads();

  // Queues `build`; the returned job receives its result.
  std::shared_ptr<BuildJob> Submit(
      std::function<absl::StatusOr<ModuleRecord>()> build);

  // How long fork() waits for the running builds.
  static constexpr absl::Duration kForkWaitLimit = absl::Seconds(30);

 private:
  struct Task {
    std::shared_ptr<BuildJob> job;
    std::function<absl::StatusOr<ModuleRecord>()> build;
  };
  void Loop();
  // A thread for the queue when no idle one will take it (mu_ held).
  void MaybeStartThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OnPoolThread() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A build ended: the thread is idle again.
  void Idle();

  // The pthread_atfork handlers, over every live pool.
  static void PrepareForkAll();
  static void AfterForkInParentAll();
  static void AfterForkInChildAll();
  // Returns with mu_ held; the After* handlers release it.
  void PrepareFork() ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void AfterFork(bool in_child) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const int max_threads_;
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int running_ ABSL_GUARDED_BY(mu_) = 0;       // builds in progress
  bool forking_ ABSL_GUARDED_BY(mu_) = false;  // fork() in progress
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  size_t started_ ABSL_GUARDED_BY(mu_) = 0;  // threads that reached Loop
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_BUILDER_BUILD_POOL_H_
