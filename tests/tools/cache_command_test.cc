#include "tools/cache_command.h"

#include <sys/stat.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "runtime/cache/module_cache.h"
#include "tests/common/env.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::ReadFile;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::WriteFile;

class CacheCommandTest : public ::testing::Test {
 protected:
  CacheCommandTest() : seed_(FreshSeed()), cache_dir_(dir_.Sub("cache")) {}

  void Fill(int count) {
    CacheConfig config;
    config.dir = cache_dir_;
    ModuleCache cache(config);
    for (int i = 0; i < count; ++i) {
      ASSERT_TRUE(cache
                      .GetOrBuild(KeyFor(seed_, i),
                                  [&]() -> absl::StatusOr<jit::Artifact> {
                                    return ArtifactFor(seed_, i, 2048);
                                  })
                      .ok());
    }
  }
  // Runs the command; returns (exit code, output).
  std::pair<int, std::string> Run(std::vector<std::string> args) {
    std::FILE* out = std::tmpfile();
    int code = RunCacheCommand(args, out);
    std::fflush(out);
    std::rewind(out);
    std::string text;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), out)) > 0)
      text.append(buffer, n);
    std::fclose(out);
    return {code, text};
  }
  std::string EntryPath(int i) {
    return DiskCache(cache_dir_, 0, Logger())
        .EntryPath(KeyFor(seed_, i).digest);
  }

  const uint64_t seed_;
  TempDir dir_;
  const std::string cache_dir_;
};

TEST_F(CacheCommandTest, StatsCountsDiskEntries) {
  Fill(3);
  auto [code, text] = Run({"stats", "--dir", cache_dir_});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "entries       3")) << text;
  EXPECT_TRUE(absl::StrContains(text, cache_dir_)) << text;
  std::tie(code, text) = Run({"stats", "--json", "--dir=" + cache_dir_});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "\"disk_entries\":3,")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"memory_hits\":0")) << text;
}

TEST_F(CacheCommandTest, LsListsEntriesWithTheirTarget) {
  Fill(2);
  auto [code, text] = Run({"ls", "--dir", cache_dir_});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, KeyFor(seed_, 0).digest.substr(0, 16)))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "sm_90a")) << text;
  EXPECT_TRUE(absl::StrContains(text, "2 entries")) << text;
  std::tie(code, text) = Run({"ls", "--json", "--dir", cache_dir_});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(
      absl::StrContains(text, "\"digest\":\"" + KeyFor(seed_, 1).digest + "\""))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\"bad\":0}")) << text;
}

TEST_F(CacheCommandTest, VerifyFindsDamageAndFailsWithExitCode1) {
  Fill(3);
  auto [code, text] = Run({"verify", "--dir", cache_dir_});
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "0 bad")) << text;
  std::string bytes = ReadFile(EntryPath(1));
  bytes[bytes.size() - 1] ^= 0x01;
  WriteFile(EntryPath(1), bytes);
  std::tie(code, text) = Run({"verify", "--dir", cache_dir_});
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(absl::StrContains(text, "checksum")) << text;
  EXPECT_TRUE(absl::StrContains(text, "1 bad")) << text;
  std::tie(code, text) = Run({"verify", "--json", "--dir", cache_dir_});
  EXPECT_EQ(code, 1);
  EXPECT_TRUE(absl::StrContains(text, "\"bad\":1}")) << text;
}

TEST_F(CacheCommandTest, ClearDeletesEntries) {
  Fill(4);
  auto [code, text] = Run({"clear", "--dir", cache_dir_});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "deleted 4 entries")) << text;
  struct stat st;
  EXPECT_NE(::stat(EntryPath(0).c_str(), &st), 0);
  std::tie(code, text) = Run({"stats", "--json", "--dir", cache_dir_});
  EXPECT_TRUE(absl::StrContains(text, "\"disk_entries\":0,")) << text;
}

// A folder that is not a fleetjit cache: clear refuses it, says why and
// deletes nothing, even what is named like a shard, a link or a folder
// fleetjit once moved aside.
TEST_F(CacheCommandTest, ClearRefusesAFolderThatIsNotACache) {
  const std::string d = dir_.Sub("user");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  WriteFile(d + "/ab", "a user file named like a shard");
  ASSERT_EQ(::symlink(dir_.path().c_str(), (d + "/ef").c_str()), 0);
  ASSERT_EQ(::mkdir((d + "/.rejected-cd-1-2").c_str(), 0700), 0);
  WriteFile(d + "/.rejected-cd-1-2/draft.txt", "a draft");
  for (bool json : {false, true}) {
    std::vector<std::string> args = {"clear", "--dir", d};
    if (json) args.push_back("--json");
    auto [code, text] = Run(args);
    EXPECT_EQ(code, 1) << text;
    EXPECT_FALSE(absl::StrContains(text, "deleted")) << text;
  }
  EXPECT_EQ(ReadFile(d + "/ab"), "a user file named like a shard");
  struct stat st;
  EXPECT_EQ(::lstat((d + "/ef").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(ReadFile(d + "/.rejected-cd-1-2/draft.txt"), "a draft");
}

TEST_F(CacheCommandTest, BadArgumentsAreAUsageError) {
  EXPECT_EQ(Run({"frobnicate"}).first, 2);
  EXPECT_EQ(Run({"ls", "--bogus"}).first, 2);
  EXPECT_EQ(Run({"ls", "extra", "words"}).first, 2);
}

// A path that is a file: every verb says so and exits 1, stats included
// (its scan alone would count "0 entries").
TEST_F(CacheCommandTest, AFileGivenAsTheDirectoryFailsEveryVerb) {
  const std::string file = dir_.Sub("a-file");
  WriteFile(file, "not a directory");
  for (const char* verb : {"stats", "ls", "verify", "clear"}) {
    for (bool json : {false, true}) {
      std::vector<std::string> args = {verb, "--dir", file};
      if (json) args.push_back("--json");
      auto [code, text] = Run(args);
      EXPECT_EQ(code, 1) << verb << ": " << text;
      EXPECT_FALSE(absl::StrContains(text, "entries")) << verb << ": " << text;
    }
  }
  EXPECT_EQ(ReadFile(file), "not a directory");
}

TEST_F(CacheCommandTest, MissingDirectoryIsEmptyNotAnError) {
  auto [code, text] = Run({"ls", "--dir", dir_.Sub("nothing-here")});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "0 entries")) << text;
  std::tie(code, text) = Run({"stats", "--dir", dir_.Sub("nothing-here")});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "entries       0")) << text;
  struct stat st;
  EXPECT_NE(::stat(dir_.Sub("nothing-here").c_str(), &st), 0)
      << "ls created it";
}

// `fleetjit cache export FILE`: the folder's entries (every target's, or
// --target's) into one bundle, signed when FLEETJIT_FLEET_KEY is set;
// `ls --bundle` lists it through the runtime's checks.
TEST_F(CacheCommandTest, ExportWritesEveryOrTheNamedTargetsIntoABundle) {
  ::fleetjit::testing::ScopedEnv no_key("FLEETJIT_FLEET_KEY", nullptr);
  Fill(3);  // sm_90a
  {
    CacheConfig config;
    config.dir = cache_dir_;
    ModuleCache cache(config);
    CacheKeyInputs in = ::fleetjit::testing::KeyInputsFor(seed_, 10);
    in.target = "sm_80";
    ASSERT_TRUE(cache
                    .GetOrBuild(MakeCacheKey(in),
                                [&]() -> absl::StatusOr<jit::Artifact> {
                                  return ArtifactFor(seed_, 10, 2048);
                                })
                    .ok());
  }
  const std::string bundle = dir_.Sub("app.fjb");
  auto [code, text] = Run({"export", bundle, "--dir", cache_dir_, "--json"});
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"entries\":4,")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"targets\":[\"sm_80\",\"sm_90a\"]"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "\"signed\":false")) << text;
  std::tie(code, text) = Run({"verify", "--bundle", bundle});
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "4 entries")) << text;
  std::tie(code, text) = Run({"ls", "--bundle", bundle});
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, KeyFor(seed_, 0).digest.substr(0, 16)))
      << text;

  // One target; a target with nothing is a failure.
  std::tie(code, text) = Run({"export", dir_.Sub("sm80.fjb"), "--dir",
                              cache_dir_, "--target", "sm_80", "--json"});
  EXPECT_EQ(code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text, "\"entries\":1,")) << text;
  std::tie(code, text) = Run({"export", dir_.Sub("sm75.fjb"), "--dir",
                              cache_dir_, "--target", "sm_75"});
  EXPECT_EQ(code, 1);

  // Signed with the fleet key: a runtime with another key refuses it.
  {
    ::fleetjit::testing::ScopedEnv key(
        "FLEETJIT_FLEET_KEY",
        "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    std::tie(code, text) = Run({"export", bundle, "--dir", cache_dir_});
    EXPECT_EQ(code, 0) << text;
    EXPECT_TRUE(absl::StrContains(text, "signed with the fleet key")) << text;
    std::tie(code, text) = Run({"ls", "--bundle", bundle});
    EXPECT_EQ(code, 0) << text;
  }
  {
    ::fleetjit::testing::ScopedEnv key(
        "FLEETJIT_FLEET_KEY",
        "ff112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
    std::tie(code, text) = Run({"ls", "--bundle", bundle});
    EXPECT_EQ(code, 1);
  }

  // Another file under the name is not replaced.
  WriteFile(dir_.Sub("notes"), "my notes");
  std::tie(code, text) =
      Run({"export", dir_.Sub("notes"), "--dir", cache_dir_});
  EXPECT_EQ(code, 1);
  EXPECT_EQ(ReadFile(dir_.Sub("notes")), "my notes");
  // Usage errors.
  EXPECT_EQ(Run({"export", "--dir", cache_dir_}).first, 2);
  EXPECT_EQ(Run({"ls", bundle}).first, 2);
  EXPECT_EQ(Run({"stats", "--target", "sm_80"}).first, 2);
}

}  // namespace
}  // namespace fleetjit
