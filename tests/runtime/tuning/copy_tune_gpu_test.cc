// fj_copy's window kernel tuned per device (runtime/tuning/copy_window_tune.cc)
// on the live GPU (skips without one): a tuning run under each implementation
// picks a correct shape and stores it, a second runtime on the same cache
// folder takes it from disk without timing anything, the first copy of a
// runtime queues the tuning in the background and later copies use its
// shape, and copies under the tuned shape match the host reference.
#include <chrono>
#include <filesystem>
#include <random>

#include "gtest/gtest.h"
#include "runtime/config.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/copy/copy_kernels.h"
#include "runtime/runtime.h"
#include "tests/runtime/copy/copy_gpu_util.h"

namespace fleetjit::copy {
namespace {

namespace fs = std::filesystem;
using testutil::CopyCase;
using testutil::GpuFixture;

// A fresh cache folder per test, removed after it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("fj-copy-tune-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

std::unique_ptr<Runtime> RuntimeOn(const std::string& cache_dir,
                                   bool copy_tune) {
  RuntimeOptions options;
  if (!ApplyEnvironment(options).ok()) return nullptr;
  options.cache.dir = cache_dir;
  options.cache.disk = true;
  options.copy_tune = copy_tune;
  auto rt = Runtime::Create(options);
  return rt.ok() ? std::move(rt).value() : nullptr;
}

CopyLaunchShape WinnerShape(const TuneOutcome& o) {
  absl::StatusOr<CopyLaunchShape> shape =
      Runtime::CopyWindowShapeOf(o.record.rows[o.record.winner]);
  EXPECT_TRUE(shape.ok()) << shape.status();
  return shape.value_or(CopyLaunchShape{});
}

class CopyTuneGpuTest : public GpuFixture {};

TEST_F(CopyTuneGpuTest, TunesStoresAndServesTheShapeFromDisk) {
  TempDir dir;
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    std::unique_ptr<Runtime> first = RuntimeOn(dir.str(), false);
    ASSERT_NE(first, nullptr);
    absl::StatusOr<TuneOutcome> tuned = first->TuneCopyWindow(0, impl);
    ASSERT_TRUE(tuned.ok()) << tuned.status();
    EXPECT_EQ(tuned->source, CacheSource::kCompiled);
    ASSERT_TRUE(tuned->record.has_winner());
    EXPECT_GE(tuned->record.rows.size(), 60u);
    size_t ok_rows = 0;
    for (const tune::TuneRow& r : tuned->record.rows) {
      ok_rows += r.status == tune::RowStatus::kOk;
    }
    EXPECT_GE(ok_rows, tuned->record.rows.size() / 2)
        << "most shapes should copy the window";
    const CopyLaunchShape installed = first->copy().kernels().ShapeFor(0, impl);
    if (!tuned->record.noisy) EXPECT_EQ(installed, WinnerShape(*tuned));
    if (tuned->record.noisy) {
      GTEST_SKIP() << "the GPU was busy: the run was noisy, nothing stored";
    }
    EXPECT_TRUE(tuned->stored);
    first.reset();  // its disk publication is written by now

    std::unique_ptr<Runtime> second = RuntimeOn(dir.str(), false);
    ASSERT_NE(second, nullptr);
    absl::StatusOr<TuneOutcome> found = second->TuneCopyWindow(0, impl);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->source, CacheSource::kDisk);
    EXPECT_EQ(found->key_digest, tuned->key_digest);
    EXPECT_EQ(found->record.winner, tuned->record.winner);
    EXPECT_EQ(second->copy().kernels().ShapeFor(0, impl), installed);
  }
}

TEST_F(CopyTuneGpuTest, TheFirstCopyTunesInTheBackgroundAndLaterCopiesUseIt) {
  TempDir dir;
  std::unique_ptr<Runtime> rt = RuntimeOn(dir.str(), true);
  ASSERT_NE(rt, nullptr);
  const jit::CopyImpl impl = Impls(0).back();  // the device's best
  // What the first kernel copy does (CopyKernels::LaunchCopy): it takes
  // the shipped shape at once and asks for the device's own.
  EXPECT_EQ(rt->copy().kernels().ShapeFor(0, impl), CopyShapeFor(impl));
  rt->WaitForBackgroundWork();
  absl::StatusOr<TuneOutcome> stored = rt->TuneCopyWindow(0, impl);
  ASSERT_TRUE(stored.ok()) << stored.status();
  if (stored->record.noisy) GTEST_SKIP() << "the GPU was busy";
  EXPECT_EQ(stored->source, CacheSource::kMemory)
      << "the background run stored it; this call only looks it up";
  EXPECT_EQ(rt->copy().kernels().ShapeFor(0, impl), WinnerShape(*stored));
}

TEST_F(CopyTuneGpuTest, CopiesUnderEveryTunedShapeMatchTheHostReference) {
  // The fixture's runtime tunes in the background (FLEETJIT_COPY_TUNE is
  // on by default): wait for it, then copy random windows.
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    absl::StatusOr<TuneOutcome> tuned = rt().TuneCopyWindow(0, impl);
    ASSERT_TRUE(tuned.ok()) << tuned.status();
    std::mt19937_64 rng(99 + static_cast<int>(impl));
    for (int trial = 0; trial < 20; ++trial) {
      CopyCase c = CopyCase::Random(rng, /*gather=*/trial % 4 == 3);
      SCOPED_TRACE(c.Describe());
      ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, impl, /*force_kernel=*/true));
    }
  }
}

}  // namespace
}  // namespace fleetjit::copy
