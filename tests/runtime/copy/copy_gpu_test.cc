// fj_copy / fj_prefetch / peer access on real GPUs (skips without one; the
// two-GPU tests skip without two). Each copy is checked against a host
// reference over random ranks, shapes, strides, windows, fill modes and
// dtypes, under every implementation the device has, with the output
// poisoned first so that holes in a strided dst must stay poisoned.
//
//   tests/copy_gpu_test --gtest_filter='CopyGpu*'      one GPU
//   tests/copy_gpu_test --gtest_filter='CopyTwoGpu*'   two GPUs
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/runtime/copy/copy_gpu_util.h"

namespace fleetjit::copy {
namespace {

using testutil::Buffer;
using testutil::CopyCase;
using testutil::GpuFixture;

class CopyGpuTest : public GpuFixture {};

TEST_F(CopyGpuTest, RandomCopiesMatchTheHostReferenceUnderEveryImplementation) {
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    std::mt19937_64 rng(1234 + static_cast<int>(impl));
    for (int trial = 0; trial < 60; ++trial) {
      CopyCase c = CopyCase::Random(rng, /*gather=*/trial % 5 == 4);
      SCOPED_TRACE(c.Describe());
      ASSERT_NO_FATAL_FAILURE(
          RunAndCheck(c, impl, /*force_kernel=*/trial % 3 == 0));
    }
  }
}

TEST_F(CopyGpuTest, DenseInBoundsCopiesTakeTheDriver) {
  CopyCase c = CopyCase::Dense({64, 1000}, testutil::kF32);
  const auto before = rt().copy().counters();
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));
  const auto after = rt().copy().counters();
  EXPECT_EQ(after.driver, before.driver + 1);
  EXPECT_EQ(after.kernel, before.kernel);
}

TEST_F(CopyGpuTest, WindowsWithFillTakeTheKernel) {
  CopyCase c = CopyCase::Dense({64, 1000}, testutil::kF32);
  c.dst_shape = {70, 900};
  c.start = {-3, 50, 0, 0, 0};
  c.oob = FJ_OOB_NAN;
  const auto before = rt().copy().counters();
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));
  EXPECT_EQ(rt().copy().counters().kernel, before.kernel + 1);
}

// Windows whose columns start between 256-byte boundaries of a src whose
// rows start on them (fj_copy_bench's geometry, where reads cost the most:
// docs/measurements.md), some running past src's right edge into the fill.
TEST_F(CopyGpuTest, WindowsOffABoundaryMatchTheReference) {
  const testutil::Dtype* dtypes[] = {&testutil::kF32, &testutil::kBF16,
                                     &testutil::kU8, &testutil::kF64};
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    std::mt19937_64 rng(0x5A1F7 + static_cast<int>(impl));
    for (int trial = 0; trial < 24; ++trial) {
      const testutil::Dtype& dt = *dtypes[trial % 4];
      const int64_t per_boundary = 256 / dt.bytes;
      const int64_t src_cols = per_boundary * (4 + rng() % 12);
      const int64_t rows = 3 + rng() % 40;
      CopyCase c = CopyCase::Dense({rows, src_cols}, dt);
      // A column start off every boundary, and (every third trial) a
      // window that runs past src's right edge into the fill.
      const int64_t col = 1 + rng() % (per_boundary - 1) +
                          per_boundary * static_cast<int64_t>(rng() % 2);
      const int64_t width =
          trial % 3 == 2 ? src_cols - col + 7 : src_cols - col - rng() % 5;
      c.dst_shape = {rows + 1, width};
      c.start = {static_cast<int64_t>(rng() % 3) - 1, col, 0, 0, 0};
      c.oob = dt.is_float && trial % 2 ? FJ_OOB_NAN : FJ_OOB_ZEROS;
      SCOPED_TRACE(c.Describe());
      const auto before = rt().copy().counters();
      ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, impl, /*force_kernel=*/true));
      EXPECT_EQ(rt().copy().counters().kernel, before.kernel + 1);
    }
  }
}

TEST_F(CopyGpuTest, PagedGatherWithBadIndicesFills) {
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    // src: 32 pages of [16 tokens, 4 heads, 64] bf16; gather 9 pages.
    CopyCase c = CopyCase::Dense({32, 16, 4, 64}, testutil::kBF16);
    c.dst_shape = {9, 16, 4, 64};
    c.gather = true;
    c.index = {3, 31, 0, 7, -1, 7, 40, 12, 1};  // -1 and 40: outside src
    for (int oob : {FJ_OOB_PROMISE_IN_BOUNDS, FJ_OOB_ZEROS, FJ_OOB_NAN}) {
      c.oob = oob;
      for (int index_bits : {32, 64}) {
        c.index_bits = index_bits;
        SCOPED_TRACE(absl::StrCat("oob ", oob, ", int", index_bits, " index"));
        ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, impl, false));
      }
    }
  }
}

// fj_copy's scatter index (since 1.4), a paged KV-cache append: window row
// i goes to cache row scatter_index[i]; -1 and 40 lie outside the cache
// and write nothing; every row no index names keeps its poison. With a
// gather index too, and under every fill mode and index width.
TEST_F(CopyGpuTest, PagedAppendWritesOnlyTheRowsItsIndexNames) {
  for (jit::CopyImpl impl : Impls(0)) {
    SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
    // src: 9 new tokens of [4 heads, 64] bf16; dst: a cache of 32 rows.
    CopyCase c = CopyCase::Dense({9, 4, 64}, testutil::kBF16);
    c.dst_shape = {32, 4, 64};
    c.scatter = true;
    c.scatter_index = {3, 31, 0, 7, -1, 8, 40, 12, 1};
    for (int oob : {FJ_OOB_PROMISE_IN_BOUNDS, FJ_OOB_ZEROS, FJ_OOB_NAN}) {
      c.oob = oob;
      for (int index_bits : {32, 64}) {
        c.index_bits = index_bits;
        SCOPED_TRACE(absl::StrCat("oob ", oob, ", int", index_bits, " index"));
        const auto before = rt().copy().counters();
        ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, impl, false));
        EXPECT_EQ(rt().copy().counters().kernel, before.kernel + 1);
      }
    }
    // Gathered and scattered at once: src rows by one index, dst rows by
    // the other (a bad gather index reads the fill, a bad scatter index
    // writes nothing).
    CopyCase g = CopyCase::Dense({16, 4, 64}, testutil::kBF16);
    g.dst_shape = {32, 4, 64};
    g.gather = true;
    g.index = {15, 2, -3, 0, 9};
    g.scatter = true;
    g.scatter_index = {30, 1, 2, -1, 16};
    g.oob = FJ_OOB_ZEROS;
    ASSERT_NO_FATAL_FAILURE(RunAndCheck(g, impl, false));
  }
}

TEST_F(CopyGpuTest, PinnedHostSourceAndDestination) {
  CopyCase c = CopyCase::Dense({48, 300}, testutil::kF16);
  c.src_place = testutil::Place::kPinnedHost;
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));  // the driver
  c.dst_shape = {40, 256};
  c.start = {4, 30, 0, 0, 0};
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));  // the kernel
  c.src_place = testutil::Place::kDevice;
  c.dst_place = testutil::Place::kPinnedHost;
  c.oob = FJ_OOB_ZEROS;
  c.start = {-2, 100, 0, 0, 0};
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));
}

TEST_F(CopyGpuTest, UnpinnedHostMemoryIsRefused) {
  std::vector<float> host(1024);
  Buffer dst = Device(0, 4096);
  int64_t shape[1] = {1024};
  fj_tensor s{host.data(), {1, 0}, 1, {2, 32, 1}, shape, nullptr, 0};
  fj_tensor d{reinterpret_cast<void*>(dst.address),
              {2, 0},
              1,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  CopySpec spec;
  spec.src = DlTensorOf(s);
  spec.dst = DlTensorOf(d);
  absl::Status st = rt().copy().CopyTensorWindow(spec, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("not pinned"), absl::string_view::npos) << st;
}

TEST_F(CopyGpuTest, ARangePastItsAllocationIsRefused) {
  Buffer a = Device(0, 4096), b = Device(0, 8192);
  int64_t shape[1] = {2048};  // 8 KiB of f32 from a 4 KiB allocation
  fj_tensor s{reinterpret_cast<void*>(a.address),
              {2, 0},
              1,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  fj_tensor d{reinterpret_cast<void*>(b.address),
              {2, 0},
              1,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  CopySpec spec;
  spec.src = DlTensorOf(s);
  spec.dst = DlTensorOf(d);
  absl::Status st = rt().copy().CopyTensorWindow(spec, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

TEST_F(CopyGpuTest, LocalPrefetchRunsAndChangesNothing) {
  Buffer a = Device(0, 8 << 20);
  std::vector<uint8_t> pattern = testutil::RandomBytes(8 << 20, 7);
  a.Upload(pattern);
  PrefetchSpec p;
  p.address = a.address + 3;
  p.bytes = (8 << 20) - 100;
  const auto before = rt().copy().counters();
  ASSERT_TRUE(rt().copy().Prefetch(p, {0, stream(0)}).ok());
  // A tile of a tensor, too.
  int64_t shape[2] = {1024, 2048};
  fj_tensor t{reinterpret_cast<void*>(a.address),
              {2, 0},
              2,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  PrefetchSpec q;
  q.tensor = DlTensorOf(t);
  q.start = {100, 64};
  q.extent = {64, 512};
  ASSERT_TRUE(rt().copy().Prefetch(q, {0, stream(0)}).ok());
  Sync(0);
  EXPECT_EQ(rt().copy().counters().prefetch_local, before.prefetch_local + 2);
  EXPECT_EQ(a.Download(), pattern);
}

// ----------------------------------------------------------------- 2 GPUs

class CopyTwoGpuTest : public GpuFixture {
 protected:
  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped()) return;
    if (rt().device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  }
};

TEST_F(CopyTwoGpuTest, PeerAccessIsIdempotent) {
  auto can = rt().copy().CanAccessPeer(0, 1);
  ASSERT_TRUE(can.ok()) << can.status();
  if (!*can) {
    EXPECT_EQ(rt().copy().EnablePeer(0, 1).code(),
              absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "GPUs 0 and 1 have no P2P path";
  }
  EXPECT_TRUE(rt().copy().EnablePeer(0, 1).ok());
  EXPECT_TRUE(rt().copy().EnablePeer(0, 1).ok());
  EXPECT_TRUE(rt().copy().PeerEnabled(0, 1));
  EXPECT_TRUE(rt().copy().DisablePeer(0, 1).ok());
  EXPECT_TRUE(rt().copy().DisablePeer(0, 1).ok());
  EXPECT_FALSE(rt().copy().PeerEnabled(0, 1));
}

TEST_F(CopyTwoGpuTest, DensePeerCopyTakesTheDriverPeerCopy) {
  CopyCase c = CopyCase::Dense({256, 4096}, testutil::kF32);
  c.src_device = 1;
  const auto before = rt().copy().counters();
  ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));
  EXPECT_EQ(rt().copy().counters().driver_peer, before.driver_peer + 1);
}

TEST_F(CopyTwoGpuTest, StridedPeerCopiesNeedAccessOrStage) {
  CopyCase c = CopyCase::Dense({200, 1000}, testutil::kF32);
  c.src_device = 1;
  c.dst_shape = {150, 700};
  c.start = {-5, 20, 0, 0, 0};
  c.oob = FJ_OOB_ZEROS;
  auto can = rt().copy().CanAccessPeer(0, 1);
  ASSERT_TRUE(can.ok());
  ASSERT_TRUE(rt().copy().DisablePeer(0, 1).ok());
  if (*can) {
    absl::Status st = Run(c, std::nullopt, false);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    ASSERT_TRUE(rt().copy().EnablePeer(0, 1).ok());
    for (jit::CopyImpl impl : Impls(0)) {
      SCOPED_TRACE(std::string(jit::CopyImplName(impl)));
      ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, impl, false));
    }
  } else {
    const auto before = rt().copy().counters();
    ASSERT_NO_FATAL_FAILURE(RunAndCheck(c, std::nullopt, false));
    EXPECT_EQ(rt().copy().counters().staged, before.staged + 1);
  }
}

TEST_F(CopyTwoGpuTest, PeerPrefetchModes) {
  Buffer peer = Device(1, 8 << 20), stage = Device(0, 8 << 20);
  std::vector<uint8_t> pattern = testutil::RandomBytes(8 << 20, 11);
  peer.Upload(pattern);
  PrefetchSpec p;
  p.address = peer.address;
  p.bytes = 8 << 20;
  // A reader-side prefetch of a peer address is refused...
  p.mode = static_cast<int32_t>(PrefetchMode::kLocalL2);
  EXPECT_EQ(rt().copy().Prefetch(p, {0, stream(0)}).code(),
            absl::StatusCode::kInvalidArgument);
  // ...auto warms the owner's L2...
  p.mode = static_cast<int32_t>(PrefetchMode::kAuto);
  auto before = rt().copy().counters();
  ASSERT_TRUE(rt().copy().Prefetch(p, {0, stream(0)}).ok());
  Sync(0);
  EXPECT_EQ(rt().copy().counters().prefetch_warm_owner,
            before.prefetch_warm_owner + 1);
  EXPECT_EQ(peer.Download(), pattern);
  // ...and staging copies it to the reader.
  p.mode = static_cast<int32_t>(PrefetchMode::kStageLocal);
  p.stage_address = stage.address;
  p.stage_bytes = 8 << 20;
  ASSERT_TRUE(rt().copy().Prefetch(p, {0, stream(0)}).ok());
  Sync(0);
  EXPECT_EQ(stage.Download(), pattern);
}

TEST_F(CopyTwoGpuTest, UserKernelReadsAPeerTensorThroughATmaMap) {
  ASSERT_NO_FATAL_FAILURE(ReadPeerTensorThroughTma(*this));
}

}  // namespace
}  // namespace fleetjit::copy
