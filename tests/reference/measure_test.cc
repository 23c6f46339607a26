// reference/measure.h, the one timing library of bench/ and `fleetjit bench`:
// its statistics against a sorted reference on fresh random samples, and
// the run counts TimeMs and OnThreadsTogether promise.
#include "reference/measure.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/common/seed.h"

namespace fleetjit::measure {
namespace {

TEST(Measure, MedianAndPercentileMatchASortedReference) {
  std::mt19937_64 rng = testing::SeededRng("MeasureStatistics");
  std::uniform_real_distribution<double> dist(-1e3, 1e3);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> v(1 + rng() % 41);
    for (double& x : v) x = dist(rng);
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median =
        n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
    EXPECT_EQ(Median(v), median);
    for (double p : {0.0, 0.5, 0.9, 0.99, 1.0}) {
      EXPECT_EQ(Percentile(v, p),
                sorted[std::min(n - 1, static_cast<size_t>(p * n))])
          << "p" << p << " of " << n;
    }
  }
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Percentile({}, 0.5), 0);
}

TEST(Measure, TimeMsRunsWarmupThenSamplesOfBatches) {
  std::mt19937_64 rng = testing::SeededRng("MeasureTimeMs");
  for (int round = 0; round < 5; ++round) {
    const int samples = 1 + rng() % 6, batch = 1 + rng() % 4,
              warmup = rng() % 4;
    int runs = 0, syncs = 0, runs_at_first_sync = -1;
    const double ms = TimeMs([&] { ++runs; },
                             [&] {
                               if (syncs++ == 0) runs_at_first_sync = runs;
                             },
                             samples, batch, warmup);
    EXPECT_EQ(runs, warmup + samples * batch);
    EXPECT_EQ(syncs, 1 + samples);
    EXPECT_EQ(runs_at_first_sync, warmup);  // the warm-up is synchronised
    EXPECT_GE(ms, 0);
  }
}

TEST(Measure, OnThreadsTogetherRunsEveryIndexOnce) {
  std::mt19937_64 rng = testing::SeededRng("MeasureThreads");
  const int threads = 2 + rng() % 7;
  std::vector<std::atomic<int>> seen(threads);
  OnThreadsTogether(threads, [&](int t) { seen[t].fetch_add(1); });
  for (int t = 0; t < threads; ++t) EXPECT_EQ(seen[t].load(), 1) << t;
}

}  // namespace
}  // namespace fleetjit::measure
