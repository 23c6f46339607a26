#include "runtime/cache/circuit_breaker.h"

#include <algorithm>
#include <utility>

namespace fleetjit {

CircuitBreaker::CircuitBreaker(int failures_to_open, absl::Duration cooldown,
                               std::function<absl::Time()> now)
    : failures_to_open_(std::max(1, failures_to_open)),
      cooldown_(cooldown),
      now_(std::move(now)) {}

bool CircuitBreaker::Allow() {
  absl::MutexLock lock(&mu_);
  switch (state_) {
    case State::kClosed:
      return true;
    case State::kOpen:
      if (Now() - opened_at_ < cooldown_) return false;
      state_ = State::kHalfOpen;
      probe_in_flight_ = true;
      return true;
    case State::kHalfOpen:
      if (probe_in_flight_) return false;
      probe_in_flight_ = true;
      return true;
  }
  return false;
}

void CircuitBreaker::Record(bool success) {
  absl::MutexLock lock(&mu_);
  if (success) {
    state_ = State::kClosed;
    consecutive_failures_ = 0;
    probe_in_flight_ = false;
    return;
  }
  ++consecutive_failures_;
  if (state_ == State::kHalfOpen ||
      (state_ == State::kClosed &&
       consecutive_failures_ >= failures_to_open_)) {
    state_ = State::kOpen;
    opened_at_ = Now();
    probe_in_flight_ = false;
    ++opens_;
  }
}

CircuitBreaker::State CircuitBreaker::state() const {
  absl::MutexLock lock(&mu_);
  // An open breaker whose cooldown has passed lets the next call probe.
  if (state_ == State::kOpen && Now() - opened_at_ >= cooldown_) {
    return State::kHalfOpen;
  }
  return state_;
}

uint64_t CircuitBreaker::opens() const {
  absl::MutexLock lock(&mu_);
  return opens_;
}

const char* CircuitBreakerStateName(CircuitBreaker::State state) {
  switch (state) {
    case CircuitBreaker::State::kClosed:
      return "closed";
    case CircuitBreaker::State::kOpen:
      return "open";
    case CircuitBreaker::State::kHalfOpen:
      return "half-open";
  }
  return "?";
}

}  // namespace fleetjit
