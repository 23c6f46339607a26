// Copy and prefetch routing on the CPU: placements are fed in (no driver),
// so every placement-dependent bad input (unpinned host memory, peers
// without access, ranges past their allocation) and every route (driver,
// driver peer, kernel, staged) is checked here.
#include "runtime/copy/placement.h"

#include <vector>

#include "gtest/gtest.h"

namespace fleetjit::copy {
namespace {

constexpr uint64_t kA = 0x7f0000000000ull;
constexpr uint64_t kB = 0x7f1000000000ull;

struct T {
  std::vector<int64_t> shape, strides;
  fj_tensor t{};
  T(uint64_t address, std::vector<int64_t> s, std::vector<int64_t> st = {},
    int32_t device_type = 2, int32_t device_id = 0)
      : shape(std::move(s)), strides(std::move(st)) {
    t.data = reinterpret_cast<void*>(address);
    t.device = {device_type, device_id};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = {2, 32, 1};
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

Placement Dev(int device, uint64_t lo = 0, uint64_t size = 0) {
  Placement p;
  p.kind = MemoryKind::kDevice;
  p.device = device;
  if (size > 0) p.allocation = Span{lo, lo + size};
  return p;
}
Placement Host(MemoryKind kind = MemoryKind::kPinnedHost) {
  Placement p;
  p.kind = kind;
  return p;
}

PeerState Peers(bool path, bool enabled) {
  PeerState s;
  s.has_path = [path](int, int) { return path; };
  s.enabled = [enabled](int, int) { return enabled; };
  return s;
}

ValidatedCopy V(const T& src, const T& dst,
                int32_t oob = FJ_OOB_PROMISE_IN_BOUNDS,
                std::array<int64_t, 5> start = {}) {
  CopySpec s;
  s.src = DlTensorOf(src.t);
  s.dst = DlTensorOf(dst.t);
  s.oob = oob;
  s.start = start;
  auto v = ValidateCopy(s);
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

absl::StatusOr<CopyRoute> Plan(const ValidatedCopy& v, const Placement& s,
                               const Placement& d, int stream_device = -1,
                               PeerState peers = Peers(true, true)) {
  return PlanCopyRoute(v, s, d, nullptr, stream_device, 2, false, peers);
}

TEST(PlanCopyRoute, DenseInBoundsTakesTheDriver) {
  T src(kA, {64, 64}), dst(kB, {64, 64});
  auto r = Plan(V(src, dst), Dev(0), Dev(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kDriver);
  EXPECT_EQ(r->exec_device, 0);
  // Pinned host on either side: still the driver (cuMemcpyAsync).
  T hsrc(kA, {64, 64}, {}, 3);
  r = Plan(V(hsrc, dst), Host(), Dev(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kDriver);
}

TEST(PlanCopyRoute, DenseBetweenGpusTakesTheDriverPeerCopy) {
  T src(kA, {64}, {}, 2, 1), dst(kB, {64});
  auto r = Plan(V(src, dst), Dev(1), Dev(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kDriverPeer);
  EXPECT_EQ(r->exec_device, 0);
  EXPECT_TRUE(r->note.empty());
  r = Plan(V(src, dst), Dev(1), Dev(0), -1, Peers(false, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kDriverPeer);
  EXPECT_NE(r->note.find("no P2P path"), std::string::npos);
}

TEST(PlanCopyRoute, WindowsFillsAndStridesTakeTheKernel) {
  T src(kA, {64, 64}), dst(kB, {16, 16});
  auto r = Plan(V(src, dst, FJ_OOB_ZEROS, {-2, 3}), Dev(0), Dev(0), 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
  EXPECT_FALSE(r->synchronous);
  T strided(kB, {64, 32}, {64, 2});
  r = Plan(V(src, strided, FJ_OOB_PROMISE_IN_BOUNDS), Dev(0), Dev(0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
}

TEST(PlanCopyRoute, ForcedKernelSkipsTheDriver) {
  T src(kA, {64}), dst(kB, {64});
  auto r = PlanCopyRoute(V(src, dst), Dev(0), Dev(0), nullptr, -1, 1, true,
                         Peers(true, true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
}

TEST(PlanCopyRoute, RefusesPageableHostMemory) {
  T src(kA, {64}, {}, 1), dst(kB, {64});
  auto r = Plan(V(src, dst), Host(MemoryKind::kPageableHost), Dev(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not pinned"), absl::string_view::npos);
}

TEST(PlanCopyRoute, RefusesWhatTheCallerMisdescribed) {
  T src(kA, {64}), dst(kB, {64});
  // kDLCUDA but the driver says pinned host.
  EXPECT_EQ(Plan(V(src, dst), Host(), Dev(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // device_id 0 but the memory is GPU 1's.
  EXPECT_NE(
      Plan(V(src, dst), Dev(1), Dev(0)).status().message().find("device_id"),
      absl::string_view::npos);
  // Host type but device memory.
  T hsrc(kA, {64}, {}, 3);
  EXPECT_EQ(Plan(V(hsrc, dst), Dev(0), Dev(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanCopyRoute, RefusesRangesPastTheirAllocation) {
  T src(kA, {64}), dst(kB, {64});
  auto r = Plan(V(src, dst), Dev(0, kA, 128), Dev(0, kB, 256));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("outside its allocation"),
            absl::string_view::npos);
  EXPECT_TRUE(Plan(V(src, dst), Dev(0, kA, 256), Dev(0, kB, 256)).ok());
}

TEST(PlanCopyRoute, PeersWithoutAccessAreRefusedForTheKernel) {
  T src(kA, {64, 64}, {}, 2, 1), dst(kB, {16, 16});
  const ValidatedCopy v = V(src, dst, FJ_OOB_ZEROS, {1, 1});
  auto r = Plan(v, Dev(1), Dev(0), 0, Peers(true, false));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("fj_peer_enable(runtime, 0, 1)"),
            absl::string_view::npos)
      << r.status();
  r = Plan(v, Dev(1), Dev(0), 0, Peers(true, true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
  EXPECT_FALSE(r->stage_src);
}

TEST(PlanCopyRoute, NoP2PPathStagesThroughPinnedHost) {
  T src(kA, {64, 64}, {}, 2, 1), dst(kB, {16, 16});
  const ValidatedCopy v = V(src, dst, FJ_OOB_ZEROS, {1, 1});
  auto r = Plan(v, Dev(1), Dev(0), 0, Peers(false, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
  EXPECT_TRUE(r->stage_src);
  EXPECT_TRUE(r->synchronous);
  EXPECT_NE(r->note.find("pinned host"), std::string::npos);
  // dst unreachable from the stream's GPU: the kernel runs on dst's GPU.
  T src0(kA, {64, 64}), dst1(kB, {16, 16}, {}, 2, 1);
  r = Plan(V(src0, dst1, FJ_OOB_ZEROS, {1, 1}), Dev(0), Dev(1), 0,
           Peers(false, false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exec_device, 1);
  EXPECT_TRUE(r->stage_src);
}

TEST(PlanCopyRoute, AGatherIndexMustBeReachable) {
  T src(kA, {64, 8}), dst(kB, {4, 8}), idx(kB + 4096, {4}, {}, 2, 1);
  idx.t.dtype = {0, 32, 1};
  CopySpec s;
  s.src = DlTensorOf(src.t);
  s.dst = DlTensorOf(dst.t);
  s.index = DlTensorOf(idx.t);
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  Placement index = Dev(1);
  auto r = PlanCopyRoute(*v, Dev(0), Dev(0), &index, 0, 2, false,
                         Peers(false, false));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gather index"), absl::string_view::npos);
  r = PlanCopyRoute(*v, Dev(0), Dev(0), &index, 0, 2, false, Peers(true, true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
}

// A scatter (since 1.4) always runs the kernel, even dense and in bounds,
// and its index must be reachable like a gather's.
TEST(PlanCopyRoute, AScatterTakesTheKernelAndItsIndexMustBeReachable) {
  T src(kA, {4, 8}), dst(kB, {64, 8}), idx(kB + 4096, {4}, {}, 2, 1);
  idx.t.dtype = {0, 32, 1};
  CopySpec s;
  s.src = DlTensorOf(src.t);
  s.dst = DlTensorOf(dst.t);
  s.scatter = DlTensorOf(idx.t);
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  Placement index = Dev(1);
  auto r = PlanCopyRoute(*v, Dev(0), Dev(0), nullptr, 0, 2, false,
                         Peers(false, false), &index);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("scatter index"), absl::string_view::npos)
      << r.status();
  r = PlanCopyRoute(*v, Dev(0), Dev(0), nullptr, 0, 2, false, Peers(true, true),
                    &index);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->path, CopyPath::kKernel);
  // Its placement is required.
  EXPECT_FALSE(
      PlanCopyRoute(*v, Dev(0), Dev(0), nullptr, 0, 2, false, Peers(true, true))
          .ok());
}

TEST(PlanCopyRoute, HugeDimensionsOnTheKernelPathAreOutOfRange) {
  T src(kA, {int64_t{3} << 31}), dst(kB, {16});
  auto r = Plan(V(src, dst, FJ_OOB_ZEROS, {-1}), Dev(0), Dev(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(PlanCopyRoute, NoDeviceIsUnavailable) {
  T src(kA, {64}), dst(kB, {64});
  auto r = PlanCopyRoute(V(src, dst), Dev(0), Dev(0), nullptr, -1, 0, false,
                         Peers(true, true));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
}

ValidatedPrefetch Range(PrefetchMode mode, int reader = -1,
                        uint64_t stage = 0) {
  PrefetchSpec p;
  p.address = kA;
  p.bytes = 1 << 20;
  p.mode = static_cast<int32_t>(mode);
  p.reader_device = reader;
  p.stage_address = stage;
  p.stage_bytes = stage != 0 ? (1 << 20) : 0;
  auto v = ValidatePrefetch(p);
  EXPECT_TRUE(v.ok()) << v.status();
  return *v;
}

TEST(PlanPrefetchRoute, AutoPicksLocalOrWarmOwner) {
  auto r = PlanPrefetchRoute(Range(PrefetchMode::kAuto), Dev(0), nullptr, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, PrefetchMode::kLocalL2);
  EXPECT_EQ(r->run_device, 0);
  // A peer's memory: never a reader-side prefetch.
  r = PlanPrefetchRoute(Range(PrefetchMode::kAuto), Dev(1), nullptr, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, PrefetchMode::kWarmOwnerL2);
  EXPECT_EQ(r->run_device, 1);
  EXPECT_EQ(r->reader, 0);
  // No stream, no reader: the owner reads it.
  r = PlanPrefetchRoute(Range(PrefetchMode::kAuto), Dev(1), nullptr, -1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, PrefetchMode::kLocalL2);
  EXPECT_EQ(r->run_device, 1);
}

TEST(PlanPrefetchRoute, RefusesAReaderSidePrefetchOfAPeer) {
  auto r = PlanPrefetchRoute(Range(PrefetchMode::kLocalL2), Dev(1), nullptr, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("warms neither L2"),
            absl::string_view::npos);
  r = PlanPrefetchRoute(Range(PrefetchMode::kLocalL2, 0), Dev(1), nullptr, -1);
  EXPECT_FALSE(r.ok());
}

TEST(PlanPrefetchRoute, HostMemoryNeedsStaging) {
  EXPECT_FALSE(
      PlanPrefetchRoute(Range(PrefetchMode::kAuto), Host(), nullptr, 0).ok());
  EXPECT_FALSE(
      PlanPrefetchRoute(Range(PrefetchMode::kWarmOwnerL2), Host(), nullptr, 0)
          .ok());
  EXPECT_FALSE(PlanPrefetchRoute(Range(PrefetchMode::kAuto),
                                 Host(MemoryKind::kPageableHost), nullptr, 0)
                   .ok());
  Placement stage = Dev(0);
  auto r =
      PlanPrefetchRoute(Range(PrefetchMode::kAuto, -1, kB), Host(), &stage, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, PrefetchMode::kStageLocal);
}

TEST(PlanPrefetchRoute, StageBufferMustBeOnTheReader) {
  Placement wrong = Dev(1), right = Dev(0, kB, 1 << 20),
            small = Dev(0, kB, 4096);
  auto v = Range(PrefetchMode::kStageLocal, -1, kB);
  EXPECT_FALSE(PlanPrefetchRoute(v, Dev(1), &wrong, 0).ok());
  EXPECT_FALSE(PlanPrefetchRoute(v, Dev(1), &small, 0).ok());
  auto r = PlanPrefetchRoute(v, Dev(1), &right, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->run_device, 0);
  EXPECT_EQ(r->owner, 1);
}

TEST(PlanPrefetchRoute, ReaderMustMatchTheStream) {
  auto r = PlanPrefetchRoute(Range(PrefetchMode::kAuto, 1), Dev(0), nullptr, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fleetjit::copy
