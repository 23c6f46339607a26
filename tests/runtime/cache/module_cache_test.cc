#include "runtime/cache/module_cache.h"

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/common/env.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::EnvGuard;

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::KeyInputsFor;
using ::fleetjit::testing::SameArtifact;
using ::fleetjit::testing::TempDir;

class ModuleCacheTest : public ::testing::Test {
 protected:
  ModuleCacheTest() : seed_(FreshSeed()) {}

  CacheConfig Config() {
    CacheConfig c;
    c.dir = dir_.Sub("cache");
    c.log = Logger(LogLevel::kDebug, [this](LogLevel, absl::string_view line) {
      std::lock_guard<std::mutex> lock(log_mu_);
      log_.emplace_back(line);
    });
    return c;
  }
  // A build that counts its calls and returns item `index`'s artifact.
  auto Builder(int index, std::atomic<int>& calls) {
    return [this, index, &calls]() -> absl::StatusOr<jit::Artifact> {
      calls.fetch_add(1);
      return ArtifactFor(seed_, index, 4096);
    };
  }

  const uint64_t seed_;
  TempDir dir_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(ModuleCacheTest, CompilesThenHitsMemoryThenDisk) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  std::atomic<int> calls{0};
  const CacheKey key = KeyFor(seed_, 0);
  const jit::Artifact expected = ArtifactFor(seed_, 0, 4096);
  {
    ModuleCache cache(Config());
    absl::StatusOr<ModuleCache::Result> r =
        cache.GetOrBuild(key, Builder(0, calls));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kCompiled);
    EXPECT_TRUE(SameArtifact(*r->artifact, expected));
    r = cache.GetOrBuild(key, Builder(0, calls));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kMemory);
    EXPECT_EQ(calls.load(), 1);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.memory_hits, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(s.disk_entries, 1u);
    EXPECT_GT(s.disk_bytes, 4096u);
  }
  ModuleCache fresh(Config());
  absl::StatusOr<ModuleCache::Result> r =
      fresh.GetOrBuild(key, Builder(0, calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, CacheSource::kDisk);
  EXPECT_TRUE(SameArtifact(*r->artifact, expected));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(fresh.stats().disk_hits, 1u);
  EXPECT_TRUE(log_.empty()) << log_[0];  // no log line on hits
}

TEST_F(ModuleCacheTest, EachKeyFieldMissesAndUnchangedInputHits) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const CacheKeyInputs base = KeyInputsFor(seed_, 1);
  std::vector<std::pair<const char*, void (*)(CacheKeyInputs&)>> mutations = {
      {"source", [](CacheKeyInputs& in) { in.source += "\n"; }},
      {"header content",
       [](CacheKeyInputs& in) { in.headers[0].second.back() ^= 1; }},
      {"options", [](CacheKeyInputs& in) { in.options.push_back("-DX"); }},
      {"target", [](CacheKeyInputs& in) { in.target = "sm_90"; }},
      {"copy_impl", [](CacheKeyInputs& in) { in.copy_impl = "sync"; }},
      {"compiler", [](CacheKeyInputs& in) { in.compiler += "1"; }},
      {"driver_version", [](CacheKeyInputs& in) { in.driver_version += 10; }},
      {"name_expressions",
       [](CacheKeyInputs& in) { in.name_expressions = {}; }},
      {"emit_ptx", [](CacheKeyInputs& in) { in.emit_ptx = true; }},
  };
  std::atomic<int> calls{0};
  {
    ModuleCache cache(Config());
    ASSERT_EQ(cache.GetOrBuild(MakeCacheKey(base), Builder(1, calls))->source,
              CacheSource::kCompiled);
    for (auto& [what, mutate] : mutations) {
      CacheKeyInputs in = base;
      mutate(in);
      EXPECT_EQ(cache.GetOrBuild(MakeCacheKey(in), Builder(1, calls))->source,
                CacheSource::kCompiled)
          << what;
    }
    EXPECT_EQ(cache.GetOrBuild(MakeCacheKey(base), Builder(1, calls))->source,
              CacheSource::kMemory);
  }
  ModuleCache fresh(Config());
  EXPECT_EQ(fresh.GetOrBuild(MakeCacheKey(base), Builder(1, calls))->source,
            CacheSource::kDisk);
  EXPECT_EQ(calls.load(), 1 + static_cast<int>(mutations.size()));
}

TEST_F(ModuleCacheTest, SixtyFourThreadsOneKeyOneBuild) {
  ModuleCache cache(Config());
  const CacheKey key = KeyFor(seed_, 2);
  std::atomic<int> builds{0};
  absl::Barrier* start = new absl::Barrier(64);  // deletes itself
  std::vector<std::shared_ptr<const jit::Artifact>> got(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 64; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      absl::StatusOr<ModuleCache::Result> r =
          cache.GetOrBuild(key, [&]() -> absl::StatusOr<jit::Artifact> {
            builds.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            return ArtifactFor(seed_, 2, 1000);
          });
      ASSERT_TRUE(r.ok()) << r.status();
      got[t] = r->artifact;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (int t = 1; t < 64; ++t) EXPECT_EQ(got[t].get(), got[0].get());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.compiles, 1u);
  EXPECT_EQ(s.memory_hits, 63u);
}

// Memory hits are served from per-thread shards (base/thread_shards.h);
// these check that a shard never serves what the shared map replaced or
// dropped, with the hitting threads alive throughout (distinct shards).
class ShardedHitsTest : public ModuleCacheTest {
 protected:
  static constexpr int kThreads = 8;
  // Runs `round(t, r)` on threads t < kThreads for r < `rounds`, all threads
  // finishing a round before any starts the next; `between(r)` runs alone
  // after round r.
  template <typename Round, typename Between>
  void Rounds(int rounds, Round round, Between between) {
    absl::Barrier* barriers[8];
    for (int r = 0; r < rounds * 2; ++r)
      barriers[r] = new absl::Barrier(kThreads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int r = 0; r < rounds; ++r) {
          round(t, r);
          if (barriers[2 * r]->Block()) delete barriers[2 * r];
          if (barriers[2 * r + 1]->Block()) delete barriers[2 * r + 1];
        }
      });
    }
    for (int r = 0; r < rounds; ++r) {
      if (barriers[2 * r]->Block()) delete barriers[2 * r];
      between(r);
      if (barriers[2 * r + 1]->Block()) delete barriers[2 * r + 1];
    }
    for (std::thread& t : threads) t.join();
  }
};

TEST_F(ShardedHitsTest, AnUpdateReachesEveryThreadsNextHit) {
  ModuleCache cache(Config());
  const CacheKey key = KeyFor(seed_, 30);
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.GetOrBuild(key, Builder(30, calls)).ok());
  auto updated =
      std::make_shared<const jit::Artifact>(ArtifactFor(seed_, 31, 2048));
  std::vector<const jit::Artifact*> got(kThreads * 3, nullptr);
  Rounds(
      3,
      [&](int t, int round) {
        // Twice per round: the second is served by the thread's shard.
        for (int i = 0; i < 2; ++i) {
          absl::StatusOr<ModuleCache::Result> r =
              cache.GetOrBuild(key, Builder(30, calls));
          ASSERT_TRUE(r.ok()) << r.status();
          EXPECT_EQ(r->source, CacheSource::kMemory);
          if (i == 1) got[round * kThreads + t] = r->artifact.get();
        }
      },
      [&](int r) {
        if (r == 0) ASSERT_TRUE(cache.Update(key, updated).ok());
      });
  EXPECT_EQ(calls.load(), 1);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_NE(got[t], updated.get()) << "thread " << t << ", before the update";
    EXPECT_EQ(got[kThreads + t], updated.get())
        << "thread " << t << ", after the update";
    EXPECT_EQ(got[2 * kThreads + t], updated.get())
        << "thread " << t << ", later";
  }
  EXPECT_EQ(cache.stats().memory_hits, uint64_t{kThreads} * 6);
}

TEST_F(ShardedHitsTest, AClearReachesEveryThreadAndRebuildsOnce) {
  ModuleCache cache(Config());
  const CacheKey key = KeyFor(seed_, 32);
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.GetOrBuild(key, Builder(32, calls)).ok());
  std::vector<CacheSource> sources(kThreads * 2);
  std::vector<std::shared_ptr<const jit::Artifact>> held(kThreads * 2);
  Rounds(
      2,
      [&](int t, int r) {
        absl::StatusOr<ModuleCache::Result> hit =
            cache.GetOrBuild(key, Builder(32, calls));
        ASSERT_TRUE(hit.ok()) << hit.status();
        hit = cache.GetOrBuild(key, Builder(32, calls));  // from the shard
        ASSERT_TRUE(hit.ok()) << hit.status();
        sources[r * kThreads + t] = hit->source;
        held[r * kThreads + t] = hit->artifact;
      },
      [&](int r) {
        if (r == 0) ASSERT_TRUE(cache.Clear().ok());
      });
  // One build before the clear, exactly one after it (single flight).
  EXPECT_EQ(calls.load(), 2);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(sources[t], CacheSource::kMemory);
    EXPECT_NE(held[kThreads + t].get(), held[t].get())
        << "thread " << t << " was served the cleared artifact";
    EXPECT_EQ(held[kThreads + t].get(), held[kThreads].get());
    EXPECT_TRUE(
        SameArtifact(*held[kThreads + t], ArtifactFor(seed_, 32, 4096)));
  }
}

TEST_F(ModuleCacheTest, AHitOutlivesItsCache) {
  absl::StatusOr<ModuleCache::Result> hit;
  {
    ModuleCache cache(Config());
    const CacheKey key = KeyFor(seed_, 33);
    std::atomic<int> calls{0};
    ASSERT_TRUE(cache.GetOrBuild(key, Builder(33, calls)).ok());
    ASSERT_TRUE(
        cache.GetOrBuild(key, Builder(33, calls)).ok());  // shard learns it
    hit = cache.GetOrBuild(key, Builder(33, calls));      // shard serves it
    ASSERT_TRUE(hit.ok());
    ASSERT_EQ(hit->source, CacheSource::kMemory);
    ASSERT_TRUE(cache.Clear().ok());
  }
  EXPECT_TRUE(SameArtifact(*hit->artifact, ArtifactFor(seed_, 33, 4096)));
}

TEST_F(ModuleCacheTest, HitsRacingUpdatesAndClearsServeWholeArtifacts) {
  CacheConfig config = Config();
  config.disk = false;  // memory only: each Update is quick, the race tight
  ModuleCache cache(config);
  const CacheKey key = KeyFor(seed_, 34);
  const jit::Artifact built = ArtifactFor(seed_, 34, 1024);
  std::vector<std::shared_ptr<const jit::Artifact>> versions;
  for (int v = 0; v < 4; ++v) {
    versions.push_back(std::make_shared<const jit::Artifact>(
        ArtifactFor(seed_, 40 + v, 1024)));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
            key, [&]() -> absl::StatusOr<jit::Artifact> { return built; });
        if (!r.ok()) {
          bad.fetch_add(1);
          continue;
        }
        // One of the versions (the same object), or the build's.
        bool known = false;
        for (const auto& v : versions) known = known || r->artifact == v;
        if (!known) known = SameArtifact(*r->artifact, built);
        if (!known) bad.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) {
    if (i % 5 == 4) {
      ASSERT_TRUE(cache.Clear().ok());
    } else {
      ASSERT_TRUE(cache.Update(key, versions[i % 4]).ok());
    }
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  // No build in flight now (an Update leaves one alone): once the last
  // Update has returned, every thread's next hit is it.
  ASSERT_TRUE(cache.Update(key, versions[3]).ok());
  std::atomic<int> stale{0};
  std::vector<std::thread> checkers;
  for (int t = 0; t < 4; ++t) {
    checkers.emplace_back([&] {
      auto r = cache.GetOrBuild(
          key, [&]() -> absl::StatusOr<jit::Artifact> { return built; });
      if (!r.ok() || r->artifact.get() != versions[3].get()) stale.fetch_add(1);
    });
  }
  for (std::thread& t : checkers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(stale.load(), 0);
  auto last = cache.GetOrBuild(
      key, [&]() -> absl::StatusOr<jit::Artifact> { return built; });
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->artifact.get(), versions[3].get());
}

// Eight builds of distinct keys must run at the same time: each waits until
// all eight are inside build(), which a lock around build() would deadlock
// (the wait times out instead, failing the test).
TEST_F(ModuleCacheTest, DistinctKeysBuildInParallel) {
  ModuleCache cache(Config());
  constexpr int kKeys = 8;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  std::atomic<int> all_met{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kKeys; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
          KeyFor(seed_, 100 + i), [&]() -> absl::StatusOr<jit::Artifact> {
            std::unique_lock<std::mutex> lock(mu);
            ++inside;
            cv.notify_all();
            if (cv.wait_for(lock, std::chrono::seconds(10),
                            [&] { return inside == kKeys; })) {
              all_met.fetch_add(1);
            }
            return ArtifactFor(seed_, 100 + i, 100);
          });
      EXPECT_TRUE(r.ok()) << r.status();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(all_met.load(), kKeys);
}

TEST_F(ModuleCacheTest, FailedBuildReachesEveryWaiterAndIsNotCached) {
  ModuleCache cache(Config());
  const CacheKey key = KeyFor(seed_, 3);
  std::atomic<int> builds{0};
  auto failing = [&]() -> absl::StatusOr<jit::Artifact> {
    builds.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return absl::InvalidArgumentError("error: expected ';'");
  };
  absl::Barrier* start = new absl::Barrier(16);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      if (start->Block()) delete start;
      absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(key, failing);
      if (!r.ok() && r.status().code() == absl::StatusCode::kInvalidArgument &&
          r.status().message() == "error: expected ';'") {
        errors.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 16);
  EXPECT_EQ(builds.load(), 1);
  EXPECT_EQ(cache.stats().compiles, 0u);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  // Not cached: the next call builds again, and may succeed.
  std::atomic<int> calls{0};
  absl::StatusOr<ModuleCache::Result> r =
      cache.GetOrBuild(key, Builder(3, calls));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, CacheSource::kCompiled);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ModuleCacheTest, WithoutMemoryTierEveryCallReadsDisk) {
  CacheConfig config = Config();
  config.memory = false;
  ModuleCache cache(config);
  std::atomic<int> calls{0};
  const CacheKey key = KeyFor(seed_, 4);
  EXPECT_EQ(cache.GetOrBuild(key, Builder(4, calls))->source,
            CacheSource::kCompiled);
  EXPECT_EQ(cache.GetOrBuild(key, Builder(4, calls))->source,
            CacheSource::kDisk);
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ModuleCacheTest, WithoutDiskTierNothingIsWritten) {
  CacheConfig config = Config();
  config.disk = false;
  ModuleCache cache(config);
  std::atomic<int> calls{0};
  const CacheKey key = KeyFor(seed_, 5);
  EXPECT_EQ(cache.GetOrBuild(key, Builder(5, calls))->source,
            CacheSource::kCompiled);
  EXPECT_EQ(cache.GetOrBuild(key, Builder(5, calls))->source,
            CacheSource::kMemory);
  struct stat st;
  EXPECT_NE(::stat(config.dir.c_str(), &st), 0);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
}

TEST_F(ModuleCacheTest, ConstructionDoesNoIoAndFirstStoreCreatesDir0700) {
  CacheConfig config = Config();
  config.dir = dir_.Sub("a/b/cache");
  ModuleCache cache(config);
  EXPECT_EQ(cache.dir(), config.dir);
  struct stat st;
  ASSERT_NE(::stat(dir_.Sub("a").c_str(), &st), 0);
  std::atomic<int> calls{0};
  ASSERT_TRUE(cache.GetOrBuild(KeyFor(seed_, 6), Builder(6, calls)).ok());
  for (const char* sub : {"a", "a/b", "a/b/cache"}) {
    ASSERT_EQ(::stat(dir_.Sub(sub).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u) << sub;
  }
}

TEST_F(ModuleCacheTest, ClearEmptiesBothTiers) {
  ModuleCache cache(Config());
  std::atomic<int> calls{0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        cache.GetOrBuild(KeyFor(seed_, 10 + i), Builder(10 + i, calls)).ok());
  }
  testing::WriteFile(cache.dir() + "/README", "not ours");
  EXPECT_EQ(cache.stats().disk_entries, 5u);
  ASSERT_TRUE(cache.Clear().ok());
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  EXPECT_EQ(cache.GetOrBuild(KeyFor(seed_, 10), Builder(10, calls))->source,
            CacheSource::kCompiled);
  EXPECT_EQ(testing::ReadFile(cache.dir() + "/README"), "not ours");
}

TEST_F(ModuleCacheTest, UnwritableDirectoryStillBuildsAndLogsOnce) {
  CacheConfig config = Config();
  testing::WriteFile(dir_.Sub("file"), "x");
  config.dir = dir_.Sub("file/cache");  // a path under a regular file
  ModuleCache cache(config);
  std::atomic<int> calls{0};
  size_t lines_after_first = 0;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<ModuleCache::Result> r =
        cache.GetOrBuild(KeyFor(seed_, 20 + i), Builder(20 + i, calls));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kCompiled);
    if (i == 0) lines_after_first = log_.size();
  }
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_.size(), lines_after_first);
  EXPECT_EQ(log_[0].rfind("cache: ", 0), 0u) << log_[0];
  EXPECT_NE(log_[0].find(config.dir), std::string::npos) << log_[0];
}

TEST_F(ModuleCacheTest, ABuildThatThrowsReleasesWaiters) {
  ModuleCache cache(Config());
  const CacheKey key = KeyFor(seed_, 7);
  EXPECT_THROW(cache.GetOrBuild(key,
                                []() -> absl::StatusOr<jit::Artifact> {
                                  throw std::runtime_error("boom");
                                }),
               std::runtime_error);
  std::atomic<int> calls{0};
  EXPECT_EQ(cache.GetOrBuild(key, Builder(7, calls))->source,
            CacheSource::kCompiled);
}

// Cross-process single flight, with two caches on one folder standing for
// two processes: the lock belongs to an open file description, so two
// caches exclude each other as two processes do (cache_process_test runs
// the processes).
TEST_F(ModuleCacheTest, ASiblingOnTheFolderWaitsForTheBuildAndTakesItsEntry) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  const CacheKey key = KeyFor(seed_, 0);
  ModuleCache a(Config()), b(Config());
  absl::Notification building, release;
  std::thread first([&] {
    auto r = a.GetOrBuild(key, [&]() -> absl::StatusOr<jit::Artifact> {
      building.Notify();
      release.WaitForNotification();
      return ArtifactFor(seed_, 0, 4096);
    });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kCompiled);
  });
  building.WaitForNotification();
  std::atomic<int> calls{0};
  absl::Notification done;
  std::thread second([&] {
    auto r = b.GetOrBuild(key, Builder(0, calls));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kDisk);
    EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed_, 0, 4096)));
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(300)))
      << "the sibling did not wait";
  release.Notify();
  first.join();
  second.join();
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(b.stats().lock_waits, 1u);
  EXPECT_EQ(b.stats().disk_hits, 1u);
  EXPECT_EQ(b.stats().compiles, 0u);
}

TEST_F(ModuleCacheTest, AWaitEndsAtTheDeadlineAndTheSiblingBuildsToo) {
  const CacheKey key = KeyFor(seed_, 0);
  CacheConfig patient = Config();
  patient.lock_wait_ms = 250;
  ModuleCache a(Config()), b(patient);
  absl::Notification building, release;
  std::thread first([&] {
    auto r = a.GetOrBuild(key, [&]() -> absl::StatusOr<jit::Artifact> {
      building.Notify();
      release.WaitForNotification();
      return ArtifactFor(seed_, 0, 4096);
    });
    EXPECT_TRUE(r.ok()) << r.status();
  });
  building.WaitForNotification();
  std::atomic<int> calls{0};
  const auto start = std::chrono::steady_clock::now();
  auto r = b.GetOrBuild(key, Builder(0, calls));
  const double waited_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start)
                               .count();
  release.Notify();
  first.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, CacheSource::kCompiled);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_GE(waited_ms, 240);
  EXPECT_LT(waited_ms, 5000);
  EXPECT_EQ(b.stats().lock_waits, 1u);
  bool said = false;
  for (const std::string& l : log_) {
    said = said || absl::StrContains(l, "without waiting longer");
  }
  EXPECT_TRUE(said);
  // Off: no waiting at all.
  CacheConfig off = Config();
  off.lock_wait_ms = 0;
  ModuleCache c(off);
  absl::Notification building2, release2;
  const CacheKey key2 = KeyFor(seed_, 1);
  std::thread holder([&] {
    auto h = a.GetOrBuild(key2, [&]() -> absl::StatusOr<jit::Artifact> {
      building2.Notify();
      release2.WaitForNotification();
      return ArtifactFor(seed_, 1, 4096);
    });
    EXPECT_TRUE(h.ok());
  });
  building2.WaitForNotification();
  std::atomic<int> calls2{0};
  EXPECT_TRUE(c.GetOrBuild(key2, Builder(1, calls2)).ok());
  EXPECT_EQ(calls2.load(), 1);
  EXPECT_EQ(c.stats().lock_waits, 0u);
  release2.Notify();
  holder.join();
}

// On a thread that must not wait (the runtime's background worker, whose
// queue releases this process's locks): the lock is tried once, and the
// build goes on.
TEST_F(ModuleCacheTest, ABuildThatMustNotWaitTriesTheLockOnce) {
  const CacheKey key = KeyFor(seed_, 0);
  ModuleCache a(Config()), b(Config());
  absl::Notification building, release;
  std::thread holder([&] {
    auto h = a.GetOrBuild(key, [&]() -> absl::StatusOr<jit::Artifact> {
      building.Notify();
      release.WaitForNotification();
      return ArtifactFor(seed_, 0, 4096);
    });
    EXPECT_TRUE(h.ok());
  });
  building.WaitForNotification();
  {
    ModuleCache::NoSiblingWaitScope no_wait;
    std::atomic<int> calls{0};
    const auto t0 = std::chrono::steady_clock::now();
    auto r = b.GetOrBuild(key, Builder(0, calls));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kCompiled);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_EQ(calls.load(), 1);
  }
  release.Notify();
  holder.join();
}

// With the disk store deferred (the runtime's builds: the entry waits for
// its launch thunk), the caller holds the lock until its Update wrote it.
TEST_F(ModuleCacheTest, ADeferredStoreHoldsTheLockUntilItsUpdate) {
  const CacheKey key = KeyFor(seed_, 0);
  ModuleCache a(Config()), b(Config());
  std::atomic<int> a_calls{0}, b_calls{0};
  auto r =
      a.GetOrBuild(key, Builder(0, a_calls), ModuleCache::DiskStore::kDeferred);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->disk_store_pending);
  ASSERT_NE(r->build_lock, nullptr);
  absl::Notification done;
  std::thread second([&] {
    auto h = b.GetOrBuild(key, Builder(0, b_calls));
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->source, CacheSource::kDisk);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  ASSERT_TRUE(a.Update(key, r->artifact).ok());
  r->build_lock.reset();
  second.join();
  EXPECT_EQ(b_calls.load(), 0);
  // A store done at once releases it at once.
  auto now = a.GetOrBuild(KeyFor(seed_, 1), Builder(1, a_calls));
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->build_lock, nullptr);
}

TEST(CacheDirTest, ResolutionOrder) {
  EXPECT_EQ(ResolveCacheDir("/x/option/", "/x/xdg", "/x/home"), "/x/option");
  EXPECT_EQ(ResolveCacheDir("", "/x/xdg", "/x/home"), "/x/xdg/fleetjit");
  // A relative XDG_CACHE_HOME is ignored, as the XDG spec says.
  EXPECT_EQ(ResolveCacheDir("", "relative", "/x/home"),
            "/x/home/.cache/fleetjit");
  EXPECT_EQ(ResolveCacheDir("", "", "/x/home"), "/x/home/.cache/fleetjit");
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  EXPECT_EQ(ResolveCacheDir("rel", "/x/xdg", "/x/home"),
            absl::StrCat(cwd, "/rel"));
  // No HOME at all: the password database's home.
  const std::string fallback = ResolveCacheDir("", "", "");
  EXPECT_TRUE(fallback.empty() || absl::EndsWith(fallback, "/.cache/fleetjit"))
      << fallback;
}

TEST(CacheDirTest, TheCacheReadsNoEnvironment) {
  // What the environment says reaches a cache only through its config
  // (ApplyEnvironment, runtime/config.h).
  EnvGuard guard({"FLEETJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"},
                 /*clear=*/false);
  ::setenv("FLEETJIT_CACHE_DIR", "/x/fj", 1);
  ::setenv("XDG_CACHE_HOME", "/x/xdg", 1);
  ::setenv("HOME", "/x/env-home", 1);
  CacheConfig config;
  config.home = "/x/home";
  EXPECT_EQ(ModuleCache(config).dir(), "/x/home/.cache/fleetjit");
  config.xdg_cache_home = "/x/config-xdg";
  EXPECT_EQ(ModuleCache(config).dir(), "/x/config-xdg/fleetjit");
}

}  // namespace
}  // namespace fleetjit
