// `fleetjit build a.cu b.cu` (since 1.3): several sources, --object, --lto
// link into one cubin (NVRTC and nvJitLink, no GPU: the links name sm_90).
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/seed.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(BuildLinkTest, SeveralSourcesLinkIntoOneCubin) {
  std::mt19937_64 rng =
      fleetjit::testing::SeededRng("SeveralSourcesLinkIntoOneCubin");
  ScratchDir dir;
  std::ofstream(dir.Sub("a.cu"))
      << "extern \"C\" __device__ float cli_g(float);\n"
         "extern \"C\" __global__ void cli_k(float* y) { y[0] = cli_g(y[0]); "
         "}\n";
  std::ofstream(dir.Sub("b.cu"))
      << "extern \"C\" __device__ float cli_g(float x) { return "
      << (rng() % 100000 + 2) << " * x; }\n";
  const std::vector<std::pair<std::string, std::optional<std::string>>> env = {
      {"FLEETJIT_CACHE_DIR", dir.Sub("cache")}};
  CliRun linked = RunCli({"build", dir.Sub("a.cu"), dir.Sub("b.cu"), "--target",
                          "sm_90", "-o", dir.Sub("out")},
                         env);
  if (linked.code != 0 && absl::StrContains(linked.err, "libnvrtc")) {
    GTEST_SKIP() << "no NVRTC: " << linked.err;
  }
  ASSERT_EQ(linked.code, 0) << linked.err;
  std::string cubin = ReadAll(dir.Sub("out/a.sm_90.cubin"));
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_TRUE(absl::StrContains(cubin, "cli_k"));
  CliRun lto = RunCli(
      {"build", dir.Sub("a.cu"), dir.Sub("b.cu"), "--target", "sm_90", "--lto"},
      env);
  EXPECT_EQ(lto.code, 0) << lto.err;
  // The callee alone is missing: nvJitLink's log names the symbol.
  CliRun missing =
      RunCli({"build", dir.Sub("a.cu"), "--lto", "--target", "sm_90"}, env);
  EXPECT_EQ(missing.code, 1);
  EXPECT_TRUE(absl::StrContains(missing.err, "'cli_g'")) << missing.err;
  // Refused before any build: an object of no known kind, PTX output.
  std::ofstream(dir.Sub("x.bin")) << "bytes";
  CliRun object = RunCli({"build", dir.Sub("a.cu"), "--object",
                          dir.Sub("x.bin"), "--target", "sm_90"},
                         env);
  EXPECT_EQ(object.code, 2);
  EXPECT_TRUE(absl::StrContains(object.err, "x.bin")) << object.err;
  CliRun ptx = RunCli({"build", dir.Sub("a.cu"), dir.Sub("b.cu"), "--emit",
                       "ptx", "--target", "sm_90"},
                      env);
  EXPECT_EQ(ptx.code, 2);
  EXPECT_TRUE(absl::StrContains(ptx.err, "--emit ptx")) << ptx.err;
}

TEST(BuildOutputTest, OutputFolderIsCreatedWithItsParentsAndAFileIsRefused) {
  std::mt19937_64 rng = fleetjit::testing::SeededRng(
      "OutputFolderIsCreatedWithItsParentsAndAFileIsRefused");
  ScratchDir dir;
  const std::string name = "k" + std::to_string(rng() % 1000000);
  std::ofstream(dir.Sub(name + ".cu"))
      << "extern \"C\" __global__ void " << name
      << "(float* y) { y[0] += " << (rng() % 1000 + 1) << ".f; }\n";
  const std::vector<std::pair<std::string, std::optional<std::string>>> env = {
      {"FLEETJIT_CACHE_DIR", dir.Sub("cache")}};
  CliRun nested = RunCli({"build", dir.Sub(name + ".cu"), "--target", "sm_90",
                          "-o", dir.Sub("out/a/b")},
                         env);
  if (nested.code != 0 && absl::StrContains(nested.err, "libnvrtc")) {
    GTEST_SKIP() << "no NVRTC: " << nested.err;
  }
  ASSERT_EQ(nested.code, 0) << nested.err;
  const std::string cubin =
      ReadAll(dir.Sub("out/a/b/" + name + ".sm_90.cubin"));
  ASSERT_GE(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_TRUE(absl::StrContains(cubin, name));
  // A file where the folder should be: a clear error naming it, no crash.
  std::ofstream(dir.Sub("plain_file")) << "bytes";
  CliRun file = RunCli({"build", dir.Sub(name + ".cu"), "--target", "sm_90",
                        "-o", dir.Sub("plain_file")},
                       env);
  EXPECT_EQ(file.code, 1);
  EXPECT_TRUE(absl::StrContains(file.err, "cannot create")) << file.err;
  EXPECT_TRUE(absl::StrContains(file.err, "plain_file")) << file.err;
}

}  // namespace
}  // namespace fleetjit
