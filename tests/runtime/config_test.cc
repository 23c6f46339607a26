// ApplyEnvironment: the one reader of the FLEETJIT_* overrides.
#include "runtime/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
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
#include "tests/common/env.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::EnvGuard;

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

TEST(ConfigTest, PreopenTakesAllNoneOrOrdinals) {
  EnvGuard guard({"FLEETJIT_PREOPEN", "FLEETJIT_PRELOAD_NVRTC"});
  std::mt19937 rng(std::random_device{}());
  const std::vector<int> ordinals = {static_cast<int>(rng() % 4),
                                     4 + static_cast<int>(rng() % 60)};
  struct Case {
    std::string value;
    std::vector<int> want;
  } cases[] = {
      {"all", {-1}},
      {"none", {}},
      {absl::StrJoin(ordinals, ","), ordinals},
      {absl::StrCat(" ", ordinals[1], " , ", ordinals[0]),
       {ordinals[1], ordinals[0]}},
  };
  for (const Case& c : cases) {
    ::setenv("FLEETJIT_PREOPEN", c.value.c_str(), 1);
    RuntimeOptions options;
    options.preopen_devices = {7, 8, 9};  // the caller's list, replaced
    ASSERT_TRUE(ApplyEnvironment(options).ok()) << c.value;
    EXPECT_EQ(options.preopen_devices, c.want) << c.value;
    EXPECT_NE(std::find(options.env_overrides.begin(),
                        options.env_overrides.end(), "FLEETJIT_PREOPEN"),
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
  for (const char* bad :
       {"-1", "0,,1", "0;1", "gpu0", "1,x", "ALL", "99999999999"}) {
    ::setenv("FLEETJIT_PREOPEN", bad, 1);
    RuntimeOptions options;
    options.preopen_devices = {5};
    absl::Status s = ApplyEnvironment(options);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "FLEETJIT_PREOPEN")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("'", bad, "'")))
        << s;
    EXPECT_TRUE(
        absl::StrContains(s.message(), "expected all, none or device ordinals"))
        << s;
    EXPECT_EQ(options.preopen_devices, std::vector<int>{5}) << bad;
  }
}

// Every switch takes the one syntax, in any case, and refuses anything
// else by the variable's name and the accepted words.
// FLEETJIT_COPY_DEFINES: copy-layer macros as -D options, in order; a value
// that is not FJ_NAME=INTEGER items, or names a macro twice, fails naming
// the variable and the item.
TEST(ConfigTest, CopyDefinesAreCopyLayerMacrosWithIntegerValues) {
  EnvGuard guard({"FLEETJIT_COPY_DEFINES"});
  std::mt19937 rng(std::random_device{}());
  const int a = static_cast<int>(rng() % 100000),
            b = -1 - static_cast<int>(rng() % 9);
  const std::string value = absl::StrCat(" FJ_TMA_SMALL_TILES=", a,
                                         ",FJ_FLAT_LISTS=", b, "  FJ_X9=0");
  ::setenv("FLEETJIT_COPY_DEFINES", value.c_str(), 1);
  RuntimeOptions options;
  ASSERT_TRUE(ApplyEnvironment(options).ok()) << value;
  const std::vector<std::string> want = {
      absl::StrCat("-DFJ_TMA_SMALL_TILES=", a),
      absl::StrCat("-DFJ_FLAT_LISTS=", b), "-DFJ_X9=0"};
  EXPECT_EQ(options.copy_defines, want);
  EXPECT_NE(std::find(options.env_overrides.begin(),
                      options.env_overrides.end(), "FLEETJIT_COPY_DEFINES"),
            options.env_overrides.end());
  for (const char* bad :
       {"FJ_TMA_SMALL_TILES", "TMA_SMALL_TILES=1", "FJ_=1", "FJ_A=x",
        "FJ_A=1.5", "FJ_A-B=1", "FJ_A=1,FJ_A=2", "FJ_A=1;FJ_B=2"}) {
    ::setenv("FLEETJIT_COPY_DEFINES", bad, 1);
    RuntimeOptions o;
    const absl::Status st = ApplyEnvironment(o);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(st.message(), "FLEETJIT_COPY_DEFINES")) << st;
  }
}

TEST(ConfigTest, EverySwitchTakesOneSyntax) {
  struct Switch {
    const char* name;
    bool RuntimeOptions::*field;  // null: the cache's disk switch
  };
  const std::vector<Switch> switches = {
      {"FLEETJIT_CACHE", nullptr},
      {"FLEETJIT_PCH", &RuntimeOptions::pch},
      {"FLEETJIT_THUNKS", &RuntimeOptions::thunks},
      {"FLEETJIT_PRELOAD_NVRTC", &RuntimeOptions::preload_nvrtc}};
  EnvGuard guard({"FLEETJIT_CACHE", "FLEETJIT_PCH", "FLEETJIT_THUNKS",
                  "FLEETJIT_PRELOAD_NVRTC"});
  std::mt19937 rng(std::random_device{}());
  auto random_case = [&](std::string word) {
    for (char& c : word) {
      if (rng() % 2)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    return word;
  };
  for (const Switch& sw : switches) {
    SCOPED_TRACE(sw.name);
    auto value = [&](const RuntimeOptions& o) {
      return sw.field == nullptr ? o.cache.disk : o.*(sw.field);
    };
    for (const bool want : {true, false}) {
      for (const char* word :
           want ? std::vector<const char*>{"1", "true", "on", "yes"}
                : std::vector<const char*>{"0", "false", "off", "no"}) {
        const std::string v = random_case(word);
        ::setenv(sw.name, v.c_str(), 1);
        RuntimeOptions options;  // poisoned: the opposite of the answer
        if (sw.field == nullptr) {
          options.cache.disk = !want;
        } else {
          options.*(sw.field) = !want;
        }
        absl::Status s = ApplyEnvironment(options);
        ASSERT_TRUE(s.ok()) << v << ": " << s;
        EXPECT_EQ(value(options), want) << v;
        EXPECT_EQ(options.env_overrides.back(), sw.name) << v;
      }
    }
    // Values the old parsers took ("2" was on for three of them, "yes" was
    // refused by one) and others: each refused, by name.
    const std::string noise = std::to_string(rng() % 1000 + 2);
    for (const std::string& bad :
         {noise, std::string("enable"), std::string("y"), std::string("0x1"),
          std::string("truee")}) {
      ::setenv(sw.name, bad.c_str(), 1);
      RuntimeOptions options;
      absl::Status s = ApplyEnvironment(options);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_TRUE(absl::StrContains(s.message(), sw.name)) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("'", bad, "'")))
          << s;
      EXPECT_TRUE(absl::StrContains(
          s.message(), "expected 1, 0, true, false, on, off, yes or no"))
          << s;
    }
    ::unsetenv(sw.name);
  }
}

// Each row of the table is applied: a fresh value set for a variable lands
// in its field and is recorded as an override.
TEST(ConfigTest, TheTableDrivesParsing) {
  std::vector<const char*> names;
  for (const EnvVariable& row : EnvVariables()) names.push_back(row.name);
  EnvGuard guard(names);
  const std::string tag = std::to_string(std::random_device{}());
  ::setenv("FLEETJIT_LIBHIREDIS", ("/x/hiredis" + tag + ".so").c_str(), 1);
  ::setenv("FLEETJIT_LIBNVRTC", ("/x/nvrtc" + tag + ".so").c_str(), 1);
  RuntimeOptions options;
  ASSERT_TRUE(ApplyEnvironment(options).ok());
  EXPECT_EQ(options.cache.remote.libhiredis_path, "/x/hiredis" + tag + ".so");
  EXPECT_EQ(options.libnvrtc_path, "/x/nvrtc" + tag + ".so");
  EXPECT_EQ(
      options.env_overrides,
      (std::vector<std::string>{"FLEETJIT_LIBHIREDIS", "FLEETJIT_LIBNVRTC"}));
  EXPECT_EQ(EnvValue("FLEETJIT_LIBNVRTC"), "/x/nvrtc" + tag + ".so");
  EXPECT_EQ(EnvValue("FLEETJIT_TARGET"), std::nullopt);
  // The cache's part reads the cache rows only.
  CacheConfig cache;
  std::vector<std::string> overrides;
  ASSERT_TRUE(ApplyCacheEnvironment(cache, overrides).ok());
  EXPECT_EQ(cache.remote.libhiredis_path, "/x/hiredis" + tag + ".so");
  EXPECT_EQ(overrides, std::vector<std::string>{"FLEETJIT_LIBHIREDIS"});
  // Every row is documented and named once.
  std::vector<std::string> seen;
  for (const EnvVariable& row : EnvVariables()) {
    EXPECT_TRUE(absl::StartsWith(row.name, "FLEETJIT_")) << row.name;
    EXPECT_NE(std::string(row.syntax), "") << row.name;
    EXPECT_GT(std::string(row.help).size(), 10u) << row.name;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), row.name), 0) << row.name;
    seen.push_back(row.name);
  }
}

// The lists users read are the table's: every FLEETJIT_* name the header
// and the README mention is a row (FLEETJIT_LIBRARY is the bindings' own,
// read by them before any runtime exists), and every row is named in the
// header's list.
TEST(ConfigTest, TheHeaderAndReadmeNameOnlyTheTablesVariables) {
  namespace fs = std::filesystem;
  const fs::path root = FJ_SOURCE_DIR;
  if (!fs::exists(root / "README.md"))
    GTEST_SKIP() << "no source tree at " << root;
  std::vector<std::string> rows;
  for (const EnvVariable& row : EnvVariables()) rows.push_back(row.name);
  const std::regex name(R"(FLEETJIT_[A-Z0-9_]*[A-Z0-9])");
  for (const char* file : {"include/fleetjit/fleetjit.h", "README.md"}) {
    std::ifstream in(root / file);
    std::string text((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
    ASSERT_FALSE(text.empty()) << file;
    for (std::sregex_iterator it(text.begin(), text.end(), name), end;
         it != end; ++it) {
      const std::string n = it->str();
      if (n == "FLEETJIT_LIBRARY" || absl::StartsWith(n, "FLEETJIT_FLEETJIT_H"))
        continue;
      EXPECT_NE(std::find(rows.begin(), rows.end(), n), rows.end())
          << file << " names " << n
          << ", which runtime/config.cc does not read";
    }
    if (std::string(file) == "include/fleetjit/fleetjit.h") {
      for (const std::string& r : rows) {
        EXPECT_TRUE(absl::StrContains(text, r))
            << file << " does not name " << r;
      }
    }
  }
}

// docs/configuration.md holds the table's Markdown between its markers.
TEST(ConfigTest, TheConfigurationDocIsCurrent) {
  namespace fs = std::filesystem;
  const fs::path doc = fs::path(FJ_SOURCE_DIR) / "docs" / "configuration.md";
  if (!fs::exists(doc)) GTEST_SKIP() << "no source tree at " << FJ_SOURCE_DIR;
  std::ifstream in(doc);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  in.close();
  const std::string begin =
      "<!-- BEGIN generated by runtime/config.cc (EnvVariablesMarkdown) -->\n";
  const std::string end = "<!-- END generated -->";
  const size_t b = text.find(begin);
  const size_t e = text.find(end);
  ASSERT_NE(b, std::string::npos) << "no BEGIN marker in " << doc;
  ASSERT_NE(e, std::string::npos) << "no END marker in " << doc;
  ASSERT_LT(b, e);
  const std::string current =
      text.substr(b + begin.size(), e - b - begin.size());
  const std::string want = EnvVariablesMarkdown();
  const char* update = std::getenv("FJ_UPDATE_CONFIG_DOC");
  if (update != nullptr && std::string(update) == "1" && current != want) {
    std::ofstream(doc, std::ios::trunc)
        << text.substr(0, b + begin.size()) << want << text.substr(e);
    GTEST_SKIP() << "rewrote " << doc;
  }
  EXPECT_EQ(current, want) << doc << " is stale: run FJ_UPDATE_CONFIG_DOC=1 "
                           << "config_test --gtest_filter='*DocIsCurrent'";
  for (const EnvVariable& row : EnvVariables()) {
    EXPECT_TRUE(absl::StrContains(want, absl::StrCat("`", row.name, "`")))
        << row.name;
  }
}

TEST(ConfigTest, TheCacheLocationAndRemoteTierComeFromTheEnvironmentHere) {
  EnvGuard guard({"FLEETJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME",
                  "FLEETJIT_REMOTE_CACHE", "FLEETJIT_FLEET_KEY",
                  "FLEETJIT_CACHE_MAX_BYTES", "FLEETJIT_CACHE",
                  "FLEETJIT_LIBHIREDIS"});
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
    EXPECT_TRUE(name != "XDG_CACHE_HOME" && name != "HOME" &&
                name != "FLEETJIT_CACHE_DIR")
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
  EXPECT_TRUE(absl::StrContains(
      listed, "FLEETJIT_CACHE_DIR,FLEETJIT_REMOTE_CACHE,FLEETJIT_FLEET_KEY"))
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
  EXPECT_TRUE(absl::StrContains(bad.message(), "FLEETJIT_CACHE_MAX_BYTES"))
      << bad;
}

// Configuration is read in runtime/config.cc only. The other reads of the
// environment in the library are not configuration of a runtime, and are
// listed here with why; a new one fails this test.
TEST(ConfigTest, OnlyConfigReadsTheEnvironment) {
  namespace fs = std::filesystem;
  const fs::path root = FJ_SOURCE_DIR;
  if (!fs::exists(root / "runtime" / "config.cc"))
    GTEST_SKIP() << "no source tree at " << root;
  const std::vector<std::string> allowed = {
      "runtime/config.cc",
      "platform/nvrtc_locate.cc",  // LD_LIBRARY_PATH: the dynamic loader's own
                                   // search
      "jit/nvrtc_pch.cc",          // TMPDIR: where scratch files go
      "tools/bench_build.cc",      // TMPDIR: where its scratch cache goes
      "tools/build_command.cc",    // TMPDIR: the -j workers' scratch folder
      "tools/child_process.cc",  // environ: the child's, for `fleetjit matrix`
  };
  const std::regex reads(R"(\bgetenv\b|\benviron\b)");
  std::vector<std::string> found;
  for (const char* layer :
       {"base", "platform", "jit", "runtime", "capi", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      const std::string where = fs::relative(e.path(), root).string();
      if (std::find(allowed.begin(), allowed.end(), where) != allowed.end())
        continue;
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
  for (const std::string& f : found)
    ADD_FAILURE() << "reads the environment: " << f;
}

}  // namespace
}  // namespace fleetjit
