// `fleetjit bench`, run as a user would run it: its help and bad flags;
// without a GPU, copy and launch (and build without --target) exit 3
// saying why; `bench build --target sm_90` measures on any machine with
// NVRTC, and its JSON carries real figures in the order the table says
// (a hit is faster than the compile it saves). `bench kernels --corpus`
// runs the sample corpus (tests/data/corpus_sample) end to end on the fake
// CUDA driver, whose kernels write nothing: every case is caught wrong.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/test_paths.h"
#include "tests/tools/cli_process.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CliRun;
using ::fleetjit::testing::RunCli;
using ::fleetjit::testing::ScratchDir;

int GpuCount() {
  fj_runtime* rt = nullptr;
  int32_t n = 0;
  if (fj_runtime_create(nullptr, &rt) == nullptr)
    fj_status_free(fj_device_count(rt, &n));
  fj_status_free(fj_runtime_destroy(rt));
  return n;
}

bool Empty(const std::string& dir) {
  return std::filesystem::is_empty(std::filesystem::path(dir));
}

TEST(BenchCommandTest, HelpNamesTheThreeBenches) {
  CliRun run = RunCli({"bench", "--help"});
  EXPECT_EQ(run.code, 0) << run.err;
  for (const char* word : {"copy", "launch", "build", "kernels", "--json",
                           "--target", "--device"}) {
    EXPECT_TRUE(absl::StrContains(run.out, word)) << word << ": " << run.out;
  }
  EXPECT_EQ(run.err, "");
}

TEST(BenchCommandTest, BadWordsAndFlagsAreNamedAndExit2) {
  struct Case {
    std::vector<std::string> args;
    const char* named;
  };
  const std::vector<Case> cases = {
      {{"bench", "frobnicate"}, "frobnicate"},
      {{"bench"}, "copy, launch, build or kernels"},
      {{"bench", "copy", "--mib", "0"}, "--mib"},
      {{"bench", "launch", "--reps", "-4"}, "--reps"},
      {{"bench", "copy", "--device", "-1"}, "--device"},
      {{"bench", "launch", "--target", "sm_90"}, "--target"},
      {{"bench", "build", "--bogus"}, "--bogus"},
  };
  for (const Case& c : cases) {
    CliRun run = RunCli(c.args);
    EXPECT_EQ(run.code, 2) << c.named << ": " << run.out << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, c.named))
        << c.named << ": " << run.err;
    EXPECT_EQ(run.out, "") << c.named;
  }
}

TEST(BenchCommandTest, WithoutAGpuTheDeviceBenchesExit3SayingWhy) {
  if (GpuCount() > 0)
    GTEST_SKIP()
        << "a GPU is present: scripts/gpu-host/gpu-check runs the benches";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "copy"},
        {"bench", "launch", "--json"},
        {"bench", "kernels"},
        {"bench", "build"}}) {
    CliRun run = RunCli(args);
    EXPECT_EQ(run.code, 3) << args[1] << ": " << run.out << run.err;
    EXPECT_TRUE(absl::StrContains(run.err, "no GPU")) << run.err;
    EXPECT_EQ(run.out, "") << args[1];
  }
  CliRun run = RunCli({"bench", "build"});
  EXPECT_TRUE(absl::StrContains(run.err, "--target")) << run.err;
}

TEST(BenchCommandTest, BuildForANamedTargetReportsRealFigures) {
  ScratchDir tmp;
  std::filesystem::create_directory(tmp.Sub("t"));
  // FLEETJIT_CACHE_DIR would override the bench's scratch cache.
  CliRun run =
      RunCli({"bench", "build", "--target", "sm_90", "--json", "--reps", "2"},
             {{"FLEETJIT_CACHE_DIR", std::nullopt}, {"TMPDIR", tmp.Sub("t")}});
  if (run.code == 1 && absl::StrContains(run.err, "no NVRTC"))
    GTEST_SKIP() << run.err;
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["bench"], "build");
  EXPECT_EQ(j["target"], "sm_90");
  EXPECT_TRUE(j["nvrtc"].get<std::string>().find('.') != std::string::npos)
      << j["nvrtc"];
  ASSERT_EQ(j["rows"].size(), 3u) << j.dump(2);
  EXPECT_TRUE(j["skipped"].empty()) << j["skipped"];
  const std::vector<std::string> cases = {"cold build (cache miss)",
                                          "disk hit (fresh runtime)",
                                          "memory hit (same runtime)"};
  double anchor = 0;
  std::vector<double> ms;
  for (size_t i = 0; i < 3; ++i) {
    const nlohmann::json& row = j["rows"][i];
    EXPECT_EQ(row["case"], cases[i]);
    EXPECT_EQ(row["unit"], "ms");
    EXPECT_EQ(row["better"], "lower");
    EXPECT_TRUE(absl::StrContains(row["anchor"].get<std::string>(), "NVRTC"))
        << row;
    EXPECT_EQ(row["fleetjit"], "fj_module_build");
    anchor = row["anchor_value"].get<double>();
    ms.push_back(row["fleetjit_value"].get<double>());
    EXPECT_GT(anchor, 0) << row;
    EXPECT_GT(ms.back(), 0) << row;
    EXPECT_NEAR(row["ratio"].get<double>(), ms.back() / anchor,
                1e-9 * ms.back() / anchor);
  }
  // A cache hit is cheaper than the compile it saves, and costs less than
  // compiling with NVRTC alone.
  EXPECT_LT(ms[1], ms[0]);
  EXPECT_LT(ms[2], ms[0]);
  EXPECT_LT(ms[1], anchor);
  EXPECT_LT(ms[2], anchor);
  // The scratch cache is gone.
  EXPECT_TRUE(Empty(tmp.Sub("t")));
}

TEST(BenchCommandTest, BuildMeasuresTheCacheDirectoryItIsGiven) {
  ScratchDir tmp;
  const std::string dir = tmp.Sub("cache");
  CliRun run = RunCli({"bench", "build", "--target", "compute_80", "--reps",
                       "1", "--cache-dir", dir},
                      {{"FLEETJIT_CACHE_DIR", std::nullopt}});
  if (run.code == 1 && absl::StrContains(run.err, "no NVRTC"))
    GTEST_SKIP() << run.err;
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  for (const char* line :
       {"fleetjit bench build for compute_80", "cold build (cache miss)",
        "disk hit (fresh runtime)", "memory hit (same runtime)", "(anchor)"}) {
    EXPECT_TRUE(absl::StrContains(run.out, line)) << line << ": " << run.out;
  }
  ASSERT_TRUE(std::filesystem::exists(dir));
  EXPECT_FALSE(Empty(dir));  // kept: it was the caller's
}

std::string SampleCorpus() {
  std::error_code ec;
  const std::string in_tree =
      std::string(FJ_SOURCE_DIR) + "/tests/data/corpus_sample";
  if (std::filesystem::is_directory(in_tree, ec)) return in_tree;
  return std::filesystem::current_path(ec).string() +
         "/tests/data/corpus_sample";
}

TEST(BenchCommandTest, CorpusFlagsAreForKernelsAndAFolderMustExist) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "copy", "--corpus", "x"},
        {"bench", "launch", "--only", "corpus"},
        {"bench", "kernels", "--only", "nothing"},
        {"bench", "kernels", "--corpus", "/nonexistent/corpus"}}) {
    CliRun run = RunCli(args);
    EXPECT_EQ(run.code, 2) << args.back() << ": " << run.out << run.err;
    EXPECT_EQ(run.out, "");
  }
  CliRun run = RunCli({"bench", "kernels", "--corpus", "/nonexistent/corpus"});
  EXPECT_TRUE(absl::StrContains(run.err, "/nonexistent/corpus: no such folder"))
      << run.err;
}

TEST(BenchCommandTest, CorpusWithoutAGpuExits3) {
  if (GpuCount() > 0) GTEST_SKIP() << "a GPU is present";
  CliRun run = RunCli(
      {"bench", "kernels", "--only", "corpus", "--corpus", SampleCorpus()});
  EXPECT_EQ(run.code, 3) << run.out << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "no GPU")) << run.err;
}

// The fake driver runs no kernel: both kernels leave their outputs as
// poisoned, each with its own poison, and every case must be reported
// wrong, with progress on stderr as each case finishes.
TEST(BenchCommandTest, CorpusOnTheFakeDriverCatchesOutputsLeftPoisoned) {
  CliRun run =
      RunCli({"bench", "kernels", "--only", "corpus", "--corpus",
              SampleCorpus(), "--filter", "gather", "--json", "--reps", "2"},
             {{"FLEETJIT_LIBCUDA", FJ_FAKE_CUDA_PATH}});
  if (absl::StrContains(run.err, "NVRTC")) GTEST_SKIP() << run.err;
  EXPECT_EQ(run.code, 1) << run.out << run.err;
  EXPECT_TRUE(absl::StrContains(
      run.err,
      "corpus: 1 kernel(s) of 1 set(s), 8 case(s) (tma, cp_async, "
      "sync, cp_async@compute_80)"))
      << run.err;
  for (int i = 1; i <= 8; ++i) {
    EXPECT_TRUE(absl::StrContains(
        run.err, "corpus [" + std::to_string(i) + "/8] corpus_sample/"))
        << i << ": " << run.err;
  }
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["bench"], "kernels");
  ASSERT_EQ(j["rows"].size(), 8u) << j.dump(1);
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_EQ(row["corpus"], "corpus_sample/gather_scale");
    EXPECT_EQ(row["anchor"], "cuMemcpyDtoDAsync, bytes / 2");
    const std::string v = row["verified"];
    EXPECT_TRUE(absl::StrContains(v, "y[0,0] = ") &&
                absl::StrContains(v, "the plain twin -nan") &&
                absl::StrContains(v, "sums[0] = "))
        << v;
    EXPECT_GT(row["bytes"].get<double>(), 0);
  }
  EXPECT_TRUE(j["skipped"].empty()) << j["skipped"];
}

// A size whose buffers cannot be allocated (the fake driver refuses more
// than 1 TiB) fails its cases, named, and the others still run.
TEST(BenchCommandTest, CorpusCasesWhoseInputsCannotBeMadeFailByName) {
  ScratchDir dir;
  const std::string set = dir.Sub("set_big");
  std::filesystem::create_directories(set);
  for (const char* f : {"gather_scale.cu", "gather_scale_plain.cu"}) {
    std::filesystem::copy_file(SampleCorpus() + "/" + f, set + "/" + f);
  }
  std::ifstream in(SampleCorpus() + "/gather_scale.json");
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(in);
  m["sizes"][1]["vars"] = {{"R", 1 << 20}, {"C", 1 << 20}};  // 2 TiB of x
  m["sizes"][1]["label"] = "too big";
  std::ofstream(set + "/gather_scale.json") << m.dump();
  CliRun run = RunCli({"bench", "kernels", "--only", "corpus", "--corpus", set,
                       "--json", "--reps", "1"},
                      {{"FLEETJIT_LIBCUDA",
                        testing::BesideExecutable("../lib/libfj_fake_cuda.so",
                                                  FJ_FAKE_CUDA_PATH)}});
  if (absl::StrContains(run.err, "NVRTC")) GTEST_SKIP() << run.err;
  EXPECT_EQ(run.code, 1) << run.out << run.err;
  nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["rows"].size(), 4u);  // the first size, poisoned as above
  ASSERT_EQ(j["skipped"].size(), 4u) << j["skipped"];
  for (const nlohmann::json& s : j["skipped"]) {
    EXPECT_TRUE(absl::StrContains(s["case"].get<std::string>(),
                                  "set_big/gather_scale [too big]"))
        << s;
    EXPECT_TRUE(absl::StrContains(s["why"].get<std::string>(), "inputs: "))
        << s;
  }
  EXPECT_TRUE(
      absl::StrContains(run.err, "[8/8] set_big/gather_scale [too big]"))
      << run.err;
}

}  // namespace
}  // namespace fleetjit
