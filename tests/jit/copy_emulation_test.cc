// The copy layer's software paths, run on the CPU: the device headers are
// compiled as host C++ (a small shim stands in for the CUDA builtins), and
// each block-collective call is replayed thread by thread. This checks the
// tile walker, span splitting, OOB fill and predicates of the sync and
// cp_async implementations (and the tma fallback, which is the cp_async
// issue path) against the conformance reference, and every cp.async the
// cp_async path would issue against the hardware's rules (alignment,
// src-size, no read outside the tensor). The emulated barrier of the sync
// implementation runs on real threads. TMA itself needs the H200 matrix.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "conformance/reference.h"

#if defined(__clang__)
// clang checks inline-asm constraints of unused functions; the shim relies
// on GCC not looking at the (never called) PTX asm.
#define FJ_EMULATION_UNSUPPORTED 1
#else
// ---------------------------------------------------------------- the shim
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __align__(n) alignas(n)
#define __grid_constant__
struct FjDim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local FjDim3 threadIdx, blockDim{1, 1, 1};
struct uint4 {
  unsigned x, y, z, w;
};
inline void __syncthreads() {}
inline void __threadfence_block() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
inline unsigned long long __cvta_generic_to_shared(const void* p) {
  return reinterpret_cast<unsigned long long>(p);
}
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
// Each replayed thread runs alone: its warp's active mask is itself.
inline unsigned __activemask() { return 1u << (threadIdx.x % 32); }
inline void __syncwarp(unsigned = 0xffffffffu) {}
inline unsigned __match_any_sync(unsigned mask, unsigned long long) {
  return mask;
}
inline unsigned atomicCAS(unsigned* a, unsigned expected, unsigned desired) {
  __atomic_compare_exchange_n(a, &expected, desired, false, __ATOMIC_SEQ_CST,
                              __ATOMIC_SEQ_CST);
  return expected;
}

// Every cp.async the cp_async path issues comes here.
struct CpAsyncLog {
  const uint8_t* src_lo = nullptr;  // the readable GMEM range
  const uint8_t* src_hi = nullptr;
  size_t issued = 0, partial = 0, zero = 0;
  std::string error;
};
CpAsyncLog g_cp_async;
inline void fj_host_cp_async(void* s, const void* g, unsigned w,
                             unsigned src_bytes) {
  CpAsyncLog& log = g_cp_async;
  const auto sa = reinterpret_cast<uintptr_t>(s);
  const auto ga = reinterpret_cast<uintptr_t>(g);
  if (w != 4 && w != 8 && w != 16) log.error = "cp.async size not 4/8/16";
  if (sa % w || (src_bytes != 0 && ga % w)) log.error = "misaligned cp.async";
  if (src_bytes > w) log.error = "src-size larger than the copy";
  const uint8_t* gb = static_cast<const uint8_t*>(g);
  if (src_bytes != 0 && (gb < log.src_lo || gb + src_bytes > log.src_hi)) {
    log.error = "cp.async reads outside the tensor";
  }
  if (!log.error.empty()) return;
  std::memcpy(s, g, src_bytes);
  std::memset(static_cast<uint8_t*>(s) + src_bytes, 0, w - src_bytes);
  ++log.issued;
  log.partial += src_bytes != 0 && src_bytes < w;
  log.zero += src_bytes == 0;
}

#define FJ_COPY_HOST_EMULATION 1
#include "fleetjit/copy/common.cuh"
#include "fleetjit/copy/cp_async.cuh"
#include "fleetjit/copy/sync.cuh"
#endif

namespace fleetjit::selftest {
namespace {

#ifndef FJ_EMULATION_UNSUPPORTED

// Runs `fn` once per thread of a 1-D block, in order: a block-collective
// call whose threads write disjoint bytes ends in the same state.
template <class Fn>
void AsBlock(unsigned threads, Fn fn) {
  blockDim = {threads, 1, 1};
  for (unsigned t = 0; t < threads; ++t) {
    threadIdx = {t, 0, 0};
    fn();
  }
  threadIdx = {};
  blockDim = {1, 1, 1};
}

// A random tensor with its elements in a host buffer.
struct RandomTensor {
  std::vector<uint8_t> storage;
  HostTensor host;
};

const int kDtypeOfSize[9][3] = {
    {},
    {fj::dtype_u8, fj::dtype_f8e4m3, fj::dtype_f8e5m2},
    {fj::dtype_f16, fj::dtype_bf16, fj::dtype_i16},
    {},
    {fj::dtype_f32, fj::dtype_i32, fj::dtype_u32},
    {},
    {},
    {},
    {fj::dtype_f64, fj::dtype_i64, fj::dtype_f64}};

RandomTensor MakeTensor(std::mt19937& rng, int rank) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  RandomTensor r;
  fj::tensor_param& p = r.host.param;
  std::memset(&p, 0, sizeof(p));
  const int sizes[4] = {1, 2, 4, 8};
  p.elem_bytes = sizes[pick(0, 3)];
  p.dtype = kDtypeOfSize[p.elem_bytes][pick(0, 2)];
  p.rank = rank;
  p.oob = pick(0, 2);
  // Dimension 0 is contiguous most of the time; strides may be padded.
  int64_t stride = pick(0, 4) == 0 ? pick(2, 3) : 1;
  for (int d = 0; d < rank; ++d) {
    p.shape[d] = pick(1, d == 0 ? 40 : 6);
    p.stride[d] = stride;
    stride = stride * p.shape[d] + (pick(0, 2) == 0 ? pick(1, 9) : 0);
    // Box: sometimes 16-byte rows (the TMA-friendly case), else anything.
    p.box[d] = d == 0 && pick(0, 1)
                   ? std::max(1, 16 / p.elem_bytes) * pick(1, 3)
                   : pick(1, d == 0 ? 24 : 4);
  }
  // A data pointer that is element-aligned but sometimes not 16-aligned.
  const size_t elems = static_cast<size_t>(stride) + 1;
  const size_t shift = pick(0, 3) * p.elem_bytes;
  r.storage.resize(elems * p.elem_bytes + shift + 64);
  for (auto& b : r.storage) b = static_cast<uint8_t>(rng());
  uint8_t* base = r.storage.data();
  base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;  // 16-aligned
  r.host.data = base + shift;
  p.data = r.host.data;
  return r;
}

// Coordinates around the tensor: inside, straddling an edge, or outside.
std::vector<int32_t> MakeCoords(std::mt19937& rng, const fj::tensor_param& p,
                                bool in_bounds) {
  std::vector<int32_t> c(kCaseInts, 0);
  for (int d = 0; d < p.rank; ++d) {
    const int lo = in_bounds ? 0 : -p.box[d] - 2;
    const int hi = in_bounds ? static_cast<int>(p.shape[d]) - p.box[d]
                             : static_cast<int>(p.shape[d]) + 2;
    c[d] = std::uniform_int_distribution<int>(lo, std::max(lo, hi))(rng);
  }
  return c;
}

bool FitsInBounds(const fj::tensor_param& p) {
  for (int d = 0; d < p.rank; ++d) {
    if (p.box[d] > p.shape[d]) return false;
  }
  return true;
}

template <int R>
void IssueTile(int impl, uint8_t* smem, const fj::tensor_param& p,
               const int32_t* c, bool pred, int mode) {
  const fj::coords at = fj::at(c[0], c[1], c[2], c[3], c[4]);
  const auto m = static_cast<fj::pred_mode>(mode);
  if (impl == 0) {
    fj::sync_impl::load_tile_span<R>(smem, p, at, pred, m);
  } else {
    fj::cp_async_impl::issue_tile<R>(smem, p, at, pred, m);
  }
}
void IssueTileAnyRank(int impl, uint8_t* smem, const fj::tensor_param& p,
                      const int32_t* c, bool pred, int mode) {
  switch (p.rank) {
    case 1:
      return IssueTile<1>(impl, smem, p, c, pred, mode);
    case 2:
      return IssueTile<2>(impl, smem, p, c, pred, mode);
    case 3:
      return IssueTile<3>(impl, smem, p, c, pred, mode);
    case 4:
      return IssueTile<4>(impl, smem, p, c, pred, mode);
    default:
      return IssueTile<5>(impl, smem, p, c, pred, mode);
  }
}

template <int R>
void StoreTile(const fj::tensor_param& p, const int32_t* c, const uint8_t* smem,
               bool pred) {
  fj::detail::store_tile_generic<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]),
                                    smem, pred);
}
void StoreTileAnyRank(const fj::tensor_param& p, const int32_t* c,
                      const uint8_t* smem, bool pred) {
  switch (p.rank) {
    case 1:
      return StoreTile<1>(p, c, smem, pred);
    case 2:
      return StoreTile<2>(p, c, smem, pred);
    case 3:
      return StoreTile<3>(p, c, smem, pred);
    case 4:
      return StoreTile<4>(p, c, smem, pred);
    default:
      return StoreTile<5>(p, c, smem, pred);
  }
}

const char* ImplName(int impl) { return impl == 0 ? "sync" : "cp_async"; }

TEST(CopyEmulationTest, TileLoadsMatchTheReference) {
  std::mt19937 rng(20261130);
  size_t cases = 0, partial_chunks = 0, zero_chunks = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    const int rank = 1 + iter % 5;
    RandomTensor t = MakeTensor(rng, rank);
    const fj::tensor_param& p = t.host.param;
    const bool promise = p.oob == fj::oob_promise_in_bounds;
    if (promise && !FitsInBounds(p)) continue;
    const std::vector<int32_t> c = MakeCoords(rng, p, promise);
    const bool pred = rng() % 4 != 0;
    const int mode = rng() % 2;
    const unsigned threads = 1 + rng() % 70;
    const size_t bytes = BoxElems(p) * p.elem_bytes;
    alignas(128) static uint8_t smem[1 << 16];
    ASSERT_LE(bytes, sizeof(smem));
    std::vector<uint8_t> want(bytes);
    for (size_t i = 0; i < bytes; ++i) want[i] = StaleByte(iter, i);
    RefLoadTileInto(t.host, c.data(), pred, mode, want.data());
    for (int impl = 0; impl < 2; ++impl) {
      for (size_t i = 0; i < bytes; ++i) smem[i] = StaleByte(iter, i);
      g_cp_async = {};
      g_cp_async.src_lo = t.storage.data();
      g_cp_async.src_hi = t.storage.data() + t.storage.size();
      AsBlock(threads,
              [&] { IssueTileAnyRank(impl, smem, p, c.data(), pred, mode); });
      ASSERT_EQ(g_cp_async.error, "") << ImplName(impl) << " iter " << iter;
      ptrdiff_t first = -1;
      const size_t bad = CountMismatches(p.dtype, p.elem_bytes, want.data(),
                                         smem, BoxElems(p), &first);
      ASSERT_EQ(bad, 0u) << ImplName(impl) << " iter " << iter << " rank "
                         << rank << " elem " << p.elem_bytes << " oob " << p.oob
                         << " pred " << pred << " mode " << mode
                         << " first bad element " << first;
      partial_chunks += g_cp_async.partial;
      zero_chunks += g_cp_async.zero;
      ++cases;
    }
  }
  EXPECT_GT(cases, 6000u);
  EXPECT_GT(partial_chunks, 0u) << "src-size clamping was never exercised";
}

TEST(CopyEmulationTest, TileStoresMatchTheReference) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 3000; ++iter) {
    RandomTensor t = MakeTensor(rng, 1 + iter % 5);
    const fj::tensor_param& p = t.host.param;
    const std::vector<int32_t> c = MakeCoords(rng, p, false);
    const bool pred = rng() % 4 != 0;
    const size_t bytes = BoxElems(p) * p.elem_bytes;
    alignas(128) static uint8_t smem[1 << 16];
    for (size_t i = 0; i < bytes; ++i) smem[i] = static_cast<uint8_t>(rng());
    // Reference on a copy of the tensor's storage at the same offsets.
    std::vector<uint8_t> want = t.storage;
    HostTensor ref = t.host;
    ref.data =
        want.data() + (static_cast<uint8_t*>(t.host.data) - t.storage.data());
    const uint8_t pred_byte = pred;
    RefTileStore(ref, c.data(), &pred_byte, 1, smem);
    AsBlock(1 + rng() % 70, [&] { StoreTileAnyRank(p, c.data(), smem, pred); });
    ASSERT_EQ(t.storage, want) << "iter " << iter;
    (void)bytes;
  }
}

TEST(CopyEmulationTest, SpanLoadsAndStoresMatchTheReference) {
  std::mt19937 rng(11);
  std::vector<uint8_t> src(4096 + 64);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  alignas(128) static uint8_t smem[kSpanCap];
  for (int iter = 0; iter < 3000; ++iter) {
    SpanCase sc;
    sc.bytes = static_cast<int32_t>(rng() % 600);
    sc.src_off = static_cast<int32_t>(rng() % 3000);
    sc.dst_off = static_cast<int32_t>(rng() % 3000);
    if (rng() % 3 == 0) sc.dst_off = (sc.src_off + 16 * (rng() % 8)) % 3000;
    sc.pred = rng() % 4 != 0;
    sc.mode = static_cast<int32_t>(rng() % 2);
    std::vector<uint8_t> want(kSpanCap);
    RefSpanLoad(src.data(), &sc, 1, 1, 1, want.data());  // block 0 stale
    for (int impl = 0; impl < 2; ++impl) {
      for (uint32_t i = 0; i < kSpanCap; ++i) smem[i] = StaleByte(0, i);
      g_cp_async = {};
      g_cp_async.src_lo = src.data();
      g_cp_async.src_hi = src.data() + src.size();
      const auto m = static_cast<fj::pred_mode>(sc.mode);
      AsBlock(1 + rng() % 70, [&] {
        if (impl == 0) {
          fj::sync_impl::load_span(smem + sc.dst_off, src.data() + sc.src_off,
                                   sc.bytes, sc.pred, m);
        } else {
          fj::cp_async_impl::issue_span(
              smem + sc.dst_off, src.data() + sc.src_off, sc.bytes, sc.pred, m);
        }
      });
      // A false pred_zero copy "reads" with src-size 0 only.
      ASSERT_EQ(g_cp_async.error, "") << ImplName(impl) << " iter " << iter;
      ASSERT_EQ(std::memcmp(smem, want.data(), kSpanCap), 0)
          << ImplName(impl) << " iter " << iter << " src " << sc.src_off
          << " dst " << sc.dst_off << " bytes " << sc.bytes;
    }
    // The same case as a store (SMEM image from src, out poisoned).
    std::vector<uint8_t> image(src.begin(), src.begin() + kSpanCap / 2);
    image.resize(kSpanCap);
    std::vector<uint8_t> out(kSpanCap, 0xCD), want_out(kSpanCap, 0xCD);
    SpanCase st = sc;
    RefSpanStore(image.data(), &st, 1, 1, want_out.data());
    AsBlock(1 + rng() % 70, [&] {
      fj::sync_impl::store(out.data() + st.dst_off, image.data() + st.src_off,
                           st.bytes, st.pred);
    });
    ASSERT_EQ(out, want_out) << "store iter " << iter;
  }
}

// A tensor whose tiles take the fast path (detail::tile_fast): dimension 0
// contiguous, 16-byte rows in GMEM (data, strides, box row) and a 16-byte
// multiple start coordinate. `shrink` < 0 leaves the tensor no larger than
// the box along dimension -shrink - 1 (so any shift leaves the tensor).
RandomTensor MakeFastTensor(std::mt19937& rng, int rank, int elem_bytes) {
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  RandomTensor r;
  fj::tensor_param& p = r.host.param;
  std::memset(&p, 0, sizeof(p));
  const int k = 16 / elem_bytes;  // elements per 16-byte chunk
  p.elem_bytes = elem_bytes;
  p.dtype = kDtypeOfSize[elem_bytes][pick(0, 2)];
  p.rank = rank;
  p.oob = pick(0, 2);
  int64_t stride = 1;
  for (int d = 0; d < rank; ++d) {
    p.box[d] = d == 0 ? k * pick(1, 4) : pick(1, rank > 3 ? 3 : 5);
    p.shape[d] = p.box[d] + pick(0, d == 0 ? 2 * k : 3);
    p.stride[d] = stride;
    const int64_t padded = stride * p.shape[d] + (pick(0, 1) ? k * pick(1, 2) : 0);
    stride = d == 0 ? (padded + k - 1) / k * k : padded;
  }
  const size_t elems = static_cast<size_t>(stride) + 1;
  r.storage.resize(elems * elem_bytes + 64);
  for (auto& b : r.storage) b = static_cast<uint8_t>(rng());
  uint8_t* base = r.storage.data();
  base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;
  r.host.data = base;
  p.data = base;
  return r;
}

// In-bounds coordinates with c0 on a 16-byte boundary.
std::vector<int32_t> MakeFastCoords(std::mt19937& rng,
                                    const fj::tensor_param& p) {
  std::vector<int32_t> c(kCaseInts, 0);
  const int k = 16 / p.elem_bytes;
  for (int d = 0; d < p.rank; ++d) {
    const int room = static_cast<int>(p.shape[d]) - p.box[d];
    c[d] = std::uniform_int_distribution<int>(0, room)(rng);
    if (d == 0) c[d] = c[d] / k * k;
  }
  return c;
}

template <int R>
bool TileFast(const fj::tensor_param& p, const int32_t* c, const void* smem,
              bool check) {
  return fj::detail::tile_fast<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]),
                                  smem, check);
}
// Whether thread 0 of a block of `threads` takes the fast path's row walk
// (detail::plan_rows) rather than its general chunk cursor.
template <int R>
bool RowWalk(const fj::tensor_param& p, const int32_t* c, unsigned threads) {
  return fj::detail::plan_rows<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]), 0, threads).ok;
}
bool RowWalkAnyRank(const fj::tensor_param& p, const int32_t* c, unsigned threads) {
  switch (p.rank) {
    case 1:
      return RowWalk<1>(p, c, threads);
    case 2:
      return RowWalk<2>(p, c, threads);
    case 3:
      return RowWalk<3>(p, c, threads);
    case 4:
      return RowWalk<4>(p, c, threads);
    default:
      return RowWalk<5>(p, c, threads);
  }
}
bool TileFastAnyRank(const fj::tensor_param& p, const int32_t* c,
                     const void* smem, bool check) {
  switch (p.rank) {
    case 1:
      return TileFast<1>(p, c, smem, check);
    case 2:
      return TileFast<2>(p, c, smem, check);
    case 3:
      return TileFast<3>(p, c, smem, check);
    case 4:
      return TileFast<4>(p, c, smem, check);
    default:
      return TileFast<5>(p, c, smem, check);
  }
}

// One tile load (both impls) and one store against the reference.
void CheckTile(const RandomTensor& t, const std::vector<int32_t>& c,
               uint8_t* smem, unsigned threads, const std::string& what) {
  const fj::tensor_param& p = t.host.param;
  const size_t bytes = BoxElems(p) * p.elem_bytes;
  std::vector<uint8_t> want(bytes);
  for (size_t i = 0; i < bytes; ++i) want[i] = StaleByte(3, i);
  RefLoadTileInto(t.host, c.data(), true, kPredSkip, want.data());
  const size_t guard = 512;  // SMEM past the box must stay untouched
  for (int impl = 0; impl < 2; ++impl) {
    for (size_t i = 0; i < bytes + guard; ++i) smem[i] = StaleByte(3, i);
    g_cp_async = {};
    g_cp_async.src_lo = t.storage.data();
    g_cp_async.src_hi = t.storage.data() + t.storage.size();
    AsBlock(threads, [&] {
      IssueTileAnyRank(impl, smem, p, c.data(), true, kPredSkip);
    });
    ASSERT_EQ(g_cp_async.error, "") << ImplName(impl) << " " << what;
    ptrdiff_t first = -1;
    ASSERT_EQ(CountMismatches(p.dtype, p.elem_bytes, want.data(), smem,
                              BoxElems(p), &first),
              0u)
        << ImplName(impl) << " " << what << " rank " << p.rank << " elem "
        << p.elem_bytes << " threads " << threads << " first bad " << first;
    for (size_t i = bytes; i < bytes + guard; ++i) {
      ASSERT_EQ(smem[i], StaleByte(3, i))
          << ImplName(impl) << " " << what << " wrote past the box at " << i;
    }
  }
  // The store: SMEM random, the tensor's storage against the reference.
  for (size_t i = 0; i < bytes; ++i) smem[i] = static_cast<uint8_t>(i * 7 + 1);
  RandomTensor got = t;
  got.host.data =
      got.storage.data() + (static_cast<const uint8_t*>(t.host.data) -
                            t.storage.data());
  got.host.param.data = got.host.data;
  std::vector<uint8_t> want_store = t.storage;
  HostTensor ref = t.host;
  ref.data = want_store.data() +
             (static_cast<const uint8_t*>(t.host.data) - t.storage.data());
  const uint8_t pred_byte = 1;
  RefTileStore(ref, c.data(), &pred_byte, 1, smem);
  AsBlock(threads,
          [&] { StoreTileAnyRank(got.host.param, c.data(), smem, true); });
  ASSERT_EQ(got.storage, want_store) << "store " << what << " rank " << p.rank
                                     << " threads " << threads;
}

// The in-bounds fast path: every rank and element size, block sizes below
// and above the chunk count, and the cases just across its boundary
// (a tile one element outside, misaligned data, SMEM, stride or start)
// that must take the general walker, all against the reference.
TEST(CopyEmulationTest, FastPathTilesMatchTheReference) {
  std::mt19937 rng(424242);
  alignas(128) static uint8_t smem_buf[(1 << 16) + 128];
  size_t fast = 0, general = 0, row_walks = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int rank = 1 + iter % 5;
    const int elem_bytes = 1 << ((iter / 5) % 4);
    RandomTensor t = MakeFastTensor(rng, rank, elem_bytes);
    fj::tensor_param& p = t.host.param;
    const unsigned threads_choice[] = {1, 3, 32, 37, 96, 128, 256, 512};
    const unsigned threads = threads_choice[rng() % 8];
    std::vector<int32_t> c = MakeFastCoords(rng, p);
    uint8_t* smem = smem_buf + 16 * (rng() % 8);
    const std::string at = "iter " + std::to_string(iter);
    const bool check = p.oob != fj::oob_promise_in_bounds;
    ASSERT_TRUE(TileFastAnyRank(p, c.data(), smem, check)) << at;
    CheckTile(t, c, smem, threads, at + " fast");
    ++fast;
    row_walks += RowWalkAnyRank(p, c.data(), threads) ? 1 : 0;
    if (::testing::Test::HasFatalFailure()) return;
    // Across the boundary: each variant must leave the fast path.
    const int k = 16 / elem_bytes;
    const int variant = static_cast<int>(rng() % 5);
    std::vector<int32_t> c2 = c;
    RandomTensor t2 = t;
    t2.host.data = t2.storage.data() + (static_cast<uint8_t*>(t.host.data) -
                                        t.storage.data());
    fj::tensor_param& p2 = t2.host.param;
    p2.data = t2.host.data;
    uint8_t* smem2 = smem;
    if (p2.oob == fj::oob_promise_in_bounds) p2.oob = fj::oob_zeros;
    const int d = static_cast<int>(rng() % rank);
    switch (variant) {
      case 0:  // one element past the end along d
        c2[d] = static_cast<int32_t>(p2.shape[d]) - p2.box[d] + 1;
        break;
      case 1:  // one element before the start along d
        c2[d] = -1;
        break;
      case 2:  // a start that is not on a 16-byte boundary
        if (k == 1) continue;
        c2[0] = c[0] + 1 <= p2.shape[0] - p2.box[0] ? c[0] + 1 : c[0] - 1;
        if (c2[0] < 0) continue;
        break;
      case 3:  // SMEM one element off 16-byte alignment
        if (k == 1) continue;
        smem2 = smem + elem_bytes;
        break;
      default:  // data one element off 16-byte alignment
        if (k == 1) continue;
        t2.host.data = static_cast<uint8_t*>(t2.host.data) + elem_bytes;
        p2.data = t2.host.data;
        break;
    }
    ASSERT_FALSE(TileFastAnyRank(p2, c2.data(), smem2, true))
        << at << " variant " << variant;
    CheckTile(t2, c2, smem2, threads, at + " variant " + std::to_string(variant));
    ++general;
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(general, 500u);
  EXPECT_EQ(fast, 1500u);
  // Both forms of the fast path ran: the row walk and the chunk cursor.
  EXPECT_GT(row_walks, 300u);
  EXPECT_LT(row_walks, 1200u);
}

// The sync implementation's barrier (an mbarrier stand-in) on real threads:
// the conformance barrier kernel's protocol, checked against RefBarrier.
TEST(CopyEmulationTest, EmulatedBarrierKeepsPhases) {
  for (int threads : {1, 3, 8}) {
    const int phases = 50;
    fj::barrier bar;
    blockDim = {static_cast<unsigned>(threads), 1, 1};
    fj::sync_impl::barrier_init(bar, threads);
    std::vector<uint32_t> words(2 * threads), out((phases + 1) * threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        unsigned flags = 0;
        if (fj::sync_impl::test(bar, 1)) flags |= 1;
        if (!fj::sync_impl::test(bar, 0)) flags |= 2;
        for (int k = 0; k < phases; ++k) {
          __atomic_store_n(&words[(k & 1) * threads + t], BarrierWord(0, k, t),
                           __ATOMIC_RELAXED);
          fj::sync_impl::arrive(bar);
          fj::sync_impl::wait(bar, k & 1);
          out[k * threads + t] = __atomic_load_n(
              &words[(k & 1) * threads + (t + 1) % threads], __ATOMIC_RELAXED);
        }
        if (fj::sync_impl::test(bar, (phases - 1) & 1)) flags |= 4;
        out[phases * threads + t] = flags;
      });
    }
    for (auto& th : pool) th.join();
    blockDim = {1, 1, 1};
    std::vector<uint32_t> want((phases + 1) * threads);
    RefBarrier(1, threads, phases, want.data());
    EXPECT_EQ(out, want) << threads << " threads";
  }
}

#else
TEST(CopyEmulationTest, NeedsGcc) {
  GTEST_SKIP() << "the host emulation of the device headers needs GCC";
}
#endif

// The reference's own fixed points, independent of any emulation.
TEST(CopyReferenceTest, RaggedTileReadsZerosAndNans) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};  // shape {3, 2}
  HostTensor t;
  std::memset(&t.param, 0, sizeof(t.param));
  t.param.rank = 2;
  t.param.dtype = fj::dtype_f32;
  t.param.elem_bytes = 4;
  t.param.shape[0] = 3;
  t.param.shape[1] = 2;
  t.param.stride[0] = 1;
  t.param.stride[1] = 3;
  t.param.box[0] = 2;
  t.param.box[1] = 2;
  t.data = data.data();
  const int32_t c[kCaseInts] = {2, 1, 0, 0, 0};
  float tile[4];
  t.param.oob = fj::oob_zeros;
  RefLoadTileInto(t, c, true, kPredSkip, reinterpret_cast<uint8_t*>(tile));
  EXPECT_EQ(tile[0], 6.f);
  EXPECT_EQ(tile[1], 0.f);
  EXPECT_EQ(tile[2], 0.f);
  t.param.oob = fj::oob_nan;
  RefLoadTileInto(t, c, true, kPredSkip, reinterpret_cast<uint8_t*>(tile));
  EXPECT_EQ(tile[0], 6.f);
  EXPECT_TRUE(IsNan(fj::dtype_f32, &tile[1]));
  EXPECT_TRUE(IsNan(fj::dtype_f32, &tile[3]));
  float stale[4] = {9, 9, 9, 9};
  RefLoadTileInto(t, c, false, kPredSkip, reinterpret_cast<uint8_t*>(stale));
  EXPECT_EQ(stale[2], 9.f);
  RefLoadTileInto(t, c, false, kPredZero, reinterpret_cast<uint8_t*>(stale));
  EXPECT_EQ(stale[2], 0.f);
}

TEST(CopyReferenceTest, NanPatternsAreNans) {
  for (int d : {fj::dtype_f32, fj::dtype_f64, fj::dtype_f16, fj::dtype_bf16,
                fj::dtype_f8e4m3, fj::dtype_f8e5m2}) {
    const uint64_t v = NanPattern(d);
    EXPECT_TRUE(IsNan(d, &v)) << d;
  }
  const uint32_t tma_style = 0x7FFFFFFFu, one = 0x3F800000u;
  EXPECT_TRUE(SameElement(fj::dtype_f32, 4, &tma_style, &one) == false);
  const uint64_t canonical = NanPattern(fj::dtype_f32);
  EXPECT_TRUE(SameElement(fj::dtype_f32, 4, &tma_style, &canonical));
  EXPECT_FALSE(SameElement(fj::dtype_i32, 4, &tma_style, &canonical));
}

}  // namespace
}  // namespace fleetjit::selftest
