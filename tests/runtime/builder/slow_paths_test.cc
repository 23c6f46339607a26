// The copy layer's slow paths built once (runtime/builder/slow_paths.cc,
// docs/slow-path-library.md), on the CPU: NVRTC and nvJitLink for sm_90,
// no GPU. The first layer kernel compiles whole and queues the library;
// later ones link it, under keys of their own, without raising any
// kernel's register count; kernels that configure the layer themselves, or
// do not include it, compile whole; with the option off nothing changes.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/image_reader.h"
#include "jit/nvrtc_build.h"
#include "platform/cuda_headers.h"
#include "platform/nvjitlink_library.h"
#include "platform/nvrtc_library.h"
#include "runtime/runtime.h"
#include "tests/common/corpus.h"
#include "tests/common/seed.h"
#include "tests/common/temp_dir.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CorpusKernel;
using ::fleetjit::testing::TempDir;

// A corpus kernel made unique (a fresh module key) by a trailing comment.
std::string Unique(const std::string& file, std::mt19937_64& rng) {
  return absl::StrCat(CorpusKernel(file), "\n// slow_paths_test ", rng(), "\n");
}

// Register counts of `image`'s functions whose name contains `part`.
std::vector<int> RegistersOf(const std::string& image, absl::string_view part) {
  std::vector<int> out;
  auto counts = jit::CubinRegisterCounts(image);
  EXPECT_TRUE(counts.ok()) << counts.status();
  if (!counts.ok()) return out;
  for (const auto& [name, regs] : *counts) {
    if (absl::StrContains(name, part)) out.push_back(regs);
  }
  return out;
}

// Whether `image` holds the layer's slow paths as functions of their own
// (a linked image) rather than inside its kernels (a whole build).
bool HasSeparateSlowPaths(const std::string& image) {
  return !RegistersOf(image, "walk_tile").empty();
}

class SlowPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NvrtcLibrary::Default().Get().ok())
      GTEST_SKIP() << "NVRTC is not installed";
    rng_ = ::fleetjit::testing::SeededRng(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  std::unique_ptr<Runtime> NewRuntime(bool library) {
    RuntimeOptions options;
    options.cache.dir = dir_.path();
    options.slow_path_library = library;
    auto rt = Runtime::Create(options);
    EXPECT_TRUE(rt.ok()) << rt.status();
    return rt.ok() ? *std::move(rt) : nullptr;
  }

  // A runtime with the option on whose library for tiled_copy's register
  // level is built (a first kernel compiled whole and queued it): the next
  // layer kernel links. Null (with a failure recorded) if that went wrong.
  std::unique_ptr<Runtime> RuntimeWithLibrary() {
    std::unique_ptr<Runtime> rt = NewRuntime(/*library=*/true);
    if (rt == nullptr) return nullptr;
    auto first = Build(*rt, Unique("tiled_copy.cu", rng_));
    EXPECT_TRUE(first.ok()) << first.status();
    if (!first.ok()) return nullptr;
    rt->WaitForBackgroundWork();
    return rt;
  }

  absl::StatusOr<ModuleRecord> Build(Runtime& rt, const std::string& source,
                                     const std::string& target = "sm_90") {
    BuildSpec spec;
    spec.source = source;
    spec.name = "slow_paths_test.cu";
    spec.target = *jit::ParseTarget(target);
    return rt.BuildRecord(spec);
  }

  TempDir dir_;
  std::mt19937_64 rng_;
};

TEST_F(SlowPathsTest, FirstKernelCompilesWholeLaterOnesLinkTheLibrary) {
  if (!ResolveNvJitLinkLibrary("", "").ok())
    GTEST_SKIP() << "nvJitLink is not installed";
  std::unique_ptr<Runtime> rt = NewRuntime(/*library=*/true);
  ASSERT_NE(rt, nullptr);
  // 1. No library yet: compiled whole, the library queued.
  auto first = Build(*rt, Unique("tiled_copy.cu", rng_));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(HasSeparateSlowPaths(first->artifact->image));
  rt->WaitForBackgroundWork();
  // 2. A new kernel links it: the same kernels and layouts as a whole build
  // of the same source, the slow paths as functions of their own, and no
  // kernel above the registers its own code needs.
  const std::string source = Unique("tiled_copy.cu", rng_);
  auto linked = Build(*rt, source);
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_EQ(linked->source, CacheSource::kCompiled);
  EXPECT_TRUE(HasSeparateSlowPaths(linked->artifact->image));
  std::unique_ptr<Runtime> plain = NewRuntime(/*library=*/false);
  ASSERT_NE(plain, nullptr);
  BuildSpec whole_spec;
  whole_spec.source = source;
  whole_spec.target = *jit::ParseTarget("sm_90");
  whole_spec.use_cache = false;
  auto whole = plain->BuildRecord(whole_spec);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(linked->artifact->kernels.size(), whole->artifact->kernels.size());
  for (size_t i = 0; i < whole->artifact->kernels.size(); ++i) {
    const jit::KernelEntry& a = linked->artifact->kernels[i];
    const jit::KernelEntry& b = whole->artifact->kernels[i];
    EXPECT_EQ(a.lowered_name, b.lowered_name);
    EXPECT_EQ(a.param_bytes, b.param_bytes);
    ASSERT_EQ(a.params.size(), b.params.size());
    for (size_t p = 0; p < a.params.size(); ++p) {
      EXPECT_EQ(a.params[p].offset, b.params[p].offset) << a.name << " " << p;
      EXPECT_EQ(a.params[p].size, b.params[p].size) << a.name << " " << p;
    }
  }
  // The kernel's own code, compiled alone as the route compiles it.
  jit::BuildRequest own;
  own.source = source;
  own.target = *jit::ParseTarget("sm_90");
  own.copy_impl = jit::CopyImpl::kTma;
  own.device_code = jit::DeviceCode::kRelocatable;
  own.options = {"-DFJ_SLOW_PATHS_EXTERN"};
  auto alone = jit::BuildModule(own);
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<int> own_regs = RegistersOf(alone->image, "tiled_copy");
  const std::vector<int> linked_regs =
      RegistersOf(linked->artifact->image, "tiled_copy");
  ASSERT_EQ(own_regs.size(), 1u);
  ASSERT_EQ(linked_regs.size(), 1u);
  EXPECT_EQ(linked_regs[0], std::max(own_regs[0], 32))
      << "linking the slow paths raised the kernel's register count";
  // 3. The same source again: a memory hit, as for any build.
  auto again = Build(*rt, source);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->source, CacheSource::kMemory);
  // 4. Another runtime on the folder (another process) finds the library
  // on disk: its first layer kernel links at once.
  rt.reset();
  std::unique_ptr<Runtime> next = NewRuntime(/*library=*/true);
  ASSERT_NE(next, nullptr);
  auto from_disk = Build(*next, Unique("tiled_copy.cu", rng_));
  ASSERT_TRUE(from_disk.ok()) << from_disk.status();
  EXPECT_TRUE(HasSeparateSlowPaths(from_disk->artifact->image));
}

TEST_F(SlowPathsTest, KernelsTheRouteDoesNotFitCompileWhole) {
  if (!ResolveNvJitLinkLibrary("", "").ok())
    GTEST_SKIP() << "nvJitLink is not installed";
  std::unique_ptr<Runtime> rt = RuntimeWithLibrary();
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(HasSeparateSlowPaths(
      Build(*rt, Unique("tiled_copy.cu", rng_))->artifact->image));
  // A kernel that sets the layer's configuration itself: the library's
  // could differ from it.
  auto configured = Build(*rt, absl::StrCat("#define FJ_TMA_EDGE_STORE 1\n",
                                            Unique("tiled_copy.cu", rng_)));
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_FALSE(HasSeparateSlowPaths(configured->artifact->image));
  // PTX targets: nothing to link into.
  auto ptx = Build(*rt, Unique("tiled_copy.cu", rng_), "compute_90");
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_TRUE(ptx->artifact->is_ptx);
  // A kernel without the layer is built as ever (no -dc, no link).
  auto saxpy = Build(*rt, Unique("saxpy.cu", rng_));
  ASSERT_TRUE(saxpy.ok()) << saxpy.status();
  EXPECT_FALSE(HasSeparateSlowPaths(saxpy->artifact->image));
  auto names = jit::CubinKernelNames(saxpy->artifact->image);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_FALSE(names->empty());
}

// Beyond the slow paths, the library holds three of tma's functions that
// a whole build inlines or compiles per kernel: the gathers
// (load_tiles_bar, fj::gather_tiles), the span load on a barrier
// (load_span_bar, fj::load) and the threads' tile store (store_generic,
// fj::store_tile of a tile the tensor map cannot take). A kernel that uses one,
// compiled for the route, holds none of it, and once its level's library is on
// disk links the library's, no kernel above the registers its own code needs.
class LibraryFunctionTest : public SlowPathsTest,
                            public ::testing::WithParamInterface<
                                std::pair<const char*, const char*>> {};

TEST_P(LibraryFunctionTest, LinksFromTheLibrary) {
  if (!ResolveNvJitLinkLibrary("", "").ok())
    GTEST_SKIP() << "nvJitLink is not installed";
  const std::string file = GetParam().first, function = GetParam().second;
  std::unique_ptr<Runtime> rt = NewRuntime(/*library=*/true);
  ASSERT_NE(rt, nullptr);
  auto first = Build(*rt, Unique(file, rng_));
  ASSERT_TRUE(first.ok()) << first.status();
  rt->WaitForBackgroundWork();
  const std::string source = Unique(file, rng_);
  jit::BuildRequest own;
  own.source = source;
  own.target = *jit::ParseTarget("sm_90");
  own.copy_impl = jit::CopyImpl::kTma;
  own.device_code = jit::DeviceCode::kRelocatable;
  own.options = {"-DFJ_SLOW_PATHS_EXTERN"};
  for (const CudaIncludeDir& d : FindCudaIncludeDirs(CudaHeaderSearch{}))
    own.include_dirs.push_back({d.path, d.origin});
  auto alone = jit::BuildModule(own);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(RegistersOf(alone->image, function).empty())
      << "the route's own compile still defines " << function;
  auto linked = Build(*rt, source);
  ASSERT_TRUE(linked.ok()) << linked.status();
  EXPECT_FALSE(RegistersOf(linked->artifact->image, function).empty())
      << "the linked image lacks the library's " << function;
  for (const jit::KernelEntry& k : linked->artifact->kernels) {
    const std::vector<int> own_regs = RegistersOf(alone->image, k.lowered_name);
    const std::vector<int> linked_regs =
        RegistersOf(linked->artifact->image, k.lowered_name);
    ASSERT_FALSE(own_regs.empty()) << k.lowered_name;
    ASSERT_FALSE(linked_regs.empty()) << k.lowered_name;
    EXPECT_LE(linked_regs[0], std::max(own_regs[0], 32))
        << k.lowered_name << ": linking raised its register count";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tma, LibraryFunctionTest,
    ::testing::Values(std::make_pair("paged_decode.cu", "load_tiles_bar"),
                      std::make_pair("rmsnorm.cu", "load_span_bar"),
                      std::make_pair("transpose.cu", "store_generic")));

// Linked modules run slower than whole ones in some kernels
// (docs/slow-path-library.md), so they live under keys of their own: a
// process with the option off never loads one from a shared folder, and a
// process with it on takes a whole build wherever one is stored.
TEST_F(SlowPathsTest, LinkedModulesNeverServeBuildsWithTheOptionOff) {
  if (!ResolveNvJitLinkLibrary("", "").ok())
    GTEST_SKIP() << "nvJitLink is not installed";
  std::unique_ptr<Runtime> rt = RuntimeWithLibrary();
  ASSERT_NE(rt, nullptr);
  const std::string source = Unique("tiled_copy.cu", rng_);
  auto linked = Build(*rt, source);
  ASSERT_TRUE(linked.ok()) << linked.status();
  ASSERT_TRUE(HasSeparateSlowPaths(linked->artifact->image));
  rt->WaitForBackgroundWork();  // the linked module reaches the disk
  rt.reset();
  // 1. The option off, the same folder: compiled whole, not the linked one.
  std::unique_ptr<Runtime> plain = NewRuntime(/*library=*/false);
  ASSERT_NE(plain, nullptr);
  auto whole = Build(*plain, source);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->source, CacheSource::kCompiled);
  EXPECT_FALSE(HasSeparateSlowPaths(whole->artifact->image));
  EXPECT_NE(whole->key, linked->key);
  plain->WaitForBackgroundWork();
  plain.reset();
  // 2. The option on again: the whole build on disk serves it.
  std::unique_ptr<Runtime> again = NewRuntime(/*library=*/true);
  ASSERT_NE(again, nullptr);
  auto found = Build(*again, source);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->source, CacheSource::kDisk);
  EXPECT_EQ(found->key, whole->key);
  EXPECT_FALSE(HasSeparateSlowPaths(found->artifact->image));
}

TEST_F(SlowPathsTest, OffByDefaultAndThenNothingChanges) {
  EXPECT_FALSE(RuntimeOptions().slow_path_library);
  std::unique_ptr<Runtime> rt = NewRuntime(/*library=*/false);
  ASSERT_NE(rt, nullptr);
  for (int i = 0; i < 2; ++i) {
    auto built = Build(*rt, Unique("tiled_copy.cu", rng_));
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_FALSE(HasSeparateSlowPaths(built->artifact->image));
    rt->WaitForBackgroundWork();
  }
  // No library was queued: the disk holds the two modules alone (and
  // maybe the layer's precompiled header, an entry of another kind).
  auto entries = rt->cache().List(/*verify=*/false);
  ASSERT_TRUE(entries.ok()) << entries.status();
  int modules = 0;
  for (const auto& e : *entries) modules += e.kind == "module" ? 1 : 0;
  EXPECT_EQ(modules, 2);
}

}  // namespace
}  // namespace fleetjit
