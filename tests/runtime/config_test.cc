// ApplyEnvironment: the one reader of the FLEETJIT_* overrides.
#include "runtime/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/cache/module_cache.h"

namespace fleetjit {
namespace {

TEST(ConfigTest, ThunksSwitchAndRecordedOverrides) {
  ::unsetenv("FLEETJIT_THUNKS");
  RuntimeOptions defaults;
  ASSERT_TRUE(ApplyEnvironment(defaults).ok());
  EXPECT_TRUE(defaults.thunks);
  ::setenv("FLEETJIT_THUNKS", "0", 1);
  RuntimeOptions off;
  ASSERT_TRUE(ApplyEnvironment(off).ok());
  EXPECT_FALSE(off.thunks);
  ASSERT_FALSE(off.env_overrides.empty());
  EXPECT_EQ(off.env_overrides.back(), "FLEETJIT_THUNKS");
  ::setenv("FLEETJIT_THUNKS", "1", 1);
  RuntimeOptions on;
  on.thunks = false;
  ASSERT_TRUE(ApplyEnvironment(on).ok());
  EXPECT_TRUE(on.thunks);
  ::unsetenv("FLEETJIT_THUNKS");
}

TEST(ConfigTest, AMalformedValueNamesTheVariable) {
  ::setenv("FLEETJIT_COPY_IMPL", "fastest", 1);
  RuntimeOptions options;
  absl::Status s = ApplyEnvironment(options);
  ::unsetenv("FLEETJIT_COPY_IMPL");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("FLEETJIT_COPY_IMPL"), absl::string_view::npos);
}

// Sets variables for one test and restores them after it.
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<const char*> names) {
    for (const char* n : names) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(n);
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved_) {
      if (v) {
        ::setenv(n, v->c_str(), 1);
      } else {
        ::unsetenv(n);
      }
    }
  }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

TEST(ConfigTest, PreopenTakesAllNoneOrOrdinals) {
  EnvGuard guard({"FLEETJIT_PREOPEN", "FLEETJIT_PRELOAD_NVRTC"});
  std::mt19937 rng(std::random_device{}());
  const std::vector<int> ordinals = {static_cast<int>(rng() % 4), 4 + static_cast<int>(rng() % 60)};
  struct Case {
    std::string value;
    std::vector<int> want;
  } cases[] = {
      {"all", {-1}},
      {"none", {}},
      {absl::StrJoin(ordinals, ","), ordinals},
      {absl::StrCat(" ", ordinals[1], " , ", ordinals[0]), {ordinals[1], ordinals[0]}},
  };
  for (const Case& c : cases) {
    ::setenv("FLEETJIT_PREOPEN", c.value.c_str(), 1);
    RuntimeOptions options;
    options.preopen_devices = {7, 8, 9};  // the caller's list, replaced
    ASSERT_TRUE(ApplyEnvironment(options).ok()) << c.value;
    EXPECT_EQ(options.preopen_devices, c.want) << c.value;
    EXPECT_NE(std::find(options.env_overrides.begin(), options.env_overrides.end(),
                        "FLEETJIT_PREOPEN"),
              options.env_overrides.end());
  }
  // Unset (or empty): the caller's list stands.
  ::setenv("FLEETJIT_PREOPEN", "", 1);
  RuntimeOptions options;
  options.preopen_devices = {3};
  ASSERT_TRUE(ApplyEnvironment(options).ok());
  EXPECT_EQ(options.preopen_devices, std::vector<int>{3});
}

TEST(ConfigTest, ABadPreopenValueNamesTheVariableAndTheItem) {
  EnvGuard guard({"FLEETJIT_PREOPEN"});
  for (const char* bad : {"-1", "0,,1", "0;1", "gpu0", "1,x", "ALL", "99999999999"}) {
    ::setenv("FLEETJIT_PREOPEN", bad, 1);
    RuntimeOptions options;
    options.preopen_devices = {5};
    absl::Status s = ApplyEnvironment(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "FLEETJIT_PREOPEN")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("'", bad, "'"))) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "expected all, none or device ordinals")) << s;
    EXPECT_EQ(options.preopen_devices, std::vector<int>{5}) << bad;
  }
}

TEST(ConfigTest, PreloadNvrtcIsOneOrZero) {
  EnvGuard guard({"FLEETJIT_PRELOAD_NVRTC"});
  for (bool initial : {false, true}) {
    for (const char* v : {"1", "0"}) {
      ::setenv("FLEETJIT_PRELOAD_NVRTC", v, 1);
      RuntimeOptions options;
      options.preload_nvrtc = initial;
      ASSERT_TRUE(ApplyEnvironment(options).ok());
      EXPECT_EQ(options.preload_nvrtc, v[0] == '1');
      EXPECT_EQ(options.env_overrides.back(), "FLEETJIT_PRELOAD_NVRTC");
    }
  }
  for (const char* bad : {"yes", "2", "true", "on"}) {
    ::setenv("FLEETJIT_PRELOAD_NVRTC", bad, 1);
    RuntimeOptions options;
    absl::Status s = ApplyEnvironment(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "FLEETJIT_PRELOAD_NVRTC")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "expected 1 or 0")) << s;
  }
}

TEST(ConfigTest, TheCacheLocationAndRemoteTierComeFromTheEnvironmentHere) {
  EnvGuard guard({"FLEETJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "FLEETJIT_REMOTE_CACHE",
                  "FLEETJIT_FLEET_KEY", "FLEETJIT_CACHE_MAX_BYTES", "FLEETJIT_CACHE"});
  const std::string tag = std::to_string(std::random_device{}());
  ::setenv("XDG_CACHE_HOME", ("/x/xdg" + tag).c_str(), 1);
  ::setenv("HOME", ("/x/home" + tag).c_str(), 1);
  RuntimeOptions defaults;
  ASSERT_TRUE(ApplyEnvironment(defaults).ok());
  EXPECT_EQ(defaults.cache.dir, "");
  EXPECT_EQ(defaults.cache.xdg_cache_home, "/x/xdg" + tag);
  EXPECT_EQ(defaults.cache.home, "/x/home" + tag);
  // The caller's own variables are not overrides.
  for (const std::string& name : defaults.env_overrides) {
    EXPECT_TRUE(name != "XDG_CACHE_HOME" && name != "HOME" && name != "FLEETJIT_CACHE_DIR")
        << name;
  }
  EXPECT_EQ(ModuleCache(defaults.cache).dir(), "/x/xdg" + tag + "/fleetjit");

  ::setenv("FLEETJIT_CACHE_DIR", ("/x/fj" + tag).c_str(), 1);
  ::setenv("FLEETJIT_REMOTE_CACHE", "redis://127.0.0.1:1", 1);
  ::setenv("FLEETJIT_FLEET_KEY", tag.c_str(), 1);
  RuntimeOptions set;
  ASSERT_TRUE(ApplyEnvironment(set).ok());
  EXPECT_EQ(set.cache.dir, "/x/fj" + tag);
  EXPECT_EQ(set.cache.remote.url, "redis://127.0.0.1:1");
  EXPECT_EQ(set.cache.remote.fleet_key, tag);
  const std::string listed = absl::StrJoin(set.env_overrides, ",");
  EXPECT_TRUE(absl::StrContains(listed, "FLEETJIT_CACHE_DIR,FLEETJIT_REMOTE_CACHE,FLEETJIT_FLEET_KEY"))
      << listed;
  // The cache part alone, as test fixtures use it.
  CacheConfig cache;
  std::vector<std::string> overrides;
  ASSERT_TRUE(ApplyCacheEnvironment(cache, overrides).ok());
  EXPECT_EQ(cache.dir, "/x/fj" + tag);
  EXPECT_EQ(overrides.size(), 3u);
  ::setenv("FLEETJIT_CACHE_MAX_BYTES", "lots", 1);
  absl::Status bad = ApplyCacheEnvironment(cache, overrides);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "FLEETJIT_CACHE_MAX_BYTES")) << bad;
}

// Configuration is read in runtime/config.cc only. The other reads of the
// environment in the library are not configuration of a runtime, and are
// listed here with why; a new one fails this test.
TEST(ConfigTest, OnlyConfigReadsTheEnvironment) {
  namespace fs = std::filesystem;
  const fs::path root = FJ_SOURCE_DIR;
  if (!fs::exists(root / "runtime" / "config.cc")) GTEST_SKIP() << "no source tree at " << root;
  const std::vector<std::string> allowed = {
      "runtime/config.cc",
      "platform/nvrtc_locate.cc",  // LD_LIBRARY_PATH: the dynamic loader's own search
      "jit/nvrtc_pch.cc",          // TMPDIR: where scratch files go
      "platform/hiredis_api.cc",   // FLEETJIT_LIBHIREDIS: one process-wide dlopen
  };
  const std::regex reads(R"(\bgetenv\b|\benviron\b)");
  std::vector<std::string> found;
  for (const char* layer : {"base", "platform", "jit", "runtime", "capi"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      const std::string where = fs::relative(e.path(), root).string();
      if (std::find(allowed.begin(), allowed.end(), where) != allowed.end()) continue;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const std::string code = line.substr(0, line.find("//"));
        if (std::regex_search(code, reads)) {
          found.push_back(absl::StrCat(where, ":", n, ": ", line));
        }
      }
    }
  }
  for (const std::string& f : found) ADD_FAILURE() << "reads the environment: " << f;
}

}  // namespace
}  // namespace fleetjit
