// <fleetjit/copy.cuh>: one kernel source, every GPU generation.
//
// Portable GMEM<->SMEM copies, barriers, group waits, tile copies with
// out-of-bounds fill, cluster multicast and L2 prefetch. fleetjit offers this
// header to every NVRTC build (no include path needed) and compiles it with
// -DFJ_COPY_IMPL=0|1|2, choosing one of three implementations:
//
//   0 sync      ld/st by the block's threads; any GPU      copy/sync.cuh
//   1 cp_async  cp.async + mbarrier; sm_80+                 copy/cp_async.cuh
//   2 tma       bulk/tensor copies + mbarrier; sm_90+       copy/tma.cuh
//
// Without FJ_COPY_IMPL the best one for __CUDA_ARCH__ is used. Every feature
// below has the same semantics under every implementation; a kernel written
// against this header never changes between them. It needs no system
// headers and no libcu++.
//
// ===================================================== performance guide
//
// docs/copy-guide.md: the idiom to copy (a producer warp and a ring of
// stages), when a tile goes through the tensor map, the fallbacks and their
// cost, stages/boxes/threads per implementation, swizzled tiles, checked
// builds, registers and spills. "The guide, N." below is its section N.
//
// ============================================================ reference
//
// Example: scale a 2-D tensor tile by tile, ragged edges included.
//
//   #include <fleetjit/copy.cuh>
//   // in, out: f32 tensors whose box (tile) is {64, 32}; in.oob = zeros.
//   extern "C" __global__ void scale(FJ_TENSOR(float, 2) in,
//                                    FJ_TENSOR(float, 2) out, float k) {
//     __shared__ __align__(128) float tile[32 * 64];
//     __shared__ fj::barrier bar;
//     if (threadIdx.x == 0) bar.init(fj::block_threads());
//     __syncthreads();
//     const fj::coords at = fj::at(blockIdx.x * 64, blockIdx.y * 32);
//     fj::load_tile(tile, in, at, bar);  // every thread calls it
//     bar.arrive();                      // every thread arrives...
//     bar.wait(0);                       // ...and waits for phase 0
//     for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) tile[i] *= k;
//     fj::store_tile(out, at, tile);     // clipped at out's bounds
//     fj::commit_group();
//     fj::wait_group<0>();               // stores done before the block exits
//   }
//
// Conventions (the cooperation contract; the conformance tests check it):
//  1. Copy, store and prefetch calls without a scope tag are
//     block-collective: every thread of the block calls them, in the same
//     order, with the same arguments (predicates included). The calls that
//     also take a first argument fj::block (the same) or fj::warp (below):
//     load, store, load_tile (with a barrier), store_tile, load_tiles and
//     gather_tiles (with a barrier or fj::in_group), commit_group and the
//     waits; prefetches and multicasts take no tag. Under tma
//     thread rank 0 issues the copy engine (the first warp's lanes issue
//     the pieces of a split box or a gather); under cp_async and sync the
//     threads split the work. With fj::warp, the 32 lanes of one warp call
//     them, converged, with the same arguments; the rest of the block does
//     not (see the guide, 1.).
//  2. Every block-scope load and store call starts with a block barrier
//     (and, under tma, a proxy fence): SMEM that threads wrote or read
//     before the call may be overwritten (loads) or is what gets stored
//     (stores). No other synchronisation is needed around a call within
//     one block. A warp-scope call only syncs its warp: the caller orders
//     the destination (an "empty" barrier) and, for stores of SMEM other
//     warps wrote, has the writers call fj::fence_smem() first.
//  3. fj::barrier lives in shared memory. One thread calls init(count),
//     then the block synchronises (__syncthreads(), or fj::cluster_sync()
//     when other CTAs multicast into this one). A phase completes when
//     `count` arrive() calls have been made and every copy attached to the
//     phase has landed. A load attaches to the phase current when it is
//     called: every thread that calls a load on `bar` must arrive() on
//     `bar` afterwards in that phase. So a barrier that copies complete on
//     has count = fj::block_threads(), and each thread calls arrive() once
//     per phase after its copy calls. A warp-scope load attaches to the
//     phase without counting: its warp arrives with arrive(fj::warp), one
//     arrival, so a barrier fed by one producer warp has count 1.
//  4. wait(parity) returns once the phase with that parity has completed;
//     phase k has parity k & 1. As with mbarriers, wait(1) on a fresh
//     barrier returns at once (the phase before phase 0 counts as done).
//     After wait(), the phase's copies are visible to the waiting thread.
//  5. Groups: a load given fj::in_group, and every store, joins the open
//     group. commit_group() closes it; wait_group<N>() (block-collective)
//     returns when at most the N most recent committed groups are still
//     in flight: their loads are visible to every thread and their stores
//     have written GMEM. wait_group_read<N>() only guarantees that stores
//     have read their SMEM source. SMEM that a store reads must not be
//     overwritten (by threads or loads) before a wait that covers the
//     store, and a block must wait_group<0>() after its last store before
//     it exits (under tma the copy engine reads SMEM after the call).
//  6. Predicates: a copy with pred == false does nothing under pred_skip
//     (SMEM keeps its old contents) and zero-fills the whole destination
//     (box or span) under pred_zero; a false store writes nothing. The
//     barrier protocol is unchanged: threads still arrive, nothing hangs.
//  7. Tiles: a tile is the tensor's box (tensor_param::box) starting at
//     signed coordinates (fj::coords, dimension 0 innermost); it lands in
//     SMEM dense and row-major (dimension 0 fastest), under the tensor's
//     swizzle if it has one (the guide, 5.). A box may exceed 256 per
//     dimension (the guide, 2.). load_tiles / gather_tiles put k tiles at
//     smem + i * box_elems, all on one barrier. Elements outside the
//     tensor read per the tensor's oob mode: oob_zeros gives 0, oob_nan a
//     quiet NaN (f32 7FC00000, f64 7FF8..., f16 7E00, bf16 7FC0, e4m3 7F,
//     e5m2 7E; integer dtypes read 0), oob_promise_in_bounds is unchecked
//     (a checked build traps instead, guide 6.). Tile stores write only
//     in-bounds elements. SMEM tiles must be 128-byte aligned for TMA
//     (others still work, without TMA).
//     Indices (gather_tiles, scatter_tiles; fj_copy's gather_index and
//     scatter_index follow the same rule): an index whose tile does not
//     lie wholly inside the tensor along the indexed dimension (idx < 0
//     or idx + box(dim) > shape(dim)) never faults, under every oob mode:
//     a gather reads that whole tile as the fill (zeros, NaN under
//     oob_nan; zeros under oob_promise_in_bounds), a scatter writes
//     nothing of it. So -1 marks an unused page-table slot. A dimension
//     the tensor does not have traps (an int) or fails to compile
//     (fj::dim<D>).
//  8. Multicast: load(_tile)_multicast is cluster-collective: every CTA in
//     `cta_mask` (bit i = cluster rank i; it must include the caller) calls
//     it with the same tile, predicate and the same SMEM/barrier offsets.
//     Before the call every such CTA must have initialised `bar` and be done
//     with the destination and with bar's previous phase: fj::cluster_sync()
//     after the previous wait() does it. End the kernel with
//     fj::cluster_sync() so no CTA exits while a peer still writes into it.
//     Without a cluster, or where multicast is not native, each CTA loads
//     the tile itself: the result is the same.
//  9. Tensor parameters are declared FJ_TENSOR(T, R) and passed to these
//     functions as they are (by reference): TMA needs the address of the
//     __grid_constant__ parameter, never a copy. A parameter declared
//     without FJ_TENSOR is a copy in local memory, which TMA cannot read.
//     Build with -DFJ_CHECK_TENSORS=1 to catch that: its first copy call
//     then prints "fleetjit: an fj::tensor given to a copy call is not the
//     kernel's __grid_constant__ parameter..." and traps, under every
//     implementation (the launch fails). The check costs an isspacep.local
//     per copy call and some registers, so it is off by default.
//     sizeof(T) must equal the tensor's elem_bytes; element addresses must
//     be aligned to it.
// 10. Limits: one phase may expect at most 2^20 - 1 bytes (all SMEM fits).
//     Spans are split into bulk/cp.async bodies and bytewise ends, so any
//     size and alignment works; matching 16-byte alignment is fastest.
//
// What each implementation does natively (N) and emulates (E):
//
//   feature          sync  cp_async  tma
//   barrier           E    N         N   sm_75: counter in SMEM + atomics
//   group_wait        E    N         E   TMA loads need an mbarrier: loads
//                                        in a group are cp.async there
//   copy_g2s          E    N         N   ends of unaligned spans bytewise
//   copy_s2g          N    N         N   tma: cp.async.bulk bulk_group
//   predicate         E    N         N   pred_zero under tma: thread stores
//   tile_copy         E    E         N*  *when the tensor has a tensor map
//   oob_zeros         E    N         N*  cp_async: src-size clamping
//   oob_nan           E    E         N*  thread stores; E on tma for fp8, f64
//   multicast         E    E         N*  *sm_90 and sm_100a/103a/110a/f
//   l2_prefetch       N    N         N   prefetch.global.L2 / bulk prefetch
#ifndef FLEETJIT_COPY_CUH_
#define FLEETJIT_COPY_CUH_

// ------------------------------------------------ implementation choice
#ifndef FJ_COPY_IMPL
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FJ_COPY_IMPL 2
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FJ_COPY_IMPL 1
#else
#define FJ_COPY_IMPL 0
#endif
#endif

#if FJ_COPY_IMPL != 0 && FJ_COPY_IMPL != 1 && FJ_COPY_IMPL != 2
#error "fleetjit copy: FJ_COPY_IMPL must be 0 (sync), 1 (cp_async) or 2 (tma)"
#endif
#if defined(__CUDA_ARCH__) && FJ_COPY_IMPL == 2 && __CUDA_ARCH__ < 900
#error \
    "fleetjit copy: FJ_COPY_IMPL=2 (tma) needs sm_90 or newer: this target has no cp.async.bulk, TMA or mbarrier expect_tx. Build with FJ_COPY_IMPL=1 (cp_async, sm_80+) or 0 (sync)."
#endif
#if defined(__CUDA_ARCH__) && FJ_COPY_IMPL == 1 && __CUDA_ARCH__ < 800
#error \
    "fleetjit copy: FJ_COPY_IMPL=1 (cp_async) needs sm_80 or newer: this target has no cp.async or mbarrier. Build with FJ_COPY_IMPL=0 (sync)."
#endif

#include <fleetjit/copy/common.cuh>
#if FJ_COPY_IMPL == 2
#include <fleetjit/copy/tma.cuh>
#elif FJ_COPY_IMPL == 1
#include <fleetjit/copy/cp_async.cuh>
#else
#include <fleetjit/copy/sync.cuh>
#endif
#include <fleetjit/copy/check.cuh>

namespace fj {

#if FJ_COPY_IMPL == 2
namespace impl = tma_impl;
#elif FJ_COPY_IMPL == 1
namespace impl = cp_async_impl;
#else
namespace impl = sync_impl;
#endif

// The implementation this build uses (FJ_COPY_IMPL).
constexpr int copy_impl = FJ_COPY_IMPL;

// ---------------------------------------------------------------- tensors
// A tensor kernel parameter: a typed view of the runtime-filled
// tensor_param (its only member, so the layout is the ABI's).
// `B`, sizeof(T) (never given by hand), puts the element's size into a C++
// kernel's mangled signature, so that a launch refuses a tensor whose
// elements have another size even when T is a struct of the caller's own
// ("the kernel declares 8-byte elements but the caller passed f32").
// extern "C" kernels have no signature to carry it.
template <class T, int R, int B = (int)sizeof(T)>
struct tensor {
  static_assert(R >= 1 && R <= FJ_TP_MAX_RANK, "tensor rank must be 1..5");
  static_assert(!detail::is_const<T>::value,
                "fj::tensor<const T>: the element type is T; a kernel that "
                "only reads it takes FJ_TENSOR(T, R), which is const already");
  static_assert(B == (int)sizeof(T),
                "fj::tensor's third argument is sizeof(T): leave it out");
  tensor_param p;

  // ---- compile-time check: an fj::tensor is never copied ----------------
  // TMA reads the tensor map at the address of the kernel's
  // __grid_constant__ parameter; a copy (a by-value function parameter,
  // `auto u = t;`) lives in local memory, where TMA cannot read it. So a
  // copy does not compile: pass `const fj::tensor<T, R>&`, and declare the
  // kernel's parameter with FJ_TENSOR(T, R). NVRTC still accepts the
  // parameter itself, with the same 320-byte, 64-aligned PTX layout (checked
  // for sm_80 and sm_90 over examples/, conformance/ and the copy kernels);
  // built with FJ_CHECK_TENSORS=1, a copy call given such a parameter traps
  // with a message (detail::checked below).
  tensor() = default;
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;
  // ---- end of the check ---------------------------------------------------

  // The rank, a constant: t.rank, fj::tensor<T, R>::rank.
  enum : int { rank = R };
  FJ_DEV T* data() const { return (T*)p.data; }
  // The element type the caller passed (fj::dtype_code: dtype_bf16, ...),
  // its size in bytes (sizeof(T): the launch checks it) and the fill mode
  // of tiles read outside the tensor (fj::oob_mode).
  FJ_DEV dtype_code dtype() const { return (dtype_code)p.dtype; }
  FJ_DEV int elem_bytes() const { return p.elem_bytes; }
  FJ_DEV oob_mode oob() const { return (oob_mode)p.oob; }
  FJ_DEV long long shape(int d) const { return p.shape[d]; }
  FJ_DEV long long stride(int d) const { return p.stride[d]; }
  FJ_DEV int box(int d) const { return p.box[d]; }
  FJ_DEV unsigned box_elems() const {
    unsigned n = 1;
    for (int d = 0; d < R; ++d) n *= (unsigned)p.box[d];
    return n;
  }
  FJ_DEV unsigned box_bytes() const { return box_elems() * sizeof(T); }
  FJ_DEV bool has_tmap() const { return (p.flags & FJ_TP_HAS_TMAP) != 0; }
  // The SMEM layout of its tiles: 0 none, 1 32B, 2 64B, 3 128B swizzle.
  FJ_DEV int swizzle() const { return p.swizzle; }
  // Whether tiles of this tensor are laid out as `S` (swz_none ... swz128)
  // expects: check it once where a kernel relies on tile_ref<T, S>.
  template <class S>
  FJ_DEV bool swizzled_as() const {
    return (unsigned)p.swizzle == S::mode;
  }
};
static_assert(sizeof(tensor<float, 2>) == 320 &&
                  alignof(tensor<float, 2>) == 64,
              "fj::tensor must have tensor_param's layout");

#define FJ_TENSOR(T, R) const __grid_constant__ fj::tensor<T, R>

namespace detail {
// A tensor that a copy call is given must live where TMA can read its
// tensor map: the kernel's __grid_constant__ parameter (FJ_TENSOR), global
// or constant memory. A parameter declared without FJ_TENSOR is copied to
// local memory, where TMA reads garbage. Built with FJ_CHECK_TENSORS=1 (a
// debugging aid; off by default, where it costs nothing), every copy call
// tests that with one isspacep.local and fails loudly under every
// implementation: a message on the device's printf stream, then a trap.
// The test is PTX because NVRTC 13.0's __isGridConstant / __isGlobal /
// __isLocal break its IR verifier when a tensor reaches a __noinline__
// function by reference; and it is off by default because, not folded,
// it costs registers (pipelined_tiles under tma: 64 -> 82).
template <class T, int R>
FJ_DEV const tensor_param& checked(const tensor<T, R>& t) {
#if defined(FJ_CHECK_TENSORS) && FJ_CHECK_TENSORS && defined(__CUDA_ARCH__) && \
    __CUDA_ARCH__ >= 700
  unsigned local;
  asm("{\n\t.reg .pred p;\n\tisspacep.local p, %1;\n\tselp.u32 %0, 1, 0, "
      "p;\n\t}"
      : "=r"(local)
      : "l"(&t));
  if (local) {
    printf(
        "fleetjit: an fj::tensor given to a copy call is not the kernel's "
        "__grid_constant__ parameter: declare it FJ_TENSOR(T, R) and pass it "
        "on as const fj::tensor<T, R>&\n");
    __trap();
  }
#endif
  return t.p;
}
}  // namespace detail

// ---------------------------------------------------------------- threads
FJ_DEV unsigned block_threads() { return detail::block_threads(); }
FJ_DEV unsigned cluster_rank() { return detail::cluster_rank(); }
FJ_DEV unsigned cluster_size() { return detail::cluster_size(); }
// Barrier for every thread of every CTA in the cluster (sm_90+), else
// __syncthreads(). Orders earlier SMEM writes before peers' multicasts.
FJ_DEV void cluster_sync() { detail::cluster_sync(); }

// --------------------------------------------------------------- barriers
FJ_DEV void barrier::init(unsigned count) { impl::barrier_init(*this, count); }
FJ_DEV void barrier::arrive() { impl::arrive(*this); }
FJ_DEV bool barrier::test(unsigned parity) { return impl::test(*this, parity); }
FJ_DEV void barrier::wait(unsigned parity) { impl::wait(*this, parity); }
FJ_DEV void barrier::arrive(warp_t) { impl::arrive_warp(*this); }
FJ_DEV void barrier::arrive_and_wait(unsigned parity) {
  impl::arrive(*this);
  impl::wait(*this, parity);
}

// Orders this thread's earlier SMEM writes before copies that another
// thread issues after a barrier (tma: fence.proxy.async; else nothing).
// Threads that wrote a tile call it before handing the tile to a producer
// warp's fj::store_tile(fj::warp, ...) (block-scope calls do it themselves).
FJ_DEV void fence_smem() {
#if FJ_COPY_IMPL == 2
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// ----------------------------------------------------------------- groups
FJ_DEV void commit_group() { impl::commit_group(); }
template <int N>
FJ_DEV void wait_group() {
  impl::wait_group<N>();
}
template <int N>
FJ_DEV void wait_group_read() {
  impl::wait_group_read<N>();
}
// The warp-scope forms: the groups of the calling warp's stores (and
// in_group loads); wait_group syncs the warp, not the block.
FJ_DEV void commit_group(block_t) { impl::commit_group(); }
FJ_DEV void commit_group(warp_t w) { impl::commit_group(w); }
template <int N>
FJ_DEV void wait_group(block_t) {
  impl::wait_group<N>();
}
template <int N>
FJ_DEV void wait_group(warp_t w) {
  impl::wait_group<N>(w);
}
template <int N>
FJ_DEV void wait_group_read(block_t) {
  impl::wait_group_read<N>();
}
template <int N>
FJ_DEV void wait_group_read(warp_t w) {
  impl::wait_group_read<N>(w);
}

// ------------------------------------------------------------ contiguous
// Copies `bytes` bytes GMEM -> SMEM, completing on `bar` (or in the open
// group with fj::in_group). Any size and alignment.
FJ_DEV void load(void* smem_dst, const void* gmem_src, unsigned bytes,
                 barrier& bar, bool pred = true, pred_mode mode = pred_skip) {
  impl::load(smem_dst, gmem_src, bytes, bar, pred, mode);
}
FJ_DEV void load(void* smem_dst, const void* gmem_src, unsigned bytes,
                 in_group_t g, bool pred = true, pred_mode mode = pred_skip) {
  impl::load(smem_dst, gmem_src, bytes, g, pred, mode);
}
// The same span into the same SMEM offset of every CTA in `cta_mask`.
FJ_DEV void load_multicast(void* smem_dst, const void* gmem_src, unsigned bytes,
                           barrier& bar, unsigned short cta_mask,
                           bool pred = true, pred_mode mode = pred_skip) {
  impl::load_multicast(smem_dst, gmem_src, bytes, bar, cta_mask, pred, mode);
}
// Copies `bytes` bytes SMEM -> GMEM in the open group.
FJ_DEV void store(void* gmem_dst, const void* smem_src, unsigned bytes,
                  bool pred = true) {
  impl::store(gmem_dst, smem_src, bytes, pred);
}
// Warp scope (see the guide): one warp issues; the copy attaches to `bar`'s
// current phase without arriving; the warp then calls bar.arrive(fj::warp).
FJ_DEV void load(warp_t w, void* smem_dst, const void* gmem_src, unsigned bytes,
                 barrier& bar, bool pred = true, pred_mode mode = pred_skip) {
  impl::load(w, smem_dst, gmem_src, bytes, bar, pred, mode);
}
FJ_DEV void load(block_t, void* smem_dst, const void* gmem_src, unsigned bytes,
                 barrier& bar, bool pred = true, pred_mode mode = pred_skip) {
  impl::load(smem_dst, gmem_src, bytes, bar, pred, mode);
}
FJ_DEV void store(warp_t w, void* gmem_dst, const void* smem_src,
                  unsigned bytes, bool pred = true) {
  impl::store(w, gmem_dst, smem_src, bytes, pred);
}
FJ_DEV void store(block_t, void* gmem_dst, const void* smem_src, unsigned bytes,
                  bool pred = true) {
  impl::store(gmem_dst, smem_src, bytes, pred);
}

// ------------------------------------------------------------------ tiles
// Every tile call takes a last, defaulted argument: where it was called
// (detail::site; never pass it), which a checked build's messages name.
// Loads the tile of `t` at `c` into `smem_dst` (box elements, dense).
template <class T, int R, int B>
FJ_DEV void load_tile(T* smem_dst, const tensor<T, R, B>& t, coords c,
                      barrier& bar, bool pred = true,
                      pred_mode mode = pred_skip,
                      detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_load_tile, t.p, c, smem_dst, pred, true,
                           s);
  impl::load_tile<R>(smem_dst, detail::checked(t), c, bar, pred, mode);
}
template <class T, int R, int B>
FJ_DEV void load_tile(T* smem_dst, const tensor<T, R, B>& t, coords c,
                      in_group_t g, bool pred = true,
                      pred_mode mode = pred_skip,
                      detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_load_tile, t.p, c, smem_dst, pred, true,
                           s);
  detail::note_group_load(block, check_load_tile, t.p, pred, s);
  impl::load_tile<R>(smem_dst, detail::checked(t), c, g, pred, mode);
}
// The same tile into every CTA in `cta_mask` (hardware multicast on tma).
template <class T, int R, int B>
FJ_DEV void load_tile_multicast(T* smem_dst, const tensor<T, R, B>& t, coords c,
                                barrier& bar, unsigned short cta_mask,
                                bool pred = true, pred_mode mode = pred_skip,
                                detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_load_tile_multicast, t.p, c, smem_dst,
                           pred, true, s);
  impl::load_tile_multicast<R>(smem_dst, detail::checked(t), c, bar, cta_mask,
                               pred, mode);
}
// Stores the box at `smem_src` to the tile of `t` at `c`, in the open
// group; elements outside the tensor are not written.
template <class T, int R, int B>
FJ_DEV void store_tile(const tensor<T, R, B>& t, coords c, const T* smem_src,
                       bool pred = true,
                       detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_store_tile, t.p, c, smem_src, pred,
                           false, s);
  impl::store_tile<R>(detail::checked(t), c, smem_src, pred);
}
template <class T, int R, int B>
FJ_DEV void store_tile(block_t, const tensor<T, R, B>& t, coords c,
                       const T* smem_src, bool pred = true,
                       detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_store_tile, t.p, c, smem_src, pred,
                           false, s);
  impl::store_tile<R>(detail::checked(t), c, smem_src, pred);
}
template <class T, int R, int B>
FJ_DEV void store_tile(warp_t w, const tensor<T, R, B>& t, coords c,
                       const T* smem_src, bool pred = true,
                       detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(w, check_store_tile, t.p, c, smem_src, pred, false,
                           s);
  impl::store_tile<R>(w, detail::checked(t), c, smem_src, pred);
}

// Warp-scope tile load: attaches to `bar` (no arrival; see load above).
template <class T, int R, int B>
FJ_DEV void load_tile(warp_t w, T* smem_dst, const tensor<T, R, B>& t, coords c,
                      barrier& bar, bool pred = true,
                      pred_mode mode = pred_skip,
                      detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(w, check_load_tile, t.p, c, smem_dst, pred, true, s);
  impl::load_tile<R>(w, smem_dst, detail::checked(t), c, bar, pred, mode);
}
template <class T, int R, int B>
FJ_DEV void load_tile(block_t, T* smem_dst, const tensor<T, R, B>& t, coords c,
                      barrier& bar, bool pred = true,
                      pred_mode mode = pred_skip,
                      detail::site s = detail::site::here()) {
  detail::check_tile<T, R>(block, check_load_tile, t.p, c, smem_dst, pred, true,
                           s);
  impl::load_tile<R>(smem_dst, detail::checked(t), c, bar, pred, mode);
}

// ------------------------------------------------------- tile lists

// k tiles at the k coordinates cs[0..k-1]: tile i lands at smem_dst + i *
// t.box_elems(), all completing on `bar` (one expect_tx under tma) or in
// the open group. Scope: none/fj::block (block-collective) or fj::warp.
template <class T, int R, int B, class Done>
FJ_DEV void load_tiles(T* smem_dst, const tensor<T, R, B>& t, const coords* cs,
                       int k, Done& bar, bool pred = true,
                       pred_mode mode = pred_skip,
                       detail::site s = detail::site::here()) {
  detail::check_done<Done>();
  detail::check_tiles<T, R>(block, check_load_tiles, t.p,
                            detail::coord_list{cs}, k, smem_dst, pred, true,
                            detail::is_group<Done>::value, -1, s);
  impl::load_tiles<R>(block, smem_dst, detail::checked(t),
                      detail::coord_list{cs}, k, bar, pred, mode);
}
template <class Scope, class T, int R, int B, class Done>
FJ_DEV void load_tiles(Scope sc, T* smem_dst, const tensor<T, R, B>& t,
                       const coords* cs, int k, Done& bar, bool pred = true,
                       pred_mode mode = pred_skip,
                       detail::site s = detail::site::here()) {
  detail::check_done<Done, Scope>();
  detail::check_tiles<T, R>(sc, check_load_tiles, t.p, detail::coord_list{cs},
                            k, smem_dst, pred, true,
                            detail::is_group<Done>::value, -1, s);
  impl::load_tiles<R>(sc, smem_dst, detail::checked(t), detail::coord_list{cs},
                      k, bar, pred, mode);
}
// A gather (a page table): tile i is the tile at `base` with coordinate
// `dim` replaced by idx[i] (idx in GMEM or SMEM, read by the issuing
// threads), landing at smem_dst + i * t.box_elems(). `dim` is an int, or
// fj::dim<D> to have it checked at compile time; a dimension the tensor
// does not have traps (the int) or does not compile (fj::dim<D>). An index
// that puts its tile outside the tensor along `dim` (idx[i] < 0 or idx[i] +
// t.box(dim) > t.shape(dim)) never faults: the whole tile reads as the
// fill, zeros under oob_promise_in_bounds (contract 7).
template <class T, int R, int B, class Dim, class Done>
FJ_DEV void gather_tiles(T* smem_dst, const tensor<T, R, B>& t, coords base,
                         Dim dim, const int* idx, int k, Done& bar,
                         bool pred = true, pred_mode mode = pred_skip,
                         detail::site s = detail::site::here()) {
  detail::check_done<Done>();
  const int d = detail::checked_dim<R>(block, check_gather_tiles, dim, s);
  const detail::coord_gather g = detail::gather_of(t.p, base, d, idx);
  detail::check_tiles<T, R>(block, check_gather_tiles, t.p, g, k, smem_dst,
                            pred, true, detail::is_group<Done>::value, d, s);
  impl::load_tiles<R>(block, smem_dst, detail::checked(t), g, k, bar, pred,
                      mode);
}
template <class Scope, class T, int R, int B, class Dim, class Done>
FJ_DEV void gather_tiles(Scope sc, T* smem_dst, const tensor<T, R, B>& t,
                         coords base, Dim dim, const int* idx, int k, Done& bar,
                         bool pred = true, pred_mode mode = pred_skip,
                         detail::site s = detail::site::here()) {
  detail::check_done<Done, Scope>();
  const int d = detail::checked_dim<R>(sc, check_gather_tiles, dim, s);
  const detail::coord_gather g = detail::gather_of(t.p, base, d, idx);
  detail::check_tiles<T, R>(sc, check_gather_tiles, t.p, g, k, smem_dst, pred,
                            true, detail::is_group<Done>::value, d, s);
  impl::load_tiles<R>(sc, smem_dst, detail::checked(t), g, k, bar, pred, mode);
}

// k tiles from SMEM (tile i at smem_src + i * t.box_elems()) to the tiles
// of `t` at cs[0..k-1], in the open group (commit_group, then wait_group
// before the SMEM is reused or the block exits), each clipped at the
// tensor's bounds as store_tile. Scope: none/fj::block or fj::warp. Tiles
// that overlap in GMEM are written in an unspecified order.
template <class T, int R, int B>
FJ_DEV void store_tiles(const tensor<T, R, B>& t, const coords* cs, int k,
                        const T* smem_src, bool pred = true,
                        detail::site s = detail::site::here()) {
  detail::check_tiles<T, R>(block, check_store_tiles, t.p,
                            detail::coord_list{cs}, k, smem_src, pred, false,
                            false, -1, s);
  impl::store_tiles<R>(block, detail::checked(t), detail::coord_list{cs}, k,
                       smem_src, pred);
}
template <class Scope, class T, int R, int B>
FJ_DEV void store_tiles(Scope sc, const tensor<T, R, B>& t, const coords* cs,
                        int k, const T* smem_src, bool pred = true,
                        detail::site s = detail::site::here()) {
  static_assert(detail::is_scope<Scope>::value,
                "a scope is fj::block or fj::warp");
  detail::check_tiles<T, R>(sc, check_store_tiles, t.p, detail::coord_list{cs},
                            k, smem_src, pred, false, false, -1, s);
  impl::store_tiles<R>(sc, detail::checked(t), detail::coord_list{cs}, k,
                       smem_src, pred);
}
// A scatter (a paged KV-cache append), the store twin of gather_tiles:
// tile i, at smem_src + i * t.box_elems(), goes to the tile at `base` with
// coordinate `dim` replaced by idx[i], in the open group. An index that
// puts its tile outside the tensor along `dim` (idx[i] < 0 or idx[i] +
// t.box(dim) > t.shape(dim)) writes nothing and never faults, so -1 skips
// tile i: a per-index predicate. Elsewhere a tile is clipped at the
// tensor's bounds (store_tile). Two indices that are equal write the same
// tile in an unspecified order. Scope: none/fj::block or fj::warp.
template <class T, int R, int B, class Dim>
FJ_DEV void scatter_tiles(const tensor<T, R, B>& t, coords base, Dim dim,
                          const int* idx, int k, const T* smem_src,
                          bool pred = true,
                          detail::site s = detail::site::here()) {
  const int d = detail::checked_dim<R>(block, check_scatter_tiles, dim, s);
  const detail::coord_gather g = detail::gather_of(t.p, base, d, idx);
  detail::check_tiles<T, R>(block, check_scatter_tiles, t.p, g, k, smem_src,
                            pred, false, false, d, s);
  impl::store_tiles<R>(block, detail::checked(t), g, k, smem_src, pred);
}
template <class Scope, class T, int R, int B, class Dim>
FJ_DEV void scatter_tiles(Scope sc, const tensor<T, R, B>& t, coords base,
                          Dim dim, const int* idx, int k, const T* smem_src,
                          bool pred = true,
                          detail::site s = detail::site::here()) {
  static_assert(detail::is_scope<Scope>::value,
                "a scope is fj::block or fj::warp");
  const int d = detail::checked_dim<R>(sc, check_scatter_tiles, dim, s);
  const detail::coord_gather g = detail::gather_of(t.p, base, d, idx);
  detail::check_tiles<T, R>(sc, check_scatter_tiles, t.p, g, k, smem_src, pred,
                            false, false, d, s);
  impl::store_tiles<R>(sc, detail::checked(t), g, k, smem_src, pred);
}

// --------------------------------------------------------------- prefetch
// Hints that GMEM will be read soon: warms L2. Block-collective, no wait.
// On this GPU's own memory only. On a peer GPU's memory (a P2P pointer) the
// prefetch instructions reach neither GPU's L2, so these calls do nothing
// useful there and cost their NVLink requests. Measured on two H200s over
// NV18, GPU0 reading 8 MiB that GPU1 owns, after GPU0 prefetched it:
//   dependent loads 1177 ns, against 1189 ns cold;
//   a streaming read took 37.5 us, against 32.9 us cold.
// For peer data, call fj_prefetch from the host (<fleetjit/fleetjit.h>):
//   FJ_PREFETCH_WARM_OWNER_L2 runs on the owner and warms the L2 that
//   serves NVLink reads (dependent loads ~15% faster);
//   FJ_PREFETCH_STAGE_LOCAL copies the data to the reader (re-reads 3-7x
//   faster).
FJ_DEV void prefetch_l2(const void* gmem, unsigned long long bytes) {
  impl::prefetch_l2(gmem, bytes);
}
template <class T, int R, int B>
FJ_DEV void prefetch_tile(const tensor<T, R, B>& t, coords c) {
  impl::prefetch_tile<R>(detail::checked(t), c);
}
// Brings the tensor map itself into the cache (tma only; else nothing).
template <class T, int R, int B>
FJ_DEV void prefetch_tensormap(const tensor<T, R, B>& t) {
  impl::prefetch_tensormap(detail::checked(t));
}

}  // namespace fj

// The slow-path library's build (FJ_SLOW_PATHS_LIBRARY, see
// copy/common.cuh): every out-of-line slow path this implementation has,
// for ranks 1 to 5, so that kernels built with FJ_SLOW_PATHS_EXTERN link
// against them.
#ifdef FJ_SLOW_PATHS_LIBRARY
#define FJ_SLOW_PATHS_OF_RANK_COMMON(R)                                    \
  template __device__ void fj::detail::walk_tile<R, fj::detail::store_op>( \
      const fj::tensor_param&, const fj::coords&, unsigned char*, bool,    \
      fj::detail::store_op&, fj::detail::team);                            \
  template __device__ void fj::detail::store_tile_slow<R>(                 \
      const fj::tensor_param&, fj::coords, const unsigned char*, bool,     \
      fj::detail::team);
#if FJ_COPY_IMPL == 0
#define FJ_SLOW_PATHS_OF_RANK(R)                                             \
  FJ_SLOW_PATHS_OF_RANK_COMMON(R)                                            \
  template __device__ void fj::detail::walk_tile<R, fj::sync_impl::load_op>( \
      const fj::tensor_param&, const fj::coords&, unsigned char*, bool,      \
      fj::sync_impl::load_op&, fj::detail::team);                            \
  template __device__ void fj::sync_impl::load_tile_slow<R>(                 \
      void*, const fj::tensor_param&, fj::coords, bool, fj::pred_mode, bool, \
      fj::detail::team);
#else
#define FJ_SLOW_PATHS_OF_CP_ASYNC(R)                                         \
  template __device__ void                                                   \
  fj::detail::walk_tile<R, fj::cp_async_impl::load_op>(                      \
      const fj::tensor_param&, const fj::coords&, unsigned char*, bool,      \
      fj::cp_async_impl::load_op&, fj::detail::team);                        \
  template __device__ void fj::cp_async_impl::issue_tile_slow<R>(            \
      void*, const fj::tensor_param&, fj::coords, bool, fj::pred_mode, bool, \
      fj::detail::team);
#if FJ_COPY_IMPL == 1
#define FJ_SLOW_PATHS_OF_RANK(R) \
  FJ_SLOW_PATHS_OF_RANK_COMMON(R) FJ_SLOW_PATHS_OF_CP_ASYNC(R)
#else
// tma's gathers (fj::gather_tiles and the coordinate-list loads): one
// out-of-line load_tiles_bar per rank and kind of coordinates.
#define FJ_SLOW_PATHS_OF_GATHER(R, C)                                       \
  template __device__ void fj::tma_impl::load_tiles_bar<R, C>(              \
      unsigned char*, const fj::tensor_param&, const C&, int, fj::barrier&, \
      bool, fj::pred_mode, fj::detail::team);
#define FJ_SLOW_PATHS_OF_RANK(R)                                \
  FJ_SLOW_PATHS_OF_RANK_COMMON(R)                               \
  FJ_SLOW_PATHS_OF_CP_ASYNC(R)                                  \
  template __device__ void fj::tma_impl::load_tile_bar<R>(      \
      void*, const fj::tensor_param&, fj::coords, fj::barrier&, \
      unsigned short, bool, fj::pred_mode, fj::detail::team);   \
  FJ_SLOW_PATHS_OF_GATHER(R, fj::detail::coord_list)            \
  FJ_SLOW_PATHS_OF_GATHER(R, fj::detail::coord_gather)          \
  template __device__ void fj::tma_impl::store_generic<R>(      \
      const fj::tensor_param&, fj::coords, const void*, bool,   \
      fj::detail::team);
#endif
#endif
FJ_SLOW_PATHS_OF_RANK(1)
FJ_SLOW_PATHS_OF_RANK(2)
FJ_SLOW_PATHS_OF_RANK(3)
FJ_SLOW_PATHS_OF_RANK(4)
FJ_SLOW_PATHS_OF_RANK(5)
#endif  // FJ_SLOW_PATHS_LIBRARY

#endif  // FLEETJIT_COPY_CUH_
