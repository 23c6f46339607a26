// The `fleetjit` binary's conventions, run as a user would run it (no GPU
// needed): every command answers --help, --version names both versions, a
// bad flag is named, JSON always parses, and a malformed FLEETJIT_*
// variable is reported.
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

}  // namespace
}  // namespace fleetjit
