// The circuit breaker on a fake clock: opens after N consecutive failures,
// refuses during the cooldown, lets one probe through, closes on success.
#include "runtime/cache/circuit_breaker.h"

#include "gtest/gtest.h"

namespace fleetjit {
namespace {

TEST(CircuitBreakerTest, OpensProbesAndCloses) {
  absl::Time now = absl::UnixEpoch();
  CircuitBreaker b(3, absl::Seconds(5), [&] { return now; });
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(b.Allow());
    b.Record(false);
  }
  ASSERT_TRUE(b.Allow());
  b.Record(true);  // a success resets the count
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(b.Allow());
    b.Record(false);
  }
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(b.opens(), 1u);
  EXPECT_FALSE(b.Allow());
  now += absl::Seconds(4);
  EXPECT_FALSE(b.Allow());
  now += absl::Seconds(1);
  EXPECT_EQ(b.state(), CircuitBreaker::State::kHalfOpen);
  ASSERT_TRUE(b.Allow());   // the probe
  EXPECT_FALSE(b.Allow());  // only one at a time
  b.Record(false);          // probe failed: open again, new cooldown
  EXPECT_EQ(b.state(), CircuitBreaker::State::kOpen);
  EXPECT_EQ(b.opens(), 2u);
  EXPECT_FALSE(b.Allow());
  now += absl::Seconds(5);
  ASSERT_TRUE(b.Allow());
  b.Record(true);
  EXPECT_EQ(b.state(), CircuitBreaker::State::kClosed);
  EXPECT_TRUE(b.Allow());
  b.Record(true);
}

}  // namespace
}  // namespace fleetjit
