// The disk cache under faults (issue 12, item 3): ENOSPC, EIO, EACCES, a
// read-only file system, a folder deleted mid-run. Faults come through the
// file-operation seam of base/files.h (root can not be refused by chmod,
// and there is no small file system to fill here), plus one real refusal
// as another user. For every failure class:
//  - every build still succeeds (from memory), and the bytes are right;
//  - the runtime's Logger gets exactly one line naming the failure;
//  - afterwards the directory holds only valid entries and no temp files,
//    and a fresh runtime serves each build (from disk or compiled again)
//    with the same bytes: no partial entry is ever served.
// And, SQLite-style, every file operation of a store and of a load failing
// in turn (DiskCache directly, no NVRTC).
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "gtest/gtest.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/module_cache.h"
#include "runtime/runtime.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::testing {
namespace {

using files::FileOp;

// ---------------------------------------------------------------------------
// The fault plan the hook follows: which operations fail, with what errno,
// from which occurrence on; and an action to run at an operation.

struct FaultPlan {
  std::mutex mu;
  uint32_t ops = 0;    // bit per FileOp that fails
  int error = 0;       // errno
  uint64_t nth = 0;    // 0: every matching operation; else only the nth
  uint64_t seen = 0;   // matching operations so far
  uint64_t total = 0;  // every operation so far
  uint64_t fired = 0;
  FileOp action_op = FileOp::kOpen;
  std::function<void()> action;  // run once, at the first `action_op`
};

FaultPlan& Plan() {
  static FaultPlan* plan = new FaultPlan;
  return *plan;
}

uint32_t Bit(FileOp op) { return 1u << static_cast<int>(op); }

int Hook(FileOp op, void*) {
  FaultPlan& p = Plan();
  std::function<void()> action;
  int error = 0;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    ++p.total;
    if (p.action && op == p.action_op) std::swap(action, p.action);
    if ((p.ops & Bit(op)) != 0) {
      ++p.seen;
      if (p.nth == 0 || p.seen == p.nth) {
        ++p.fired;
        error = p.error;
      }
    }
  }
  if (action) action();
  return error;
}

// Installs a plan for the scope; none afterwards.
class ScopedFaults {
 public:
  ScopedFaults(uint32_t ops, int error, uint64_t nth = 0) {
    FaultPlan& p = Plan();
    std::lock_guard<std::mutex> lock(p.mu);
    p.ops = ops;
    p.error = error;
    p.nth = nth;
    p.seen = p.total = p.fired = 0;
    p.action = nullptr;
    files::SetFileFaultHookForTesting(Hook, nullptr);
  }
  void At(FileOp op, std::function<void()> action) {
    std::lock_guard<std::mutex> lock(Plan().mu);
    Plan().action_op = op;
    Plan().action = std::move(action);
  }
  uint64_t fired() const {
    std::lock_guard<std::mutex> lock(Plan().mu);
    return Plan().fired;
  }
  uint64_t total() const {
    std::lock_guard<std::mutex> lock(Plan().mu);
    return Plan().total;
  }
  ~ScopedFaults() {
    files::SetFileFaultHookForTesting(nullptr, nullptr);
    std::lock_guard<std::mutex> lock(Plan().mu);
    Plan().action = nullptr;
  }
};

// ---------------------------------------------------------------------------
// Runtimes whose log lines are kept.

struct Lines {
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<std::string> Matching(absl::string_view needle) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    for (const std::string& l : lines) {
      if (absl::StrContains(l, needle)) out.push_back(l);
    }
    return out;
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu);
    std::string text;
    for (const std::string& l : lines) absl::StrAppend(&text, "\n  ", l);
    return text;
  }
};

std::unique_ptr<Runtime> NewRuntime(const std::string& dir, Lines* lines) {
  RuntimeOptions options;
  options.cache.dir = dir;
  options.libcuda_path = "/nonexistent/libcuda.so.1";  // CPU: named targets
  if (lines != nullptr) {
    options.log_sink = [lines](LogLevel, absl::string_view line) {
      std::lock_guard<std::mutex> lock(lines->mu);
      lines->lines.emplace_back(line);
    };
    options.log_level = LogLevel::kDebug;
  }
  auto rt = Runtime::Create(options);
  EXPECT_TRUE(rt.ok()) << rt.status();
  return rt.ok() ? std::move(*rt) : nullptr;
}

BuildSpec Spec(int variant) {
  BuildSpec spec;
  spec.source = absl::StrCat(
      "extern \"C\" __global__ void k(float* p, int n) {\n"
      "  if (threadIdx.x < n) p[threadIdx.x] = ",
      variant, ".5f;\n}\n");
  spec.name = absl::StrCat("disk_faults_", variant, ".cu");
  spec.target = *jit::ParseTarget("sm_90");
  return spec;
}

#define SKIP_WITHOUT_NVRTC(rt)                                             \
  do {                                                                     \
    auto identity = (rt).compiler_identity();                              \
    if (!identity.ok()) GTEST_SKIP() << "no NVRTC: " << identity.status(); \
  } while (0)

// Every file under `dir` whose name starts with ".tmp-".
std::vector<std::string> TempFiles(const std::string& dir) {
  std::vector<std::string> temps;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (absl::StartsWith(it->path().filename().string(), ".tmp-")) {
      temps.push_back(it->path().string());
    }
  }
  return temps;
}

// The directory holds only valid entries and no temp file, and a fresh
// runtime serves every variant with the bytes `images` recorded.
void ExpectCleanAndServed(const std::string& dir,
                          const std::vector<std::string>& images) {
  ModuleCache cache(CacheConfig{dir});
  auto entries = cache.List(/*verify=*/true);
  ASSERT_TRUE(entries.ok()) << entries.status();
  for (const auto& e : *entries) EXPECT_EQ(e.problem, "") << e.path;
  EXPECT_EQ(TempFiles(dir), std::vector<std::string>{});
  auto rt = NewRuntime(dir, nullptr);
  ASSERT_NE(rt, nullptr);
  for (size_t v = 0; v < images.size(); ++v) {
    auto built = rt->BuildRecord(Spec(static_cast<int>(v)));
    ASSERT_TRUE(built.ok()) << built.status();
    EXPECT_EQ(built->artifact->image, images[v]) << "variant " << v;
  }
}

constexpr int kVariants = 3;

// Builds variants 0..count-1 twice (the second from memory); returns the
// images.
std::vector<std::string> BuildAll(Runtime& rt, int count = kVariants) {
  std::vector<std::string> images;
  for (int round = 0; round < 2; ++round) {
    for (int v = 0; v < count; ++v) {
      auto built = rt.BuildRecord(Spec(v));
      EXPECT_TRUE(built.ok()) << built.status();
      if (!built.ok()) return {};
      if (round == 0) images.push_back(built->artifact->image);
      if (round == 1) {
        EXPECT_EQ(built->source, CacheSource::kMemory);
        EXPECT_EQ(built->artifact->image, images[v]);
      }
    }
  }
  rt.WaitForBackgroundWork();  // publication runs in the background
  return images;
}

struct FailureClass {
  const char* name;
  uint32_t ops;
  int error;
  // Variants 0 and 1 are on disk before the faults (read-side classes);
  // variant 2 is always new, so something is stored under the faults.
  bool prefill;
};

void PrintTo(const FailureClass& c, std::ostream* os) { *os << c.name; }

class DiskFaultsTest : public ::testing::TestWithParam<FailureClass> {};

// One class at a time, persistent (every matching operation fails).
TEST_P(DiskFaultsTest, BuildsSucceedFromMemoryWithOneLogLine) {
  const FailureClass& c = GetParam();
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  {
    auto probe = NewRuntime(cache_dir, nullptr);
    ASSERT_NE(probe, nullptr);
    SKIP_WITHOUT_NVRTC(*probe);
    if (c.prefill) {
      ASSERT_EQ(BuildAll(*probe, kVariants - 1).size(),
                static_cast<size_t>(kVariants - 1));
    }
  }
  Lines lines;
  std::vector<std::string> images;
  {
    ScopedFaults faults(c.ops, c.error);
    auto rt = NewRuntime(cache_dir, &lines);
    ASSERT_NE(rt, nullptr);
    images = BuildAll(*rt);
    ASSERT_EQ(images.size(), static_cast<size_t>(kVariants));
    EXPECT_GT(faults.fired(), 0u) << "the fault never fired";
    rt.reset();
  }
  const std::vector<std::string> named = lines.Matching(strerror(c.error));
  EXPECT_EQ(named.size(), 1u) << "log lines:" << lines.All();
  ExpectCleanAndServed(cache_dir, images);
}

INSTANTIATE_TEST_SUITE_P(
    Classes, DiskFaultsTest,
    ::testing::Values(
        FailureClass{"enospc_on_write", Bit(FileOp::kWrite), ENOSPC, false},
        FailureClass{"edquot_on_write", Bit(FileOp::kWrite), EDQUOT, false},
        FailureClass{"eio_on_write", Bit(FileOp::kWrite), EIO, false},
        FailureClass{"eio_on_fsync", Bit(FileOp::kFsync), EIO, false},
        FailureClass{"eio_on_close", Bit(FileOp::kClose), EIO, false},
        FailureClass{"eio_on_rename", Bit(FileOp::kRename), EIO, false},
        FailureClass{"eio_on_read", Bit(FileOp::kRead) | Bit(FileOp::kMap), EIO,
                     true},
        FailureClass{"eacces_creating",
                     Bit(FileOp::kCreate) | Bit(FileOp::kMkdir), EACCES, false},
        FailureClass{"eacces_opening", Bit(FileOp::kOpen), EACCES, true},
        FailureClass{
            "read_only_file_system",
            Bit(FileOp::kCreate) | Bit(FileOp::kMkdir) | Bit(FileOp::kRename),
            EROFS, true}),
    [](const ::testing::TestParamInfo<FailureClass>& info) {
      return info.param.name;
    });

// The directory removed under a running process: between builds, and in
// the middle of a store (after the temp file is written, before its
// rename). Builds succeed; the interrupted store is one log line; the next
// store recreates the directory.
TEST(DiskFaultsTest, FolderDeletedMidRun) {
  TempDir dir;
  const std::string cache_dir = dir.Sub("cache");
  Lines lines;
  auto rt = NewRuntime(cache_dir, &lines);
  ASSERT_NE(rt, nullptr);
  SKIP_WITHOUT_NVRTC(*rt);
  auto a = rt->BuildRecord(Spec(0));
  ASSERT_TRUE(a.ok()) << a.status();
  rt->WaitForBackgroundWork();
  std::filesystem::remove_all(cache_dir);
  auto b = rt->BuildRecord(Spec(1));  // between builds: recreated, silently
  ASSERT_TRUE(b.ok()) << b.status();
  rt->WaitForBackgroundWork();
  EXPECT_TRUE(std::filesystem::exists(cache_dir));
  EXPECT_EQ(lines.Matching("cache").size(), 0u) << lines.All();
  {
    ScopedFaults faults(0, 0);
    faults.At(FileOp::kRename, [&] { std::filesystem::remove_all(cache_dir); });
    auto c = rt->BuildRecord(Spec(2));
    ASSERT_TRUE(c.ok()) << c.status();
    rt->WaitForBackgroundWork();
    EXPECT_GT(faults.total(), 0u);
  }
  EXPECT_EQ(lines.Matching(strerror(ENOENT)).size(), 1u) << lines.All();
  auto again = rt->BuildRecord(Spec(2));  // the memory tier still has it
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, CacheSource::kMemory);
  std::vector<std::string> images = {a->artifact->image, b->artifact->image,
                                     again->artifact->image};
  rt.reset();
  ExpectCleanAndServed(cache_dir, images);
}

// ---------------------------------------------------------------------------
// Every file operation of a store, then of a load, failing in turn.

constexpr FileOp kAllOps[] = {FileOp::kOpen,  FileOp::kCreate, FileOp::kMkdir,
                              FileOp::kRead,  FileOp::kMap,    FileOp::kWrite,
                              FileOp::kFsync, FileOp::kClose,  FileOp::kRename};

uint32_t AllOps() {
  uint32_t bits = 0;
  for (FileOp op : kAllOps) bits |= Bit(op);
  return bits;
}

TEST(DiskFaultsTest, EveryStoreOperationFailingInTurnLeavesNoPartialEntry) {
  auto rng = SeededRng("EveryStoreOperationFailingInTurnLeavesNoPartialEntry");
  const uint64_t seed = rng();
  const int kErrors[] = {ENOSPC, EIO, EACCES, EROFS, EDQUOT};
  // A store over an existing entry (the thunk follow-up does that) and a
  // store into an empty directory.
  for (bool replace : {false, true}) {
    uint64_t n_ops = 0;
    {
      TempDir dir;
      DiskCache cache(dir.Sub("cache"), 0, Logger());
      if (replace)
        ASSERT_TRUE(
            cache.Store(KeyFor(seed, 0), ArtifactFor(seed, 1, 300)).ok());
      ScopedFaults count(0, 0);
      ASSERT_TRUE(
          cache.Store(KeyFor(seed, 0), ArtifactFor(seed, 0, 5000)).ok());
      n_ops = count.total();
    }
    ASSERT_GT(n_ops, 3u);
    for (uint64_t nth = 1; nth <= n_ops; ++nth) {
      SCOPED_TRACE(
          absl::StrCat(replace ? "replacing" : "new", ": operation ", nth));
      TempDir dir;
      DiskCache cache(dir.Sub("cache"), 0, Logger());
      const jit::Artifact old_artifact = ArtifactFor(seed, 1, 300);
      if (replace) ASSERT_TRUE(cache.Store(KeyFor(seed, 0), old_artifact).ok());
      const jit::Artifact artifact = ArtifactFor(seed, 0, 5000);
      absl::Status stored;
      {
        ScopedFaults faults(AllOps(), kErrors[rng() % std::size(kErrors)], nth);
        stored = cache.Store(KeyFor(seed, 0), artifact);
        EXPECT_EQ(faults.fired(), 1u);
      }
      // Served afterwards: the new entry, or (on failure) the old one or none.
      std::optional<jit::Artifact> loaded = cache.Load(KeyFor(seed, 0));
      if (stored.ok()) {
        ASSERT_TRUE(loaded.has_value());
        EXPECT_TRUE(SameArtifact(*loaded, artifact));
      } else if (loaded.has_value()) {
        EXPECT_TRUE(SameArtifact(*loaded, replace ? old_artifact : artifact))
            << "a failed store served something else: " << stored;
      }
      EXPECT_EQ(TempFiles(dir.path()), std::vector<std::string>{}) << stored;
      auto listed = cache.List(/*verify=*/true);
      ASSERT_TRUE(listed.ok());
      for (const auto& e : *listed) EXPECT_EQ(e.problem, "") << e.path;
    }
  }
}

TEST(DiskFaultsTest, EveryLoadOperationFailingInTurnIsAMissOrTheEntry) {
  auto rng = SeededRng("EveryLoadOperationFailingInTurnIsAMissOrTheEntry");
  const uint64_t seed = rng();
  TempDir dir;
  std::vector<std::string> lines;
  DiskCache cache(dir.Sub("cache"), 0,
                  Logger(LogLevel::kDebug, [&](LogLevel, absl::string_view l) {
                    lines.emplace_back(l);
                  }));
  const jit::Artifact artifact = ArtifactFor(seed, 0, 20000);
  ASSERT_TRUE(cache.Store(KeyFor(seed, 0), artifact).ok());
  uint64_t n_ops = 0;
  {
    ScopedFaults count(0, 0);
    ASSERT_TRUE(cache.Load(KeyFor(seed, 0)).has_value());
    n_ops = count.total();
  }
  ASSERT_GE(n_ops, 3u);  // root, shard, entry (+ map or read)
  for (uint64_t nth = 1; nth <= n_ops; ++nth) {
    SCOPED_TRACE(absl::StrCat("operation ", nth));
    std::optional<jit::Artifact> loaded;
    {
      ScopedFaults faults(AllOps(), EIO, nth);
      loaded = cache.Load(KeyFor(seed, 0));
    }
    if (loaded.has_value()) EXPECT_TRUE(SameArtifact(*loaded, artifact));
    // A read failure is not a verdict: the entry is still there, whole.
    std::optional<jit::Artifact> after = cache.Load(KeyFor(seed, 0));
    ASSERT_TRUE(after.has_value());
    EXPECT_TRUE(SameArtifact(*after, artifact));
  }
  EXPECT_EQ(cache.rejected_entries(), 0u);
  // The first unreadable entry is logged, once.
  int read_lines = 0;
  for (const std::string& l : lines)
    read_lines += absl::StrContains(l, "cannot read");
  EXPECT_EQ(read_lines, 1);
}

// ---------------------------------------------------------------------------
// A real refusal, without the seam: a read-only folder of another user (or
// of this one, when not root), in a child process.

TEST(DiskFaultsTest, RealReadOnlyFolderAsAnotherUser) {
  auto rng = SeededRng("RealReadOnlyFolderAsAnotherUser");
  const uint64_t seed = rng();
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  const std::string cache_dir = dir.Sub("cache");
  fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Root ignores permission bits: become nobody first.
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0))
      _exit(10);
    if (::mkdir(cache_dir.c_str(), 0700) != 0) _exit(11);
    std::vector<std::string> lines;
    CacheConfig config{cache_dir};
    config.log = Logger(LogLevel::kDebug, [&](LogLevel, absl::string_view l) {
      lines.emplace_back(l);
    });
    int built = 0;
    auto build = [&](int i) {
      return [&built, seed, i]() -> absl::StatusOr<jit::Artifact> {
        ++built;
        return ArtifactFor(seed, i, 4000);
      };
    };
    {
      ModuleCache writer(config);
      if (!writer.GetOrBuild(KeyFor(seed, 0), build(0)).ok()) _exit(12);
    }
    if (::chmod(cache_dir.c_str(), 0500) != 0) _exit(13);
    for (const auto& entry : std::filesystem::directory_iterator(cache_dir)) {
      ::chmod(entry.path().c_str(), 0500);  // shards read-only too
    }
    ModuleCache cache(config);
    lines.clear();
    built = 0;
    // An existing entry still hits; new ones build, are served from memory
    // and cannot be written: one line.
    auto hit = cache.GetOrBuild(KeyFor(seed, 0), build(0));
    if (!hit.ok() || hit->source != CacheSource::kDisk) _exit(14);
    for (int i = 1; i <= 4; ++i) {
      auto r = cache.GetOrBuild(KeyFor(seed, i), build(i));
      if (!r.ok() || !SameArtifact(*r->artifact, ArtifactFor(seed, i, 4000)))
        _exit(15);
      auto again = cache.GetOrBuild(KeyFor(seed, i), build(i));
      if (!again.ok() || again->source != CacheSource::kMemory) _exit(16);
    }
    if (built != 4) _exit(17);
    int denied = 0;
    for (const std::string& l : lines)
      denied += absl::StrContains(l, strerror(EACCES));
    if (denied != 1 || lines.size() != 1) _exit(18);
    ::chmod(cache_dir.c_str(), 0700);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child died: " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10-13: setup, 14: no disk hit, 15-16: "
                                       "a build failed, 17: build count, "
                                       "18: not exactly one EACCES log line";
}

}  // namespace
}  // namespace fleetjit::testing
