// Precompiled headers kept in the module cache's disk tier
// (jit/nvrtc_pch.h): a fresh process uses the PCH another process stored,
// a corrupt or foreign one is ignored and the build still succeeds, other
// options get other entries, and two processes creating one at once are
// safe. Each build runs in a fresh process (this binary, re-executed with
// the DISABLED_ child test selected), so address-space layout differs as it
// does between servers. Needs NVRTC 12.8+, no GPU.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/sha256.h"
#include "jit/copy_plan.h"
#include "jit/nvrtc_build.h"
#include "jit/nvrtc_pch.h"
#include "jit/target.h"
#include "platform/nvrtc_library.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/module_cache.h"
#include "runtime/runtime.h"
#include "tests/common/process.h"
#include "tests/common/temp_dir.h"

namespace fleetjit {
namespace {

// Only includes the layer: its build time is mostly the header's parse.
constexpr const char* kBody = R"(
extern "C" __global__ void copy4(const float4* in, float4* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x)
    out[i] = in[i];
}
)";

// The source a child builds: `tag` makes its module key unique while the
// include line (the PCH's key) stays the same.
std::string Source(const std::string& tag) {
  return absl::StrCat("#include <fleetjit/copy.cuh>\n", kBody, "// ", tag,
                      "\n");
}

using ::fleetjit::testing::SelfExecutable;
using ::fleetjit::testing::Spawn;
using ::fleetjit::testing::TempDir;

// What a child reports: its PCH counters, then its PTX.
struct ChildResult {
  int exit_code = -1;
  std::map<std::string, int> stats;
  std::string ptx;
};

// Starts this binary as a child that builds Source(tag) for `target` with
// `option` (may be "") into the cache at `dir`; its report goes to `out`.
pid_t StartChild(const std::string& dir, const std::string& tag,
                 const std::string& target, const std::string& option,
                 const std::string& out) {
  // The five FJ_PCH_CHILD_* variables replace any the parent has.
  return Spawn({SelfExecutable(), "--gtest_filter=PchFileChild.DISABLED_Build",
                "--gtest_also_run_disabled_tests", "--gtest_brief=1"},
               {"FJ_PCH_CHILD_DIR=" + dir, "FJ_PCH_CHILD_TAG=" + tag,
                "FJ_PCH_CHILD_TARGET=" + target,
                "FJ_PCH_CHILD_OPTION=" + option, "FJ_PCH_CHILD_OUT=" + out});
}

ChildResult WaitChild(pid_t pid, const std::string& out) {
  ChildResult r;
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  }
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  for (absl::string_view field : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(field, '=');
    int v = 0;
    if (kv.size() == 2 && absl::SimpleAtoi(kv[1], &v)) r.stats[kv[0]] = v;
  }
  std::stringstream rest;
  rest << in.rdbuf();
  r.ptx = rest.str();
  return r;
}

ChildResult RunChild(const std::string& dir, const std::string& tag,
                     const std::string& target = "sm_90",
                     const std::string& option = "") {
  const std::string out = absl::StrCat(dir, "/report-", tag);
  return WaitChild(StartChild(dir, tag, target, option, out), out);
}

// The child: one build through a runtime on the shared cache.
TEST(PchFileChild, DISABLED_Build) {
  const char* dir = std::getenv("FJ_PCH_CHILD_DIR");
  ASSERT_NE(dir, nullptr);
  RuntimeOptions options;
  options.cache.dir = dir;
  options.cache.memory = false;
  options.cache.log = Logger();  // logs nothing
  options.thunks = false;
  options.pch = true;
  auto rt = Runtime::Create(options);
  ASSERT_TRUE(rt.ok()) << rt.status();
  BuildSpec spec;
  spec.source = Source(std::getenv("FJ_PCH_CHILD_TAG"));
  spec.name = "pch_file.cu";
  spec.target = *jit::ParseTarget(std::getenv("FJ_PCH_CHILD_TARGET"));
  const std::string option = std::getenv("FJ_PCH_CHILD_OPTION");
  if (!option.empty()) spec.options.push_back(option);
  auto built = (*rt)->BuildRecord(spec);
  ASSERT_TRUE(built.ok()) << built.status();
  const jit::PchStats s = jit::GetPchStats();
  std::ofstream out(std::getenv("FJ_PCH_CHILD_OUT"));
  out << "created=" << s.created << " used=" << s.used
      << " heap_placed=" << s.heap_placed << " file_loaded=" << s.file_loaded
      << " file_used=" << s.file_used << " file_rejected=" << s.file_rejected
      << " file_stored=" << s.file_stored << "\n"
      << built->artifact->ptx;
}

class PchFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
    if (!jit::NvrtcHasPch(**api))
      GTEST_SKIP() << "NVRTC before 12.8 has no PCH";
    ASSERT_FALSE(dir_.path().empty());
  }

  // The PTX of Source(tag) built in this process without any PCH.
  static std::string PlainPtx(const std::string& tag, const std::string& target,
                              const std::string& option = "") {
    jit::BuildRequest r;
    r.source = Source(tag);
    r.name = "pch_file.cu";
    r.target = *jit::ParseTarget(target);
    r.copy_impl = jit::MakeCopyPlan(r.target, std::nullopt)->impl;
    if (!option.empty()) r.options.push_back(option);
    auto a = jit::BuildModule(r);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? a->ptx : "";
  }

  std::vector<CacheEntryInfo> PchEntries() {
    ModuleCache cache(CacheConfig{dir_.path()});
    auto entries = cache.List(/*verify=*/true);
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<CacheEntryInfo> pchs;
    if (!entries.ok()) return pchs;
    for (const CacheEntryInfo& e : *entries) {
      EXPECT_EQ(e.problem, "") << e.path;
      if (e.kind == "pch") pchs.push_back(e);
    }
    return pchs;
  }

  TempDir dir_;
};

// The first process creates and stores the PCH; a second one, with a
// different kernel after the same include, takes it from the disk tier
// (NVRTC confirms it used it) and builds what a build without a PCH builds.
TEST_F(PchFileTest, ASecondProcessReusesThePchFile) {
  ChildResult first = RunChild(dir_.path(), "first");
  ASSERT_EQ(first.exit_code, 0);
  if (first.stats["heap_placed"] != 1) {
    GTEST_SKIP() << "this process layout cannot place the PCH heap";
  }
  EXPECT_EQ(first.stats["created"], 1);
  EXPECT_EQ(first.stats["file_stored"], 1);
  EXPECT_EQ(first.stats["file_used"], 0);
  ASSERT_EQ(PchEntries().size(), 1u);

  ChildResult second = RunChild(dir_.path(), "second");
  ASSERT_EQ(second.exit_code, 0);
  EXPECT_EQ(second.stats["file_loaded"], 1);
  EXPECT_EQ(second.stats["file_used"], 1);
  EXPECT_EQ(second.stats["file_rejected"], 0);
  EXPECT_EQ(second.stats["created"], 0);
  EXPECT_EQ(second.ptx, PlainPtx("second", "sm_90"));
  EXPECT_EQ(first.ptx, PlainPtx("first", "sm_90"));
  EXPECT_EQ(PchEntries().size(), 1u);
}

// Rewrites the one PCH entry of `dir`: `damage` gets the stored PCH bytes;
// with `reseal` the entry is stored again with a valid checksum (a foreign
// PCH), else the file's bytes are damaged in place (a corrupt entry).
void TamperWithPch(const std::string& dir, bool reseal,
                   const std::function<void(std::string&)>& damage) {
  DiskCache disk(dir, 0, Logger());
  auto entries = disk.List(false);
  ASSERT_TRUE(entries.ok());
  for (const CacheEntryInfo& e : *entries) {
    if (e.kind != "pch") continue;
    std::ifstream in(e.path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    in.close();
    if (!reseal) {
      std::string middle = bytes.substr(bytes.size() / 2, 4096);
      damage(middle);
      bytes.replace(bytes.size() / 2, middle.size(), middle);
      std::ofstream(e.path, std::ios::binary | std::ios::trunc) << bytes;
      return;
    }
    auto view = DecodeCacheEntry(bytes);
    ASSERT_TRUE(view.ok()) << view.status();
    CacheKey key{Sha256::Hex(Sha256::Hash(view->key)), std::string(view->key)};
    std::optional<jit::Artifact> a = disk.Load(key);
    ASSERT_TRUE(a.has_value());
    damage(a->image);
    ASSERT_TRUE(disk.Store(key, *a).ok());
    return;
  }
  FAIL() << "no PCH entry in " << dir;
}

void Scramble(std::string& bytes) {
  std::mt19937 rng(std::random_device{}());
  for (char& c : bytes) c = static_cast<char>(rng());
}

// A PCH entry damaged on disk fails the disk tier's checks (deleted); one
// with a valid entry but bytes NVRTC refuses is ignored. Either way the
// build succeeds with the output of a plain build, and a new PCH replaces
// the bad one, which the next process uses.
TEST_F(PchFileTest, ACorruptOrForeignPchIsIgnored) {
  ChildResult first = RunChild(dir_.path(), "make");
  ASSERT_EQ(first.exit_code, 0);
  if (first.stats["heap_placed"] != 1) {
    GTEST_SKIP() << "this process layout cannot place the PCH heap";
  }
  for (bool reseal : {false, true}) {
    SCOPED_TRACE(reseal ? "foreign" : "corrupt");
    TamperWithPch(dir_.path(), reseal, Scramble);
    const std::string tag = reseal ? "after_foreign" : "after_corrupt";
    ChildResult r = RunChild(dir_.path(), tag);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.stats["file_used"], 0);
    EXPECT_EQ(r.stats["file_rejected"], reseal ? 1 : 0);
    EXPECT_EQ(r.stats["file_loaded"], reseal ? 1 : 0);
    EXPECT_EQ(r.ptx, PlainPtx(tag, "sm_90"));
    ChildResult again = RunChild(dir_.path(), tag + "_again");
    ASSERT_EQ(again.exit_code, 0);
    // The rejected PCH was replaced (after the foreign one, by the next
    // build: the rejecting process made it in its second build or not at
    // all), so a later process uses a good one.
    if (again.stats["file_used"] == 0) {
      EXPECT_EQ(again.stats["created"], 1);
      ChildResult third = RunChild(dir_.path(), tag + "_third");
      EXPECT_EQ(third.stats["file_used"], 1);
    }
    EXPECT_EQ(PchEntries().size(), 1u);
  }
}

// The target, the copy implementation and a -D option each key their own
// PCH entry, and each is then reused by a fresh process.
TEST_F(PchFileTest, DifferentOptionsGetDifferentEntries) {
  const struct {
    const char* target;
    const char* option;
  } cases[] = {{"sm_90", ""}, {"sm_80", ""}, {"sm_90", "-DFJ_TEST_DEFINE=3"}};
  int n = 0;
  for (const auto& c : cases) {
    ChildResult r =
        RunChild(dir_.path(), absl::StrCat("case", n), c.target, c.option);
    ASSERT_EQ(r.exit_code, 0);
    if (r.stats["heap_placed"] != 1)
      GTEST_SKIP() << "cannot place the PCH heap";
    EXPECT_EQ(r.stats["created"], 1) << c.target << " " << c.option;
    EXPECT_EQ(r.stats["file_loaded"], 0) << c.target << " " << c.option;
    ++n;
    EXPECT_EQ(PchEntries().size(), static_cast<size_t>(n));
  }
  n = 0;
  for (const auto& c : cases) {
    const std::string tag = absl::StrCat("again", n++);
    ChildResult r = RunChild(dir_.path(), tag, c.target, c.option);
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.stats["file_used"], 1) << c.target << " " << c.option;
    EXPECT_EQ(r.ptx, PlainPtx(tag, c.target, c.option));
  }
}

// Two processes that create the same PCH at once both build; the disk tier
// ends with one valid entry, which a third process uses.
TEST_F(PchFileTest, ConcurrentCreationIsSafe) {
  const std::string out_a = dir_.path() + "/report-a",
                    out_b = dir_.path() + "/report-b";
  pid_t a = StartChild(dir_.path(), "racer_a", "sm_90", "", out_a);
  pid_t b = StartChild(dir_.path(), "racer_b", "sm_90", "", out_b);
  ChildResult ra = WaitChild(a, out_a), rb = WaitChild(b, out_b);
  ASSERT_EQ(ra.exit_code, 0);
  ASSERT_EQ(rb.exit_code, 0);
  if (ra.stats["heap_placed"] != 1) GTEST_SKIP() << "cannot place the PCH heap";
  EXPECT_EQ(ra.ptx, PlainPtx("racer_a", "sm_90"));
  EXPECT_EQ(rb.ptx, PlainPtx("racer_b", "sm_90"));
  EXPECT_EQ(PchEntries().size(), 1u);
  ChildResult c = RunChild(dir_.path(), "after_race");
  ASSERT_EQ(c.exit_code, 0);
  EXPECT_EQ(c.stats["file_used"], 1);
}

}  // namespace
}  // namespace fleetjit
