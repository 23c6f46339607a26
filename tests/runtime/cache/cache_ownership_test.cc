// fleetjit deletes only what it wrote (docs/security.md): user files,
// links and folders planted with every name shape the disk cache uses
// (shards, entries, temp files, the tag, folders moved aside before 1.4),
// in a folder that is not a cache and in a cache fleetjit made, survive
// builds, rejections, eviction and `cache clear`, byte for byte.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/module_cache.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::ReadFile;
using ::fleetjit::testing::Rng;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::WriteFile;

// Every path under `root` (links not followed) with what identifies it: a
// file's content and mode, a link's target, a folder's mode.
std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    const std::string path = e.path().string();
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    std::string what = absl::StrFormat("mode %o", st.st_mode);
    if (S_ISLNK(st.st_mode)) {
      what += " -> " + std::filesystem::read_symlink(e.path()).string();
    } else if (S_ISREG(st.st_mode)) {
      what += " " + ReadFile(path);
    }
    out[path.substr(root.size())] = what;
  }
  return out;
}

class CacheOwnershipTest : public ::testing::Test {
 protected:
  CacheOwnershipTest() : seed_(FreshSeed()), rng_(seed_) {}

  // Plants the user's things under `dir`: in every one of the 256 shard
  // names a folder (group-writable, as under umask 002) holding a file, or
  // a file, or a link; files named like an entry, a temp file (old enough
  // to be swept), the tag and a folder fleetjit once moved aside.
  void Plant(const std::string& dir) {
    ASSERT_TRUE(std::filesystem::create_directories(dir_.Sub("elsewhere")));
    WriteFile(dir_.Sub("elsewhere/keep.txt"), "linked-to data");
    for (int i = 0; i < 256; ++i) {
      const std::string shard = absl::StrFormat("%s/%02x", dir, i);
      switch (i % 4) {
        case 0:
        case 1: {  // a user's folder (0775 or 0700) with a file and an
                   // entry-named file of the user's
          ASSERT_EQ(::mkdir(shard.c_str(), i % 4 == 0 ? 0775 : 0700), 0);
          ::chmod(shard.c_str(), i % 4 == 0 ? 0775 : 0700);
          WriteFile(shard + "/thesis.tex", absl::StrCat("chapter ", i));
          WriteFile(shard + "/.tmp-0123456789abcdef-1-0-0", "user temp");
          struct timespec old[2] = {{0, UTIME_OMIT},
                                    {::time(nullptr) - 7200, 0}};
          ::utimensat(AT_FDCWD,
                      (shard + "/.tmp-0123456789abcdef-1-0-0").c_str(), old, 0);
          break;
        }
        case 2:  // a file named like a shard
          WriteFile(shard, absl::StrCat("notes ", i));
          break;
        case 3:  // a link named like a shard
          ASSERT_EQ(::symlink(dir_.Sub("elsewhere").c_str(), shard.c_str()), 0);
          break;
      }
    }
    // Files of the user's named like the entries of keys 0..299, where
    // their shard is a folder.
    for (int k = 0; k < 300; ++k) {
      const std::string digest = KeyFor(seed_, k).digest;
      const std::string shard = absl::StrCat(dir, "/", digest.substr(0, 2));
      struct stat st;
      if (k % 3 == 0 && ::lstat(shard.c_str(), &st) == 0 &&
          S_ISDIR(st.st_mode)) {
        WriteFile(absl::StrCat(shard, "/", digest, ".fjc"),
                  absl::StrCat("not a cache entry ", k));
      }
    }
    ASSERT_TRUE(std::filesystem::create_directory(dir + "/.rejected-ab-1-2"));
    WriteFile(dir + "/.rejected-ab-1-2/draft.txt", "a draft");
    WriteFile(dir + "/.tmp-0123456789abcdef-1-0-0", "root temp");
  }

  CacheConfig Config(const std::string& dir, uint64_t max_bytes = 0) {
    CacheConfig c;
    c.dir = dir;
    c.memory = false;
    if (max_bytes != 0) c.max_bytes = max_bytes;
    c.log = Logger(LogLevel::kDebug, [this](LogLevel, absl::string_view line) {
      log_ += std::string(line) + "\n";
    });
    return c;
  }

  // Builds `n` keys through `cache` (each compiled or served).
  void Build(ModuleCache& cache, int first, int n) {
    for (int i = first; i < first + n; ++i) {
      absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
          KeyFor(seed_, i), [&]() -> absl::StatusOr<jit::Artifact> {
            return ArtifactFor(seed_, i, 4096);
          });
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }

  const uint64_t seed_;
  Rng rng_;
  TempDir dir_;
  std::string log_;
};

// A build into D and a clear of D, where D is a user's folder (issue 45's
// report). Nothing in it changes; the disk tier says why it is off.
TEST_F(CacheOwnershipTest, AFolderThatIsNotACacheIsNeverTouched) {
  const std::string d = dir_.Sub("user");
  ASSERT_TRUE(std::filesystem::create_directory(d));
  Plant(d);
  WriteFile(d + "/CACHEDIR.TAG",
            "Signature: 8a477f597d28d172789f06886806bc55\n");
  const auto before = Snapshot(d);
  {
    ModuleCache cache(Config(d));
    Build(cache, 0, 64);
    Build(cache, 0, 8);
    EXPECT_EQ(cache.stats().disk_hits, 0u);
    ModuleCache::TierState disk;
    for (const ModuleCache::TierState& t : cache.Tiers()) {
      if (t.tier == "disk") disk = t;
    }
    ASSERT_EQ(disk.tier, "disk");
    EXPECT_FALSE(disk.on);
    EXPECT_TRUE(absl::StrContains(disk.detail, "not a fleetjit cache"))
        << disk.detail;
    EXPECT_FALSE(cache.Clear().ok());
  }
  EXPECT_TRUE(absl::StrContains(log_, "is not a fleetjit cache")) << log_;
  EXPECT_EQ(Snapshot(d), before) << log_;
}

// A cache fleetjit made, into which the user's things were put: builds,
// rejections of the user's entry-named files, eviction under a small cap
// and `cache clear` remove fleetjit's entries and nothing of the user's.
TEST_F(CacheOwnershipTest, ACacheKeepsWhatItDidNotWrite) {
  const std::string d = dir_.Sub("cache");
  {
    ModuleCache cache(Config(d));
    Build(cache, 1000, 4);  // makes and tags the folder
  }
  struct stat st;
  ASSERT_EQ(::stat((d + "/CACHEDIR.TAG").c_str(), &st), 0);
  // Move fleetjit's shards away, plant the user's things, and put them back
  // where the names are free.
  std::map<std::string, std::string> ours;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 2) {
      ours[name] = dir_.Sub("ours-" + name);
      std::filesystem::rename(e.path(), ours[name]);
    }
  }
  Plant(d);
  auto user_files = Snapshot(d);
  user_files.erase("/.fleetjit-lock");  // fleetjit's (the first builds')
  for (auto& [name, aside] : ours) {
    if (::lstat((d + "/" + name).c_str(), &st) != 0) {
      std::filesystem::rename(aside, d + "/" + name);
    }
  }
  {
    ModuleCache cache(Config(d, /*max_bytes=*/64 * 1024));  // evicts
    Build(cache, 0, 300);
    EXPECT_GT(cache.stats().rejected_entries, 0u) << log_;
    EXPECT_GT(cache.stats().evictions, 0u) << log_;
    ASSERT_TRUE(cache.Clear().ok());  // what is left is checked below
  }
  EXPECT_TRUE(absl::StrContains(log_, "fleetjit did not write it")) << log_;
  EXPECT_TRUE(absl::StrContains(log_, "refusing directory")) << log_;
  // Every planted path is as it was; what else is left is fleetjit's tag.
  auto after = Snapshot(d);
  for (const auto& [path, what] : user_files) {
    auto it = after.find(path);
    ASSERT_NE(it, after.end()) << path << " was deleted";
    EXPECT_EQ(it->second, what) << path << " was changed";
  }
  for (const auto& [path, what] : after) {
    EXPECT_TRUE(user_files.count(path) || path == "/CACHEDIR.TAG" ||
                (path.size() == 3 && ours.count(path.substr(1))))
        << path << " was left behind";
  }
  EXPECT_EQ(ReadFile(dir_.Sub("elsewhere/keep.txt")), "linked-to data");
}

// A folder that holds only a cache made before the tag is adopted: it gets
// the tag and its entries keep hitting.
TEST_F(CacheOwnershipTest, ACacheFromBeforeTheTagIsAdopted) {
  const std::string d = dir_.Sub("cache");
  {
    ModuleCache cache(Config(d));
    Build(cache, 0, 8);
  }
  ASSERT_EQ(::unlink((d + "/CACHEDIR.TAG").c_str()), 0);
  ModuleCache cache(Config(d));
  Build(cache, 0, 8);
  EXPECT_EQ(cache.stats().disk_hits, 8u) << log_;
  struct stat st;
  EXPECT_EQ(::stat((d + "/CACHEDIR.TAG").c_str(), &st), 0);
}

// An empty folder the user made (a private one) becomes a cache.
TEST_F(CacheOwnershipTest, AnEmptyFolderBecomesACache) {
  const std::string d = dir_.Sub("empty");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  ModuleCache cache(Config(d));
  Build(cache, 0, 4);
  Build(cache, 0, 4);
  EXPECT_EQ(cache.stats().disk_hits, 4u) << log_;
}

// The build lock's file (DiskCache::LockKey) follows the same rules: made
// 0600 in fleetjit's folder, used and deleted only when fleetjit's; a
// user's file or a link under that name is left alone (builds then go
// without the lock, and say so).
TEST_F(CacheOwnershipTest, TheLockFileIsFleetjitsAndNothingElseIsTouched) {
  const std::string d = dir_.Sub("cache");
  const std::string lock = d + "/.fleetjit-lock";
  {
    ModuleCache cache(Config(d));
    Build(cache, 0, 3);
  }
  struct stat st;
  ASSERT_EQ(::lstat(lock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(absl::StartsWith(ReadFile(lock), "fleetjit build lock"));
  {
    // Ours: a clear deletes it with the entries; the next build makes it.
    ModuleCache cache(Config(d));
    ASSERT_TRUE(cache.Clear().ok());
    EXPECT_NE(::lstat(lock.c_str(), &st), 0);
    Build(cache, 0, 1);
    EXPECT_EQ(::lstat(lock.c_str(), &st), 0);
  }
  // The user's file, then a link, under its name.
  ASSERT_TRUE(std::filesystem::create_directories(dir_.Sub("elsewhere")));
  WriteFile(dir_.Sub("elsewhere/keep.txt"), "linked-to data");
  for (bool link : {false, true}) {
    ASSERT_EQ(::unlink(lock.c_str()), 0);
    if (link) {
      ASSERT_EQ(::symlink(dir_.Sub("elsewhere/keep.txt").c_str(), lock.c_str()),
                0);
    } else {
      WriteFile(lock, "the user's lock");
    }
    const auto before = Snapshot(d);
    {
      ModuleCache cache(Config(d));
      ASSERT_TRUE(cache.Clear().ok());
      Build(cache, 0, 3);  // built again, without the lock
      EXPECT_EQ(cache.stats().misses, 3u);
      ASSERT_TRUE(cache.Clear().ok());
    }
    EXPECT_TRUE(absl::StrContains(log_, "not locking builds")) << log_;
    ASSERT_EQ(::lstat(lock.c_str(), &st), 0);
    if (link) {
      EXPECT_TRUE(S_ISLNK(st.st_mode));
    } else {
      EXPECT_EQ(ReadFile(lock), "the user's lock");
    }
    const auto after = Snapshot(d);
    EXPECT_EQ(after.at("/.fleetjit-lock"), before.at("/.fleetjit-lock"));
    log_.clear();
  }
  EXPECT_EQ(ReadFile(dir_.Sub("elsewhere/keep.txt")), "linked-to data");
}

}  // namespace
}  // namespace fleetjit
