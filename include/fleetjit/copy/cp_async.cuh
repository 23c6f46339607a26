// fleetjit copy layer, implementation `cp_async` (FJ_COPY_IMPL=1): sm_80+.
//
// GMEM->SMEM copies are cp.async (4, 8 or 16 bytes per thread per
// instruction), split across the block's threads. They complete
//   - on an fj::barrier (an mbarrier) through cp.async.mbarrier.arrive, or
//   - in the open group, through cp.async.commit_group / wait_group.
// Native: barriers, groups, predicates (skip = no issue, zero = src-size 0),
// OOB zero fill (src-size clamped to the in-bounds bytes of a chunk).
// Emulated: tiles are walked in software; NaN fill is stored by threads;
// SMEM->GMEM is ld.shared + st.global (cp.async only goes GMEM->SMEM);
// multicast loads the tile in each block (cp.async cannot write another
// CTA's shared memory).
// The tma implementation reuses the issue functions here for the copies
// TMA cannot do (barrier-less loads, tensors without a tensor map).
// Internal to <fleetjit/copy.cuh>.
#ifndef FLEETJIT_COPY_CP_ASYNC_CUH_
#define FLEETJIT_COPY_CP_ASYNC_CUH_

#include <fleetjit/copy/common.cuh>

namespace fj {
namespace cp_async_impl {

// ---------------------------------------------------------------- barrier
FJ_DEV void barrier_init(barrier& b, unsigned count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(detail::smem_u32(&b)),
               "r"(count)
               : "memory");
#if __CUDA_ARCH__ >= 900
  // Make the initialised barrier visible to the async proxy and the cluster.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
FJ_DEV void arrive(barrier& b) {
  asm volatile(
      "{\n\t.reg .b64 st;\n\t"
      "mbarrier.arrive.shared.b64 st, [%0];\n\t}" ::"r"(detail::smem_u32(&b))
      : "memory");
}
// One arrival for a warp, by lane 0 once every lane got here (the lanes'
// copies are attached already; mbarrier.arrive releases at CTA scope).
FJ_DEV void arrive_warp(barrier& b) {
  __syncwarp();
  if (detail::lane_id() == 0) arrive(b);
}
FJ_DEV bool test(barrier& b, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(detail::smem_u32(&b)), "r"(parity & 1)
      : "memory");
  return done != 0;
}
FJ_DEV void wait(barrier& b, unsigned parity) {
#if __CUDA_ARCH__ >= 900
  // try_wait suspends in hardware for a while before returning false.
  unsigned done;
  do {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(detail::smem_u32(&b)), "r"(parity & 1)
        : "memory");
  } while (!done);
#else
  // mbarrier.try_wait is sm_90+; sm_80 polls test_wait.
  while (!test(b, parity)) __nanosleep(20);
#endif
}

// Makes this thread's earlier cp.asyncs complete on `b`'s current phase.
// Without .noinc the pending count is raised by one first, so this is not
// an arrival of its own: the thread still arrives with barrier::arrive().
FJ_DEV void attach(barrier& b) {
#ifdef FJ_COPY_HOST_EMULATION
  fj_host_attach(&b);  // test seam
#else
  asm volatile(
      "cp.async.mbarrier.arrive.shared.b64 [%0];" ::"r"(detail::smem_u32(&b))
      : "memory");
#endif
}
FJ_DEV void attach(in_group_t) {}

// ----------------------------------------------------------------- groups
// cp.async groups are per thread; every thread commits and waits, and the
// block barrier then publishes each thread's part to the others.
FJ_DEV void commit_group() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
FJ_DEV void wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  __syncthreads();
}
// A store here is the threads' ld.shared + st.global: once every thread
// is past the barrier, the stores have read their SMEM. No cp.async wait:
// it would also wait for the loads in flight on barriers
// (FJ_WAIT_READ_LOADS, common.cuh).
template <int N>
FJ_DEV void wait_group_read() {
#if FJ_WAIT_READ_LOADS
  wait_group<N>();
#else
  __syncthreads();
#endif
}
FJ_DEV void commit_group(warp_t) { commit_group(); }
template <int N>
FJ_DEV void wait_group(warp_t) {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  __syncwarp();
}
template <int N>
FJ_DEV void wait_group_read(warp_t w) {
#if FJ_WAIT_READ_LOADS
  cp_async_impl::wait_group<N>(w);
#else
  __syncwarp();
#endif
}

// One cp.async of `w` bytes (4, 8 or 16): the first `src_bytes` come from
// GMEM, the rest of the chunk is zero-filled (src_bytes = 0 reads nothing).
FJ_DEV void cp_async(void* s, const void* g, unsigned w, unsigned src_bytes) {
#ifdef FJ_COPY_HOST_EMULATION
  // Test seam: tests/jit/copy_emulation_test.cc runs the software copy
  // paths on the CPU and checks each cp.async it would issue.
  fj_host_cp_async(s, g, w, src_bytes);
  return;
#endif
  const unsigned sa = detail::smem_u32(s);
  if (w == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(sa),
                 "l"(g), "r"(src_bytes)
                 : "memory");
  } else if (w == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(sa),
                 "l"(g), "r"(src_bytes)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(sa),
                 "l"(g), "r"(src_bytes)
                 : "memory");
  }
}

// ------------------------------------------------------------ contiguous
// Issues this thread's share of a span copy (no block barrier, no attach).
FJ_DEV void issue_span(void* dst, const void* src, unsigned bytes, bool pred,
                       pred_mode mode, detail::team tm = detail::block_team()) {
  if (!pred && mode == pred_skip) return;
  const detail::span_split sp = detail::split_span(dst, src, bytes);
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  if (sp.w < 4) {  // no common 4-byte alignment: cp.async cannot help
    if (pred) {
      detail::move_block(d, s, bytes, tm);
    } else {
      detail::zero_bytes(d, bytes, tm);
    }
    return;
  }
  const unsigned t = tm.rank, n = tm.size;
  for (unsigned i = sp.head + t * sp.w; i < sp.head + sp.body; i += n * sp.w)
    cp_async(d + i, s + i, sp.w, pred ? sp.w : 0);
  const unsigned tail = sp.head + sp.body;
  if (pred) {
    detail::move_bytes(d, s, sp.head, tm);
    detail::move_bytes(d + tail, s + tail, sp.tail, tm);
  } else {
    detail::zero_bytes(d, sp.head, tm);
    detail::zero_bytes(d + tail, sp.tail, tm);
  }
}
template <class Done>
FJ_DEV void load(void* dst, const void* src, unsigned bytes, Done& done,
                 bool pred, pred_mode mode) {
  __syncthreads();  // every thread is done with dst's old contents
  issue_span(dst, src, bytes, pred, mode);
  attach(done);
}
template <class Done>
FJ_DEV void load_multicast(void* dst, const void* src, unsigned bytes,
                           Done& done, unsigned short, bool pred,
                           pred_mode mode) {
  load(dst, src, bytes, done, pred, mode);
}
// Warp scope: the lanes split the span; each attaches its cp.asyncs.
FJ_DEV void load(warp_t, void* dst, const void* src, unsigned bytes, barrier& b,
                 bool pred, pred_mode mode) {
  __syncwarp();
  issue_span(dst, src, bytes, pred, mode, detail::warp_team());
  attach(b);
}
// cp.async has no SMEM->GMEM direction: threads store directly.
FJ_DEV void store(void* dst, const void* src, unsigned bytes, bool pred) {
  __syncthreads();
  if (pred) detail::move_block(dst, src, bytes);
}

// ------------------------------------------------------------------ tiles
// In-bounds chunks are cp.async; a chunk cut by the tensor's end keeps its
// in-bounds prefix and zero-fills the rest through src-size; other partial
// chunks and NaN fill are stored by the thread (cp.async only fills zeros).
struct load_op {
  detail::u64 fill;
  unsigned eb;
  FJ_DEV void full(unsigned char* s, const unsigned char* g, unsigned w) {
    if (w >= 4) {
      cp_async(s, g, w, w);
    } else {
      detail::move(s, g, w);
    }
  }
  FJ_DEV void oob(unsigned char* s, unsigned w) { detail::put(s, fill, w); }
  FJ_DEV void part(unsigned char* s, const unsigned char* g, unsigned w,
                   unsigned lo, unsigned hi, unsigned k) {
    if (lo == 0 && fill == 0 && w >= 4) {
      cp_async(s, g, w, hi * eb);
      return;
    }
    detail::move_part(s, g, lo, hi, k, eb, fill);
  }
};

// Fast-path tile load (see detail::tile_fast), its common case
// (detail::plan_rows): one cp.async.cg of 16 bytes per chunk, each address
// one add from the last. False when the box needs the chunk cursor.
// Under a swizzle (SW) each chunk's SMEM offset goes through detail::swz.
template <bool SW>
FJ_DEV void issue_rows_body(const detail::row_walk& w, unsigned char* smem,
                            const unsigned char* g, unsigned m) {
  unsigned s = w.s;
  unsigned k = 0;
  for (; k + 4 <= w.count; k += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned o = s + j * w.sstep;
      cp_async(smem + (SW ? detail::swz(o, m) : o), g + j * w.gstep, 16, 16);
    }
    s += 4 * w.sstep;
    g += 4 * w.gstep;
  }
  for (; k < w.count; ++k, s += w.sstep, g += w.gstep)
    cp_async(smem + (SW ? detail::swz(s, m) : s), g, 16, 16);
}
template <int R>
FJ_DEV bool issue_rows(unsigned char* smem, const tensor_param& p,
                       const coords& c, detail::team tm) {
  const detail::row_walk w = detail::plan_rows<R>(p, c, tm.rank, tm.size);
  if (!w.ok) return false;
  const unsigned char* g = (const unsigned char*)p.data + w.g;
  const unsigned m = detail::swz_mask(p);
  if (m != 0) {
    issue_rows_body<true>(w, smem, g, m);
  } else {
    issue_rows_body<false>(w, smem, g, 0);
  }
  return true;
}

// Narrow-path tile load (see detail::plan_narrow): one cp.async of W = 4
// or 8 bytes per chunk, each address one add from the last; a chunk outside
// the tensor is the fill, stored by the thread. W is a template argument,
// so a chunk costs no width branch. (The swizzle as one too cost 11-20 %
// more build time of every kernel on the layer, nvcc 13, sm_90.)
template <unsigned W>
FJ_DEV void issue_narrow_body(detail::narrow_walk n, unsigned char* smem,
                              const unsigned char* g, unsigned m,
                              detail::u64 fill) {
  const detail::row_walk& w = n.w;
  unsigned s = w.s;
  unsigned k = 0;
  // Whole batches of 4, then the rest one at a time (no count test per
  // chunk), as issue_rows_body.
  for (; k + 4 <= w.count; k += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned char* d = smem + detail::swz(s + j * w.sstep, m);
      if (n.inside(j)) {
        cp_async(d, g + j * w.gstep, W, W);
      } else {
        detail::put(d, fill, W);
      }
    }
    s += 4 * w.sstep;
    g += 4 * w.gstep;
    n.advance(4);
  }
  for (; k < w.count; ++k, s += w.sstep, g += w.gstep, n.advance(1)) {
    unsigned char* d = smem + detail::swz(s, m);
    if (n.inside(0)) {
      cp_async(d, g, W, W);
    } else {
      detail::put(d, fill, W);
    }
  }
}
template <int R>
FJ_DEV bool issue_narrow(unsigned char* smem, const tensor_param& p,
                         const coords& c, detail::team tm) {
  const detail::narrow_walk n =
      detail::plan_narrow<R>(p, c, smem, p.oob != oob_promise_in_bounds, tm);
  if (!n.w.ok) return false;
  const unsigned char* g = (const unsigned char*)p.data + n.w.g;
  const unsigned m = detail::swz_mask(p);
  const detail::u64 fill = detail::oob_fill_pattern(p);
  if (n.wb == 8) {
    issue_narrow_body<8>(n, smem, g, m, fill);
  } else {
    issue_narrow_body<4>(n, smem, g, m, fill);
  }
  return true;
}

// The rest of a tile load: false predicates, fast-path boxes that need the
// chunk cursor (addresses without the walker's divisions), and the walker.
// Not inlined: one copy per rank however many call sites (build time).
template <int R>
__device__ __noinline__ void issue_tile_slow(void* dst, const tensor_param& p,
                                             coords c, bool pred,
                                             pred_mode mode, bool fast,
                                             detail::team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  // Under FJ_NARROW_INLINE the call site has tried the narrow path.
  if (!FJ_NARROW_INLINE && pred && !fast &&
      issue_narrow<R>((unsigned char*)dst, p, c, tm))
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
#pragma unroll 4
  for (; i < total; i += n) {
    cp_async(smem + detail::swz(i * 16, m), base + cur.g, 16, 16);
    cur.next();
  }
}
#endif
// The common case is inlined at each call site (as a call it cost a stack
// frame per tile in local memory; see sync.cuh's load_tile_span).
template <int R>
FJ_DEV void issue_tile(void* dst, const tensor_param& p, const coords& c,
                       bool pred, pred_mode mode,
                       detail::team tm = detail::block_team()) {
  const bool fast = detail::load_fast<R>(p, c, dst, pred);
  if (fast && issue_rows<R>((unsigned char*)dst, p, c, tm)) return;
#if FJ_NARROW_INLINE
  if (pred && !fast && issue_narrow<R>((unsigned char*)dst, p, c, tm)) return;
#endif
  issue_tile_slow<R>(dst, p, c, pred, mode, fast, tm);
}
template <int R, class Done>
FJ_DEV void load_tile(void* dst, const tensor_param& p, const coords& c,
                      Done& done, bool pred, pred_mode mode) {
  __syncthreads();
  issue_tile<R>(dst, p, c, pred, mode);
  attach(done);
}
template <int R, class Done>
FJ_DEV void load_tile_multicast(void* dst, const tensor_param& p,
                                const coords& c, Done& done, unsigned short,
                                bool pred, pred_mode mode) {
  load_tile<R>(dst, p, c, done, pred, mode);
}
// Warp scope: the lanes split the tile; each attaches its cp.asyncs to
// `b` (net zero on the pending count: the producer still arrives).
template <int R>
FJ_DEV void load_tile(warp_t, void* dst, const tensor_param& p, const coords& c,
                      barrier& b, bool pred, pred_mode mode) {
  __syncwarp();
  issue_tile<R>(dst, p, c, pred, mode, detail::warp_team());
  attach(b);
}
// k tiles at cs(0..k-1), tile i at dst + i * box bytes, all on `done`. A
// tile that is not cs.ok (a gathered index outside the tensor) is the
// fill, stored by the threads.
// A list of two or more tiles smaller than the team (fewer 16-byte chunks
// than threads: a 128-byte row gathered by a block) goes flat where it can
// (detail::flat_*): the team's threads issue the chunks of all its
// tiles together, rather than each tile's few chunks by a few threads in
// turn; the tiles that cannot go flat follow, one by one. A larger tile
// already keeps every thread issuing, more cheaply (the row walk has no
// division per chunk), so it keeps the per-tile loop. Not inlined: one copy
// per rank and index kind, however many call sites (build time). On by
// default (bit 2 of FJ_FLAT_LISTS, common.cuh): it adds 1,200-1,300 PTX
// lines (16-20 %) to a gathering kernel (bench/corpus moe_dispatch,
// rope_gather) and lifted rope_gather 0.51 -> 0.64 of its plain twin on an
// H100. tma's FJ_TMA_SMALL_TILES uses it for the small tiles of a list.
template <int R, class Coords>
__device__ __noinline__ void issue_list_flat(unsigned char* dst,
                                             const tensor_param& p, Coords cs,
                                             int k, detail::team tm) {
  const detail::flat_shape f = detail::flat_shape_of<R>(p);
  const unsigned bb = detail::box_bytes(p, R), total = f.cpt * (unsigned)k;
  detail::flat_cursor at(f, tm.rank, tm.size);
#pragma unroll 4
  for (unsigned q = tm.rank; q < total; q += tm.size, at.next(f)) {
    unsigned so;
    if (const unsigned char* g =
            detail::flat_chunk<R>(p, cs, dst, f, bb, k, at, so))
      cp_async(dst + so, g, 16, 16);
  }
  // The rest are not fast-path tiles (flat_list_ok held for the list).
  detail::flat_rest<R>(
      dst, p, cs, k, tm, [&](unsigned char* d, const coords& c) {
#if FJ_NARROW_INLINE
        if (issue_narrow<R>(d, p, c, tm)) return;
#endif
        issue_tile_slow<R>(d, p, c, true, pred_skip, false, tm);
      });
}
template <int R, class Scope, class Coords, class Done>
FJ_DEV void load_tiles(Scope sc, void* dst, const tensor_param& p,
                       const Coords& cs, int k, Done& done, bool pred,
                       pred_mode mode) {
  detail::enter_scope(sc);
#if (FJ_FLAT_LISTS & 2)  // (off: not even instantiated, so no PTX for it)
  if (pred && k > 1 &&
      detail::flat_shape_of<R>(p).cpt < detail::team_of(sc).size &&
      detail::flat_list_ok<R>(p)) {
    issue_list_flat<R, Coords>((unsigned char*)dst, p, cs, k,
                               detail::team_of(sc));
    attach(done);
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
  attach(done);
}
// Stores and prefetches: the software ones (common.cuh, soft_impl).
using soft_impl::prefetch_l2;
using soft_impl::prefetch_tensormap;
using soft_impl::prefetch_tile;
using soft_impl::store;
using soft_impl::store_tile;
using soft_impl::store_tiles;

}  // namespace cp_async_impl
}  // namespace fj

#endif  // FLEETJIT_COPY_CP_ASYNC_CUH_
