#include "runtime/builder/background_worker.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "runtime/cache/module_cache.h"

namespace fleetjit {
namespace {

struct WorkerRegistry {
  absl::Mutex mu;
  std::set<BackgroundWorker*> workers ABSL_GUARDED_BY(mu);
};

WorkerRegistry& Registry() {
  static WorkerRegistry* registry = new WorkerRegistry();  // never freed
  return *registry;
}

}  // namespace

BackgroundWorker::BackgroundWorker() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    std::atexit(&StopAllAtExit);
    // A queued job may hold a build's key lock: the disk cache's handlers
    // must run inside these (its list locked after the workers park,
    // unlocked in the child before the child drops the queued jobs).
    DiskCache::RegisterForkHandlers();
    pthread_atfork(&PrepareForkAll, &AfterForkInParentAll,
                   &AfterForkInChildAll);
  });
  absl::MutexLock lock(&Registry().mu);
  Registry().workers.insert(this);
}

BackgroundWorker::~BackgroundWorker() {
  {
    absl::MutexLock lock(&Registry().mu);
    Registry().workers.erase(this);
  }
  if (!thread_.joinable()) return;
  if (getpid() != pid_) {
    // A forked child: the thread is the parent's. Do not join or detach
    // a thread this process does not have; forget it.
    new std::thread(std::move(thread_));  // NOLINT: deliberately leaked
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    forking_ = false;  // out of the registry: no fork handler will clear it
  }
  thread_.join();
}

void BackgroundWorker::Post(std::function<void()> job) {
  {
    absl::MutexLock lock(&mu_);
    if (exiting_) return;
    if (!thread_.joinable() || getpid() == pid_) {
      queue_.push_back(std::move(job));
      if (!thread_.joinable()) {
        pid_ = getpid();
        thread_ = std::thread([this] { Loop(); });
      }
      return;
    }
  }
  ModuleCache::NoSiblingWaitScope no_sibling_wait;
  job();  // forked child: no worker thread here
}

void BackgroundWorker::WaitIdle() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable() && getpid() != pid_) return;
  hold_ = false;
  mu_.Await(absl::Condition(
      +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
        return w->exiting_ || (w->queue_.empty() && !w->running_);
      },
      this));
}

void BackgroundWorker::SetHold(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_ = hold;
}

void BackgroundWorker::StopAllAtExit() {
  absl::MutexLock lock(&Registry().mu);
  for (BackgroundWorker* w : Registry().workers) w->StopAtExit();
}

void BackgroundWorker::StopAtExit() {
  absl::MutexLock lock(&mu_);
  exiting_ = true;
  queue_.clear();
  if (getpid() != pid_) return;
  mu_.Await(absl::Condition(
      +[](BackgroundWorker* w)
           ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return !w->running_; },
      this));
}

// fork(): every worker finishes its job first (see the header). The
// registry lock is not held across fork(), so a runtime created meanwhile
// on another thread has an idle worker (its thread starts with a job).
void BackgroundWorker::PrepareForkAll() {
  absl::MutexLock lock(&Registry().mu);
  for (BackgroundWorker* w : Registry().workers) w->PrepareFork();
}

void BackgroundWorker::AfterForkInParentAll() {
  absl::MutexLock lock(&Registry().mu);
  for (BackgroundWorker* w : Registry().workers) w->AfterFork(false);
}

void BackgroundWorker::AfterForkInChildAll() {
  absl::MutexLock lock(&Registry().mu);
  for (BackgroundWorker* w : Registry().workers) w->AfterFork(true);
}

void BackgroundWorker::PrepareFork() {
  absl::MutexLock lock(&mu_);
  if (!thread_.joinable() || getpid() != pid_) return;         // no thread here
  if (thread_.get_id() == std::this_thread::get_id()) return;  // from a job
  forking_ = true;
  // Parked once this returns: it waits in Loop's Await, holding nothing. A
  // thread still starting has not parked yet (see the header).
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->started_ && !w->running_;
          },
          this),
      kForkWaitLimit);
}

void BackgroundWorker::AfterFork(bool in_child) {
  absl::MutexLock lock(&mu_);
  forking_ = false;
  // The child has no worker thread: the parent's queued jobs are dropped
  // (and Loop's condition stays false for the thread the child lacks).
  if (in_child && thread_.joinable()) queue_.clear();
}

void BackgroundWorker::Loop() {
  // Jobs never wait for another process's build: this queue holds the jobs
  // that release this process's build locks (ModuleCache, DiskCache).
  ModuleCache::NoSiblingWaitScope no_sibling_wait;
  absl::MutexLock lock(&mu_);
  started_ = true;
  for (;;) {
    mu_.Await(absl::Condition(
        +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return w->exiting_ ||
                 (!w->forking_ &&
                  (w->stop_ || (!w->hold_ && !w->queue_.empty())));
        },
        this));
    if (exiting_ || queue_.empty()) return;  // empty: stop_ and drained
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    mu_.Unlock();
    job();
    job = nullptr;
    mu_.Lock();
    running_ = false;
  }
}

}  // namespace fleetjit
