// The cold build path: Build returns after NVRTC, the launch thunk object is
// generated and the disk entry published on the runtime's background
// worker. Needs NVRTC (skips without it), no GPU: kernels are "loaded" by
// hand for packing, which is all a launch does before the driver call.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "jit/artifact.h"
#include "jit/target.h"
#include "jit/thunk/arg_rules.h"
#include "runtime/cache/module_cache.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/launch_thunks.h"
#include "runtime/launch/tensor_encoder.h"
#include "runtime/load/kernel.h"
#include "runtime/runtime.h"
#include "tests/common/temp_dir.h"

namespace fleetjit {
namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void mixed(float* p, int n, double d, short s) {
  if (threadIdx.x == 0 && n > 0) p[0] = static_cast<float>(d) + s;
}
)";

using ::fleetjit::testing::TempDir;

std::unique_ptr<Runtime> NewRuntime(const std::string& dir,
                                    bool thunks = true) {
  RuntimeOptions options;
  options.cache.dir = dir;
  options.cache.log = Logger();
  options.thunks = thunks;
  auto rt = Runtime::Create(options);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

absl::StatusOr<ModuleRecord> BuildIt(Runtime& rt, int variant = 0) {
  BuildSpec spec;
  spec.source = absl::StrCat(kSource, "// variant ", variant, "\n");
  spec.name = "cold_build.cu";
  spec.target = *jit::ParseTarget("sm_90");
  return rt.BuildRecord(spec);
}

#define BUILD_OR_SKIP(var, expr)                                         \
  auto var = (expr);                                                     \
  if (!var.ok() && absl::StrContains(var.status().message(), "NVRTC")) { \
    GTEST_SKIP() << "no NVRTC: " << var.status();                        \
  }                                                                      \
  ASSERT_TRUE(var.ok()) << var.status()

// Packs mixed(p, n, d, s) for `k` the way a launch does; returns the buffer.
std::vector<uint8_t> PackMixed(const LoadedKernel& k, bool use_thunk,
                               absl::Status* status) {
  fj_arg args[4] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = 0x7f0012345600ull;
  args[1].kind = FJ_ARG_I32;
  args[1].v.i32 = -77;
  args[2].kind = FJ_ARG_F64;
  args[2].v.f64 = 3.25;
  args[3].kind = FJ_ARG_I16;
  args[3].v.i16 = 1234;
  TensorEncoder encoder(nullptr, k.display_name, nullptr, nullptr);
  alignas(64) uint8_t buffer[jit::kMaxParamBytes];
  std::memset(buffer, 0xA5, sizeof(buffer));
  *status = PackForLaunch(k, args, 4, sizeof(fj_arg), encoder, use_thunk,
                          buffer, sizeof(buffer));
  return std::vector<uint8_t>(buffer, buffer + k.entry->param_bytes);
}

// (a) A cold build returns before its thunk exists; packing works through
// the generic path; the thunk then arrives (memory tier) and packs the
// same bytes.
TEST(ColdBuild, ReturnsBeforeItsThunkAndTheGenericPathWorks) {
  TempDir dir;
  auto rt = NewRuntime(dir.path());
  ASSERT_NE(rt, nullptr);
  rt->HoldBackgroundWorkForTesting(true);
  BUILD_OR_SKIP(built, BuildIt(*rt));
  EXPECT_EQ(built->source, CacheSource::kCompiled);
  EXPECT_TRUE(built->artifact->thunk_object.empty())
      << "the cold build waited for its thunk";
  EXPECT_EQ(rt->thunks().stats().objects_generated, 0u);
  // Not on disk yet either: the store waits for the thunk object.
  EXPECT_EQ(rt->cache().stats().disk_entries, 0u);

  const jit::KernelEntry* entry = built->artifact->FindKernel("mixed");
  ASSERT_NE(entry, nullptr);
  LoadedKernel k;
  k.entry = entry;
  k.copy_impl = built->artifact->copy_impl;
  k.display_name = "cold_build.cu:mixed";
  absl::Status status;
  std::vector<uint8_t> generic = PackMixed(k, /*use_thunk=*/true, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(k.thunk.load(), nullptr);

  // A concurrent-style second request is a memory hit: no second compile,
  // no second thunk job.
  BUILD_OR_SKIP(again, BuildIt(*rt));
  EXPECT_EQ(again->source, CacheSource::kMemory);
  EXPECT_EQ(rt->cache_stats().compiles, 1u);

  rt->HoldBackgroundWorkForTesting(false);
  rt->WaitForBackgroundWork();
  EXPECT_EQ(rt->thunks().stats().objects_generated, 1u);
  BUILD_OR_SKIP(hit, BuildIt(*rt));
  EXPECT_EQ(hit->source, CacheSource::kMemory);
  ASSERT_FALSE(hit->artifact->thunk_object.empty());
  EXPECT_EQ(rt->cache_stats().compiles, 1u);
  EXPECT_EQ(rt->cache().stats().disk_entries, 1u);
  // The callers' artifacts are unchanged (never mutated under them).
  EXPECT_TRUE(built->artifact->thunk_object.empty());

  ASSERT_TRUE(rt->thunks().Attach(*hit->artifact, k).ok());
  ASSERT_NE(k.thunk.load(), nullptr);
  std::vector<uint8_t> thunked = PackMixed(k, /*use_thunk=*/true, &status);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(thunked, generic);
  EXPECT_EQ(rt->thunks().stats().objects_generated, 1u)
      << "attaching ran codegen although the artifact carries the object";
}

// (b) After the background work, a fresh runtime on the same directory gets
// a disk hit carrying the thunk object and generates nothing.
TEST(ColdBuild, AFreshRuntimeGetsTheThunkFromDisk) {
  TempDir dir;
  std::string object;
  {
    auto rt = NewRuntime(dir.path());
    ASSERT_NE(rt, nullptr);
    BUILD_OR_SKIP(built, BuildIt(*rt));
    EXPECT_EQ(built->source, CacheSource::kCompiled);
    rt->WaitForBackgroundWork();
    BUILD_OR_SKIP(hit, BuildIt(*rt));
    object = hit->artifact->thunk_object;
    ASSERT_FALSE(object.empty());
  }
  auto fresh = NewRuntime(dir.path());
  ASSERT_NE(fresh, nullptr);
  BUILD_OR_SKIP(from_disk, BuildIt(*fresh));
  EXPECT_EQ(from_disk->source, CacheSource::kDisk);
  EXPECT_EQ(from_disk->artifact->thunk_object, object);
  fresh->WaitForBackgroundWork();
  const LaunchThunkStats stats = fresh->thunks().stats();
  EXPECT_EQ(stats.objects_generated, 0u);
  EXPECT_EQ(stats.codegen_ms_total, 0.0);
  EXPECT_EQ(fresh->cache_stats().compiles, 0u);

  // An entry without the object (written by a runtime with thunks off) is
  // completed once, in the background, and republished.
  TempDir dir2;
  {
    auto off = NewRuntime(dir2.path(), /*thunks=*/false);
    ASSERT_NE(off, nullptr);
    BUILD_OR_SKIP(built, BuildIt(*off, 1));
    EXPECT_TRUE(built->artifact->thunk_object.empty());
  }  // ~Runtime writes the pending entry
  {
    auto on = NewRuntime(dir2.path());
    BUILD_OR_SKIP(hit, BuildIt(*on, 1));
    EXPECT_EQ(hit->source, CacheSource::kDisk);
    EXPECT_TRUE(hit->artifact->thunk_object.empty());
    on->WaitForBackgroundWork();
    EXPECT_EQ(on->thunks().stats().objects_generated, 1u);
  }
  auto last = NewRuntime(dir2.path());
  BUILD_OR_SKIP(hit, BuildIt(*last, 1));
  EXPECT_EQ(hit->source, CacheSource::kDisk);
  EXPECT_FALSE(hit->artifact->thunk_object.empty());
  last->WaitForBackgroundWork();
  EXPECT_EQ(last->thunks().stats().objects_generated, 0u);
}

void ExpectEntriesValid(const std::string& dir, size_t expected) {
  ModuleCache cache(CacheConfig{dir});
  auto entries = cache.List(/*verify=*/true);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->size(), expected);
  for (const auto& e : *entries) EXPECT_EQ(e.problem, "") << e.path;
}

// (c) Destroying a runtime with background work pending neither crashes nor
// leaves a corrupt entry: ~Runtime finishes the queue.
TEST(ColdBuild, DestroyWithPendingWorkFinishesIt) {
  TempDir dir;
  {
    auto rt = NewRuntime(dir.path());
    ASSERT_NE(rt, nullptr);
    rt->HoldBackgroundWorkForTesting(true);
    for (int i = 0; i < 3; ++i) {
      BUILD_OR_SKIP(built, BuildIt(*rt, 10 + i));
    }
  }
  ExpectEntriesValid(dir.path(), 3);
  auto fresh = NewRuntime(dir.path());
  for (int i = 0; i < 3; ++i) {
    BUILD_OR_SKIP(hit, BuildIt(*fresh, 10 + i));
    EXPECT_EQ(hit->source, CacheSource::kDisk);
    EXPECT_FALSE(hit->artifact->thunk_object.empty());
  }
  // Destroyed right after building, work possibly running: same outcome.
  for (int round = 0; round < 3; ++round) {
    auto rt = NewRuntime(dir.path());
    BUILD_OR_SKIP(built, BuildIt(*rt, 20 + round));
  }
  ExpectEntriesValid(dir.path(), 6);
}

// (c') A process that exits without destroying its runtime, with work
// queued and possibly running: exit() neither crashes nor hangs, and the
// directory holds only valid entries (the dropped work is simply absent).
TEST(ColdBuild, ExitWithoutDestroyLeavesNoCorruptEntry) {
  TempDir dir;
  {
    // Skip early without NVRTC, in this process.
    auto probe = NewRuntime(dir.path(), false);
    BUILD_OR_SKIP(built, BuildIt(*probe, 30));
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto rt = NewRuntime(dir.path());
    if (rt == nullptr || !BuildIt(*rt, 31).ok()) _exit(2);
    rt->HoldBackgroundWorkForTesting(true);
    if (!BuildIt(*rt, 32).ok()) _exit(3);
    (void)rt.release();  // never destroyed
    std::exit(0);        // runs the atexit handlers
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus)) << "child died: " << wstatus;
  EXPECT_EQ(WEXITSTATUS(wstatus), 0);
  ModuleCache cache(CacheConfig{dir.path()});
  auto entries = cache.List(/*verify=*/true);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_GE(entries->size(), 1u);  // the probe's
  EXPECT_LE(entries->size(), 2u);  // 32 was held, hence dropped
  for (const auto& e : *entries) EXPECT_EQ(e.problem, "") << e.path;
}

// ModuleCache::Update replaces the memory entry and the disk entry.
TEST(ColdBuild, ModuleCacheUpdateReplacesBothTiers) {
  TempDir dir;
  CacheConfig config{dir.path()};
  config.log = Logger();
  ModuleCache cache(config);
  CacheKeyInputs inputs;
  inputs.source = "update test";
  inputs.target = "sm_90";
  inputs.compiler = "test";
  CacheKey key = MakeCacheKey(inputs);
  jit::Artifact a;
  a.image = "image bytes";
  a.target = *jit::ParseTarget("sm_90");
  auto r = cache.GetOrBuild(
      key, [&]() -> absl::StatusOr<jit::Artifact> { return a; },
      ModuleCache::DiskStore::kDeferred);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->disk_store_pending);
  EXPECT_EQ(cache.stats().disk_entries, 0u);
  auto updated = std::make_shared<jit::Artifact>(a);
  updated->thunk_object = "thunk object bytes";
  ASSERT_TRUE(cache.Update(key, updated).ok());
  auto never = [&]() -> absl::StatusOr<jit::Artifact> {
    ADD_FAILURE() << "built again";
    return a;
  };
  auto hit = cache.GetOrBuild(key, never);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->source, CacheSource::kMemory);
  EXPECT_EQ(hit->artifact->thunk_object, "thunk object bytes");
  EXPECT_EQ(r->artifact->thunk_object, "");  // the old one, still alive
  ModuleCache other(config);
  auto disk = other.GetOrBuild(key, never);
  ASSERT_TRUE(disk.ok());
  EXPECT_EQ(disk->source, CacheSource::kDisk);
  EXPECT_EQ(disk->artifact->thunk_object, "thunk object bytes");
  ExpectEntriesValid(dir.path(), 1);
}

}  // namespace
}  // namespace fleetjit
