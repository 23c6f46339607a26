#include "runtime/builder/build_pool.h"

#include <pthread.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <set>
#include <utility>

namespace fleetjit {
namespace {

// Every live pool, for the fork handlers.
struct PoolRegistry {
  absl::Mutex mu;
  std::set<BuildPool*> pools ABSL_GUARDED_BY(mu);
};

PoolRegistry& Registry() {
  static PoolRegistry* registry = new PoolRegistry;  // never destroyed
  return *registry;
}

}  // namespace

bool BuildJob::done() const {
  absl::MutexLock lock(&mu_);
  return result_.has_value();
}

bool BuildJob::Wait(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto finished = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return result_.has_value();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&finished), timeout);
}

absl::StatusOr<ModuleRecord> BuildJob::Take() {
  absl::MutexLock lock(&mu_);
  auto finished = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return result_.has_value();
  };
  mu_.Await(absl::Condition(&finished));
  if (taken_)
    return absl::FailedPreconditionError(
        "the build's result was already taken");
  taken_ = true;
  absl::StatusOr<ModuleRecord> out = std::move(*result_);
  *result_ =
      absl::FailedPreconditionError("the build's result was already taken");
  return out;
}

void BuildJob::Finish(absl::StatusOr<ModuleRecord> result) {
  absl::MutexLock lock(&mu_);
  if (!result_.has_value()) result_ = std::move(result);
}

BuildPool::BuildPool(int max_threads) : max_threads_(std::max(1, max_threads)) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(&PrepareForkAll, &AfterForkInParentAll,
                   &AfterForkInChildAll);
  });
  absl::MutexLock lock(&Registry().mu);
  Registry().pools.insert(this);
}

int BuildPool::DefaultThreads() {
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw, 1, 8);
}

BuildPool::~BuildPool() {
  {
    absl::MutexLock lock(&Registry().mu);
    Registry().pools.erase(this);
  }
  std::deque<Task> cancelled;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cancelled.swap(queue_);
    threads.swap(threads_);
  }
  for (Task& t : cancelled) {
    t.job->Finish(absl::CancelledError(
        "the runtime was destroyed before the build started"));
  }
  for (std::thread& t : threads) t.join();
}

std::shared_ptr<BuildJob> BuildPool::Submit(
    std::function<absl::StatusOr<ModuleRecord>()> build) {
  auto job = std::make_shared<BuildJob>();
  absl::MutexLock lock(&mu_);
  if (stop_) {
    job->Finish(absl::CancelledError("the runtime is being destroyed"));
    return job;
  }
  queue_.push_back(Task{job, std::move(build)});
  MaybeStartThread();
  return job;
}

void BuildPool::MaybeStartThread() {
  // A thread per queued build no idle thread will take, up to the bound.
  // After a fork() the child starts its own here: it has none of the
  // parent's, so every queued build gets a thread again.
  while (static_cast<int>(queue_.size()) > idle_ &&
         static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
    ++idle_;  // counted until it takes a build
  }
}

bool BuildPool::OnPoolThread() const {
  const std::thread::id self = std::this_thread::get_id();
  for (const std::thread& t : threads_) {
    if (t.get_id() == self) return true;
  }
  return false;
}

void BuildPool::PrepareForkAll() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  // Held across fork(): no pool is created or destroyed meanwhile.
  Registry().mu.Lock();
  for (BuildPool* p : Registry().pools) p->PrepareFork();
}

void BuildPool::AfterForkInParentAll() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (BuildPool* p : Registry().pools) p->AfterFork(false);
  Registry().mu.Unlock();
}

void BuildPool::AfterForkInChildAll() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (BuildPool* p : Registry().pools) p->AfterFork(true);
  // Released, then made afresh: the old lock may list the parent's threads
  // as waiters, and waking one that does not exist here can leave the lock
  // waiting for it. This thread is the child's only one.
  Registry().mu.Unlock();
  new (&Registry().mu) absl::Mutex;
}

void BuildPool::PrepareFork() {
  mu_.Lock();
  forking_ = true;             // no thread takes a new build
  if (OnPoolThread()) return;  // fork() from inside a build
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](BuildPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->running_ == 0 && p->started_ == p->threads_.size();
          },
          this),
      kForkWaitLimit);
}

void BuildPool::AfterFork(bool in_child) {
  forking_ = false;
  if (in_child) {
    // The parent's threads do not exist here: forget them (joining or
    // detaching a thread this process lacks is undefined), deliberately
    // leaked. The next Submit starts the child's own.
    for (std::thread& t : threads_) {
      new std::thread(std::move(t));  // NOLINT: deliberately leaked
    }
    threads_.clear();
    idle_ = 0;
    running_ = 0;
    started_ = 0;
  }
  mu_.Unlock();
  // A fresh lock in the child, for the reason AfterForkInChildAll gives.
  if (in_child) new (&mu_) absl::Mutex;
}

void BuildPool::Loop() {
  {
    absl::MutexLock lock(&mu_);
    ++started_;
  }
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BuildPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return !p->forking_ && (p->stop_ || !p->queue_.empty());
          },
          this));
      --idle_;
      if (queue_.empty()) return;  // stopping
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    if (task.job->abandoned()) {
      task.job->Finish(
          absl::CancelledError("the build was destroyed before it started"));
      Idle();
      continue;
    }
    absl::StatusOr<ModuleRecord> result =
        absl::InternalError("build did not run");
    try {
      result = task.build();
    } catch (const std::bad_alloc&) {
      result = absl::ResourceExhaustedError("out of host memory");
    } catch (...) {
      result =
          absl::InternalError("unexpected exception in an asynchronous build");
    }
    task.job->Finish(std::move(result));
    task = Task{};  // the build's captures go before fork() may proceed
    Idle();
  }
}

void BuildPool::Idle() {
  absl::MutexLock lock(&mu_);
  --running_;
  ++idle_;
}

}  // namespace fleetjit
