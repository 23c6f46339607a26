// `fleetjit build -I DIR -D NAME=VAL` and `fleetjit info` listing CUDA's
// header folders, run as a user would run them (NVRTC, no GPU: the builds
// name sm_90).
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;

TEST(BuildIncludeTest, IncludeFoldersAndDefinesReachTheBuild) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.Sub("inc"));
  std::ofstream(dir.Sub("inc/tile.h")) << "#define TILE 64\n";
  std::ofstream(dir.Sub("k.cu"))
      << "#include \"tile.h\"\n#ifndef EXTRA\n#error EXTRA not "
         "defined\n#endif\n"
         "extern \"C\" __global__ void k(int* p) { *p = TILE + EXTRA; }\n";
  const std::vector<std::pair<std::string, std::optional<std::string>>> env = {
      {"FLEETJIT_CACHE_DIR", dir.Sub("cache")}};
  CliRun ok = RunCli({"build", dir.Sub("k.cu"), "--target", "sm_90", "-I",
                      dir.Sub("inc"), "-D", "EXTRA=1"},
                     env);
  if (ok.code != 0 && absl::StrContains(ok.err, "libnvrtc")) {
    GTEST_SKIP() << "no NVRTC: " << ok.err;
  }
  EXPECT_EQ(ok.code, 0) << ok.err;
  CliRun missing = RunCli(
      {"build", dir.Sub("k.cu"), "--target", "sm_90", "-D", "EXTRA"}, env);
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(
      absl::StrContains(missing.err, "header 'tile.h' not found; searched:"))
      << missing.err;
}

TEST(BuildIncludeTest, InfoListsCudaHeaderFoldersWithTheirOrigin) {
  ScratchDir scratch;
  const std::string root = scratch.Sub("tk"), include = root + "/include";
  std::filesystem::create_directories(include);
  CliRun text = RunCli({"info"}, {{"CUDA_HOME", root}});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(
      absl::StrContains(text.out, "CUDA headers: " + include + " (CUDA_HOME)"))
      << text.out;
  CliRun json = RunCli({"info", "--json"}, {{"CUDA_HOME", root}});
  ASSERT_EQ(json.code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j.contains("include_folders")) << json.out;
  ASSERT_FALSE(j["include_folders"].empty());
  EXPECT_EQ(j["include_folders"][0]["path"], include);
  EXPECT_EQ(j["include_folders"][0]["origin"], "CUDA_HOME");
}

}  // namespace
}  // namespace fleetjit
