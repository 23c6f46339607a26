// `fleetjit matrix` with a stub test command that fails under exactly one
// copy implementation: the matrix shows that one failure, the exit code is
// non-zero, and the JUnit XML names every variant (no GPU needed).
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;
using ::fleetjit::testing::Slurp;

// Prints what it was given; fails under cp_async, with output that needs
// escaping in XML (markup, quotes, an invalid byte, a control character).
constexpr char kStub[] = R"(#!/bin/sh
echo "impl=$FLEETJIT_COPY_IMPL check=${FLEETJIT_CHECK-unset} target=${FLEETJIT_TARGET-unset}"
if [ "$FLEETJIT_COPY_IMPL" = cp_async ]; then
  printf 'cp_async broke: <tile> & "box" \377 \001\n'
  exit 7
fi
)";

class MatrixCommandTest : public ::testing::Test {
 protected:
  MatrixCommandTest() : stub_(dir_.Sub("stub.sh")) {
    std::ofstream(stub_) << kStub;
    ::chmod(stub_.c_str(), 0755);
  }
  ScratchDir dir_;
  const std::string stub_;
};

TEST_F(MatrixCommandTest, OneFailingImplementationFailsTheMatrix) {
  const std::string junit = dir_.Sub("junit.xml");
  CliRun run = RunCli({"matrix", "--quiet", "--junit", junit, "--variants",
                       "tma@sm_90,cp_async@compute_80,sync@compute_75", "--",
                       stub_, "--stub-arg"});
  EXPECT_EQ(run.code, 1) << run.out << run.err;
  // One row per variant; only cp_async fails, with the stub's exit status.
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(run.out, '\n')) {
    if (absl::StartsWith(line, "tma ") || absl::StartsWith(line, "sync ")) {
      ++rows;
      EXPECT_TRUE(absl::StrContains(line, " pass ")) << line;
    }
    if (absl::StartsWith(line, "cp_async ")) {
      ++rows;
      EXPECT_TRUE(absl::StrContains(line, "compute_80")) << line;
      EXPECT_TRUE(absl::StrContains(line, " FAIL ")) << line;
      EXPECT_TRUE(absl::StrContains(line, " 7 ")) << line;
    }
  }
  EXPECT_EQ(rows, 3) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, "3 variants, 1 failed")) << run.out;

  const std::string xml = Slurp(junit);
  EXPECT_TRUE(absl::StrContains(xml, "<testsuite tests=\"3\" failures=\"1\""))
      << xml;
  EXPECT_TRUE(absl::StrContains(xml, "name=\"tma@sm_90\"")) << xml;
  EXPECT_TRUE(absl::StrContains(xml, "name=\"cp_async@compute_80\"")) << xml;
  EXPECT_TRUE(absl::StrContains(xml, "name=\"sync@compute_75\"")) << xml;
  EXPECT_TRUE(absl::StrContains(xml, "<failure message=\"exit status 7\">"))
      << xml;
  EXPECT_TRUE(absl::StrContains(
      xml,
      "cp_async broke: &lt;tile&gt; &amp; \"box\" \xEF\xBF\xBD \xEF\xBF\xBD"))
      << xml;
  EXPECT_TRUE(absl::StrContains(xml, "target=compute_80\ncp_async broke"))
      << xml;
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
  EXPECT_EQ(xml.find('\xff'), std::string::npos);
  EXPECT_EQ(xml.rfind("</testsuite>\n"), xml.size() - 13) << xml;
}

TEST_F(MatrixCommandTest, JsonReportsEveryVariantAndTheEnvironment) {
  CliRun run = RunCli({"matrix", "--quiet", "--json", "--variants",
                       "sync,cp_async@sm_80", "--", stub_},
                      {{"FLEETJIT_TARGET", "sm_75"}});
  EXPECT_EQ(run.code, 1) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j.at("variants").size(), 2u);
  EXPECT_EQ(j["tests"], 2);
  EXPECT_EQ(j["failures"], 1);
  const nlohmann::json& native = j["variants"][0];
  EXPECT_EQ(native["impl"], "sync");
  EXPECT_EQ(native["native"], true);
  EXPECT_EQ(native["pass"], true);
  // A native variant removes the caller's FLEETJIT_TARGET; every variant
  // runs in the copy layer's checked mode.
  EXPECT_TRUE(absl::StrContains(native["output_tail"].get<std::string>(),
                                "impl=sync check=1 target=unset"))
      << native;
  EXPECT_EQ(j["variants"][1]["exit_status"], 7);
}

// --no-check leaves FLEETJIT_CHECK as the caller's environment has it.
TEST_F(MatrixCommandTest, NoCheckLeavesTheCheckedModeAlone) {
  CliRun run = RunCli({"matrix", "--quiet", "--json", "--no-check",
                       "--variants", "sync", "--", stub_},
                      {{"FLEETJIT_CHECK", std::nullopt}});
  EXPECT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_TRUE(absl::StrContains(
      j["variants"][0]["output_tail"].get<std::string>(), "check=unset"))
      << j;
}

TEST_F(MatrixCommandTest, NamedTargetsGiveEachImplementationTheyHave) {
  CliRun run = RunCli(
      {"matrix", "--quiet", "--json", "--target", "sm_80,sm_90", "--", "true"});
  EXPECT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  std::vector<std::string> names;
  for (const auto& v : j["variants"]) {
    names.push_back(v["impl"].get<std::string>() + "@" +
                    v["target"].get<std::string>());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cp_async@sm_80", "sync@sm_80",
                                             "tma@sm_90", "cp_async@sm_90",
                                             "sync@sm_90"}));
}

TEST_F(MatrixCommandTest, UsageErrors) {
  // An implementation the target lacks, an unknown one, no command.
  CliRun run = RunCli({"matrix", "--variants", "tma@sm_80", "--", "true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "tma@sm_80")) << run.err;
  run = RunCli({"matrix", "--variants", "dma", "--", "true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "dma")) << run.err;
  run = RunCli({"matrix", "--variants", "sync"});
  EXPECT_EQ(run.code, 2);
  EXPECT_TRUE(absl::StrContains(run.err, "command")) << run.err;
}

TEST_F(MatrixCommandTest, WithoutAGpuOrAListItExplainsAndExits3) {
  CliRun run = RunCli({"matrix", "--", "true"},
                      {{"FLEETJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}});
  EXPECT_EQ(run.code, 3) << run.out;
  EXPECT_TRUE(absl::StrContains(run.err, "--target")) << run.err;
}

TEST_F(MatrixCommandTest, ACommandThatCannotStartFailsItsVariant) {
  CliRun run = RunCli({"matrix", "--quiet", "--json", "--variants", "sync",
                       "--", dir_.Sub("no-such-program")});
  EXPECT_EQ(run.code, 1);
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["variants"][0]["exit_status"], 127);
  EXPECT_TRUE(absl::StrContains(j["variants"][0]["output_tail"].dump(),
                                "no-such-program"));
}

}  // namespace
}  // namespace fleetjit
