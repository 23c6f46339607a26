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

#include "conformance/reference.h"
#include "gtest/gtest.h"

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

// The tma implementation's issue points (tma.cuh's test seams): a model of
// the copy engine below (HostTensorCopy) runs each tensor copy.
struct TmaLog {
  uint8_t* smem = nullptr;  // the SMEM buffer (32-bit addresses inside it)
  size_t loads = 0, stores = 0, expects = 0, attaches = 0;
  uint64_t expected_bytes = 0;
  std::string error;
};
TmaLog g_tma;
inline void fj_host_expect_tx(void*, unsigned bytes) {
  ++g_tma.expects;
  g_tma.expected_bytes += bytes;
}
inline void fj_host_attach(void*) { ++g_tma.attaches; }
void fj_host_tensor_load(unsigned s, const void* map, const int* c, int rank,
                         unsigned bar);
void fj_host_tensor_store(const void* map, const int* c, int rank, unsigned s);

#define FJ_COPY_HOST_EMULATION 1
#include "fleetjit/copy/common.cuh"
#include "fleetjit/copy/cp_async.cuh"
#include "fleetjit/copy/sync.cuh"
#include "fleetjit/copy/tma.cuh"

// The SMEM byte at 32-bit shared address `a` (the shim's smem_u32 keeps the
// low half of a host pointer; the test's buffer never crosses 4 GiB).
uint8_t* SmemAt(unsigned a) {
  const auto base = reinterpret_cast<uintptr_t>(g_tma.smem);
  return reinterpret_cast<uint8_t*>((base & ~uintptr_t{0xffffffff}) | a);
}
// The TMA swizzle on an absolute SMEM address, written as the hardware
// pattern is described: the 16-byte chunk index within each 128-byte line
// is XORed with the line index modulo 2, 4 or 8 (32B, 64B, 128B).
unsigned TmaSwizzle(unsigned a, int mode) {
  if (mode == 0) return a;
  const unsigned lines = 1u << mode;  // 2, 4, 8
  const unsigned chunk = (a / 16) % 8, line = (a / 128) % lines;
  return a - chunk * 16 + ((chunk ^ line) % 8) * 16;
}
// One tensor copy as the copy engine does it: the hardware box (hw_box_m1
// + 1) at `c`, dense and swizzled at SMEM address `s`; out-of-bounds
// elements read as the oob fill (load) or are not written (store).
void HostTensorCopy(bool load, unsigned s, const fj::tensor_param& p,
                    const int* c, int rank) {
  if (rank != p.rank) g_tma.error = "tensor copy of the wrong rank";
  const unsigned align = p.swizzle == 0 ? 128u : 128u << p.swizzle;
  if (s % align != 0) g_tma.error = "tensor copy to misaligned SMEM";
  int hw[5] = {1, 1, 1, 1, 1};
  size_t n = 1;
  for (int d = 0; d < rank; ++d) {
    hw[d] = p.hw_box_m1[d] + 1;
    n *= hw[d];
  }
  if (hw[0] * p.elem_bytes % 16 != 0) g_tma.error = "inner box not 16 bytes";
  if (p.swizzle != 0 && hw[0] * p.elem_bytes > (16 << p.swizzle))
    g_tma.error = "swizzled inner box wider than the swizzle";
  const uint64_t fill = fj::detail::oob_fill_pattern(p);
  const unsigned eb = p.elem_bytes;
  for (size_t e = 0; e < n; ++e) {
    size_t rest = e;
    bool in = true;
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) {
      const int64_t g = c[d] + static_cast<int64_t>(rest % hw[d]);
      rest /= hw[d];
      in = in && g >= 0 && g < p.shape[d];
      off += g * p.stride[d];
    }
    uint8_t* gp = static_cast<uint8_t*>(p.data) + off * eb;
    for (unsigned b = 0; b < eb; ++b) {
      uint8_t* sp =
          SmemAt(TmaSwizzle(s + static_cast<unsigned>(e * eb + b), p.swizzle));
      if (load) {
        *sp = in ? gp[b] : static_cast<uint8_t>(fill >> (8 * (b % 8)));
      } else if (in) {
        gp[b] = *sp;
      }
    }
  }
}
void fj_host_tensor_load(unsigned s, const void* map, const int* c, int rank,
                         unsigned) {
  ++g_tma.loads;
  HostTensorCopy(true, s, *static_cast<const fj::tensor_param*>(map), c, rank);
}
void fj_host_tensor_store(const void* map, const int* c, int rank, unsigned s) {
  ++g_tma.stores;
  HostTensorCopy(false, s, *static_cast<const fj::tensor_param*>(map), c, rank);
}
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
    const int64_t padded =
        stride * p.shape[d] + (pick(0, 1) ? k * pick(1, 2) : 0);
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
  return fj::detail::tile_fast<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]), smem,
                                  check);
}
// Whether thread 0 of a block of `threads` takes the fast path's row walk
// (detail::plan_rows) rather than its general chunk cursor.
template <int R>
bool RowWalk(const fj::tensor_param& p, const int32_t* c, unsigned threads) {
  return fj::detail::plan_rows<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]), 0,
                                  threads)
      .ok;
}
bool RowWalkAnyRank(const fj::tensor_param& p, const int32_t* c,
                    unsigned threads) {
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
  got.host.data = got.storage.data() +
                  (static_cast<const uint8_t*>(t.host.data) - t.storage.data());
  got.host.param.data = got.host.data;
  std::vector<uint8_t> want_store = t.storage;
  HostTensor ref = t.host;
  ref.data = want_store.data() +
             (static_cast<const uint8_t*>(t.host.data) - t.storage.data());
  const uint8_t pred_byte = 1;
  RefTileStore(ref, c.data(), &pred_byte, 1, smem);
  AsBlock(threads,
          [&] { StoreTileAnyRank(got.host.param, c.data(), smem, true); });
  ASSERT_EQ(got.storage, want_store)
      << "store " << what << " rank " << p.rank << " threads " << threads;
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
    t2.host.data = t2.storage.data() +
                   (static_cast<uint8_t*>(t.host.data) - t.storage.data());
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
    CheckTile(t2, c2, smem2, threads,
              at + " variant " + std::to_string(variant));
    ++general;
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(general, 500u);
  EXPECT_EQ(fast, 1500u);
  // Both forms of the fast path ran: the row walk and the chunk cursor.
  EXPECT_GT(row_walks, 300u);
  EXPECT_LT(row_walks, 1200u);
}

// Whether thread 0 of a block of `threads` takes the narrow row path
// (detail::plan_narrow: 4- or 8-byte chunks, no per-chunk divides).
template <int R>
bool Narrow(const fj::tensor_param& p, const int32_t* c, const void* smem,
            unsigned threads) {
  return fj::detail::plan_narrow<R>(p, fj::at(c[0], c[1], c[2], c[3], c[4]),
                                    smem, p.oob != fj::oob_promise_in_bounds,
                                    fj::detail::team{0, threads})
      .w.ok;
}
bool NarrowAnyRank(const fj::tensor_param& p, const int32_t* c,
                   const void* smem, unsigned threads) {
  switch (p.rank) {
    case 1:
      return Narrow<1>(p, c, smem, threads);
    case 2:
      return Narrow<2>(p, c, smem, threads);
    default:
      return Narrow<3>(p, c, smem, threads);
  }
}

// Ragged tensors whose rows are only 4- or 8-byte aligned (a row pitch of
// an odd number of 4-byte elements, data off 16-byte alignment), as the
// ragged transpose has them: the narrow row path (4/8-byte chunks), inside
// the tensor and across its edges (one-element chunks), every rank it
// takes (1-3), against the reference for loads under both impls and
// stores.
TEST(CopyEmulationTest, NarrowPathTilesMatchTheReference) {
  std::mt19937 rng(20261202);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  alignas(128) static uint8_t smem_buf[(1 << 16) + 128];
  size_t narrow = 0, edges = 0, wide = 0;
  for (int iter = 0; iter < 1200; ++iter) {
    const int rank = 1 + iter % 3;
    const int eb = iter % 4 == 3 ? 8 : 4;
    RandomTensor r;
    fj::tensor_param& p = r.host.param;
    std::memset(&p, 0, sizeof(p));
    p.elem_bytes = eb;
    p.dtype = kDtypeOfSize[eb][pick(0, 2)];
    p.rank = rank;
    p.oob = pick(0, 2);
    int64_t stride = 1;
    for (int d = 0; d < rank; ++d) {
      p.box[d] = d == 0 ? (16 / eb) * pick(1, 8) : pick(1, rank > 2 ? 4 : 9);
      p.shape[d] = p.box[d] + pick(0, 7);
      p.stride[d] = stride;
      // An odd pitch (4-byte rows) or an even one (8-byte rows for f32).
      stride = stride * p.shape[d] + pick(0, 3);
    }
    const size_t elems = static_cast<size_t>(stride) + 1;
    const size_t shift = pick(0, 3) * eb;
    r.storage.resize(elems * eb + shift + 64);
    for (auto& b : r.storage) b = static_cast<uint8_t>(rng());
    uint8_t* base = r.storage.data();
    base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;
    r.host.data = base + shift;
    p.data = r.host.data;
    const bool promise = p.oob == fj::oob_promise_in_bounds;
    const bool edge = !promise && pick(0, 2) == 0;
    const std::vector<int32_t> c = MakeCoords(rng, p, !edge);
    const unsigned threads_choice[] = {32, 64, 128, 256, 37};
    const unsigned threads = threads_choice[rng() % 5];
    uint8_t* smem = smem_buf + 16 * (rng() % 8);
    const std::string at = "iter " + std::to_string(iter);
    const bool fast = TileFastAnyRank(p, c.data(), smem, !promise);
    const bool nar = !fast && NarrowAnyRank(p, c.data(), smem, threads);
    narrow += nar;
    edges += nar && edge;
    wide += fast;
    CheckTile(r, c, smem, threads, at + (nar ? " narrow" : " other"));
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_GT(narrow, 400u);
  EXPECT_GT(edges, 50u);
  EXPECT_LT(wide, 600u);
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

// ------------------------------------------------ the tma issue paths
// A tensor for the copy-engine model: compact strides (rows padded to 16
// bytes), random bytes, `box` and the hardware box `hw` (parameter order).
RandomTensor MakeTmaTensor(std::mt19937& rng, int elem_bytes,
                           std::vector<int64_t> shape, std::vector<int> box,
                           std::vector<int> hw, int oob, int swizzle = 0) {
  RandomTensor r;
  fj::tensor_param& p = r.host.param;
  std::memset(&p, 0, sizeof(p));
  p.elem_bytes = elem_bytes;
  p.dtype = kDtypeOfSize[elem_bytes][0];  // u8 (NaN fill keeps fp8 off TMA)
  if (elem_bytes == 2) p.dtype = fj::dtype_f16;
  if (elem_bytes == 4) p.dtype = fj::dtype_f32;
  p.rank = static_cast<int>(shape.size());
  p.oob = oob;
  p.swizzle = static_cast<unsigned char>(swizzle);
  p.flags = FJ_TP_HAS_TMAP;
  int64_t stride = 1;
  for (int d = 0; d < p.rank; ++d) {
    p.shape[d] = shape[d];
    p.stride[d] = stride;
    p.box[d] = box[d];
    p.hw_box_m1[d] = static_cast<unsigned char>(hw[d] - 1);
    if (hw[d] != box[d]) p.flags |= FJ_TP_SPLIT_BOX;
    stride *=
        d == 0 ? (shape[0] * elem_bytes + 15) / 16 * 16 / elem_bytes : shape[d];
  }
  r.storage.resize(static_cast<size_t>(stride) * elem_bytes + 16);
  for (auto& b : r.storage) b = static_cast<uint8_t>(rng());
  uint8_t* base = r.storage.data();
  base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;
  r.host.data = base;
  p.data = base;
  return r;
}

// Start coordinates for a TMA tile: dimension 0 at a 16-byte multiple,
// the tile inside, across an edge or (rarely) outside the tensor.
std::vector<int32_t> MakeTmaCoords(std::mt19937& rng,
                                   const fj::tensor_param& p) {
  std::vector<int32_t> c = MakeCoords(rng, p, p.oob == 0);
  const int step = std::max(1, 16 / p.elem_bytes);
  c[0] = c[0] / step * step;
  return c;
}

constexpr size_t kSmemBytes = 1 << 17;
alignas(1024) uint8_t g_smem[kSmemBytes + 1024];

// The tile load of a box larger than the tensor map's: one expect_tx for
// the whole box, one tensor copy per piece (spread over the first warp),
// and the pieces land as the dense tile, edges included.
TEST(CopyEmulationTest, SplitBoxesAreOneExpectTxAndTileTheBox) {
  std::mt19937 rng(20261201);
  struct Case {
    int eb;
    std::vector<int64_t> shape;
    std::vector<int> box, hw;
  } cases[] = {
      {2, {4100, 3}, {1024, 2}, {256, 1}},            // a wide row: dim 0 split
      {4, {70, 600}, {64, 512}, {64, 256}},           // an outer dim split
      {1, {64, 300, 3}, {64, 300, 1}, {64, 150, 1}},  // a middle one
      {8, {40, 7, 5}, {32, 6, 2}, {32, 6, 2}},        // no split
  };
  g_tma.smem = g_smem;
  ASSERT_EQ(reinterpret_cast<uintptr_t>(g_smem) >> 32,
            (reinterpret_cast<uintptr_t>(g_smem) + sizeof(g_smem)) >> 32);
  size_t checked = 0;
  for (int iter = 0; iter < 240; ++iter) {
    const Case& k = cases[iter % 4];
    const int oob = 1 + rng() % 2;
    RandomTensor t = MakeTmaTensor(rng, k.eb, k.shape, k.box, k.hw, oob);
    const fj::tensor_param& p = t.host.param;
    const std::vector<int32_t> c = MakeTmaCoords(rng, p);
    const size_t bytes = BoxElems(p) * p.elem_bytes;
    ASSERT_LE(bytes, kSmemBytes);
    size_t pieces = 1;
    for (int d = 0; d < p.rank; ++d) pieces *= k.box[d] / k.hw[d];
    std::vector<uint8_t> want(bytes);
    for (size_t i = 0; i < bytes; ++i) want[i] = StaleByte(iter, i);
    RefLoadTileInto(t.host, c.data(), true, kPredSkip, want.data());
    const bool warp = iter % 3 == 0;
    const unsigned threads = warp ? 32 : 1 + rng() % 160;
    for (size_t i = 0; i < bytes; ++i) g_smem[i] = StaleByte(iter, i);
    g_tma = {};
    g_tma.smem = g_smem;
    g_cp_async = {};
    g_cp_async.src_lo = t.storage.data();
    g_cp_async.src_hi = t.storage.data() + t.storage.size();
    fj::barrier bar{};
    const fj::coords at = fj::at(c[0], c[1], c[2], c[3], c[4]);
    AsBlock(threads, [&] {
      const fj::detail::team tm =
          warp ? fj::detail::warp_team() : fj::detail::block_team();
      if (p.rank == 2) {
        fj::tma_impl::load_tile_bar<2>(g_smem, p, at, bar, 0, true,
                                       fj::pred_skip, tm);
      } else {
        fj::tma_impl::load_tile_bar<3>(g_smem, p, at, bar, 0, true,
                                       fj::pred_skip, tm);
      }
    });
    ASSERT_EQ(g_tma.error, "") << "iter " << iter;
    EXPECT_EQ(g_tma.expects, 1u) << "one expect_tx, iter " << iter;
    EXPECT_EQ(g_tma.expected_bytes, bytes) << "the whole box, iter " << iter;
    EXPECT_EQ(g_tma.loads, pieces) << "one copy per piece, iter " << iter;
    EXPECT_EQ(g_tma.attaches, 0u);
    ptrdiff_t first = -1;
    ASSERT_EQ(CountMismatches(p.dtype, p.elem_bytes, want.data(), g_smem,
                              BoxElems(p), &first),
              0u)
        << "iter " << iter << " first bad element " << first;
    ++checked;
  }
  EXPECT_EQ(checked, 240u);
}

// A page-table gather: k tiles at k page indices (some past the end: the
// whole tile is the fill, stored by the threads), one expect_tx for the
// others, pieces tensor copies each.
#if FJ_TMA_SMALL_TILES == 0  // with it, the small tiles here go by cp.async
TEST(CopyEmulationTest, GatherUnderTmaIssuesKTensorCopies) {
  std::mt19937 rng(7);
  g_tma.smem = g_smem;
  for (int iter = 0; iter < 120; ++iter) {
    const bool split = iter % 2 == 1;
    // [pages][16 tokens][head_dim] f16; a split case has 512-wide rows.
    const int64_t hd = split ? 512 : 128, pages = 9 + rng() % 30;
    RandomTensor t = MakeTmaTensor(
        rng, 2, {hd, 16, pages}, {static_cast<int>(hd), 16, 1},
        {split ? 256 : static_cast<int>(hd), split ? 1 : 16, 1}, 2);
    const fj::tensor_param& p = t.host.param;
    const int k = 1 + rng() % (split ? 3 : 6);
    std::vector<int> idx(k);
    for (int& v : idx) v = static_cast<int>(rng() % (pages + 2));  // > end: NaN
    int inside = 0;
    for (int v : idx) inside += v < pages ? 1 : 0;
    const unsigned bb = static_cast<unsigned>(BoxElems(p) * 2);
    std::vector<uint8_t> want(bb * k);
    for (size_t i = 0; i < want.size(); ++i) want[i] = StaleByte(iter, i);
    for (int i = 0; i < k; ++i) {
      const int32_t c[kCaseInts] = {0, 0, idx[i]};
      RefLoadTileInto(t.host, c, true, kPredSkip, want.data() + i * bb);
    }
    for (size_t i = 0; i < want.size(); ++i) g_smem[i] = StaleByte(iter, i);
    g_tma = {};
    g_tma.smem = g_smem;
    fj::barrier bar{};
    const bool warp = iter % 3 != 0;
    AsBlock(warp ? 32 : 64 + rng() % 64, [&] {
      const fj::detail::coord_gather g =
          fj::detail::gather_of(p, fj::at(0, 0, 0), 2, idx.data());
      if (warp) {
        fj::tma_impl::load_tiles<3>(fj::warp, g_smem, p, g, k, bar, true,
                                    fj::pred_skip);
      } else {
        fj::tma_impl::load_tiles<3>(fj::block, g_smem, p, g, k, bar, true,
                                    fj::pred_skip);
      }
    });
    const size_t pieces = split ? 32 : 1;  // 512 / 256 x 16 rows
    ASSERT_EQ(g_tma.error, "") << iter;
    EXPECT_EQ(g_tma.expects, inside > 0 ? 1u : 0u) << iter;
    EXPECT_EQ(g_tma.expected_bytes, uint64_t{bb} * inside) << iter;
    EXPECT_EQ(g_tma.loads, pieces * inside) << iter;
    EXPECT_EQ(g_tma.attaches, 0u) << iter;
    ptrdiff_t first = -1;
    ASSERT_EQ(CountMismatches(p.dtype, 2, want.data(), g_smem, BoxElems(p) * k,
                              &first),
              0u)
        << "iter " << iter << " first bad element " << first;
  }
}
#endif

// ------------------------------------------ index lists (contract 7)
// A gather along a random dimension with indices inside, across the edge
// and outside the tensor, under every implementation (tma: the copy-engine
// model for tensors with a map, cp.async for the others): a tile whose
// index does not put it wholly inside along that dimension is the whole
// fill (zeros under promise_in_bounds: it never faults), the others are
// read as any tile. Fails on a layer that reads such a tile.
template <int R>
void GatherInto(int impl, bool warp, uint8_t* smem, const fj::tensor_param& p,
                const int32_t* base, int dim, const int* idx, int k) {
  const fj::detail::coord_gather g = fj::detail::gather_of(
      p, fj::at(base[0], base[1], base[2], base[3], base[4]), dim, idx);
  fj::barrier bar{};
  auto run = [&](auto scope) {
    if (impl == 0) {
      fj::sync_impl::load_tiles<R>(scope, smem, p, g, k, bar, true,
                                   fj::pred_skip);
    } else if (impl == 1) {
      fj::cp_async_impl::load_tiles<R>(scope, smem, p, g, k, bar, true,
                                       fj::pred_skip);
    } else {
      fj::tma_impl::load_tiles<R>(scope, smem, p, g, k, bar, true,
                                  fj::pred_skip);
    }
  };
  if (warp) {
    run(fj::warp);
  } else {
    run(fj::block);
  }
}
void GatherAnyRank(int impl, bool warp, uint8_t* smem,
                   const fj::tensor_param& p, const int32_t* base, int dim,
                   const int* idx, int k) {
  switch (p.rank) {
    case 1:
      return GatherInto<1>(impl, warp, smem, p, base, dim, idx, k);
    case 2:
      return GatherInto<2>(impl, warp, smem, p, base, dim, idx, k);
    case 3:
      return GatherInto<3>(impl, warp, smem, p, base, dim, idx, k);
    case 4:
      return GatherInto<4>(impl, warp, smem, p, base, dim, idx, k);
    default:
      return GatherInto<5>(impl, warp, smem, p, base, dim, idx, k);
  }
}

// An index along `dim`: inside (most), across the far edge, or outside.
int PickIndex(std::mt19937& rng, const fj::tensor_param& p, int dim) {
  const int b = p.box[dim], s = static_cast<int>(p.shape[dim]);
  switch (rng() % 6) {
    case 0:
      return -1;
    case 1:
      return -b - static_cast<int>(rng() % 3);
    case 2:
      return std::max(0, s - b + 1) + static_cast<int>(rng() % b);
    case 3:
      return s + static_cast<int>(rng() % 3);
    default:
      return s >= b ? static_cast<int>(rng() % (s - b + 1)) : 0;
  }
}

TEST(CopyEmulationTest, GathersFillTilesWhoseIndexLeavesTheTensor) {
  std::mt19937 rng(20261208);
  size_t filled = 0, read = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int rank = 1 + iter % 5;
    const bool tma_model = iter % 4 == 3;
    RandomTensor t =
        tma_model ? MakeTmaTensor(rng, 2, {40, 9}, {16, 3}, {16, 3}, iter % 3)
                  : MakeTensor(rng, rank);
    fj::tensor_param& p = t.host.param;
    const bool promise = p.oob == fj::oob_promise_in_bounds;
    if (promise && !FitsInBounds(p)) continue;
    const int dim = static_cast<int>(rng() % p.rank);
    std::vector<int32_t> base = MakeCoords(rng, p, promise);
    if (tma_model) base[0] = 0;  // 16-byte aligned starts stay on TMA
    const int k = 1 + static_cast<int>(rng() % 5);
    std::vector<int> idx(k);
    std::vector<int32_t> coords(static_cast<size_t>(k) * kCaseInts);
    for (int i = 0; i < k; ++i) {
      idx[i] = PickIndex(rng, p, dim);
      std::copy(base.begin(), base.end(), coords.begin() + i * kCaseInts);
      coords[i * kCaseInts + dim] = idx[i];
      (IndexInside(p, &coords[i * kCaseInts], dim) ? read : filled) += 1;
    }
    const size_t bytes = BoxElems(p) * p.elem_bytes * k;
    ASSERT_LE(bytes, kSmemBytes);
    std::vector<uint8_t> want(bytes);
    RefGatherTiles(t.host, coords.data(), k, dim, want.data());
    for (int impl = 0; impl < 3; ++impl) {
      for (size_t i = 0; i < bytes; ++i) g_smem[i] = StaleByte(iter, i);
      g_cp_async = {};
      g_cp_async.src_lo = t.storage.data();
      g_cp_async.src_hi = t.storage.data() + t.storage.size();
      g_tma = {};
      g_tma.smem = g_smem;
      const bool warp = rng() % 2 == 0;
      AsBlock(warp ? 32 : 1 + rng() % 70, [&] {
        GatherAnyRank(impl, warp, g_smem, p, base.data(), dim, idx.data(), k);
      });
      ASSERT_EQ(g_cp_async.error, "") << impl << " iter " << iter;
      ASSERT_EQ(g_tma.error, "") << impl << " iter " << iter;
      ptrdiff_t first = -1;
      ASSERT_EQ(CountMismatches(p.dtype, p.elem_bytes, want.data(), g_smem,
                                BoxElems(p) * k, &first),
                0u)
          << "impl " << impl << " iter " << iter << " rank " << p.rank
          << " dim " << dim << " oob " << p.oob << " first bad element "
          << first;
    }
  }
  EXPECT_GT(filled, 500u);
  EXPECT_GT(read, 500u);
}

// A scatter along a random dimension (and a store of a coordinate list)
// under every implementation: a tile whose index does not put it wholly
// inside along that dimension writes nothing; the others are clipped
// stores. Fails on a layer that writes such a tile's in-bounds part.
template <int R>
void ScatterFrom(int impl, bool warp, const fj::tensor_param& p,
                 const int32_t* base, int dim, const int* idx, int k,
                 const uint8_t* smem) {
  const fj::detail::coord_gather g = fj::detail::gather_of(
      p, fj::at(base[0], base[1], base[2], base[3], base[4]), dim, idx);
  auto run = [&](auto scope) {
    if (impl == 2) {
      fj::tma_impl::store_tiles<R>(scope, p, g, k, smem, true);
    } else {
      fj::soft_impl::store_tiles<R>(scope, p, g, k, smem, true);
    }
  };
  if (warp) {
    run(fj::warp);
  } else {
    run(fj::block);
  }
}
void ScatterAnyRank(int impl, bool warp, const fj::tensor_param& p,
                    const int32_t* base, int dim, const int* idx, int k,
                    const uint8_t* smem) {
  switch (p.rank) {
    case 1:
      return ScatterFrom<1>(impl, warp, p, base, dim, idx, k, smem);
    case 2:
      return ScatterFrom<2>(impl, warp, p, base, dim, idx, k, smem);
    case 3:
      return ScatterFrom<3>(impl, warp, p, base, dim, idx, k, smem);
    case 4:
      return ScatterFrom<4>(impl, warp, p, base, dim, idx, k, smem);
    default:
      return ScatterFrom<5>(impl, warp, p, base, dim, idx, k, smem);
  }
}

TEST(CopyEmulationTest, ScattersWriteNothingOfTilesWhoseIndexLeaves) {
  std::mt19937 rng(20261209);
  size_t skipped = 0, written = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const bool tma_model = iter % 4 == 3;
    RandomTensor t = tma_model
                         ? MakeTmaTensor(rng, 4, {12, 20}, {4, 2}, {4, 2}, 1)
                         : MakeTensor(rng, 1 + iter % 5);
    const fj::tensor_param& p = t.host.param;
    const int dim = static_cast<int>(rng() % p.rank);
    std::vector<int32_t> base = MakeCoords(rng, p, false);
    if (tma_model) base[0] = 4 * static_cast<int32_t>(rng() % 3);
    // Distinct indices: two tiles never overlap along `dim`.
    const int k = 1 + static_cast<int>(rng() % 4);
    std::vector<int> idx;
    std::vector<int32_t> coords;
    for (int tries = 0; static_cast<int>(idx.size()) < k && tries < 50;
         ++tries) {
      const int v = PickIndex(rng, p, dim);
      bool clash = false;
      for (int u : idx) clash = clash || std::abs(u - v) < p.box[dim];
      if (clash) continue;
      idx.push_back(v);
      coords.insert(coords.end(), base.begin(), base.end());
      coords[coords.size() - kCaseInts + dim] = v;
      (IndexInside(p, &coords[coords.size() - kCaseInts], dim) ? written
                                                               : skipped) += 1;
    }
    const int n = static_cast<int>(idx.size());
    const size_t tile_bytes = BoxElems(p) * p.elem_bytes;
    alignas(128) static uint8_t src[1 << 16];
    ASSERT_LE(tile_bytes * n, sizeof(src));
    for (size_t i = 0; i < tile_bytes * n; ++i)
      src[i] = static_cast<uint8_t>(rng());
    std::vector<uint8_t> want = t.storage;
    HostTensor ref = t.host;
    ref.data =
        want.data() + (static_cast<uint8_t*>(t.host.data) - t.storage.data());
    const uint8_t on = 1;
    RefScatterTiles(ref, coords.data(), &on, 1, n, dim, src);
    const std::vector<uint8_t> before = t.storage;
    for (int impl = 0; impl < 3; ++impl) {
      t.storage = before;
      g_tma = {};
      g_tma.smem = g_smem;
      // The model reads SMEM through g_smem's addresses.
      std::memcpy(g_smem, src, tile_bytes * n);
      const bool warp = rng() % 2 == 0;
      AsBlock(warp ? 32 : 1 + rng() % 70, [&] {
        ScatterAnyRank(impl, warp, p, base.data(), dim, idx.data(), n,
                       impl == 2 ? g_smem : src);
      });
      ASSERT_EQ(g_tma.error, "") << impl << " iter " << iter;
      ASSERT_EQ(t.storage, want) << "impl " << impl << " iter " << iter
                                 << " rank " << p.rank << " dim " << dim;
    }
  }
  EXPECT_GT(skipped, 500u);
  EXPECT_GT(written, 500u);
}

// The software swizzle (sync and cp_async, loads and stores) writes the
// bytes the copy engine's swizzle writes, at the same addresses, for every
// swizzle width, element size, edge and block size.
TEST(CopyEmulationTest, SoftwareSwizzleMatchesTheTmaPatternByteForByte) {
  // Fixed points of the 128B pattern: line 1 chunk 0 -> chunk 1; line 5
  // chunk 3 -> chunk 6; and the portable accessor is the same map.
  EXPECT_EQ(TmaSwizzle(128, 3), 144u);
  EXPECT_EQ(TmaSwizzle(5 * 128 + 3 * 16 + 7, 3), 5u * 128 + 6 * 16 + 7);
  EXPECT_EQ(TmaSwizzle(3 * 128 + 16, 1), 3u * 128);
  for (unsigned b = 0; b < 4096; ++b) {
    ASSERT_EQ(fj::swizzle<fj::swz32>::offset(b), TmaSwizzle(b, 1)) << b;
    ASSERT_EQ(fj::swizzle<fj::swz64>::offset(b), TmaSwizzle(b, 2)) << b;
    ASSERT_EQ(fj::swizzle<fj::swz128>::offset(b), TmaSwizzle(b, 3)) << b;
    ASSERT_EQ(fj::swizzle<fj::swz_none>::offset(b), b);
  }
  std::mt19937 rng(1234);
  g_tma.smem = g_smem;
  size_t differs = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int mode = 1 + iter % 3, eb = 1 << (iter / 3 % 4);
    const int row = (16 << mode) / eb;
    const int rows = 1 + rng() % 24;
    const bool r3 = iter % 2;
    RandomTensor t = MakeTmaTensor(
        rng, eb,
        r3 ? std::vector<int64_t>{row * 2 + 5, rows + 3, 3}
           : std::vector<int64_t>{row + 1 +
                                      static_cast<int64_t>(rng() % (3 * row)),
                                  rows + 9},
        r3 ? std::vector<int>{row, rows, 2} : std::vector<int>{row, rows},
        r3 ? std::vector<int>{row, rows, 2} : std::vector<int>{row, rows},
        1 + rng() % 2, mode);
    const fj::tensor_param& p = t.host.param;
    std::vector<int32_t> c = MakeCoords(rng, p, false);
    if (rng() % 2) c[0] = c[0] / std::max(1, 16 / eb) * std::max(1, 16 / eb);
    const size_t bytes = BoxElems(p) * eb;
    // The copy engine's image of the tile (address-based swizzle).
    for (size_t i = 0; i < bytes; ++i) g_smem[i] = StaleByte(iter, i);
    g_tma = {};
    g_tma.smem = g_smem;
    HostTensorCopy(true, fj::detail::smem_u32(g_smem), p, c.data(), p.rank);
    ASSERT_EQ(g_tma.error, "");
    const std::vector<uint8_t> want(g_smem, g_smem + bytes);
    std::vector<uint8_t> dense(bytes);
    RefLoadTileInto(t.host, c.data(), true, kPredSkip, dense.data());
    differs += dense != want;
    const unsigned threads = 1 + rng() % 130;
    for (int impl = 0; impl < 2; ++impl) {
      for (size_t i = 0; i < bytes; ++i) g_smem[i] = StaleByte(iter + 1, i);
      g_cp_async = {};
      g_cp_async.src_lo = t.storage.data();
      g_cp_async.src_hi = t.storage.data() + t.storage.size();
      AsBlock(threads, [&] {
        IssueTileAnyRank(impl, g_smem, p, c.data(), true, kPredSkip);
      });
      ASSERT_EQ(g_cp_async.error, "");
      ASSERT_TRUE(std::equal(want.begin(), want.end(), g_smem))
          << ImplName(impl) << " iter " << iter << " swizzle " << mode
          << " elem " << eb << " rows " << rows << " threads " << threads;
    }
    // The store reads the swizzled image back: the tensor gets the tile.
    RandomTensor got = t;
    got.host.data =
        got.storage.data() +
        (static_cast<const uint8_t*>(t.host.data) - t.storage.data());
    got.host.param.data = got.host.data;
    std::vector<uint8_t> want_store = t.storage;
    HostTensor ref = t.host;
    ref.data = want_store.data() +
               (static_cast<const uint8_t*>(t.host.data) - t.storage.data());
    for (size_t i = 0; i < bytes; ++i) dense[i] = static_cast<uint8_t>(rng());
    const uint8_t pred_byte = 1;
    RefTileStore(ref, c.data(), &pred_byte, 1, dense.data());
    for (size_t b = 0; b < bytes; ++b)
      g_smem[TmaSwizzle(static_cast<unsigned>(b), mode)] = dense[b];
    AsBlock(threads,
            [&] { StoreTileAnyRank(got.host.param, c.data(), g_smem, true); });
    ASSERT_EQ(got.storage, want_store) << "store iter " << iter;
  }
  // (A tile of one 128-byte line, or all fill, looks the same swizzled.)
  EXPECT_GT(differs, 250u) << "the swizzle moved bytes in most cases";
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
