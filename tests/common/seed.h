// Seeds for the tests: every test draws fresh random inputs and prints the
// seed it drew, so a failure can be replayed. The seed source is the
// selftest's (conformance/case_gen.h), header-only, so a test need not link
// the runner to use it.
#ifndef FLEETJIT_TESTS_COMMON_SEED_H_
#define FLEETJIT_TESTS_COMMON_SEED_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "conformance/case_gen.h"

namespace fleetjit::testing {

using ::fleetjit::selftest::internal::FreshSeed;

// A generator seeded from FLEETJIT_TEST_SEED, else a fresh seed; prints the
// seed under `test_name` so FLEETJIT_TEST_SEED=N replays the run.
inline std::mt19937_64 SeededRng(const char* test_name) {
  uint64_t seed = FreshSeed();
  if (const char* s = std::getenv("FLEETJIT_TEST_SEED"))
    seed = std::strtoull(s, nullptr, 0);
  std::printf("[ seed     ] %s: FLEETJIT_TEST_SEED=%llu\n", test_name,
              static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_SEED_H_
