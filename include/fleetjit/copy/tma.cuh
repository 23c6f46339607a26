// fleetjit copy layer, implementation `tma` (FJ_COPY_IMPL=2): sm_90+.
//
// One thread of the block (thread rank 0) issues the copy engine's bulk and
// tensor copies; loads complete on an mbarrier through expect_tx +
// complete_tx, stores in bulk groups. Native: barriers, contiguous copies
// (cp.async.bulk), tile loads and stores through the tensor map (hardware
// OOB zero/NaN fill), cluster multicast, L2 prefetch of spans and tiles.
// Where TMA cannot do a copy, the cp_async issue path (sm_90 keeps cp.async)
// does it with the same semantics:
//   - loads without a barrier: TMA loads complete only on an mbarrier, and
//     emulating groups with a ring of mbarriers would need hidden shared
//     state and an init call, so barrier-less loads are cp.async and the
//     group wait is cp.async.wait_group (+ cp.async.bulk.wait_group for the
//     bulk stores of the same group);
//   - tensors without a tensor map (FJ_TP_HAS_TMAP clear: the host could
//     not encode one), SMEM tiles not 128-byte aligned, and fp8 under
//     oob_nan (a CUtensorMap has no fp8 type, so no NaN fill for it);
//   - spans whose SMEM and GMEM addresses differ modulo 16 (bulk copies
//     need 16-byte alignment), and the unaligned ends of the others;
//   - a false predicate under pred_zero: threads store the zeros.
// Internal to <fleetjit/copy.cuh>.
#ifndef FLEETJIT_COPY_TMA_CUH_
#define FLEETJIT_COPY_TMA_CUH_

#include <fleetjit/copy/common.cuh>
#include <fleetjit/copy/cp_async.cuh>

// Hardware multicast where it is fast: sm_90 (H100/H200) and the
// arch/family-specific datacenter Blackwell targets. ptxas accepts
// .multicast::cluster on any sm_90+ target but warns that it may be slow on
// other architectures (sm_100/sm_120 generic code may run on consumer
// Blackwell), so there each block loads the tile itself. Override with
// -DFJ_COPY_MULTICAST=0|1.
#ifndef FJ_COPY_MULTICAST
#if defined(__CUDA_ARCH__) &&                                           \
    (__CUDA_ARCH__ == 900 || (defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && \
                              (__CUDA_ARCH_FAMILY_SPECIFIC__ == 1000 || \
                               __CUDA_ARCH_FAMILY_SPECIFIC__ == 1030 || \
                               __CUDA_ARCH_FAMILY_SPECIFIC__ == 1100)))
#define FJ_COPY_MULTICAST 1
#else
#define FJ_COPY_MULTICAST 0
#endif
#endif

namespace fj {
namespace tma_impl {

namespace cpa = cp_async_impl;

// ---------------------------------------------------------------- barrier
// The same mbarrier as cp_async (try_wait on sm_90+), plus expect_tx.
using cpa::arrive;
using cpa::arrive_warp;
using cpa::barrier_init;
using cpa::test;
using cpa::wait;

FJ_DEV bool leader() { return detail::thread_rank() == 0; }

// Raises the current phase's transaction count by `bytes`. Called by the
// issuing thread before it arrives, so the phase cannot complete before the
// copy's complete_tx (which may land before this: the count goes negative).
FJ_DEV void expect_tx(barrier& b, unsigned bytes) {
#ifdef FJ_COPY_HOST_EMULATION
  fj_host_expect_tx(&b, bytes);  // test seam (tests/jit/copy_emulation_test)
#else
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(
                   detail::smem_u32(&b)),
               "r"(bytes)
               : "memory");
#endif
}

// Every load and store starts here: SMEM written by ordinary stores (any
// thread) is ordered before the copy engine's accesses, which the leader
// issues after the barrier.
FJ_DEV void fence_proxy() {
#ifndef FJ_COPY_HOST_EMULATION
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
FJ_DEV void enter() {
  fence_proxy();
  __syncthreads();
}
// A warp-scope call: the warp's own SMEM writes are ordered before its
// copies (other warps' writes are ordered by the caller's barrier, after
// they called fj::fence_async()).
FJ_DEV void enter(warp_t) {
  fence_proxy();
  __syncwarp();
}
FJ_DEV void enter(block_t) { enter(); }

// ----------------------------------------------------------------- groups
// Loads in a group are cp.async (see the top); stores are bulk copies in
// the leader's bulk groups. Every commit closes one of each, so the two
// counts stay equal and "at most N in flight" means the same for both.
FJ_DEV void commit_group() {
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (leader()) asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
FJ_DEV void wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  if (leader())
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
  __syncthreads();
}
// Like wait_group, but a store only needs to have read its SMEM source: a
// bulk store its bulk group's .read, a store by the threads the barrier.
// cp.asyncs are loads only: not waited for (FJ_WAIT_READ_LOADS, common.cuh).
template <int N>
FJ_DEV void wait_group_read() {
#if FJ_WAIT_READ_LOADS
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
  if (leader())
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
  __syncthreads();
}
// Warp scope: lane 0 issues the warp's bulk stores, so it commits and
// waits on them; the others only have cp.async groups.
FJ_DEV void commit_group(warp_t) {
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (detail::lane_id() == 0)
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
template <int N>
FJ_DEV void wait_group(warp_t) {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
  if (detail::lane_id() == 0)
    asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
  __syncwarp();
}
template <int N>
FJ_DEV void wait_group_read(warp_t) {
#if FJ_WAIT_READ_LOADS
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
  if (detail::lane_id() == 0)
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
  __syncwarp();
}

// ------------------------------------------------------------ contiguous
FJ_DEV void bulk_load(void* dst, const void* src, unsigned bytes, barrier& b) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];" ::"r"(detail::smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(detail::smem_u32(&b))
      : "memory");
}
FJ_DEV void bulk_load_multicast(void* dst, const void* src, unsigned bytes,
                                barrier& b, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(
          detail::smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(detail::smem_u32(&b)), "h"(mask)
      : "memory");
}

// The CTAs of `mask` (limited to the cluster) that a multicast reaches, or
// 0 when this block should load for itself: no multicast on this target,
// no cluster, or this block not in the mask.
FJ_DEV unsigned short multicast_peers(unsigned short mask) {
#if FJ_COPY_MULTICAST
  const unsigned n = detail::cluster_size(), r = detail::cluster_rank();
  const unsigned m = mask & (n >= 16 ? 0xFFFFu : (1u << n) - 1);
  if (((m >> r) & 1) == 0 || (m & ~(1u << r)) == 0) return 0;
  return (unsigned short)m;
#else
  return 0;
#endif
}
FJ_DEV bool is_multicast_issuer(unsigned short m) {
  return detail::cluster_rank() == (unsigned)(__ffs(m) - 1);
}

// Span load on a barrier. The 16-byte-aligned body is one bulk copy with
// its bytes expected on `b`; the ends go through threads' stores.
// `mask` != 0 multicasts the body to those CTAs (each expects it itself).
// Inline, except in the slow-path library's route (FJ_SLOW_PATHS_EXTERN,
// docs/slow-path-library.md), where it is one of the library's functions:
// its ends and fallbacks, inlined at each call site, were most of a row
// kernel's own code (examples/rmsnorm.cu's entry: 2,196 PTX lines, 862).
#if defined(FJ_SLOW_PATHS_EXTERN) || defined(FJ_SLOW_PATHS_LIBRARY)
#define FJ_SPAN_DEV __device__ __noinline__
#else
#define FJ_SPAN_DEV FJ_DEV
#endif
FJ_SPAN_DEV void load_span_bar(void* dst, const void* src, unsigned bytes,
                               barrier& b, unsigned short mask, bool pred,
                               pred_mode mode)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  enter();
  const detail::span_split sp = detail::split_span(dst, src, bytes);
  if (sp.w < 16 || sp.body == 0) {
    cpa::issue_span(dst, src, bytes, pred, mode);
    cpa::attach(b);
    return;
  }
  if (!pred) {
    if (mode == pred_zero) detail::fill_block(dst, bytes, 0);
    return;
  }
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  if (leader()) {
    expect_tx(b, sp.body);
    if (mask == 0) {
      bulk_load(d + sp.head, s + sp.head, sp.body, b);
    } else if (is_multicast_issuer(mask)) {
      bulk_load_multicast(d + sp.head, s + sp.head, sp.body, b, mask);
    }
  }
  const unsigned tail = sp.head + sp.body;
  detail::move_bytes(d, s, sp.head);
  detail::move_bytes(d + tail, s + tail, sp.tail);
}
#endif
#undef FJ_SPAN_DEV
FJ_DEV void load(void* dst, const void* src, unsigned bytes, barrier& b,
                 bool pred, pred_mode mode) {
  load_span_bar(dst, src, bytes, b, 0, pred, mode);
}
FJ_DEV void load(void* dst, const void* src, unsigned bytes, in_group_t,
                 bool pred, pred_mode mode) {
  enter();
  cpa::issue_span(dst, src, bytes, pred, mode);
}
FJ_DEV void load_multicast(void* dst, const void* src, unsigned bytes,
                           barrier& b, unsigned short mask, bool pred,
                           pred_mode mode) {
  load_span_bar(dst, src, bytes, b, multicast_peers(mask), pred, mode);
}
FJ_DEV void load_multicast(void* dst, const void* src, unsigned bytes,
                           in_group_t g, unsigned short, bool pred,
                           pred_mode mode) {
  load(dst, src, bytes, g, pred, mode);
}

// Warp scope: lane 0 issues the bulk body, the lanes move the ends.
FJ_DEV void load(warp_t, void* dst, const void* src, unsigned bytes, barrier& b,
                 bool pred, pred_mode mode) {
  enter(warp);
  const detail::team tm = detail::warp_team();
  const detail::span_split sp = detail::split_span(dst, src, bytes);
  if (sp.w < 16 || sp.body == 0) {
    cpa::issue_span(dst, src, bytes, pred, mode, tm);
    cpa::attach(b);
    return;
  }
  if (!pred) {
    if (mode == pred_zero) detail::fill_block(dst, bytes, 0, tm);
    return;
  }
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  if (tm.rank == 0) {
    expect_tx(b, sp.body);
    bulk_load(d + sp.head, s + sp.head, sp.body, b);
  }
  const unsigned tail = sp.head + sp.body;
  detail::move_bytes(d, s, sp.head, tm);
  detail::move_bytes(d + tail, s + tail, sp.tail, tm);
}
FJ_DEV void store(warp_t, void* dst, const void* src, unsigned bytes,
                  bool pred) {
  enter(warp);
  if (!pred) return;
  const detail::team tm = detail::warp_team();
  const detail::span_split sp = detail::split_span(dst, src, bytes);
  if (sp.w < 16 || sp.body == 0) {
    detail::move_block(dst, src, bytes, tm);
    return;
  }
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  if (tm.rank == 0) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
            d + sp.head),
        "r"(detail::smem_u32(s + sp.head)), "r"(sp.body)
        : "memory");
  }
  const unsigned tail = sp.head + sp.body;
  detail::move_bytes(d, s, sp.head, tm);
  detail::move_bytes(d + tail, s + tail, sp.tail, tm);
}

FJ_DEV void store(void* dst, const void* src, unsigned bytes, bool pred) {
  enter();
  if (!pred) return;
  const detail::span_split sp = detail::split_span(dst, src, bytes);
  if (sp.w < 16 || sp.body == 0) {
    detail::move_block(dst, src, bytes);
    return;
  }
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  if (leader()) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
            d + sp.head),
        "r"(detail::smem_u32(s + sp.head)), "r"(sp.body)
        : "memory");
  }
  const unsigned tail = sp.head + sp.body;
  detail::move_bytes(d, s, sp.head);
  detail::move_bytes(d + tail, s + tail, sp.tail);
}

// ------------------------------------------------------------------ tiles
// Whether this tile copy can go through the tensor map.
// Emulation (FJ_TMA_ANY_START=0, the default): a tile-mode tensor copy whose
// innermost start coordinate is not 16-byte aligned (c0 * elem_bytes % 16
// != 0) faulted on the H200 with an illegal instruction (measured in
// November, tests/jit/tma_tile_test.cc), so such tiles take the cp.async
// path instead. The PTX ISA allows any signed start coordinate; build with
// -DFJ_TMA_ANY_START=1 to send them through TMA (tma_tile_test's
// "any_start" variants check that build on the GPU).
#ifndef FJ_TMA_ANY_START
#define FJ_TMA_ANY_START 0
#endif
FJ_DEV bool tmap_coords_ok(const tensor_param& p, const coords& c) {
#if FJ_TMA_ANY_START
  return true;
#else
  return ((long long)c.v[0] * p.elem_bytes) % 16 == 0;
#endif
}
// Emulation (FJ_TMA_EDGE_STORE=0, the default): tile stores through the
// tensor map faulted on the H200 for tiles that leave the tensor (measured
// by the conformance matrix, e.g. a bf16 rank-1 store at the ragged end),
// so only tiles wholly inside it use TMA; edge tiles take the clipped
// thread store. The PTX ISA clips tensor stores at the bounds;
// -DFJ_TMA_EDGE_STORE=1 sends edge tiles through TMA.
#ifndef FJ_TMA_EDGE_STORE
#define FJ_TMA_EDGE_STORE 0
#endif
template <int R>
FJ_DEV bool tile_inside(const tensor_param& p, const coords& c) {
#if FJ_TMA_EDGE_STORE
  return true;
#else
  return detail::box_inside<R>(p, c);
#endif
}
// SMEM alignment a tensor copy needs: 128 bytes, or the swizzle pattern's
// repeat (256/512/1024 bytes) so that the pattern matches the software one.
FJ_DEV unsigned tmap_smem_align(const tensor_param& p) {
  const unsigned m = p.swizzle & 3u;
  return m == 0 ? 128u : (128u << m);
}
FJ_DEV bool use_tmap(const tensor_param& p, const void* smem, const coords& c) {
  return (p.flags & FJ_TP_HAS_TMAP) != 0 &&
         (detail::addr(smem) & (tmap_smem_align(p) - 1)) == 0 &&
         tmap_coords_ok(p, c) &&
         !(p.oob == oob_nan &&
           (p.dtype == dtype_f8e4m3 || p.dtype == dtype_f8e5m2));
}

// The tensor instructions, one per rank. `m` (a generic address of the
// __grid_constant__ parameter's tmap field) names the CUtensorMap. The
// rank is chosen with FJ_IF_CONSTEXPR, so only its asm is instantiated.
template <int R>
FJ_DEV void tensor_load(unsigned s, const void* m, const coords& c,
                        unsigned b) {
#ifdef FJ_COPY_HOST_EMULATION
  fj_host_tensor_load(s, m, c.v, R, b);  // test seam
  return;
#endif
#define FJ_TL(D)            \
  "cp.async.bulk.tensor." D \
  ".shared::cluster.global.tile.mbarrier::complete_tx::bytes "
  const int* v = c.v;
  FJ_IF_CONSTEXPR(R == 1) {
    asm volatile(FJ_TL("1d") "[%0], [%1, {%2}], [%3];" ::"r"(s), "l"(m),
                 "r"(v[0]), "r"(b)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 2) {
    asm volatile(FJ_TL("2d") "[%0], [%1, {%2, %3}], [%4];" ::"r"(s), "l"(m),
                 "r"(v[0]), "r"(v[1]), "r"(b)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 3) {
    asm volatile(FJ_TL("3d") "[%0], [%1, {%2, %3, %4}], [%5];" ::"r"(s), "l"(m),
                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(b)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 4) {
    asm volatile(FJ_TL("4d") "[%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(s),
                 "l"(m), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(b)
                 : "memory");
  }
  else {
    asm volatile(FJ_TL("5d") "[%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(s),
                 "l"(m), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]),
                 "r"(b)
                 : "memory");
  }
#undef FJ_TL
}

template <int R>
FJ_DEV void tensor_load_multicast(unsigned s, const void* m, const coords& c,
                                  unsigned b, unsigned short k) {
#ifdef FJ_COPY_HOST_EMULATION
  fj_host_tensor_load(s, m, c.v, R, b);  // test seam
  return;
#endif
#define FJ_TM(D)                 \
  "cp.async.bulk.tensor." D      \
  ".shared::cluster.global.tile" \
  ".mbarrier::complete_tx::bytes.multicast::cluster "
  const int* v = c.v;
  FJ_IF_CONSTEXPR(R == 1) {
    asm volatile(FJ_TM("1d") "[%0], [%1, {%2}], [%3], %4;" ::"r"(s), "l"(m),
                 "r"(v[0]), "r"(b), "h"(k)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 2) {
    asm volatile(FJ_TM("2d") "[%0], [%1, {%2, %3}], [%4], %5;" ::"r"(s), "l"(m),
                 "r"(v[0]), "r"(v[1]), "r"(b), "h"(k)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 3) {
    asm volatile(FJ_TM("3d") "[%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(s),
                 "l"(m), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(b), "h"(k)
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 4) {
    asm volatile(FJ_TM("4d") "[%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(s),
                 "l"(m), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(b),
                 "h"(k)
                 : "memory");
  }
  else {
    asm volatile(
        FJ_TM("5d") "[%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;" ::"r"(s),
        "l"(m), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4]), "r"(b),
        "h"(k)
        : "memory");
  }
#undef FJ_TM
}

template <int R>
FJ_DEV void tensor_store(const void* m, const coords& c, unsigned s) {
#ifdef FJ_COPY_HOST_EMULATION
  fj_host_tensor_store(m, c.v, R, s);  // test seam
  return;
#endif
#define FJ_TS(D) \
  "cp.async.bulk.tensor." D ".global.shared::cta.tile.bulk_group "
  const int* v = c.v;
  FJ_IF_CONSTEXPR(R == 1) {
    asm volatile(FJ_TS("1d") "[%0, {%2}], [%1];" ::"l"(m), "r"(s), "r"(v[0])
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 2) {
    asm volatile(FJ_TS("2d") "[%0, {%2, %3}], [%1];" ::"l"(m), "r"(s),
                 "r"(v[0]), "r"(v[1])
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 3) {
    asm volatile(FJ_TS("3d") "[%0, {%2, %3, %4}], [%1];" ::"l"(m), "r"(s),
                 "r"(v[0]), "r"(v[1]), "r"(v[2])
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 4) {
    asm volatile(FJ_TS("4d") "[%0, {%2, %3, %4, %5}], [%1];" ::"l"(m), "r"(s),
                 "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
  }
  else {
    asm volatile(FJ_TS("5d") "[%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(m),
                 "r"(s), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4])
                 : "memory");
  }
#undef FJ_TS
}

template <int R>
FJ_DEV void tensor_prefetch(const void* m, const coords& c) {
#define FJ_TP(D) "cp.async.bulk.prefetch.tensor." D ".L2.global.tile "
  const int* v = c.v;
  FJ_IF_CONSTEXPR(R == 1) {
    asm volatile(FJ_TP("1d") "[%0, {%1}];" ::"l"(m), "r"(v[0]) : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 2) {
    asm volatile(FJ_TP("2d") "[%0, {%1, %2}];" ::"l"(m), "r"(v[0]), "r"(v[1])
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 3) {
    asm volatile(FJ_TP("3d") "[%0, {%1, %2, %3}];" ::"l"(m), "r"(v[0]),
                 "r"(v[1]), "r"(v[2])
                 : "memory");
  }
  else FJ_IF_CONSTEXPR(R == 4) {
    asm volatile(FJ_TP("4d") "[%0, {%1, %2, %3, %4}];" ::"l"(m), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
  }
  else {
    asm volatile(FJ_TP("5d") "[%0, {%1, %2, %3, %4, %5}];" ::"l"(m), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3]), "r"(v[4])
                 : "memory");
  }
#undef FJ_TP
}

// Small tiles (FJ_TMA_SMALL_TILES, bytes; 0 = off): a list or gather of
// tiles of at most that many bytes goes as the team's cp.async over the
// whole list (cp_async's issue_list_flat) rather than one tensor copy per
// tile. 1024 by default: on an H100 it lifted bench/corpus rope_gather
// (gathered 128-byte cos/sin rows) 0.26 -> 0.50 of its plain twin and moved
// every other corpus case by -0.005 to +0.013
// (bench/results/2026-12-07-h100-layer-corpus-cf9063b.txt); a gathering
// kernel's PTX grows by about 790 lines.
#ifndef FJ_TMA_SMALL_TILES
#define FJ_TMA_SMALL_TILES 1024
#endif
// Rows by bulk copy (FJ_TMA_BULK_ROWS=1, an experiment, off by default;
// docs/copy-macros.md): a tile wholly inside the tensor whose rows are
// 16-byte aligned whole 16-byte multiples, unswizzled, goes as 1-D bulk
// copies (cp.async.bulk), one per row or one for the whole tile when its
// rows are adjacent in GMEM, where that is no more copies than the tensor
// map's pieces: a gathered row of 4096 bf16 is one bulk copy rather than 16
// tensor copies of 256 elements, with no tensor map read.
#ifndef FJ_TMA_BULK_ROWS
#define FJ_TMA_BULK_ROWS 0
#endif
template <int R>
FJ_DEV unsigned tile_pieces(const tensor_param& p);
// The number of bulk copies the tile at `c` into `smem` needs, or 0 when it
// cannot go that way.
template <int R>
FJ_DEV unsigned bulk_rows(const tensor_param& p, const void* smem,
                          const coords& c) {
  // Unswizzled, and a fast-path tile wholly inside (aligned rows).
  if ((p.swizzle & 3u) != 0 || !detail::tile_fast<R>(p, c, smem, true))
    return 0;
  unsigned rows = 1;
  bool adjacent = true;  // row i + 1 starts where row i ends in GMEM
  long long span = p.box[0];
#pragma unroll
  for (int d = 1; d < R; ++d) {
    rows *= (unsigned)p.box[d];
    adjacent = adjacent && (p.box[d] == 1 || p.stride[d] == span);
    span *= p.box[d];
  }
  const unsigned copies = adjacent ? 1u : rows;
  return copies <= tile_pieces<R>(p) ? copies : 0u;
}
// Issues the tile's bulk copies (bulk_rows said `copies`) on barrier
// address `bb`, the team's first 32 lanes taking them in turn from `first`.
template <int R>
FJ_DEV void issue_bulk_rows(unsigned s, const tensor_param& p, const coords& c,
                            unsigned bb, unsigned copies, unsigned first,
                            unsigned step) {
  const unsigned eb = (unsigned)p.elem_bytes;
  const unsigned row_bytes =
      copies == 1 ? detail::box_bytes(p, R) : (unsigned)p.box[0] * eb;
  for (unsigned i = first; i < copies; i += step) {
    long long off = c.v[0];
    unsigned rest = i;
#pragma unroll
    for (int d = 1; d < R; ++d) {
      unsigned id = rest;
      if (d < R - 1) {
        id = rest % (unsigned)p.box[d];
        rest /= (unsigned)p.box[d];
      }
      off += ((long long)c.v[d] + id) * p.stride[d];
    }
    const unsigned char* g = (const unsigned char*)p.data + off * eb;
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
        "[%0], [%1], %2, [%3];" ::"r"(s + i * row_bytes),
        "l"(g), "r"(row_bytes), "r"(bb)
        : "memory");
  }
}

// A box larger than the tensor map's (FJ_TP_SPLIT_BOX): piece i of the
// tile, its start coordinates and SMEM byte offset. The host chose hw_box
// so that the pieces tile the box exactly and each is contiguous in SMEM.
template <int R>
FJ_DEV unsigned tile_pieces(const tensor_param& p) {
  if ((p.flags & FJ_TP_SPLIT_BOX) == 0) return 1;
  unsigned n = 1;
#pragma unroll
  for (int d = 0; d < R; ++d)
    n *= (unsigned)p.box[d] / ((unsigned)p.hw_box_m1[d] + 1);
  return n;
}
template <int R>
FJ_DEV unsigned piece_at(const tensor_param& p, coords& q, unsigned i) {
  unsigned off = 0, inner = (unsigned)p.elem_bytes;
#pragma unroll
  for (int d = 0; d < R; ++d) {
    const unsigned h = (unsigned)p.hw_box_m1[d] + 1;
    const unsigned n = (unsigned)p.box[d] / h;
    const unsigned k = i % n;
    i /= n;
    q.v[d] += (int)(k * h);
    off += k * h * inner;
    inner *= (unsigned)p.box[d];
  }
  return off;
}
// Issues the pieces i = first, first + step, ... of the tile at `c` into
// SMEM address `s`, completing on barrier address `bb` (multicast to
// `mask` when it is not 0).
template <int R>
FJ_DEV void issue_pieces(unsigned s, const tensor_param& p, const coords& c,
                         unsigned bb, unsigned short mask, unsigned first,
                         unsigned step) {
  if ((p.flags & FJ_TP_SPLIT_BOX) == 0) {
    if (first != 0) return;
    if (mask == 0) {
      tensor_load<R>(s, p.tmap, c, bb);
    } else {
      tensor_load_multicast<R>(s, p.tmap, c, bb, mask);
    }
    return;
  }
  const unsigned n = tile_pieces<R>(p);
  for (unsigned i = first; i < n; i += step) {
    coords q = c;
    const unsigned off = piece_at<R>(p, q, i);
    if (mask == 0) {
      tensor_load<R>(s + off, p.tmap, q, bb);
    } else {
      tensor_load_multicast<R>(s + off, p.tmap, q, bb, mask);
    }
  }
}

// Tile load on a barrier; `mask` != 0 multicasts (see multicast_peers).
// The caller entered the call (block: enter(); warp: enter(warp)). The
// predicate gates the issue and the expect_tx together, so a false
// predicate leaves the phase to the arrivals alone and nothing hangs.
// One expect_tx covers the whole box; the pieces of a split box are issued
// by the first warp's lanes (tm: the block, or the calling warp).
// Not inlined: a kernel that loads tiles in several places (a pipeline's
// prologue and steady state) then compiles the TMA path and its software
// fallback once, not once per call site. (Inlining it changed nothing on
// the H200, 0.957x of D2D both ways; the software paths inline theirs.)
template <int R>
__device__ __noinline__ void load_tile_bar(void* dst, const tensor_param& p,
                                           coords c, barrier& b,
                                           unsigned short mask, bool pred,
                                           pred_mode mode, detail::team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  if (!use_tmap(p, dst, c)) {
    cpa::issue_tile<R>(dst, p, c, pred, mode, tm);
    cpa::attach(b);
    return;
  }
  if (!pred) {
    if (mode == pred_zero)
      detail::fill_block(dst, detail::box_bytes(p, R), 0, tm);
    return;
  }
  // The full box is counted, in-bounds or not: TMA writes all of it.
  if (tm.rank == 0) expect_tx(b, detail::box_bytes(p, R));
  if (tm.rank >= 32 || (mask != 0 && !is_multicast_issuer(mask))) return;
  if (FJ_TMA_BULK_ROWS && mask == 0) {
    if (const unsigned copies = bulk_rows<R>(p, dst, c)) {
      issue_bulk_rows<R>(detail::smem_u32(dst), p, c, detail::smem_u32(&b),
                         copies, tm.rank, tm.size < 32 ? tm.size : 32);
      return;
    }
  }
  issue_pieces<R>(detail::smem_u32(dst), p, c, detail::smem_u32(&b), mask,
                  tm.rank, tm.size < 32 ? tm.size : 32);
}
#endif
template <int R>
FJ_DEV void load_tile(void* dst, const tensor_param& p, const coords& c,
                      barrier& b, bool pred, pred_mode mode) {
  enter();
#if FJ_NARROW_INLINE
  // A tensor without a tensor map (rows not 16-byte aligned: a ragged
  // pitch) takes cp_async's path at the call site, its narrow rows
  // included, instead of through load_tile_bar's call (H200, the ragged
  // transpose: see docs/measurements.md).
  if ((p.flags & FJ_TP_HAS_TMAP) == 0) {
    cpa::issue_tile<R>(dst, p, c, pred, mode);
    cpa::attach(b);
    return;
  }
#endif
  load_tile_bar<R>(dst, p, c, b, 0, pred, mode, detail::block_team());
}
template <int R>
FJ_DEV void load_tile(void* dst, const tensor_param& p, const coords& c,
                      in_group_t, bool pred, pred_mode mode) {
  enter();
  cpa::issue_tile<R>(dst, p, c, pred, mode);
}
// Warp scope: lane 0 expects the bytes, the lanes issue the pieces.
template <int R>
FJ_DEV void load_tile(warp_t, void* dst, const tensor_param& p, const coords& c,
                      barrier& b, bool pred, pred_mode mode) {
  enter(warp);
  load_tile_bar<R>(dst, p, c, b, 0, pred, mode, detail::warp_team());
}
template <int R>
FJ_DEV void load_tile_multicast(void* dst, const tensor_param& p,
                                const coords& c, barrier& b,
                                unsigned short mask, bool pred,
                                pred_mode mode) {
  enter();
  load_tile_bar<R>(dst, p, c, b, multicast_peers(mask), pred, mode,
                   detail::block_team());
}
template <int R>
FJ_DEV void load_tile_multicast(void* dst, const tensor_param& p,
                                const coords& c, in_group_t g, unsigned short,
                                bool pred, pred_mode mode) {
  load_tile<R>(dst, p, c, g, pred, mode);
}

// k tiles at cs(0..k-1) on one barrier, tile i at dst + i * box bytes: one
// expect_tx for the tiles TMA takes, their pieces spread over the first
// warp's lanes; a tile TMA cannot take goes through cp.async (attached). A
// tile that is not cs.ok (a gathered index outside the tensor) is the fill,
// stored by the threads.
template <int R, class Coords>
__device__ __noinline__ void load_tiles_bar(unsigned char* dst,
                                            const tensor_param& p,
                                            const Coords& cs, int k, barrier& b,
                                            bool pred, pred_mode mode,
                                            detail::team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  const unsigned bb = detail::box_bytes(p, R);
  if (!pred) {
    if (mode == pred_zero) detail::fill_block(dst, bb * (unsigned)k, 0, tm);
    return;
  }
  // Small tiles (FJ_TMA_SMALL_TILES: at most that many bytes each; 1024
  // by default, 0 = off): the team's cp.async over the whole list, as
  // cp_async does (detail::flat_*), not one tensor copy per tile.
#if FJ_TMA_SMALL_TILES > 0  // (off: not even instantiated, so no PTX for it)
  if (k > 1 && bb <= FJ_TMA_SMALL_TILES && detail::flat_list_ok<R>(p)) {
    cpa::issue_list_flat<R, Coords>(dst, p, cs, k, tm);
    cpa::attach(b);
    return;
  }
#endif
  unsigned ok = 0;
  for (int i = 0; i < k; ++i)
    ok += cs.ok(i) && use_tmap(p, dst + i * bb, cs(i)) ? 1 : 0;
  if (tm.rank == 0 && ok != 0) expect_tx(b, ok * bb);
  const unsigned lanes = tm.size < 32 ? tm.size : 32;
  const unsigned sb = detail::smem_u32(&b), s0 = detail::smem_u32(dst);
  bool soft = false;
  for (int i = 0; i < k; ++i) {
    if (!cs.ok(i)) {
      detail::fill_block(dst + i * bb, bb, detail::oob_fill_pattern(p), tm);
      continue;
    }
    const coords c = cs(i);
    if (use_tmap(p, dst + i * bb, c)) {
      if (tm.rank < 32) {  // piece j of tile i: lane (i + j) % lanes
        const unsigned first = (tm.rank + lanes - (unsigned)i % lanes) % lanes;
        const unsigned copies =
            FJ_TMA_BULK_ROWS ? bulk_rows<R>(p, dst + i * bb, c) : 0u;
        if (copies != 0) {
          issue_bulk_rows<R>(s0 + i * bb, p, c, sb, copies, first, lanes);
        } else {
          issue_pieces<R>(s0 + i * bb, p, c, sb, 0, first, lanes);
        }
      }
    } else {
      cpa::issue_tile<R>(dst + i * bb, p, c, true, mode, tm);
      soft = true;
    }
  }
  if (soft) cpa::attach(b);
}
#endif
template <int R, class Scope, class Coords>
FJ_DEV void load_tiles(Scope sc, void* dst, const tensor_param& p,
                       const Coords& cs, int k, barrier& b, bool pred,
                       pred_mode mode) {
  enter(sc);
  load_tiles_bar<R, Coords>((unsigned char*)dst, p, cs, k, b, pred, mode,
                            detail::team_of(sc));
}
template <int R, class Scope, class Coords>
FJ_DEV void load_tiles(Scope sc, void* dst, const tensor_param& p,
                       const Coords& cs, int k, in_group_t, bool pred,
                       pred_mode mode) {
  enter(sc);
  const unsigned bb = detail::box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    unsigned char* d = (unsigned char*)dst + i * bb;
    if (pred && !cs.ok(i)) {
      detail::fill_block(d, bb, detail::oob_fill_pattern(p),
                         detail::team_of(sc));
      continue;
    }
    cpa::issue_tile<R>(d, p, cs(i), pred, mode, detail::team_of(sc));
  }
}

// Tile store: the tensor map clips at the tensor's bounds in hardware; a
// split box is one tensor store per piece, all by one thread (`issuer`).
template <int R>
FJ_DEV bool store_tmap_ok(const tensor_param& p, const coords& c,
                          const void* src) {
  return (p.flags & FJ_TP_HAS_TMAP) != 0 &&
         (detail::addr(src) & (tmap_smem_align(p) - 1)) == 0 &&
         tmap_coords_ok(p, c) && tile_inside<R>(p, c);
}
template <int R>
FJ_DEV void store_pieces(const tensor_param& p, const coords& c,
                         const void* src) {
  const unsigned s = detail::smem_u32(src);
  if ((p.flags & FJ_TP_SPLIT_BOX) == 0) {
    tensor_store<R>(p.tmap, c, s);
    return;
  }
  const unsigned n = tile_pieces<R>(p);
  for (unsigned i = 0; i < n; ++i) {
    coords q = c;
    const unsigned off = piece_at<R>(p, q, i);
    tensor_store<R>(p.tmap, q, s + off);
  }
}
// The threads' store, for a tile the tensor map cannot take. Inline,
// except in the slow-path library's route (FJ_SLOW_PATHS_EXTERN,
// docs/slow-path-library.md), where it is one of the library's functions
// rather than a copy at each call site.
#if defined(FJ_SLOW_PATHS_EXTERN) || defined(FJ_SLOW_PATHS_LIBRARY)
template <int R>
__device__ __noinline__ void store_generic(const tensor_param& p, coords c,
                                           const void* smem, bool pred,
                                           detail::team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  detail::store_tile_generic<R>(p, c, smem, pred, tm);
}
#endif
#define FJ_TMA_STORE_GENERIC store_generic
#else
#define FJ_TMA_STORE_GENERIC detail::store_tile_generic
#endif
template <int R>
FJ_DEV void store_tile(const tensor_param& p, const coords& c, const void* src,
                       bool pred) {
  enter();
  if (!store_tmap_ok<R>(p, c, src)) {
    FJ_TMA_STORE_GENERIC<R>(p, c, src, pred, detail::block_team());
    return;
  }
  if (pred && leader()) store_pieces<R>(p, c, src);
}
template <int R>
FJ_DEV void store_tile(warp_t, const tensor_param& p, const coords& c,
                       const void* src, bool pred) {
  enter(warp);
  if (!store_tmap_ok<R>(p, c, src)) {
    FJ_TMA_STORE_GENERIC<R>(p, c, src, pred, detail::warp_team());
    return;
  }
  if (pred && detail::lane_id() == 0) store_pieces<R>(p, c, src);
}

// k tiles from SMEM (tile i at src + i * box bytes) to the tiles at
// cs(0..k-1): each tile TMA can store is a tensor store (its pieces) issued
// by the team's first thread, which commits the bulk groups; the others are
// the clipped thread stores of the team. A tile that is not cs.ok (a
// scatter's index outside the tensor) is not written.
template <int R, class Scope, class Coords>
FJ_DEV void store_tiles(Scope sc, const tensor_param& p, const Coords& cs,
                        int k, const void* src, bool pred) {
  enter(sc);
  if (!pred) return;
  const detail::team tm = detail::team_of(sc);
  const unsigned bb = detail::box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    if (!cs.ok(i)) continue;
    const coords c = cs(i);
    const unsigned char* s = (const unsigned char*)src + (unsigned)i * bb;
    if (store_tmap_ok<R>(p, c, s)) {
      if (tm.rank == 0) store_pieces<R>(p, c, s);
    } else {
      FJ_TMA_STORE_GENERIC<R>(p, c, s, true, tm);
    }
  }
}
#undef FJ_TMA_STORE_GENERIC

// --------------------------------------------------------------- prefetch
// Bulk prefetch covers the 16-byte-aligned interior in 64 KiB pieces shared
// by the threads; the unaligned ends get a line prefetch (an address inside
// the span, so nothing outside it is touched).
FJ_DEV void prefetch_l2(const void* src, unsigned long long bytes) {
  if (bytes == 0) return;
  const detail::u64 a0 = detail::addr(src), a1 = a0 + bytes;
  const detail::u64 b0 = (a0 + 15) & ~15ull, b1 = a1 & ~15ull;
  if (b1 <= b0) {
    detail::prefetch_span_lines(src, bytes);
    return;
  }
  const detail::u64 piece = 65536;
  const detail::u64 pieces = (b1 - b0 + piece - 1) / piece;
  for (detail::u64 i = detail::thread_rank(); i < pieces;
       i += detail::block_threads()) {
    const detail::u64 a = b0 + i * piece;
    const unsigned n = (unsigned)(b1 - a < piece ? b1 - a : piece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(n)
                 : "memory");
  }
  if (leader()) {
    if (a0 < b0) asm volatile("prefetch.global.L2 [%0];" ::"l"(a0));
    if (b1 < a1) asm volatile("prefetch.global.L2 [%0];" ::"l"(b1));
  }
}
template <int R>
FJ_DEV void prefetch_tile(const tensor_param& p, const coords& c) {
  if ((p.flags & FJ_TP_HAS_TMAP) == 0 || !tmap_coords_ok(p, c)) {
    detail::prefetch_tile_lines<R>(p, c);
  } else if (leader()) {
    const unsigned n = tile_pieces<R>(p);  // a split box: every piece
    for (unsigned i = 0; i < n; ++i) {
      coords q = c;
      if (n > 1) piece_at<R>(p, q, i);
      tensor_prefetch<R>(p.tmap, q);
    }
  }
}
FJ_DEV void prefetch_tensormap(const tensor_param& p) {
  if ((p.flags & FJ_TP_HAS_TMAP) != 0 && leader())
    asm volatile("prefetch.tensormap [%0];" ::"l"(p.tmap) : "memory");
}

}  // namespace tma_impl
}  // namespace fj

#endif  // FLEETJIT_COPY_TMA_CUH_
