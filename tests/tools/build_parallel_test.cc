// `fleetjit build --target LIST`, run as a user would: targets built in
// parallel child processes (-j), one line per target or one JSON object
// (--json), failures per target, NVRTC's list of targets, and --emit
// fatbin (checked by reading the fatbin's entries). NVRTC, no GPU; the
// fatbin needs nvFatbin (scripts/dev/install-deps) and says so without it.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "jit/image_reader.h"
#include "platform/nvfatbin_library.h"
#include "platform/nvrtc_library.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;
using Env = std::vector<std::pair<std::string, std::optional<std::string>>>;

class BuildParallelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto nvrtc = NvrtcLibrary::Default().Get();
    if (!nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc.status();
    env_ = {{"FLEETJIT_CACHE_DIR", dir_.Sub("cache")}};
  }
  ScratchDir dir_;
  Env env_;
};

TEST_F(BuildParallelTest, JsonHasARowPerTargetInTheOrderNamed) {
  CliRun run = RunCli({"build", "-j", "2", "--json", "--target",
                       "sm_80,sm_90,compute_90", "examples/saxpy.cu"},
                      env_);
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << run.out;
  EXPECT_EQ(j["jobs"], 2);
  EXPECT_EQ(j["file"], "examples/saxpy.cu");
  ASSERT_EQ(j["targets"].size(), 3u) << run.out;
  const char* want[][2] = {
      {"sm_80", "cp_async"}, {"sm_90", "tma"}, {"compute_90", "tma"}};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(want[i][0]);
    const nlohmann::json& r = j["targets"][i];
    EXPECT_EQ(r["target"], want[i][0]);
    EXPECT_EQ(r["ok"], true);
    EXPECT_EQ(r["built_for"], want[i][0]);
    EXPECT_EQ(r["impl"], want[i][1]);
    EXPECT_EQ(r["cache"], "compiled");  // a fresh cache folder
    EXPECT_GT(r["image_bytes"].get<uint64_t>(), 0u);
  }
  // The children filled the one cache: a second run only hits.
  run = RunCli({"build", "-j", "2", "--json", "--target",
                "sm_80,sm_90,compute_90", "examples/saxpy.cu"},
               env_);
  ASSERT_EQ(run.code, 0) << run.err;
  j = nlohmann::json::parse(run.out, nullptr, false);
  for (const auto& r : j["targets"]) EXPECT_EQ(r["cache"], "disk hit") << r;
}

TEST_F(BuildParallelTest, PrintsALinePerTargetAndWritesTheImages) {
  CliRun run = RunCli({"build", "-j", "2", "--target", "sm_80,sm_86,sm_90",
                       "-o", dir_.Sub("out"), "examples/saxpy.cu"},
                      env_);
  ASSERT_EQ(run.code, 0) << run.err;
  std::vector<std::string> lines =
      absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << run.out;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::StartsWith(lines[i], absl::StrCat("[", i + 1, "/3] ")))
        << lines[i];
  }
  for (const char* t : {"sm_80", "sm_86", "sm_90"}) {
    const std::string path = dir_.Sub(absl::StrCat("out/saxpy.", t, ".cubin"));
    EXPECT_TRUE(absl::StrContains(run.out, path)) << run.out;
    EXPECT_GT(std::filesystem::file_size(path), 0u) << path;
  }
  // No terminal: no progress bar on stderr.
  EXPECT_FALSE(absl::StrContains(run.err, "\r")) << run.err;
}

TEST_F(BuildParallelTest, AFailedTargetFailsItsRowAndTheExitCode) {
  std::ofstream(dir_.Sub("bad.cu"))
      << "extern \"C\" __global__ void k(int* p) { *p = no_such_name; }\n";
  for (const char* jobs : {"1", "2"}) {
    SCOPED_TRACE(jobs);
    CliRun run = RunCli({"build", "-j", jobs, "--json", "--target",
                         "sm_80,sm_90", dir_.Sub("bad.cu")},
                        env_);
    EXPECT_EQ(run.code, 1) << run.err;
    // The build log reaches stderr, from the child too.
    EXPECT_TRUE(absl::StrContains(run.err, "no_such_name")) << run.err;
    nlohmann::json j = nlohmann::json::parse(run.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << run.out;
    ASSERT_EQ(j["targets"].size(), 2u);
    for (const auto& r : j["targets"]) {
      EXPECT_EQ(r["ok"], false) << r;
      EXPECT_TRUE(
          absl::StrContains(r["error"].get<std::string>(), "BUILD_ERROR"))
          << r;
    }
  }
}

TEST_F(BuildParallelTest, ATargetNvrtcDoesNotListIsAUsageError) {
  const NvrtcApi& api = **NvrtcLibrary::Default().Get();
  if (api.supported_archs.empty() || api.supported_archs.front() <= 70) {
    GTEST_SKIP() << "this NVRTC still builds sm_70";
  }
  CliRun run =
      RunCli({"build", "--target", "sm_70,sm_80", "examples/saxpy.cu"}, env_);
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "--target sm_70")) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "sm_75, sm_80")) << run.err;
  EXPECT_FALSE(absl::StrContains(run.err, "invalid value")) << run.err;
}

TEST_F(BuildParallelTest, EmitFatbinHoldsEachCubinAndPtxForTheNewest) {
  for (const char* jobs : {"1", "2"}) {
    SCOPED_TRACE(jobs);
    const std::string out = dir_.Sub(absl::StrCat("fat", jobs));
    CliRun run = RunCli({"build", "-j", jobs, "--target", "sm_90,sm_80",
                         "--emit", "fatbin", "-o", out, "examples/saxpy.cu"},
                        env_);
    auto nvrtc = NvrtcLibrary::Default().Get();
    if (!ResolveNvFatbinLibrary("", (*nvrtc)->library_path).ok()) {
      // Without nvFatbin: a failure that says what to install.
      EXPECT_EQ(run.code, 1);
      EXPECT_TRUE(absl::StrContains(run.err, "UNAVAILABLE")) << run.err;
      EXPECT_TRUE(absl::StrContains(run.err, "libnvfatbin")) << run.err;
      GTEST_SKIP() << "no nvFatbin: " << run.err;
    }
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_TRUE(absl::StrContains(run.out, "compute_90 (PTX)")) << run.out;
    const std::string fatbin = testing::Slurp(out + "/saxpy.fatbin");
    auto entries = jit::FatbinEntries(fatbin);
    ASSERT_TRUE(entries.ok()) << entries.status();
    ASSERT_EQ(entries->size(), 3u);
    EXPECT_EQ((*entries)[0].kind, jit::FatbinEntry::Kind::kCubin);
    EXPECT_EQ((*entries)[0].arch, 90);
    EXPECT_EQ((*entries)[1].kind, jit::FatbinEntry::Kind::kCubin);
    EXPECT_EQ((*entries)[1].arch, 80);
    EXPECT_EQ((*entries)[2].kind, jit::FatbinEntry::Kind::kPtx);
    EXPECT_EQ((*entries)[2].arch, 90);
    auto names = jit::FatbinKernelNames(fatbin);
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_NE(std::find(names->begin(), names->end(), "saxpy"), names->end());
    // Only the fatbin is left: the per-target images were scratch.
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out),
                            std::filesystem::directory_iterator()),
              1);
  }
}

TEST_F(BuildParallelTest, EmitFatbinNeedsTargets) {
  CliRun run = RunCli({"build", "--emit", "fatbin", "examples/saxpy.cu"}, env_);
  EXPECT_EQ(run.code, 2) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "--target")) << run.err;
}

}  // namespace
}  // namespace fleetjit
