// The remote tier behind ModuleCache, against a private redis-server:
// sharing between caches with separate disk directories, poisoned values
// (unsigned, wrong key, truncated, another key's entry) refused and
// rebuilt, Redis killed and hung mid-run (builds go on locally, bounded in
// time, the breaker opens and closes again), the agnostic lookup of hosts
// without a compiler, and refusals of the configuration.
#include "runtime/cache/remote_tier.h"

#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "base/hmac_sha256.h"
#include "gtest/gtest.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/module_cache.h"
#include "runtime/cache/published_compiler.h"
#include "tests/common/process.h"
#include "tests/common/redis_server.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::KeyInputsFor;
using ::fleetjit::testing::RedisServer;
using ::fleetjit::testing::SameArtifact;
using ::fleetjit::testing::TempDir;

constexpr char kFleetKey[] =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr size_t kImage = 64 << 10;

#define START_REDIS_OR_SKIP(var, ...)                        \
  std::string var##_skip;                                    \
  auto var = RedisServer::Start(&var##_skip, ##__VA_ARGS__); \
  if (var == nullptr) GTEST_SKIP() << var##_skip

// Log lines, collected.
struct Lines {
  absl::Mutex mu;
  std::vector<std::string> lines;
  Logger logger() {
    return Logger(LogLevel::kDebug, [this](LogLevel, absl::string_view line) {
      absl::MutexLock lock(&mu);
      lines.emplace_back(line);
    });
  }
  bool Contains(absl::string_view text) {
    absl::MutexLock lock(&mu);
    for (const std::string& l : lines) {
      if (absl::StrContains(l, text)) return true;
    }
    return false;
  }
  std::string All() {
    absl::MutexLock lock(&mu);
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    return all;
  }
};

CacheConfig Config(const std::string& dir, const std::string& url,
                   Lines* lines = nullptr) {
  CacheConfig c;
  c.dir = dir;
  c.remote.url = url;
  c.remote.fleet_key = kFleetKey;
  c.remote.breaker_cooldown_ms = 300;
  if (lines != nullptr)
    c.log = lines->logger();
  else
    c.log = Logger();
  return c;
}

// GetOrBuild of item `i`; `built` counts build() calls.
absl::StatusOr<ModuleCache::Result> Serve(ModuleCache& cache, uint64_t seed,
                                          int i, int* built = nullptr) {
  return cache.GetOrBuild(KeyFor(seed, i),
                          [&]() -> absl::StatusOr<jit::Artifact> {
                            if (built != nullptr) ++*built;
                            return ArtifactFor(seed, i, kImage);
                          });
}

TEST(RemoteTierTest, SecondHostGetsWhatTheFirstBuiltAndFillsItsDisk) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  TempDir d1, d2;
  {
    ModuleCache host1(Config(d1.path(), server->tcp_url()));
    int built = 0;
    ASSERT_TRUE(Serve(host1, seed, 0, &built).ok());
    EXPECT_EQ(built, 1);
    ASSERT_TRUE(host1.FlushRemote(absl::Seconds(5)));
    EXPECT_EQ(host1.stats().remote_writes, 1u);
    EXPECT_EQ(host1.stats().remote_state, "closed");
  }
  {
    ModuleCache host2(Config(d2.path(), server->unix_url()));
    int built = 0;
    auto r = Serve(host2, seed, 0, &built);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(built, 0);
    EXPECT_EQ(r->source, CacheSource::kRemote);
    EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed, 0, kImage)));
    CacheStats s = host2.stats();
    EXPECT_EQ(s.remote_hits, 1u);
    EXPECT_EQ(s.disk_entries, 1u) << "a remote hit fills the local disk";
  }
  {
    // Same disk, Redis gone: a disk hit.
    server->Kill();
    ModuleCache host2(Config(d2.path(), server->unix_url()));
    auto r = Serve(host2, seed, 0);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, CacheSource::kDisk);
  }
}

// A poisoned value under an entry's name is refused, logged, rebuilt, and
// the rebuild's publication heals the entry.
TEST(RemoteTierTest, PoisonedEntriesAreRefusedAndRebuilt) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  auto url = ParseRedisUrl(server->tcp_url());
  RedisClient redis(*url, RedisTimeouts{});
  CacheConfig base = Config("", server->tcp_url());
  auto tier = RemoteTier::Create(base.remote, base.log);
  ASSERT_TRUE(tier.ok()) << tier.status();

  const CacheKey key = KeyFor(seed, 0);
  const std::string name = (*tier)->EntryName(key.digest);
  const std::string good_entry = EncodeCacheEntry(
      key.canonical, jit::SerializeArtifact(ArtifactFor(seed, 0, kImage)));
  const std::string other_entry =
      EncodeCacheEntry(KeyFor(seed, 1).canonical,
                       jit::SerializeArtifact(ArtifactFor(seed, 1, kImage)));
  const std::string good =
      RemoteTier::Sign(*ParseFleetKey(kFleetKey), name, good_entry);
  struct Poison {
    const char* what;
    std::string value;
    const char* logged;
  } poisons[] = {
      {"unsigned", good_entry, "unsigned"},
      {"another fleet key",
       RemoteTier::Sign(std::string(32, 'k'), name, good_entry),
       "wrong signature"},
      {"a flipped payload bit",
       [&] {
         std::string v = good;
         v[v.size() - 100] ^= 1;
         return v;
       }(),
       "wrong signature"},
      {"truncated", good.substr(0, good.size() / 2), "wrong signature"},
      {"another key's entry, validly signed under this name",
       RemoteTier::Sign(*ParseFleetKey(kFleetKey), name, other_entry),
       "another key"},
      {"valid signature over a damaged entry",
       RemoteTier::Sign(*ParseFleetKey(kFleetKey), name,
                        good_entry.substr(0, good_entry.size() - 1)),
       "length mismatch"},
  };
  for (const Poison& p : poisons) {
    SCOPED_TRACE(p.what);
    ASSERT_TRUE(redis.Set(name, p.value, 0).ok());
    Lines lines;
    TempDir dir;
    int built = 0;
    {
      ModuleCache cache(Config(dir.path(), server->tcp_url(), &lines));
      auto r = Serve(cache, seed, 0, &built);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->source, CacheSource::kCompiled);
      EXPECT_EQ(built, 1);
      EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed, 0, kImage)));
      EXPECT_EQ(cache.stats().remote_rejected, 1u);
      EXPECT_TRUE(lines.Contains("refusing remote entry")) << lines.All();
      EXPECT_TRUE(lines.Contains(p.logged)) << lines.All();
      ASSERT_TRUE(cache.FlushRemote(absl::Seconds(5)));
    }
    // Healed: a fresh host gets a remote hit.
    TempDir dir2;
    ModuleCache fresh(Config(dir2.path(), server->tcp_url()));
    auto r = Serve(fresh, seed, 0, &built);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->source, CacheSource::kRemote);
  }
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - since)
      .count();
}

// Redis killed, then hung, mid-run: every build still succeeds locally,
// no call waits past its timeout (plus scheduling slack on a shared CI
// machine), the breaker opens after 3 failures and closes again once
// Redis is back and the cooldown has passed.
TEST(RemoteTierTest, OutagesCostBoundedTimeAndTheBreakerRecovers) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  TempDir dir;
  Lines lines;
  CacheConfig config = Config("", server->tcp_url(), &lines);
  config.disk = false;
  ModuleCache cache(config);
  constexpr double kTimeoutMs = 50, kSlackMs = 100;
  int item = 0;
  ASSERT_TRUE(Serve(cache, seed, item++).ok());
  ASSERT_TRUE(cache.FlushRemote(absl::Seconds(5)));

  for (const bool hang : {false, true}) {
    SCOPED_TRACE(hang ? "hung (SIGSTOP)" : "killed (SIGKILL)");
    if (hang)
      server->Pause();
    else
      server->Kill();
    const uint64_t opens_before = cache.stats().remote_breaker_opens;
    double worst = 0;
    for (int i = 0; i < 8; ++i) {
      auto start = std::chrono::steady_clock::now();
      auto r = Serve(cache, seed, item++);
      worst = std::max(worst, Ms(start));
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->source, CacheSource::kCompiled);
    }
    EXPECT_LT(worst, kTimeoutMs + kSlackMs);
    CacheStats s = cache.stats();
    EXPECT_EQ(s.remote_state, "open");
    EXPECT_EQ(s.remote_breaker_opens, opens_before + 1);
    EXPECT_GE(s.remote_skipped, 5u) << "reads not sent while open";
    // While open, a miss asks nothing of the network: the read is skipped,
    // not sent and timed out (no wall-clock bound below the timeout: a
    // sanitizer build on a loaded CI machine took 23 ms for the compile).
    const CacheStats open_before = cache.stats();
    auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE(Serve(cache, seed, item++).ok());
    EXPECT_LT(Ms(start), kTimeoutMs + kSlackMs);
    const CacheStats open_after = cache.stats();
    EXPECT_EQ(open_after.remote_skipped, open_before.remote_skipped + 1);
    // No read was answered either (remote_errors also counts the
    // background writes of earlier items failing, so it may move).
    EXPECT_EQ(open_after.remote_hits + open_after.remote_misses,
              open_before.remote_hits + open_before.remote_misses);

    if (hang)
      server->Resume();
    else
      ASSERT_TRUE(server->Restart());
    std::this_thread::sleep_for(std::chrono::milliseconds(350));  // cooldown
    ASSERT_TRUE(Serve(cache, seed, item++).ok());                 // the probe
    EXPECT_EQ(cache.stats().remote_state, "closed");
  }
  EXPECT_TRUE(lines.Contains("not asking it for 300 ms")) << lines.All();
  EXPECT_TRUE(lines.Contains("answers again")) << lines.All();
  // Writes queued while it was down were dropped, not waited for; the
  // tier works again.
  ASSERT_TRUE(Serve(cache, seed, 1000).ok());
  ASSERT_TRUE(cache.FlushRemote(absl::Seconds(5)));
  TempDir other;
  ModuleCache host2(Config(other.path(), server->tcp_url()));
  auto r = Serve(host2, seed, 1000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, CacheSource::kRemote);
}

// The agnostic lookup (cache_key.h): a host with no compiler finds what a
// compiling host published, checks the recorded compiler, and keeps it.
TEST(RemoteTierTest, HostWithoutCompilerFollowsThePointer) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  TempDir d1, d2;
  CacheKeyInputs inputs = KeyInputsFor(seed, 0);
  inputs.target = "sm_90";
  const CacheKey full = MakeCacheKey(inputs);
  const CacheKey agnostic = CompilerAgnosticKey(inputs);
  EXPECT_EQ(CompilerAgnosticKeyOf(full.canonical)->canonical,
            agnostic.canonical);
  {
    ModuleCache host1(Config(d1.path(), server->tcp_url()));
    ASSERT_TRUE(host1
                    .GetOrBuild(full,
                                [&]() -> absl::StatusOr<jit::Artifact> {
                                  return ArtifactFor(seed, 0, kImage);
                                })
                    .ok());
    ASSERT_TRUE(host1.FlushRemote(absl::Seconds(5)));
  }
  auto accept_13 = [&](absl::string_view c) {
    return CheckPublishedCompiler(c, "sm_90", 13000);
  };
  auto accept_12 = [&](absl::string_view c) {
    return CheckPublishedCompiler(c, "sm_90", 12080);
  };
  {
    Lines lines;
    ModuleCache old_driver(Config(d2.path(), server->tcp_url(), &lines));
    auto r = old_driver.GetPublished(agnostic, accept_12);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
    EXPECT_TRUE(lines.Contains("cannot load")) << lines.All();
  }
  {
    ModuleCache host2(Config(d2.path(), server->tcp_url()));
    auto r = host2.GetPublished(agnostic, accept_13);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kRemote);
    EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed, 0, kImage)));
    EXPECT_EQ(host2.stats().misses, 0u);
  }
  server->Kill();
  ModuleCache offline(Config(d2.path(), server->tcp_url()));
  auto r = offline.GetPublished(agnostic, accept_13);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, CacheSource::kDisk) << "kept under the agnostic key";
  // Another build (different options) has no pointer: NOT_FOUND, no build.
  inputs.options.push_back("-DOTHER");
  EXPECT_EQ(offline.GetPublished(CompilerAgnosticKey(inputs), accept_13)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(RemoteTierTest, PointerToAnEntryOfAnotherBuildIsRefused) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  TempDir d1;
  CacheConfig config = Config(d1.path(), server->tcp_url());
  ModuleCache host1(config);
  ASSERT_TRUE(Serve(host1, seed, 1).ok());
  ASSERT_TRUE(host1.FlushRemote(absl::Seconds(5)));
  // A correctly signed pointer for build 0 that names build 1's entry.
  auto tier = RemoteTier::Create(config.remote, config.log);
  const CacheKey agnostic0 = CompilerAgnosticKey(KeyInputsFor(seed, 0));
  const std::string pointer = (*tier)->PointerName(agnostic0.digest);
  RedisClient redis(*ParseRedisUrl(server->tcp_url()), RedisTimeouts{});
  ASSERT_TRUE(redis
                  .Set(pointer,
                       RemoteTier::Sign(*ParseFleetKey(kFleetKey), pointer,
                                        KeyFor(seed, 1).digest),
                       0)
                  .ok());
  Lines lines;
  TempDir d2;
  ModuleCache host2(Config(d2.path(), server->tcp_url(), &lines));
  auto r = host2.GetPublished(
      agnostic0, [](absl::string_view) { return absl::OkStatus(); });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(lines.Contains("differs from the build's")) << lines.All();
}

// A forked child holds a copy of the parent's cache, whose remote writer
// is a thread the child does not have (and whose queue lock that thread
// may have held at fork()). Destroying that copy in the child must return
// without waiting for the absent thread; the parent's tier writes on.
TEST(RemoteTierTest, AForkedChildDestroysTheParentsTierWithoutItsWriter) {
  START_REDIS_OR_SKIP(server);
  const uint64_t seed = FreshSeed();
  TempDir dir;
  auto cache =
      std::make_unique<ModuleCache>(Config(dir.path(), server->tcp_url()));
  ASSERT_TRUE(Serve(*cache, seed, 0).ok());  // starts the writer
  ASSERT_TRUE(cache->FlushRemote(absl::Seconds(5)));
  EXPECT_EQ(fleetjit::testing::InChild(
                [&] {
                  cache.reset();
                  return 0;
                },
                std::chrono::seconds(30)),
            0)
      << "-2: the child hung destroying the parent's cache";
  ASSERT_TRUE(Serve(*cache, seed, 1).ok());
  ASSERT_TRUE(cache->FlushRemote(absl::Seconds(5)));
  EXPECT_EQ(cache->stats().remote_writes, 2u);
}

TEST(RemoteTierTest, ConfigurationRefusals) {
  TempDir dir;
  Lines lines;
  CacheConfig c =
      Config(dir.path(), "redis://user:hunter2hunter2@127.0.0.1:1/0", &lines);
  c.remote.fleet_key = "";
  ModuleCache no_key(c);
  EXPECT_EQ(no_key.remote_status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(no_key.stats().remote_state, "unavailable: "));
  c.remote.fleet_key = kFleetKey;
  c.remote.url = "rediss://user:hunter2hunter2@cache:6380";
  ModuleCache tls(c);
  EXPECT_EQ(tls.remote_status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_FALSE(absl::StrContains(lines.All(), "hunter2")) << lines.All();
  // A remote tier that is configured but unreachable never fails a build.
  c.remote.url = "redis://user:hunter2hunter2@127.0.0.1:1/0";
  ModuleCache unreachable(c);
  ASSERT_TRUE(Serve(unreachable, 1, 0).ok());
  EXPECT_GE(unreachable.stats().remote_errors, 1u);
  EXPECT_TRUE(lines.Contains("redis://user:***@127.0.0.1:1/0")) << lines.All();
  EXPECT_FALSE(absl::StrContains(lines.All(), "hunter2")) << lines.All();
}

TEST(PublishedCompilerTest, Rule) {
  EXPECT_TRUE(CheckPublishedCompiler("nvrtc 13.0.88 libnvrtc.so.13 size=1",
                                     "sm_90", 13000)
                  .ok());
  EXPECT_TRUE(CheckPublishedCompiler("nvrtc 13.0 x", "sm_90", 0).ok());
  EXPECT_TRUE(CheckPublishedCompiler("nvrtc 12.8 x", "sm_90", 13000).ok());
  EXPECT_TRUE(CheckPublishedCompiler("nvrtc 13.2 x", "sm_90", 13000).ok())
      << "cubins: minor version compatibility";
  EXPECT_FALSE(CheckPublishedCompiler("nvrtc 13.2 x", "compute_90", 13000).ok())
      << "PTX needs a driver that knows its ISA";
  EXPECT_FALSE(CheckPublishedCompiler("nvrtc 13.0 x", "sm_90", 12080).ok());
  EXPECT_FALSE(CheckPublishedCompiler("", "sm_90", 13000).ok());
  EXPECT_FALSE(CheckPublishedCompiler("gcc 12", "sm_90", 13000).ok());
  EXPECT_FALSE(CheckPublishedCompiler("nvrtc thirteen", "sm_90", 0).ok());
}

}  // namespace
}  // namespace fleetjit
