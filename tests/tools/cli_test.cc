// The `fleetjit` binary's conventions, run as a user would run it (no GPU
// needed): every command answers --help, --version names both versions, a
// bad flag is named, JSON always parses, and a malformed FLEETJIT_*
// variable is reported.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;

const std::vector<std::string> kCommands = {
    "info", "build", "demo", "selftest", "matrix", "cache", "bench"};

TEST(CliTest, EveryCommandAnswersHelpOnStdout) {
  for (const std::string& command : kCommands) {
    for (const char* flag : {"--help", "-h"}) {
      CliRun run = RunCli({command, flag});
      EXPECT_EQ(run.code, 0) << command << " " << flag << ": " << run.err;
      EXPECT_TRUE(absl::StrContains(run.out, "fleetjit " + command))
          << command << ": " << run.out;
      EXPECT_TRUE(absl::StrContains(run.out, "--help")) << run.out;
      EXPECT_EQ(run.err, "") << command;
    }
    CliRun run = RunCli({"help", command});
    EXPECT_EQ(run.code, 0) << command;
    EXPECT_TRUE(absl::StrContains(run.out, "fleetjit " + command)) << run.out;
  }
  CliRun run = RunCli({"--help"});
  EXPECT_EQ(run.code, 0);
  for (const std::string& command : kCommands) {
    EXPECT_TRUE(absl::StrContains(run.out, "  " + command + " ")) << run.out;
  }
}

TEST(CliTest, HelpAfterOtherFlagsStillHelps) {
  CliRun run = RunCli({"build", "--target", "sm_80", "--help"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(absl::StrContains(run.out, "--emit")) << run.out;
  run = RunCli({"cache", "stats", "--help"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(absl::StrContains(run.out, "--dir")) << run.out;
}

TEST(CliTest, VersionNamesTheCliAndTheLibrary) {
  for (const char* flag : {"--version", "version"}) {
    CliRun run = RunCli({flag});
    EXPECT_EQ(run.code, 0) << run.err;
    EXPECT_TRUE(absl::StrContains(run.out, "fleetjit CLI ")) << run.out;
    const uint32_t v = fj_version();
    EXPECT_TRUE(absl::StrContains(run.out, "libfleetjit " +
                                               std::to_string(v >> 16) + "." +
                                               std::to_string(v & 0xffff)))
        << run.out;
  }
}

TEST(CliTest, ABadFlagIsNamedAndExits2) {
  for (const std::string& command : kCommands) {
    CliRun run = RunCli({command, "--bogus-flag"});
    EXPECT_EQ(run.code, 2) << command << ": " << run.out << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, "--bogus-flag"))
        << command << ": " << run.err;
  }
  CliRun run = RunCli({"build", "--emit", "elf", "x.cu"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "--emit")) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "elf")) << run.err;
  run = RunCli({"frobnicate"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "frobnicate")) << run.err;
}

TEST(CliTest, CacheJsonIsValidUtf8ForAnyPath) {
  ScratchDir dir;
  const std::string bad_path = dir.Sub(
      "c\xff\xfe"
      "\"quoted\"\n");
  CliRun run = RunCli({"cache", "stats", "--json", "--dir", bad_path});
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(run.out)) << run.out;
  const std::string dir_field = j.at("dir").get<std::string>();
  EXPECT_TRUE(absl::StrContains(dir_field, "c\xEF\xBF\xBD")) << dir_field;
  EXPECT_TRUE(absl::StrContains(dir_field, "\"quoted\"\n")) << dir_field;
  EXPECT_EQ(j.at("disk_entries").get<int>(), 0);
  for (const char* verb : {"ls", "verify", "clear"}) {
    run = RunCli({"cache", verb, "--json", "--dir", bad_path});
    EXPECT_EQ(run.code, 0) << verb << ": " << run.err;
    EXPECT_NO_THROW(nlohmann::json::parse(run.out)) << verb << ": " << run.out;
  }
}

TEST(CliTest, InfoJsonParses) {
  CliRun run = RunCli({"info", "--json", "--target", "sm_80,compute_75"});
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j.at("targets").size(), 2u);
  EXPECT_EQ(j["targets"][0]["impl"], "cp_async");
  run = RunCli({"info", "--json"}, {{"FLEETJIT_THUNKS", "1"}});
  ASSERT_EQ(run.code, 0) << run.err;
  j = nlohmann::json::parse(run.out);
  EXPECT_TRUE(j.at("devices").is_array());
  EXPECT_TRUE(absl::StrContains(j.at("environment").dump(), "FLEETJIT_THUNKS"));
}

TEST(CliTest, AMalformedCacheCapIsReportedNotIgnored) {
  ScratchDir dir;
  CliRun run = RunCli({"cache", "stats", "--dir", dir.Sub("c")},
                      {{"FLEETJIT_CACHE_MAX_BYTES", "12zz"}});
  EXPECT_EQ(run.code, 2) << run.out;
  EXPECT_TRUE(absl::StrContains(run.err, "FLEETJIT_CACHE_MAX_BYTES"))
      << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "12zz")) << run.err;
  run = RunCli({"cache", "stats", "--json", "--dir", dir.Sub("c")},
               {{"FLEETJIT_CACHE_MAX_BYTES", "4096"}});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("max_bytes").get<int>(), 4096);
}

// README and docs/configuration.md: a malformed FLEETJIT_* variable exits
// 2, with the library's message naming it; other failures to create the
// runtime stay 1.
TEST(CliTest, AMalformedVariableExits2) {
  ScratchDir dir;
  const std::pair<std::string, std::string> bad[] = {
      {"FLEETJIT_CACHE", "maybe"},          {"FLEETJIT_TARGET", "sm_9x"},
      {"FLEETJIT_LOG", "chatty"},           {"FLEETJIT_PREOPEN", "most"},
      {"FLEETJIT_CACHE_MAX_BYTES", "12zz"}, {"FLEETJIT_COPY_IMPL", "fast"}};
  for (const auto& [name, value] : bad) {
    CliRun run =
        RunCli({"info"}, {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}, {name, value}});
    EXPECT_EQ(run.code, 2) << name << "=" << value << ": " << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, name)) << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, value)) << run.err;
  }
  CliRun run = RunCli(
      {"build", "--target", "sm_90", "examples/saxpy.cu"},
      {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}, {"FLEETJIT_CACHE", "maybe"}});
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "FLEETJIT_CACHE")) << run.err;
  // Well-formed, but NVRTC is not there to preload: a failure, said once.
  run = RunCli({"info"}, {{"FLEETJIT_CACHE_DIR", dir.Sub("c")},
                          {"FLEETJIT_PRELOAD_NVRTC", "1"},
                          {"FLEETJIT_LIBNVRTC", dir.Sub("no/libnvrtc.so")}});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "UNAVAILABLE")) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, dir.Sub("no/libnvrtc.so"))) << run.err;
  const size_t first = run.err.find("creating the runtime");
  ASSERT_NE(first, std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("creating the runtime", first + 1), std::string::npos)
      << run.err;
}

// --publish without a remote tier is a failure (1), said once, not a usage
// error: the variables are well-formed.
TEST(CliTest, PublishWithoutARemoteCacheFails) {
  ScratchDir dir;
  CliRun run =
      RunCli({"build", "--publish", "--target", "sm_90", "examples/saxpy.cu"},
             {{"FLEETJIT_CACHE_DIR", dir.Sub("c")},
              {"FLEETJIT_REMOTE_CACHE", std::nullopt}});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "--publish needs a remote cache"))
      << run.err;
}

// README: "2 a bad flag or value (named on stderr)": a --target no target
// parser accepts is one.
TEST(CliTest, AnUnknownTargetIsNamedAndExits2) {
  ScratchDir dir;
  const std::vector<std::vector<std::string>> commands = {
      {"info", "--target", "sm_1"},
      {"info", "--json", "--target", "sm_80,sm_1"},
      {"build", "--target", "sm_1", "examples/saxpy.cu"},
      {"build", "--target", "sm_90,sm_1", "examples/saxpy.cu"},
      {"bench", "build", "--target", "sm_1"}};
  for (const std::vector<std::string>& args : commands) {
    CliRun run = RunCli(args, {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}});
    EXPECT_EQ(run.code, 2) << args[0] << ": " << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, "--target sm_1: unknown target"))
        << args[0] << ": " << run.err;
    EXPECT_EQ(run.out, "") << args[0];
  }
}

// A directory given as FILE.cu is named as one and exits 1, as a missing
// file does (not built as an empty source).
TEST(CliTest, BuildNamesADirectoryGivenAsTheSource) {
  ScratchDir dir;
  const std::string folder = dir.Sub("adir.cu");
  std::filesystem::create_directory(folder);
  CliRun run = RunCli({"build", "--target", "sm_90", folder},
                      {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err,
                                "cannot read '" + folder + "': Is a directory"))
      << run.err;
  run = RunCli({"build", "--target", "sm_90", dir.Sub("missing.cu")},
               {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "No such file")) << run.err;
  const std::string object = dir.Sub("adir.cubin");
  std::filesystem::create_directory(object);
  run = RunCli(
      {"build", "--target", "sm_90", "--object", object, "examples/saxpy.cu"},
      {{"FLEETJIT_CACHE_DIR", dir.Sub("c")}});
  EXPECT_EQ(run.code, 1) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err,
                                "cannot read '" + object + "': Is a directory"))
      << run.err;
}

TEST(CliTest, SelftestWithoutAGpuExits3WithAReason) {
  for (const char* device : {"0", "all"}) {
    CliRun run = RunCli({"selftest", "--device", device, "--json"},
                        {{"FLEETJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}});
    EXPECT_EQ(run.code, 3) << run.err;
    nlohmann::json j = nlohmann::json::parse(run.out);
    EXPECT_EQ(j.at("gpu"), false);
    EXPECT_TRUE(absl::StrContains(run.err, "no GPU")) << run.err;
  }
  CliRun run = RunCli({"selftest", "--device", "first"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "first")) << run.err;
}

// `fleetjit info --target` says where an arch- or family-specific target
// would make an emulated feature native (plain sm_100: multicast).
TEST(CliTest, InfoSaysWhichSuffixMakesAFeatureNative) {
  CliRun run = RunCli({"info", "--target", "sm_100,sm_100a,sm_80"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_TRUE(absl::StrContains(
      run.out, "multicast    emulated (native on sm_100a, sm_100f)"))
      << run.out;
  // sm_100a has it already; sm_80 has no suffixed target to point at.
  EXPECT_EQ(run.out.find("(native on"), run.out.rfind("(native on")) << run.out;
  run = RunCli({"info", "--json", "--target", "sm_100,sm_100a"});
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << run.out;
  EXPECT_EQ(j["targets"][0]["native_with_suffix"]["multicast"],
            nlohmann::json::array({"sm_100a", "sm_100f"}));
  EXPECT_TRUE(j["targets"][1]["native_with_suffix"].empty()) << run.out;
}

}  // namespace
}  // namespace fleetjit
