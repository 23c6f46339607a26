// NVRTC precompiled headers (jit/nvrtc_pch.h): a PCH never changes what a
// build produces, and builds from many threads at once stay correct.
#include "jit/nvrtc_pch.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/nvrtc_build.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::jit {
namespace {

// A kernel that only includes the layer (the PCH's whole point).
constexpr const char* kSmall = R"(
extern "C" __global__ void copy(const float4* in, float4* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = in[i];
}
)";

constexpr const char* kKernel = R"(
extern "C" __global__ void scale(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out) {
  __shared__ __align__(128) float tile[64 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  const fj::coords at = fj::at(blockIdx.x * 64, blockIdx.y * 32);
  fj::load_tile(tile, in, at, bar);
  bar.arrive();
  bar.wait(0);
  fj::store_tile(out, at, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

TEST(PchIncludePrefixTest, KeepsOnlyTheLeadingIncludes) {
  EXPECT_EQ(
      PchIncludePrefix("// c\n\n#include <fleetjit/copy.cuh>\n"
                       "  #include \"fleetjit/copy/common.cuh\"\nint x;\n"
                       "#include <c.h>\n"),
      "#include <fleetjit/copy.cuh>\n#include \"fleetjit/copy/common.cuh\"");
  // Only the embedded headers: a file on disk may change under a PCH.
  EXPECT_EQ(
      PchIncludePrefix(
          "#include <fleetjit/copy.cuh>\n#include <cuda_fp16.h>\nint x;\n"),
      "");
  EXPECT_EQ(PchIncludePrefix("#include \"mine.h\"\nint x;\n"), "");
  EXPECT_EQ(PchIncludePrefix("int x;\n#include <a.h>\n"), "");
  EXPECT_EQ(PchIncludePrefix("#define A 1\n#include <a.h>\nint x;\n"), "");
  EXPECT_EQ(PchIncludePrefix("#include <a.h>\n#define A 1\nint x;\n"), "");
  EXPECT_EQ(PchIncludePrefix("/* c */\n#include <a.h>\nint x;\n"), "");
  EXPECT_EQ(PchIncludePrefix("#include <a.h>\n#if 1\nint x;\n#endif\n"), "");
  // One-line #define/#undef join the key as written; not alone.
  EXPECT_EQ(PchIncludePrefix("#define A 1\n#include <fleetjit/copy.cuh>\n"
                             "// c\n#undef A\nint x;\n"),
            "#define A 1\n#include <fleetjit/copy.cuh>\n#undef A");
  EXPECT_EQ(PchIncludePrefix("#define A 1\nint x;\n"), "");
  EXPECT_EQ(
      PchIncludePrefix("#include <fleetjit/copy.cuh>\n#define A \\\n 1\n"), "");
  EXPECT_EQ(
      PchIncludePrefix("#include <fleetjit/copy.cuh>\n#if 1\nint x;\n#endif\n"),
      "");
}

class NvrtcPchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
    if (!NvrtcHasPch(**api)) GTEST_SKIP() << "NVRTC before 12.8 has no PCH";
  }
  static BuildRequest Request(const std::string& source, const char* target,
                              CopyImpl impl, bool use_pch) {
    BuildRequest r;
    r.source = source;
    r.name = "scale.cu";
    r.target = *ParseTarget(target);
    r.copy_impl = impl;
    r.use_pch = use_pch;
    return r;
  }
};

// The build that creates the PCH and the builds that use it produce the
// PTX, image and log of a build without one, for each implementation.
TEST_F(NvrtcPchTest, OutputsAreIdenticalWithAndWithoutPch) {
  const struct {
    const char* target;
    CopyImpl impl;
  } cases[] = {{"sm_90", CopyImpl::kTma},
               {"sm_80", CopyImpl::kCpAsync},
               {"compute_75", CopyImpl::kSync}};
  for (const auto& c : cases) {
    // A unique prefix per case, so this test creates its own PCHs.
    const std::string source = absl::StrCat(
        "#include <fleetjit/copy.cuh>\n#include "
        "<fleetjit/copy/tensor_param.h>\n"
        "// case ",
        c.target, "\n", kKernel);
    auto plain = BuildModule(Request(source, c.target, c.impl, false));
    ASSERT_TRUE(plain.ok()) << plain.status();
    const PchStats before = GetPchStats();
    auto created = BuildModule(Request(source, c.target, c.impl, true));
    ASSERT_TRUE(created.ok()) << created.status();
    const PchStats mid = GetPchStats();
    EXPECT_EQ(mid.created, before.created + 1) << c.target;
    auto used = BuildModule(Request(source, c.target, c.impl, true));
    ASSERT_TRUE(used.ok()) << used.status();
    EXPECT_EQ(GetPchStats().used, mid.used + 1) << c.target;
    for (const auto* a : {&*created, &*used}) {
      EXPECT_EQ(a->ptx, plain->ptx) << c.target;
      EXPECT_EQ(a->image, plain->image) << c.target;
      EXPECT_EQ(a->log, plain->log) << c.target;
      EXPECT_EQ(a->kernels.size(), plain->kernels.size());
    }
  }
}

// A #define after the include is part of the PCH's key: two values get two
// PCHs, and each build through its PCH matches its plain build (the value
// reaches the code, so a PCH of the other value would show).
TEST_F(NvrtcPchTest, ADefineAfterTheIncludeIsKeyed) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int value : {3, 5}) {
      const std::string source = absl::StrCat(
          "#include <fleetjit/copy.cuh>\n#define FJ_TEST_STAGES ", value,
          "\n// define test\nextern \"C\" __global__ void k(int* p) {\n"
          "  p[threadIdx.x] = FJ_TEST_STAGES * threadIdx.x;\n}\n");
      auto plain = BuildModule(Request(source, "sm_90", CopyImpl::kTma, false));
      ASSERT_TRUE(plain.ok()) << plain.status();
      const PchStats before = GetPchStats();
      auto pch = BuildModule(Request(source, "sm_90", CopyImpl::kTma, true));
      ASSERT_TRUE(pch.ok()) << pch.status();
      const PchStats after = GetPchStats();
      EXPECT_EQ(after.created + after.used, before.created + before.used + 1);
      if (pass == 1) EXPECT_EQ(after.used, before.used + 1) << value;
      EXPECT_EQ(pch->ptx, plain->ptx) << value;
      EXPECT_EQ(pch->log, plain->log) << value;
    }
  }
}

// A compile error reads the same with a PCH.
TEST_F(NvrtcPchTest, ErrorsAreIdenticalWithAndWithoutPch) {
  const std::string source =
      "#include <fleetjit/copy.cuh>\n// errors\nextern \"C\" __global__ void "
      "k() "
      "{ undefined_name(); }\n";
  auto plain = BuildModule(Request(source, "sm_90", CopyImpl::kTma, false));
  ASSERT_FALSE(plain.ok());
  for (int i = 0; i < 2; ++i) {
    auto pch = BuildModule(Request(source, "sm_90", CopyImpl::kTma, true));
    ASSERT_FALSE(pch.ok());
    EXPECT_EQ(pch.status(), plain.status());
  }
}

// 16 threads build at once with PCHs on, twice over, half of them a source
// whose PCH does not exist yet: every result matches its serial build.
TEST_F(NvrtcPchTest, ConcurrentBuildsAreCorrect) {
  constexpr int kThreads = 16;
  const std::string sources[2] = {
      absl::StrCat("#include <fleetjit/copy.cuh>\n// concurrent A\n", kSmall),
      absl::StrCat("#include <fleetjit/copy.cuh>\n#include <fleetjit/copy/"
                   "common.cuh>\n// concurrent B\n",
                   kSmall)};
  std::string want[2];
  for (int s = 0; s < 2; ++s) {
    auto a = BuildModule(Request(sources[s], "sm_90", CopyImpl::kTma, false));
    ASSERT_TRUE(a.ok()) << a.status();
    want[s] = a->image;
  }
  const PchStats before = GetPchStats();
  for (int round = 0; round < 2; ++round) {
    std::vector<std::string> got(kThreads);
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        auto a =
            BuildModule(Request(sources[t % 2], "sm_90", CopyImpl::kTma, true));
        if (a.ok()) {
          got[t] = a->image;
        } else {
          errors[t] = std::string(a.status().message());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(errors[t], "") << "thread " << t;
      EXPECT_TRUE(got[t] == want[t % 2])
          << "thread " << t << " round " << round;
    }
  }
  const PchStats after = GetPchStats();
  EXPECT_EQ(after.create_failed, before.create_failed);
  EXPECT_GE(after.created + after.used, before.created + before.used + 2)
      << "some builds took the PCH path";
  EXPECT_EQ((after.created - before.created) + (after.used - before.used) +
                (after.busy - before.busy) + (after.skipped - before.skipped),
            2 * kThreads)
      << "every build either took the slot or went without: created "
      << after.created - before.created << " used " << after.used - before.used
      << " busy " << after.busy - before.busy << " skipped "
      << after.skipped - before.skipped;
}

}  // namespace
}  // namespace fleetjit::jit
