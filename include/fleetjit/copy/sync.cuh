// fleetjit copy layer, implementation `sync` (FJ_COPY_IMPL=0): any GPU.
//
// Every copy is done by the block's threads with ordinary loads and stores,
// so it has completed (for the issuing thread) when the call returns. What
// the asynchronous implementations do in hardware is emulated here:
//   - barriers: a counter in shared memory (sm_75 has no mbarrier);
//   - groups: nothing is ever in flight, so a wait is a block barrier;
//   - predicates, OOB zero/NaN fill, ragged tiles: done by the walker;
//   - multicast: each block loads the tile itself (no clusters below sm_90).
// Internal to <fleetjit/copy.cuh>: the interface is the one cp_async.cuh
// and tma.cuh implement; compare the three files side by side.
#ifndef FLEETJIT_COPY_SYNC_CUH_
#define FLEETJIT_COPY_SYNC_CUH_

#include <fleetjit/copy/common.cuh>

namespace fj {
namespace sync_impl {

// ---------------------------------------------------------------- barrier
// Emulates an mbarrier because sm_75 has none: word 0 counts arrivals
// modulo 2*count, word 1 holds count. The current phase's
// parity is (arrivals >= count); a phase with parity P is complete once the
// current parity differs from P, as with mbarrier.test_wait.parity.
FJ_DEV unsigned* words(barrier& b) { return (unsigned*)&b.state_; }

FJ_DEV void barrier_init(barrier& b, unsigned count) {
  words(b)[0] = 0;
  words(b)[1] = count;
  __threadfence_block();
}
// The lanes of a warp that arrive together on the same barrier count in
// one atomic (a CAS that adds them modulo 2*count): a block of arrivals
// otherwise serialises block_threads() atomics on one shared word.
FJ_DEV void arrive(barrier& b) {
  __threadfence_block();  // release this thread's earlier writes
  const unsigned mask = __match_any_sync(__activemask(), detail::addr(&b));
  __syncwarp(mask);  // ...to the lane that arrives for the others
  if ((detail::thread_rank() & 31) != (unsigned)(__ffs(mask) - 1)) return;
  __threadfence_block();
  unsigned* w = &words(b)[0];
  const unsigned k = __popc(mask), limit = 2 * words(b)[1];
  unsigned old = *(volatile unsigned*)w, seen;
  do {
    seen = old;
    unsigned next = seen + k;
    if (next >= limit) next -= limit;
    old = atomicCAS(w, seen, next);
  } while (old != seen);
}
// One arrival for a warp: its lanes' writes are released to lane 0
// (__syncwarp), which releases them with the arrival.
FJ_DEV void arrive_warp(barrier& b) {
  __syncwarp();
  if (detail::lane_id() != 0) return;
  __threadfence_block();
  unsigned* w = &words(b)[0];
  const unsigned limit = 2 * words(b)[1];
  unsigned old = *(volatile unsigned*)w, seen;
  do {
    seen = old;
    unsigned next = seen + 1;
    if (next >= limit) next -= limit;
    old = atomicCAS(w, seen, next);
  } while (old != seen);
}
FJ_DEV bool test(barrier& b, unsigned parity) {
  const volatile unsigned* w = words(b);
  const unsigned current = w[0] >= w[1] ? 1u : 0u;
  if (current == (parity & 1)) return false;
  __threadfence_block();  // acquire the arrivers' writes
  return true;
}
FJ_DEV void wait(barrier& b, unsigned parity) {
  while (!test(b, parity)) __nanosleep(32);
}

// ----------------------------------------------------------------- groups
// Copies are synchronous, so no group is ever in flight; the block barrier
// makes every thread's part visible to the others.
FJ_DEV void commit_group() {}
template <int N>
FJ_DEV void wait_group() {
  __syncthreads();
}
template <int N>
FJ_DEV void wait_group_read() {
  __syncthreads();
}
FJ_DEV void commit_group(warp_t) {}
template <int N>
FJ_DEV void wait_group(warp_t) {
  __syncwarp();
}
template <int N>
FJ_DEV void wait_group_read(warp_t) {
  __syncwarp();
}

// ------------------------------------------------------------ contiguous
#ifndef FJ_SYNC_L2_FIRST
#define FJ_SYNC_L2_FIRST 0  // an experiment: see issue_tile below
#endif
FJ_DEV void load_span(void* dst, const void* src, unsigned bytes, bool pred,
                      pred_mode mode) {
  __syncthreads();  // every thread is done with dst's old contents
  if (pred) {
    // FJ_SYNC_L2_FIRST: every line of the span asked of L2 first, so the
    // threads' batches after the first find theirs there.
    if (FJ_SYNC_L2_FIRST) detail::prefetch_span_lines(src, bytes);
    detail::move_block(dst, src, bytes);
  } else if (mode == pred_zero) {
    detail::fill_block(dst, bytes, 0);
  }
}
FJ_DEV void load(void* dst, const void* src, unsigned bytes, barrier&,
                 bool pred, pred_mode mode) {
  load_span(dst, src, bytes, pred, mode);
}
FJ_DEV void load(void* dst, const void* src, unsigned bytes, in_group_t,
                 bool pred, pred_mode mode) {
  load_span(dst, src, bytes, pred, mode);
}
template <class Done>
FJ_DEV void load_multicast(void* dst, const void* src, unsigned bytes,
                           Done& done, unsigned short, bool pred,
                           pred_mode mode) {
  load_span(dst, src, bytes, pred, mode);
}
FJ_DEV void store(void* dst, const void* src, unsigned bytes, bool pred) {
  __syncthreads();  // every thread's writes to src are in
  if (pred) detail::move_block(dst, src, bytes);
}
// Warp scope: the warp's lanes copy; the caller's barrier orders the rest.
FJ_DEV void load(warp_t, void* dst, const void* src, unsigned bytes, barrier&,
                 bool pred, pred_mode mode) {
  const detail::team tm = detail::warp_team();
  if (pred) {
    detail::move_block(dst, src, bytes, tm);
  } else if (mode == pred_zero) {
    detail::fill_block(dst, bytes, 0, tm);
  }
}

// ------------------------------------------------------------------ tiles
struct load_op {
  detail::u64 fill;
  unsigned eb;
  FJ_DEV void full(unsigned char* s, const unsigned char* g, unsigned w) {
    detail::move(s, g, w);
  }
  FJ_DEV void oob(unsigned char* s, unsigned w) { detail::put(s, fill, w); }
  FJ_DEV void part(unsigned char* s, const unsigned char* g, unsigned,
                   unsigned lo, unsigned hi, unsigned k) {
    detail::move_part(s, g, lo, hi, k, eb, fill);
  }
};

// Fast-path tile load (see detail::tile_fast), its common case
// (detail::plan_rows): a batch of independent 16-byte ld.global per
// thread, then their st.shared, so FJ_FAST_UNROLL loads per thread are in
// flight instead of one. Under a swizzle (SW) each chunk's SMEM offset goes
// through detail::swz. False when the box needs the chunk cursor.
template <bool SW>
FJ_DEV void load_rows_body(const detail::row_walk& w, unsigned char* smem,
                           const unsigned char* g, unsigned m) {
  unsigned s = w.s;
  unsigned k = 0;
  for (; k + FJ_FAST_UNROLL <= w.count; k += FJ_FAST_UNROLL) {
    uint4 v[FJ_FAST_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j)
      v[j] = detail::ld_global16(g + j * w.gstep);
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      const unsigned o = s + j * w.sstep;
      detail::st_shared16(smem + (SW ? detail::swz(o, m) : o), v[j]);
    }
    s += FJ_FAST_UNROLL * w.sstep;
    g += FJ_FAST_UNROLL * w.gstep;
  }
  // The rest (< FJ_FAST_UNROLL): half a batch, then one at a time. A
  // predicated last batch of FJ_FAST_UNROLL kept its loads in flight too,
  // but its registers added to the main batch's: ptxas -v (NVRTC 13,
  // sm_90) gave copy_bench's pipelined tile copy 168 registers and a
  // one-row RMSNorm 126; this rest gives 128 and 96.
  if (k + FJ_FAST_UNROLL / 2 <= w.count) {
    uint4 v[FJ_FAST_UNROLL / 2];
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL / 2; ++j)
      v[j] = detail::ld_global16(g + j * w.gstep);
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL / 2; ++j) {
      const unsigned o = s + j * w.sstep;
      detail::st_shared16(smem + (SW ? detail::swz(o, m) : o), v[j]);
    }
    s += FJ_FAST_UNROLL / 2 * w.sstep;
    g += FJ_FAST_UNROLL / 2 * w.gstep;
    k += FJ_FAST_UNROLL / 2;
  }
  for (; k < w.count; ++k, s += w.sstep, g += w.gstep)
    detail::st_shared16(smem + (SW ? detail::swz(s, m) : s),
                        detail::ld_global16(g));
}
template <int R>
FJ_DEV bool load_rows(unsigned char* smem, const tensor_param& p,
                      const coords& c, detail::team tm) {
  const detail::row_walk w = detail::plan_rows<R>(p, c, tm.rank, tm.size);
  if (!w.ok) return false;
  const unsigned char* g = (const unsigned char*)p.data + w.g;
  const unsigned m = detail::swz_mask(p);
  if (m != 0) {
    load_rows_body<true>(w, smem, g, m);
  } else {
    load_rows_body<false>(w, smem, g, 0);
  }
  return true;
}

// Narrow-path tile load (see detail::plan_narrow): a batch of 4- or 8-byte
// ld.global per thread (the fill for a chunk outside the tensor), then
// their st.shared.
template <class U>
FJ_DEV void load_narrow_body(detail::narrow_walk n, unsigned char* smem,
                             const unsigned char* g, unsigned m,
                             detail::u64 fill) {
  const detail::row_walk& w = n.w;
  unsigned s = w.s;
  unsigned k = 0;
  // Whole batches (no count test per chunk), then the rest.
  for (; k + FJ_FAST_UNROLL <= w.count; k += FJ_FAST_UNROLL) {
    U v[FJ_FAST_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      v[j] = (U)fill;
      if (n.inside(j)) v[j] = detail::ld_global_n<U>(g + j * w.gstep);
    }
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      *(U*)(smem + detail::swz(s + j * w.sstep, m)) = v[j];
    }
    s += FJ_FAST_UNROLL * w.sstep;
    g += FJ_FAST_UNROLL * w.gstep;
    n.advance(FJ_FAST_UNROLL);
  }
  if (k < w.count) {  // the rest: one predicated batch, its loads in flight
    U v[FJ_FAST_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      v[j] = (U)fill;
      if (k + j < w.count && n.inside(j))
        v[j] = detail::ld_global_n<U>(g + j * w.gstep);
    }
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      if (k + j < w.count) *(U*)(smem + detail::swz(s + j * w.sstep, m)) = v[j];
    }
  }
}
template <int R>
FJ_DEV bool load_narrow(unsigned char* smem, const tensor_param& p,
                        const coords& c, detail::team tm) {
  const detail::narrow_walk n =
      detail::plan_narrow<R>(p, c, smem, p.oob != oob_promise_in_bounds, tm);
  if (!n.w.ok) return false;
  const unsigned char* g = (const unsigned char*)p.data + n.w.g;
  const unsigned m = detail::swz_mask(p);
  const detail::u64 fill = detail::oob_fill_pattern(p);
  if (n.wb == 8) {
    load_narrow_body<detail::u64>(n, smem, g, m, fill);
  } else {
    load_narrow_body<unsigned>(n, smem, g, m, fill);
  }
  return true;
}

// The rest of a tile load: false predicates, fast-path boxes that need the
// chunk cursor (batches of FJ_SLOW_UNROLL loads per thread), and the
// walker. Not inlined: one copy per rank however many call sites (build
// time).
template <int R>
__device__ __noinline__ void load_tile_slow(void* dst, const tensor_param& p,
                                            coords c, bool pred, pred_mode mode,
                                            bool fast, detail::team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  // Under FJ_NARROW_INLINE the call site has tried the narrow path.
  if (!FJ_NARROW_INLINE && pred && !fast &&
      load_narrow<R>((unsigned char*)dst, p, c, tm))
    return;
  if (detail::load_tile_unusual<R, load_op>(dst, p, c, pred, mode, fast, tm))
    return;
  unsigned char* smem = (unsigned char*)dst;
  const unsigned char* base = (const unsigned char*)p.data;
  const unsigned n = tm.size, total = detail::fast_chunks<R>(p);
  const unsigned m = detail::swz_mask(p);
  unsigned i = tm.rank;
  detail::chunk_cursor<R> cur;
  cur.init(p, c, i, n);
  for (; i < total; i += FJ_SLOW_UNROLL * n) {
    uint4 v[FJ_SLOW_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_SLOW_UNROLL; ++j) {
      if (i + j * n < total) {
        v[j] = detail::ld_global16(base + cur.g);
        cur.next();
      }
    }
#pragma unroll
    for (int j = 0; j < FJ_SLOW_UNROLL; ++j) {
      if (i + j * n < total)
        detail::st_shared16(smem + detail::swz((i + j * n) * 16, m), v[j]);
    }
  }
}
#endif

// The common case is inlined at each call site. As a call, it cost the
// copy a stack frame per tile (the coords and saved registers in local
// memory, which the streaming loads evicted to L2: +16% L2 write sectors
// under Nsight Compute) and a tenth of its bandwidth on the H200 (sync
// 0.85x -> 0.93x of cuMemcpyDtoD, bench/copy_bench).
//
// FJ_SYNC_L2_FIRST=1 (an experiment, off by default; docs/copy-macros.md):
// the team first asks L2 for every line of the tile, then copies, so a
// warp-scope copy has the whole tile in flight rather than its lanes'
// batches (a producer warp's copy under sync is bound by that).
#ifndef FJ_SYNC_L2_FIRST
#define FJ_SYNC_L2_FIRST 0
#endif
template <int R>
FJ_DEV void issue_tile(void* dst, const tensor_param& p, const coords& c,
                       bool pred, pred_mode mode, detail::team tm) {
  if (FJ_SYNC_L2_FIRST && pred) detail::prefetch_tile_team<R>(p, c, tm);
  const bool fast = detail::load_fast<R>(p, c, dst, pred);
  if (fast && load_rows<R>((unsigned char*)dst, p, c, tm)) return;
#if FJ_NARROW_INLINE
  if (pred && !fast && load_narrow<R>((unsigned char*)dst, p, c, tm)) return;
#endif
  load_tile_slow<R>(dst, p, c, pred, mode, fast, tm);
}
template <int R>
FJ_DEV void load_tile_span(void* dst, const tensor_param& p, const coords& c,
                           bool pred, pred_mode mode) {
  __syncthreads();
  issue_tile<R>(dst, p, c, pred, mode, detail::block_team());
}
template <int R, class Done>
FJ_DEV void load_tile(void* dst, const tensor_param& p, const coords& c, Done&,
                      bool pred, pred_mode mode) {
  load_tile_span<R>(dst, p, c, pred, mode);
}
// Warp scope: the warp's lanes move the tile; no block barrier.
template <int R>
FJ_DEV void load_tile(warp_t, void* dst, const tensor_param& p, const coords& c,
                      barrier&, bool pred, pred_mode mode) {
  issue_tile<R>(dst, p, c, pred, mode, detail::warp_team());
}
// k tiles at cs(0..k-1), tile i at dst + i * box bytes (the block's or the
// warp's threads); they complete with the call. A tile that is not cs.ok (a
// gathered index outside the tensor) is the fill.
// A list of two or more tiles goes flat where it can (detail::flat_*):
// each thread loads FJ_FLAT_UNROLL chunks of any of the tiles, then stores
// them, so the list takes about one round trip per batch rather than one
// per tile; the tiles that cannot go flat follow, one by one (they are not
// fast-path tiles: the slow path, with the predicate true).
// FJ_FLAT_UNROLL (half FJ_FAST_UNROLL) per batch: each chunk finds its own
// tile (an index read, the bounds); bench/corpus moe_dispatch's PTX went
// 180 -> 229 KB with 4, 247 KB with 8 (NVRTC 13, sm_90).
// Inline: as a call (one per rank and index kind) it cost a third less
// PTX, but examples/paged_decode.cu (128 registers) spilled 4-8 bytes at
// it, however few its arguments. Only sync builds with bit 1 of
// FJ_FLAT_LISTS (off by default: common.cuh) carry it.
template <int R, class Coords>
FJ_DEV void load_list_flat(unsigned char* dst, const tensor_param& p,
                           const Coords& cs, int k, detail::team tm) {
  const detail::flat_shape f = detail::flat_shape_of<R>(p);
  const unsigned bb = detail::box_bytes(p, R), total = f.cpt * (unsigned)k;
  detail::flat_cursor at(f, tm.rank, tm.size);
  for (unsigned q = tm.rank; q < total; q += FJ_FLAT_UNROLL * tm.size) {
    const unsigned char* g[FJ_FLAT_UNROLL];
    unsigned so[FJ_FLAT_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FLAT_UNROLL; ++j) {
      g[j] = detail::flat_chunk<R>(p, cs, dst, f, bb, k, at, so[j]);
      at.next(f);
    }
    uint4 v[FJ_FLAT_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FLAT_UNROLL; ++j)
      if (g[j]) v[j] = detail::ld_global16(g[j]);
#pragma unroll
    for (int j = 0; j < FJ_FLAT_UNROLL; ++j)
      if (g[j]) detail::st_shared16(dst + so[j], v[j]);
  }
  detail::flat_rest<R>(dst, p, cs, k, tm,
                       [&](unsigned char* d, const coords& c) {
#if FJ_NARROW_INLINE
                         if (load_narrow<R>(d, p, c, tm)) return;
#endif
                         load_tile_slow<R>(d, p, c, true, pred_skip, false, tm);
                       });
}
template <int R, class Scope, class Coords, class Done>
FJ_DEV void load_tiles(Scope sc, void* dst, const tensor_param& p,
                       const Coords& cs, int k, Done&, bool pred,
                       pred_mode mode) {
  detail::enter_scope(sc);
#if (FJ_FLAT_LISTS & 1)  // (off: not even instantiated, so no PTX for it)
  if (pred && k > 1 && detail::flat_list_ok<R>(p)) {
    load_list_flat<R>((unsigned char*)dst, p, cs, k, detail::team_of(sc));
    return;
  }
#endif
  const unsigned bb = detail::box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    unsigned char* d = (unsigned char*)dst + (unsigned)i * bb;
    if (pred && !cs.ok(i)) {
      detail::fill_block(d, bb, detail::oob_fill_pattern(p),
                         detail::team_of(sc));
      continue;
    }
    issue_tile<R>(d, p, cs(i), pred, mode, detail::team_of(sc));
  }
}
template <int R, class Done>
FJ_DEV void load_tile_multicast(void* dst, const tensor_param& p,
                                const coords& c, Done&, unsigned short,
                                bool pred, pred_mode mode) {
  load_tile_span<R>(dst, p, c, pred, mode);
}
// Stores and prefetches: the software ones (common.cuh, soft_impl).
using soft_impl::prefetch_l2;
using soft_impl::prefetch_tensormap;
using soft_impl::prefetch_tile;
using soft_impl::store;
using soft_impl::store_tile;
using soft_impl::store_tiles;

}  // namespace sync_impl
}  // namespace fj

#endif  // FLEETJIT_COPY_SYNC_CUH_
