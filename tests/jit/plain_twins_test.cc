// The plain twins of the examples (bench/kernels/plain_<X>.cu, the same job
// as examples/<X>.cu written without <fleetjit/copy.cuh>), which
// bench/build_cost.py builds against the examples: each is plain (no copy
// layer), has its example, and builds on sm_75, sm_80 and sm_90 (NVRTC, no
// GPU) with its one extern "C" kernel, plain_X, spilling nothing.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "jit/nvrtc_build.h"
#include "platform/cuda_headers.h"

namespace fleetjit::jit {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> Twins() {
  std::vector<fs::path> out;
  for (const auto& e :
       fs::directory_iterator(fs::path(FJ_SOURCE_DIR) / "bench" / "kernels")) {
    const std::string name = e.path().filename().string();
    if (absl::StartsWith(name, "plain_") && absl::EndsWith(name, ".cu"))
      out.push_back(e.path());
  }
  return out;
}

TEST(PlainTwinsTest, EveryTwinIsPlainHasItsExampleAndBuilds) {
  const std::vector<fs::path> twins = Twins();
  // transpose (bench/transpose_variants.py's anchor), the five that
  // build_cost.py added first, gemm_mma and paged_decode: one for every
  // example on the layer. A twin lost from the folder fails here.
  ASSERT_GE(twins.size(), 8u);
  const std::regex spills(
      R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  for (const fs::path& twin : twins) {
    const std::string stem = twin.stem().string();  // plain_X
    const std::string example = stem.substr(6);
    SCOPED_TRACE(twin.string());
    EXPECT_TRUE(
        fs::exists(fs::path(FJ_SOURCE_DIR) / "examples" / (example + ".cu")))
        << "a twin without its example";
    const std::string source = Read(twin);
    ASSERT_FALSE(source.empty());
    EXPECT_FALSE(absl::StrContains(source, "#include <fleetjit/"))
        << "not plain";
    for (const char* target : {"sm_75", "sm_80", "sm_90"}) {
      SCOPED_TRACE(target);
      BuildRequest r;
      r.source = source;
      r.name = twin.filename().string();
      r.target = *ParseTarget(target);
      r.copy_impl = CopyImpl::kSync;
      r.options = {"--ptxas-options=-v"};
      for (const CudaIncludeDir& d : FindCudaIncludeDirs(CudaHeaderSearch{}))
        r.include_dirs.push_back({d.path, d.origin});
      auto a = BuildModule(r);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_EQ(a->kernels.size(), 1u);
      EXPECT_EQ(a->kernels[0].name, stem);
      std::smatch m;
      ASSERT_TRUE(std::regex_search(a->log, m, spills)) << a->log;
      EXPECT_EQ(m[1], "0") << a->log;
      EXPECT_EQ(m[2], "0") << a->log;
    }
  }
}

}  // namespace
}  // namespace fleetjit::jit
