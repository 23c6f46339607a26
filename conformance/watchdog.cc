#include "conformance/watchdog.h"

#include <cstdio>

namespace fleetjit::selftest::internal {

Watchdog::Watchdog() : thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Enter(std::string label) {
  std::lock_guard<std::mutex> l(mu_);
  label_ = std::move(label);
  since_ = Clock::now();
  active_ = true;
  warned_ = 0;
}

void Watchdog::Leave() {
  std::lock_guard<std::mutex> l(mu_);
  active_ = false;
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::seconds(1));
    if (stop_ || !active_) continue;
    const double s =
        std::chrono::duration<double>(Clock::now() - since_).count();
    if (s >= 15.0 * (warned_ + 1)) {
      ++warned_;
      std::fprintf(stderr,
                   "fleetjit selftest: still waiting after %.0f s for %s "
                   "(a barrier or group wait that never completes is a "
                   "copy-layer bug)\n",
                   s, label_.c_str());
      std::fflush(stderr);
    }
  }
}

std::mutex mu_;

}  // namespace fleetjit::selftest::internal
