// The disk cache shared by several processes: concurrent builders, writers
// killed with SIGKILL mid-write, and a hit in a process with no NVRTC.
// Each process is cache_stress_helper (FJ_CACHE_STRESS_HELPER).
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cache/module_cache.h"
#include "tests/common/test_paths.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::Rng;
using ::fleetjit::testing::SameArtifact;
using ::fleetjit::testing::Spawn;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::Wait;

const std::string kHelper = fleetjit::testing::BesideExecutable(
    "cache_stress_helper", FJ_CACHE_STRESS_HELPER);

std::vector<std::string> HelperArgs(const std::string& mode,
                                    const std::string& dir, uint64_t seed,
                                    int n, size_t image) {
  return {kHelper,
          mode,
          dir,
          std::to_string(seed),
          std::to_string(n),
          std::to_string(image)};
}

int CountTempFiles(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (absl::StartsWith(e.path().filename().string(), ".tmp-")) ++n;
  }
  return n;
}

// Every entry passes a full verify and serves the right artifact.
void ExpectAllValid(const std::string& dir, uint64_t seed, int count,
                    size_t image, int expected_entries) {
  CacheConfig config;
  config.dir = dir;
  ModuleCache cache(config);
  absl::StatusOr<std::vector<CacheEntryInfo>> list =
      cache.List(/*verify=*/true);
  ASSERT_TRUE(list.ok()) << list.status();
  if (expected_entries >= 0)
    EXPECT_EQ(static_cast<int>(list->size()), expected_entries);
  for (const CacheEntryInfo& e : *list) EXPECT_EQ(e.problem, "") << e.path;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
        KeyFor(seed, i), [&]() -> absl::StatusOr<jit::Artifact> {
          return ArtifactFor(seed, i, image);
        });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed, i, image))) << i;
  }
  EXPECT_EQ(cache.stats().rejected_entries, 0u);
}

TEST(CacheProcessTest, EightProcessesBuildTheSameSetIntoOneDirectory) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  constexpr int kItems = 24;
  constexpr size_t kImage = 64 << 10;
  std::vector<pid_t> pids;
  for (int p = 0; p < 8; ++p) {
    pids.push_back(Spawn(HelperArgs("build", cache_dir, seed, kItems, kImage)));
    ASSERT_GT(pids.back(), 0);
  }
  for (pid_t pid : pids) EXPECT_EQ(Wait(pid), 0);
  EXPECT_EQ(CountTempFiles(cache_dir), 0);
  ExpectAllValid(cache_dir, seed, kItems, kImage, kItems);
  // A second round finds everything on disk.
  pids.clear();
  for (int p = 0; p < 8; ++p) {
    pids.push_back(Spawn(HelperArgs("build", cache_dir, seed, kItems, kImage)));
  }
  for (pid_t pid : pids) EXPECT_EQ(Wait(pid), 0);
}

// Writers are killed with SIGKILL at random moments, many times, while a
// reader process keeps loading: the reader must never see a bad entry (it
// fails on a wrong artifact or any rejection), and afterwards every entry
// must verify.
TEST(CacheProcessTest, KillDashNineDuringWritesNeverServesACorruptEntry) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  const std::string stop_file = dir.Sub("stop");
  constexpr int kItems = 6;
  constexpr size_t kImage = 1 << 20;  // a large write widens the window
  constexpr int kKills = 40;

  std::vector<std::string> reader_args =
      HelperArgs("read-loop", cache_dir, seed, kItems, kImage);
  reader_args.push_back("300");
  reader_args.push_back(stop_file);
  pid_t reader = Spawn(reader_args);
  ASSERT_GT(reader, 0);

  Rng rng(seed);
  const std::string ready_file = dir.Sub("ready");
  for (int k = 0; k < kKills; ++k) {
    std::vector<std::string> writer_args =
        HelperArgs("write-loop", cache_dir, seed, kItems, kImage);
    writer_args.push_back(ready_file);
    pid_t writer = Spawn(writer_args);
    ASSERT_GT(writer, 0);
    // Kill at a random moment once it has stored its first entry (each
    // entry takes a few ms; more on a loaded machine).
    struct stat st;
    for (int waited = 0; ::stat(ready_file.c_str(), &st) != 0 && waited < 60000;
         ++waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(::unlink(ready_file.c_str()), 0) << "the writer never started";
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    ASSERT_EQ(::kill(writer, SIGKILL), 0);
    EXPECT_EQ(Wait(writer), 128 + SIGKILL);
  }
  ::fleetjit::testing::WriteFile(stop_file, "stop");
  EXPECT_EQ(Wait(reader), 0) << "the reader saw a bad entry";
  std::printf("temp files left by killed writers: %d\n",
              CountTempFiles(cache_dir));
  CacheConfig config;
  config.dir = cache_dir;
  EXPECT_GT(ModuleCache(config).stats().disk_entries, 0u)
      << "nothing was written";
  ExpectAllValid(cache_dir, seed, kItems, kImage, -1);
}

// A hit never needs NVRTC: serve an entry in a process where NVRTC cannot
// be found, asserting the build callback never runs and no NVRTC library
// is mapped.
TEST(CacheProcessTest, HitInAProcessWithoutNvrtc) {
  const uint64_t seed = FreshSeed();
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  constexpr size_t kImage = 256 << 10;
  {
    CacheConfig config;
    config.dir = cache_dir;
    ModuleCache cache(config);
    ASSERT_TRUE(cache
                    .GetOrBuild(KeyFor(seed, 0),
                                [&]() -> absl::StatusOr<jit::Artifact> {
                                  return ArtifactFor(seed, 0, kImage);
                                })
                    .ok());
  }
  pid_t child = Spawn(HelperArgs("hit", cache_dir, seed, 0, kImage),
                      {"LD_LIBRARY_PATH=/nonexistent",
                       "FLEETJIT_LIBNVRTC=/nonexistent/libnvrtc.so.13"});
  ASSERT_GT(child, 0);
  EXPECT_EQ(Wait(child), 0);
}

// Cross-process single flight (issue 47): 16 processes start together on
// one new cache folder, 8 of them building one key (a build takes 400 ms,
// about a compile), the other 8 a key each. The key is built once; its 7
// siblings wait and take the entry from disk.
TEST(CacheProcessTest, SixteenProcessesEightOfOneKeyCompileItOnce) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  constexpr size_t kImage = 64 << 10;
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int p = 0; p < 16; ++p) {
    // Even: the shared key 0; odd: keys 1..8.
    const int index = p % 2 == 0 ? 0 : 1 + p / 2;
    outs.push_back(dir.Sub(absl::StrCat("out-", p)));
    std::vector<std::string> args =
        HelperArgs("build-one", cache_dir, seed, index, kImage);
    args.push_back("400");
    args.push_back(outs.back());
    pids.push_back(Spawn(args));
    ASSERT_GT(pids.back(), 0);
  }
  for (pid_t pid : pids) EXPECT_EQ(Wait(pid), 0);
  int shared_compiles = 0, shared_hits = 0, shared_waits = 0, other = 0;
  for (int p = 0; p < 16; ++p) {
    const std::string line = ::fleetjit::testing::ReadFile(outs[p]);
    SCOPED_TRACE(line);
    if (p % 2 == 0) {
      shared_compiles += absl::StrContains(line, "compiles=1");
      shared_hits += absl::StrContains(line, "source=disk");
      shared_waits += absl::StrContains(line, "lock_waits=1");
    } else {
      other += absl::StrContains(line, "source=compiled");
    }
  }
  std::printf(
      "one key in 8 processes: %d compile(s), %d disk hits (%d "
      "waited); 8 other keys: %d compiled\n",
      shared_compiles, shared_hits, shared_waits, other);
  EXPECT_EQ(shared_compiles, 1);
  EXPECT_EQ(shared_hits, 7);
  EXPECT_EQ(other, 8);
  ExpectAllValid(cache_dir, seed, 9, kImage, 9);
}

// A holder killed with SIGKILL mid-build frees the key at once: the waiter
// takes the lock over (the kernel dropped it with the process), builds the
// key itself, and is not held up for more than a few seconds.
TEST(CacheProcessTest, AHolderKilledWithSigkillIsTakenOverAtOnce) {
  const uint64_t seed = FreshSeed();
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  const std::string ready = dir.Sub("ready");
  constexpr size_t kImage = 16 << 10;
  std::vector<std::string> hold_args =
      HelperArgs("hold", cache_dir, seed, 0, kImage);
  hold_args.push_back(ready);
  pid_t holder = Spawn(hold_args);
  ASSERT_GT(holder, 0);
  struct stat st;
  for (int waited = 0; ::stat(ready.c_str(), &st) != 0 && waited < 60000;
       ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(::stat(ready.c_str(), &st), 0) << "the holder never built";
  const std::string out = dir.Sub("out");
  std::vector<std::string> args =
      HelperArgs("build-one", cache_dir, seed, 0, kImage);
  args.push_back("0");
  args.push_back(out);
  pid_t waiter = Spawn(args);
  ASSERT_GT(waiter, 0);
  // It waits while the holder lives.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(::waitpid(waiter, nullptr, WNOHANG), 0)
      << "the waiter did not wait for the holder";
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  EXPECT_EQ(Wait(holder), 128 + SIGKILL);
  EXPECT_EQ(Wait(waiter), 0);
  const double after_ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - killed)
                              .count();
  const std::string line = ::fleetjit::testing::ReadFile(out);
  std::printf("waiter done %.0f ms after the holder's SIGKILL: %s", after_ms,
              line.c_str());
  EXPECT_TRUE(absl::StrContains(line, "source=compiled")) << line;
  EXPECT_TRUE(absl::StrContains(line, "lock_waits=1")) << line;
  EXPECT_LT(after_ms, 3000);
  ExpectAllValid(cache_dir, seed, 1, kImage, 1);
}

}  // namespace
}  // namespace fleetjit
