// CUDA's headers and the caller's include folders reaching NVRTC builds, and
// the cache key following header content. Needs NVRTC (skips without it),
// no GPU: everything builds for the named target sm_90.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "jit/target.h"
#include "runtime/config.h"
#include "runtime/runtime.h"
#include "tests/common/temp_dir.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::TempDir;

std::unique_ptr<Runtime> NewRuntime(RuntimeOptions options = {}) {
  options.cache.disk = false;
  options.cache.log = Logger();
  options.thunks = false;
  auto rt = Runtime::Create(options);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

BuildSpec Spec(const std::string& source, std::vector<std::string> dirs = {}) {
  BuildSpec spec;
  spec.source = source;
  spec.name = "headers.cu";
  spec.target = *jit::ParseTarget("sm_90");
  spec.include_dirs = std::move(dirs);
  return spec;
}

#define SKIP_WITHOUT_NVRTC(rt)                                         \
  if (!(rt).compiler_identity().ok()) {                                \
    GTEST_SKIP() << "no NVRTC: " << (rt).compiler_identity().status(); \
  }

constexpr const char* kUserKernel = R"(
#include "user_config.h"
extern "C" __global__ void fill(int* p) { p[threadIdx.x] = USER_VALUE; }
)";

TEST(CudaHeadersBuildTest, AFakeToolkitInCudaHomeReachesTheBuild) {
  TempDir toolkit;
  toolkit.Write("include/fake_toolkit.h", "#define FAKE_TOOLKIT_VALUE 7\n");
  const char* old = std::getenv("CUDA_HOME");
  std::string saved = old != nullptr ? old : "";
  ::setenv("CUDA_HOME", toolkit.path().c_str(), 1);
  RuntimeOptions options;
  ASSERT_TRUE(ApplyEnvironment(options).ok());
  if (old != nullptr) {
    ::setenv("CUDA_HOME", saved.c_str(), 1);
  } else {
    ::unsetenv("CUDA_HOME");
  }
  auto rt = NewRuntime(options);
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  const std::vector<jit::IncludeDir>& dirs = rt->cuda_include_dirs();
  ASSERT_FALSE(dirs.empty());
  EXPECT_EQ(dirs[0].path, toolkit.path() + "/include");
  EXPECT_EQ(dirs[0].origin, "CUDA_HOME");
  auto built = rt->BuildRecord(Spec(R"(
#include <fake_toolkit.h>
extern "C" __global__ void k(int* p) { *p = FAKE_TOOLKIT_VALUE; }
)"));
  ASSERT_TRUE(built.ok()) << built.status();
}

TEST(CudaHeadersBuildTest, AnEditedUserHeaderRebuildsAndAnUnchangedOneHits) {
  TempDir user;
  user.Write("user_config.h", "#define USER_VALUE 1\n");
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  auto first = rt->BuildRecord(Spec(kUserKernel, {user.path()}));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, CacheSource::kCompiled);
  auto again = rt->BuildRecord(Spec(kUserKernel, {user.path()}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kMemory);
  EXPECT_EQ(again->key, first->key);
  // Same size, so only the content (and the time) says it changed.
  user.Write("user_config.h", "#define USER_VALUE 2\n");
  auto edited = rt->BuildRecord(Spec(kUserKernel, {user.path()}));
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_EQ(edited->source, CacheSource::kCompiled);
  EXPECT_NE(edited->key, first->key);
  EXPECT_NE(edited->artifact->ptx, first->artifact->ptx)
      << "the rebuilt image must use the edited header";
}

TEST(CudaHeadersBuildTest, SameSizeEditsBackToBackEachRebuild) {
  // The header is rewritten right after each build, keeping its size: on a
  // file system whose clock ticks once per jiffy, mtime, ctime, size and
  // inode can all stay the same. Each version must still be built.
  TempDir user;
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  std::mt19937 rng(std::random_device{}());
  std::set<std::string> keys;
  std::set<int> values;
  while (values.size() < 3)
    values.insert(100 + static_cast<int>(rng() % 900));  // same size
  std::vector<int> order(values.begin(), values.end());
  std::shuffle(order.begin(), order.end(), rng);
  for (int version = 0; version < 3; ++version) {
    const int value = order[version];
    user.Write("user_config.h",
               absl::StrCat("#define USER_VALUE ", value, "\n"));
    auto built = rt->BuildRecord(Spec(kUserKernel, {user.path()}));
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->source, CacheSource::kCompiled) << "version " << version;
    EXPECT_TRUE(keys.insert(built->key).second)
        << "version " << version << " reused a key";
    EXPECT_TRUE(
        absl::StrContains(built->artifact->ptx, absl::StrCat(" ", value, ";")))
        << "version " << version << " (" << value
        << ") was not built from the edited header";
    // Unchanged, it hits.
    auto again = rt->BuildRecord(Spec(kUserKernel, {user.path()}));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->source, CacheSource::kMemory);
    EXPECT_EQ(again->key, built->key);
  }
}

TEST(CudaHeadersBuildTest, TheSameHeaderInAnotherFolderSharesTheKey) {
  // Two machines with the same headers at different paths: one key.
  TempDir a, b;
  a.Write("user_config.h", "#define USER_VALUE 3\n");
  b.Write("user_config.h", "#define USER_VALUE 3\n");
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  auto in_a = rt->BuildRecord(Spec(kUserKernel, {a.path()}));
  ASSERT_TRUE(in_a.ok()) << in_a.status();
  auto in_b = rt->BuildRecord(Spec(kUserKernel, {b.path()}));
  ASSERT_TRUE(in_b.ok()) << in_b.status();
  EXPECT_EQ(in_a->key, in_b->key);
  EXPECT_EQ(in_b->source, CacheSource::kMemory);
}

TEST(CudaHeadersBuildTest, AHeaderAbsentThenCreatedRebuilds) {
  TempDir user;
  const std::string source = R"(
#if __has_include("optional_tuning.h")
#include "optional_tuning.h"
#else
#define TUNING 5
#endif
extern "C" __global__ void tuned(int* p) { *p = TUNING; }
)";
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  auto without = rt->BuildRecord(Spec(source, {user.path()}));
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->source, CacheSource::kCompiled);
  user.Write("optional_tuning.h", "#define TUNING 9\n");
  auto with = rt->BuildRecord(Spec(source, {user.path()}));
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->source, CacheSource::kCompiled);
  EXPECT_NE(with->key, without->key);
}

TEST(CudaHeadersBuildTest, AMissingHeaderNamesItAndEveryFolderSearched) {
  TempDir user;
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  BuildSpec spec = Spec(R"(
#include <no_such_header_anywhere.h>
extern "C" __global__ void k() {}
)",
                        {user.path()});
  spec.options = {"-I/nonexistent/from_options"};
  auto built = rt->BuildRecord(spec);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(built.status().message());
  EXPECT_TRUE(absl::StrContains(message,
                                "header 'no_such_header_anywhere.h' not found"))
      << message;
  EXPECT_TRUE(absl::StrContains(
      message,
      absl::StrCat("searched: /nonexistent/from_options (nvrtc_options), ",
                   user.path(), " (include_dirs)")))
      << message;
  for (const jit::IncludeDir& d : rt->cuda_include_dirs()) {
    EXPECT_TRUE(absl::StrContains(message, d.path)) << message;
  }
  EXPECT_TRUE(built.status()
                  .GetPayload(absl::StrCat(kPayloadPrefix, "build_log"))
                  .has_value());
}

// The toolkit's own headers: present on this machine and the CI machine.
bool HaveToolkitHeader(const char* name) {
  struct stat st;
  return ::stat((std::string("/usr/local/cuda/include/") + name).c_str(),
                &st) == 0 ||
         ::stat((std::string("/usr/local/cuda/include/cccl/") + name).c_str(),
                &st) == 0;
}

TEST(CudaHeadersBuildTest, Fp16AndBf16KernelBuildsForSm90) {
  if (!HaveToolkitHeader("cuda_fp16.h"))
    GTEST_SKIP() << "no /usr/local/cuda/include";
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  auto start = std::chrono::steady_clock::now();
  auto built = rt->BuildRecord(Spec(R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy_half(const __half* x, __nv_bfloat16* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __half2float(x[i]) + __bfloat162float(y[i]));
}
)"));
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  ASSERT_TRUE(built.ok()) << built.status();
  std::printf("fp16/bf16 kernel: compile %.0f ms, build %.0f ms\n",
              built->artifact->compile_ms, ms);
  // A second build is a memory hit: the header scan is memoized.
  start = std::chrono::steady_clock::now();
  auto again = rt->BuildRecord(Spec(R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy_half(const __half* x, __nv_bfloat16* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(a * __half2float(x[i]) + __bfloat162float(y[i]));
}
)"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kMemory);
  std::printf("fp16/bf16 kernel: memory hit (key + header scan) %.2f ms\n",
              std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count());
}

TEST(CudaHeadersBuildTest, CubBlockReduceKernelBuildsForSm90) {
  if (!HaveToolkitHeader("cub/block/block_reduce.cuh"))
    GTEST_SKIP() << "no CCCL";
  auto rt = NewRuntime();
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  const std::string source = R"(
#include <cub/block/block_reduce.cuh>
extern "C" __global__ void block_sum(const float* in, float* out) {
  using Reduce = cub::BlockReduce<float, 256>;
  __shared__ typename Reduce::TempStorage temp;
  float v = in[blockIdx.x * 256 + threadIdx.x];
  float sum = Reduce(temp).Sum(v);
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
)";
  auto start = std::chrono::steady_clock::now();
  auto built = rt->BuildRecord(Spec(source));
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  ASSERT_TRUE(built.ok()) << built.status();
  std::printf("CUB BlockReduce kernel: compile %.0f ms, build %.0f ms\n",
              built->artifact->compile_ms, ms);
  start = std::chrono::steady_clock::now();
  auto again = rt->BuildRecord(Spec(source));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kMemory);
  std::printf(
      "CUB BlockReduce kernel: memory hit (key + header scan) %.2f ms\n",
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - start)
          .count());
}

}  // namespace
}  // namespace fleetjit
