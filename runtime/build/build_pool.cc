#include "runtime/build/build_pool.h"

#include <algorithm>
#include <new>
#include <utility>

namespace fleetjit {

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

BuildPool::BuildPool(int max_threads)
    : max_threads_(std::max(1, max_threads)) {}

int BuildPool::DefaultThreads() {
  int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw, 1, 8);
}

BuildPool::~BuildPool() {
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
  // A thread per queued build no idle thread will take, up to the bound.
  if (static_cast<int>(queue_.size()) > idle_ &&
      static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  }
  return job;
}

void BuildPool::Loop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      ++idle_;
      mu_.Await(absl::Condition(
          +[](BuildPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stop_ || !p->queue_.empty();
          },
          this));
      --idle_;
      if (queue_.empty()) return;  // stopping
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    if (task.job->abandoned()) {
      task.job->Finish(
          absl::CancelledError("the build was destroyed before it started"));
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
  }
}

}  // namespace fleetjit
