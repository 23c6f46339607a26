// Internal to the conformance runner: a hung barrier or group wait never
// returns from the stream synchronisation; the watchdog says which case it
// was, on stderr, every 15 seconds while one launch is pending.
#ifndef FLEETJIT_CONFORMANCE_WATCHDOG_H_
#define FLEETJIT_CONFORMANCE_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace fleetjit::selftest::internal {

using Clock = std::chrono::steady_clock;

// Starts its thread on construction and joins it on destruction.
class Watchdog {
 public:
  Watchdog();
  ~Watchdog();
  // Marks the start of a wait on the case `label`.
  void Enter(std::string label);
  // Marks its end.
  void Leave();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, active_ = false;
  int warned_ = 0;
  std::string label_;
  Clock::time_point since_;
  std::thread thread_;
};

}  // namespace fleetjit::selftest::internal

#endif  // FLEETJIT_CONFORMANCE_WATCHDOG_H_
