// A circuit breaker for calls to a remote service that may be slow or gone.
//
// Closed: calls go out. After `failures_to_open` consecutive failures it
// opens: calls are refused at once (Allow() is false) for `cooldown`. Then
// it is half-open: one caller gets to try (a probe) while the others are
// still refused; the probe's success closes the breaker, its failure opens
// it for another cooldown. So a dead server costs each caller nothing once
// the breaker is open, and one bounded call per cooldown to notice its
// return.
//
//   if (!breaker.Allow()) return Skipped();
//   absl::Status s = CallRemote();   // bounded by its own timeout
//   breaker.Record(s.ok());
//
// Thread-safe. Every Allow() that returned true must be followed by one
// Record().
#ifndef FLEETJIT_RUNTIME_CACHE_CIRCUIT_BREAKER_H_
#define FLEETJIT_RUNTIME_CACHE_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace fleetjit {

class CircuitBreaker {
 public:
  enum class State { kClosed, kOpen, kHalfOpen };

  // `now` (tests) replaces the clock.
  CircuitBreaker(int failures_to_open, absl::Duration cooldown,
                 std::function<absl::Time()> now = nullptr);

  bool Allow();
  void Record(bool success);

  State state() const;
  uint64_t opens() const;  // times it went from closed/half-open to open

 private:
  absl::Time Now() const { return now_ ? now_() : absl::Now(); }

  const int failures_to_open_;
  const absl::Duration cooldown_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kClosed;
  int consecutive_failures_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time opened_at_ ABSL_GUARDED_BY(mu_);
  bool probe_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t opens_ ABSL_GUARDED_BY(mu_) = 0;
};

const char* CircuitBreakerStateName(CircuitBreaker::State state);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_CIRCUIT_BREAKER_H_
