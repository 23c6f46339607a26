// `fleetjit tune` as a child process: a malformed space is refused (exit 2)
// naming the field, a missing argument is a usage error, and without a GPU
// the command says so (exit 3), directly and through --isolate's child.
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/tools/cli_process.h"

namespace fleetjit::cli {
namespace {

using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;

std::string Write(const ScratchDir& dir, const std::string& name,
                  const std::string& text) {
  const std::string path = dir.Sub(name);
  std::ofstream(path) << text;
  return path;
}

constexpr char kKernel[] =
    "extern \"C\" __global__ void fill(float* y) { y[threadIdx.x] = TILE; }\n";

TEST(TuneCliTest, BadSpacesAndUsage) {
  ScratchDir dir;
  const std::string cu = Write(dir, "fill.cu", kKernel);
  const std::string bad =
      Write(dir, "bad.json",
            R"({"shapes": [64, {"block": [1, 2, 3, 4]}], "args": []})");
  auto r = RunCli({"tune", cu, "--space", bad, "--kernel", "fill"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "shapes[1].block")) << r.err;
  r = RunCli({"tune", cu});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--space")) << r.err;
  const std::string no_kernel =
      Write(dir, "nokernel.json",
            R"({"shapes": [64], "args": [{"buffer": 256, "output": true}]})");
  r = RunCli({"tune", cu, "--space", no_kernel});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--kernel")) << r.err;
  r = RunCli({"tune", cu, "--space", no_kernel, "--kernel", "fill", "--exclude",
              "1/x"});
  EXPECT_EQ(r.code, 2) << r.err;
}

// A directory given as FILE.cu or as the space is named as one (exit 1, as
// for a missing file), not read as empty text or invalid JSON.
TEST(TuneCliTest, ADirectoryIsNotAFile) {
  ScratchDir dir;
  const std::string cu = Write(dir, "fill.cu", kKernel);
  const std::string folder = dir.Sub("space.json");
  std::filesystem::create_directory(folder);
  auto r = RunCli({"tune", cu, "--space", folder, "--kernel", "fill"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(
      absl::StrContains(r.err, "cannot read '" + folder + "': Is a directory"))
      << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "JSON")) << r.err;
  r = RunCli({"tune", folder, "--space", folder, "--kernel", "fill"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "Is a directory")) << r.err;
  r = RunCli({"tune", cu, "--space", dir.Sub("missing.json")});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "No such file")) << r.err;
}

TEST(TuneCliTest, WithoutAGpuItSaysSo) {
  ScratchDir dir;
  const std::string cu = Write(dir, "fill.cu", kKernel);
  const std::string space =
      Write(dir, "space.json",
            R"({"kernel": "fill", "macro_sets": ["-DTILE=1", "-DTILE=2"],
          "shapes": [32, 64], "grid": [1],
          "args": [{"buffer": 256, "fill": "zero", "output": true}]})");
  auto probe = RunCli({"info"});
  if (!absl::StrContains(probe.out + probe.err, "devices: none")) {
    GTEST_SKIP()
        << "a GPU is present: tests/runtime/tuning/tune_gpu_test tunes on it";
  }
  for (bool isolate : {false, true}) {
    std::vector<std::string> args = {"tune", cu, "--space", space};
    if (isolate) args.push_back("--isolate");
    auto r = RunCli(args, {{"FLEETJIT_CACHE_DIR", dir.Sub("cache")}});
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    EXPECT_TRUE(absl::StrContains(r.out + r.err, "no GPU")) << r.out << r.err;
  }
}

}  // namespace
}  // namespace fleetjit::cli
