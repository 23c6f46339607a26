// A realistic session over the C ABI against the fake CUDA driver
// (tests/common/fake_cuda) with three devices (0 and 1 joined by P2P, 2
// reached through the host: the caller sets that up): create a runtime,
// report the device, allocate, build (compiled, from the disk cache, and an
// imported image), load and launch kernels (one with a tensor parameter),
// copy every way (sync and async, fj_copy within a GPU, from a peer and
// staged through the host), enable and disable peer access, prefetch into a
// peer's L2, use its own stream and a wrapped one, and destroy everything.
// The driver fault tests run it once cleanly to count the driver calls, then
// once per call with that call failing.
#ifndef FLEETJIT_TESTS_HARDENING_DRIVER_SCENARIO_H_
#define FLEETJIT_TESTS_HARDENING_DRIVER_SCENARIO_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"

namespace fleetjit::testing {

// The path of libfj_fake_cuda.so (beside the test's build tree).
std::string FakeDriverPath();

// A step that failed: the C ABI call, its status and the driver call the
// status names ("cuda_call" detail; "" when it names none).
struct StepFailure {
  std::string step;
  fj_code code = FJ_OK;
  std::string message;
  std::string cuda_call;
};

struct ScenarioResult {
  std::vector<StepFailure> failures;
  std::vector<std::string> log_lines;  // the runtime's Logger
  std::string fired_in;  // the step during which the fake's fault fired
  // Each step, with every entry point's call count at its end (indexed as
  // fjfake_symbol_name): which step made a given call.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> step_calls;
  bool data_checked = false;  // every copy ran and was compared
  std::string data_error;     // a mismatch, if any
  int steps = 0;
};

// Runs the session with its disk cache in `cache_dir`. Inputs are drawn
// from `rng`; outputs are poisoned before each copy and compared after.
ScenarioResult RunDriverScenario(const std::string& cache_dir,
                                 std::mt19937_64& rng);

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_HARDENING_DRIVER_SCENARIO_H_
