// fleetjit copy layer, shared part: the types every implementation uses, the
// thread and address helpers, OOB fill values, cluster queries, and the tile
// walker that the software (sync and cp_async) tile paths are built on.
//
// Internal to <fleetjit/copy.cuh>: include that instead. Builtin types and
// inline PTX only, so it compiles under NVRTC with no system headers.
#ifndef FLEETJIT_COPY_COMMON_CUH_
#define FLEETJIT_COPY_COMMON_CUH_

#include <fleetjit/copy/tensor_param.h>

#define FJ_DEV __device__ __forceinline__

// The layer's out-of-line slow paths (the tile walker, the unaligned and
// narrow-row fallbacks, the TMA load's software fallback, fill_block) are
// most of what a kernel on the layer compiles. fleetjit may build them
// once per target and implementation into a device library and link it
// (docs/slow-path-library.md): the kernel's own build then
// defines FJ_SLOW_PATHS_EXTERN and sees their declarations alone, and the
// library's build defines FJ_SLOW_PATHS_LIBRARY and instantiates every one
// (end of <fleetjit/copy.cuh>). Without either, each build compiles them.
#if defined(FJ_SLOW_PATHS_EXTERN) || defined(FJ_SLOW_PATHS_LIBRARY)
#define FJ_SLOW_INLINE
#else
#define FJ_SLOW_INLINE inline
#endif

// `if constexpr` where the dialect has it (C++17, fleetjit's default): the
// discarded branches of a rank dispatch are then never instantiated, which
// is a third of a tile kernel's front-end time. Plain `if` under C++14.
#if __cplusplus >= 201703L
#define FJ_IF_CONSTEXPR if constexpr
#else
#define FJ_IF_CONSTEXPR if
#endif

namespace fj {

// Scope tags: who calls a copy. fj::block (the default, no tag): every
// thread of the block, starting with a block barrier. fj::warp: the 32
// lanes of one warp, converged, with the same arguments; no block barrier.
struct block_t {};
struct warp_t {};
constexpr block_t block{};
constexpr warp_t warp{};

// A barrier in shared memory (8 bytes, the size of an mbarrier). Declare it
// `__shared__`; see <fleetjit/copy.cuh> for the contract. The methods are
// defined by the implementation the build selected.
struct __align__(8) barrier {
  unsigned long long state_;

  FJ_DEV void init(unsigned count);
  FJ_DEV void arrive();
  // One arrival for the calling warp (all 32 lanes call it, converged):
  // made by lane 0 after the warp's earlier copies were issued and its
  // SMEM writes released.
  FJ_DEV void arrive(warp_t);
  FJ_DEV bool test(unsigned parity);
  FJ_DEV void wait(unsigned parity);
  FJ_DEV void arrive_and_wait(unsigned parity);
};

// What a copy whose predicate is false does to its destination.
enum pred_mode : int {
  pred_skip = 0,  // nothing: SMEM keeps its old contents
  pred_zero = 1,  // the whole destination is zero-filled
};

// Tag: "this copy belongs to the open group" (completed by wait_group).
struct in_group_t {};
constexpr in_group_t in_group{};

// Signed tile start coordinates, dimension 0 innermost (tensor_param order).
struct coords {
  int v[FJ_TP_MAX_RANK];
};
FJ_DEV coords at(int c0, int c1 = 0, int c2 = 0, int c3 = 0, int c4 = 0) {
  coords c;
  c.v[0] = c0;
  c.v[1] = c1;
  c.v[2] = c2;
  c.v[3] = c3;
  c.v[4] = c4;
  return c;
}

// Stage index and phase parity of a Stages-deep ring of buffers, each with
// its barriers: stage() in [0, Stages), phase() in {0, 1}; advance() moves
// to the next stage and flips the phase when it wraps to stage 0. (Not
// named STAGES: kernels define that macro, often with -DSTAGES=n.)
template <int Stages>
struct pipeline {
  static_assert(Stages >= 1, "a pipeline has at least one stage");
  unsigned stage_ = 0, phase_ = 0;
  FJ_DEV unsigned stage() const { return stage_; }
  FJ_DEV unsigned phase() const { return phase_; }
  FJ_DEV void advance() {
    if (++stage_ == (unsigned)Stages) {
      stage_ = 0;
      phase_ ^= 1u;
    }
  }
};

// Swizzled SMEM layouts: the TMA patterns (CU_TENSOR_MAP_SWIZZLE_*). A
// tile of a tensor passed with swizzle W has rows of W bytes (box[0] *
// elem_bytes == W); byte `b` of the dense row-major tile lives at
// swizzle<S>::offset(b) in SMEM under every implementation. The tile must
// be aligned to the pattern's repeat (S::repeat bytes: 256, 512, 1024).
struct swz_none {
  static constexpr unsigned mode = 0, mask = 0, bytes = 0, repeat = 16;
};
struct swz32 {
  static constexpr unsigned mode = 1, mask = 1, bytes = 32, repeat = 256;
};
struct swz64 {
  static constexpr unsigned mode = 2, mask = 3, bytes = 64, repeat = 512;
};
struct swz128 {
  static constexpr unsigned mode = 3, mask = 7, bytes = 128, repeat = 1024;
};
template <class S>
struct swizzle {
  // Logical byte offset in the tile -> physical byte offset.
  static FJ_DEV constexpr unsigned offset(unsigned b) {
    return b ^ (((b >> 7) & S::mask) << 4);
  }
};
// A typed view of a (possibly swizzled) SMEM tile of `row_elems` per row.
template <class T, class S = swz_none>
struct tile_ref {
  T* base;
  unsigned row_elems;
  FJ_DEV tile_ref(T* smem, unsigned row) : base(smem), row_elems(row) {}
  FJ_DEV T& operator()(unsigned row, unsigned col) const {
    const unsigned b = (row * row_elems + col) * (unsigned)sizeof(T);
    return *(T*)((unsigned char*)base + swizzle<S>::offset(b));
  }
};

namespace detail {

typedef unsigned long long u64;
typedef long long i64;

// Compile-time checks of what a caller passes (the C++ error names the
// mistake at the call, under every implementation alike). Enums, not static
// data members: those would be emitted as globals of every module.
template <class T>
struct is_const {
  enum { value = 0 };
};
template <class T>
struct is_const<const T> {
  enum { value = 1 };
};
template <class T>
struct is_done {  // what a load completes on: a barrier or the open group
  enum { value = 0 };
};
template <>
struct is_done<barrier> {
  enum { value = 1 };
};
template <>
struct is_done<in_group_t> {
  enum { value = 1 };
};
template <>
struct is_done<const in_group_t> {
  enum { value = 1 };
};
template <class S>
struct is_scope {
  enum { value = 0 };
};
template <>
struct is_scope<block_t> {
  enum { value = 1 };
};
template <>
struct is_scope<warp_t> {
  enum { value = 1 };
};
template <class Done, class Scope = block_t>
FJ_DEV constexpr void check_done() {
  static_assert(is_done<Done>::value,
                "fj::load_tiles / fj::gather_tiles complete on one "
                "fj::barrier (a stage's: full[p.stage()], not the array) or "
                "on fj::in_group");
  static_assert(is_scope<Scope>::value, "a scope is fj::block or fj::warp");
}

FJ_DEV unsigned thread_rank() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
FJ_DEV unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
FJ_DEV unsigned lane_id() { return thread_rank() & 31u; }

// The threads that share a copy's work: this thread's rank among them and
// their number (the block, or one warp's 32 lanes).
struct team {
  unsigned rank, size;
};
FJ_DEV team block_team() { return team{thread_rank(), block_threads()}; }
FJ_DEV team warp_team() { return team{lane_id(), 32u}; }
FJ_DEV team team_of(block_t) { return block_team(); }
FJ_DEV team team_of(warp_t) { return warp_team(); }

// The coordinates of a tile list (fj::load_tiles, fj::store_tiles) and of
// a gather or scatter (fj::gather_tiles, fj::scatter_tiles): tile i's
// start, and ok(i): whether tile i lies inside the tensor along a gathered
// dimension. A gathered tile that does not reads as the fill, a scattered
// one is not written (copy.cuh, contract 7); a list's tiles are always ok.
struct coord_list {
  const coords* cs;
  FJ_DEV coords operator()(int i) const { return cs[i]; }
  FJ_DEV bool ok(int) const { return true; }
};
struct coord_gather {
  coords base;
  int dim;
  const int* idx;
  i64 last;  // the largest index whose tile fits: shape[dim] - box[dim]
  FJ_DEV coords operator()(int i) const {
    coords c = base;
    const int v = idx[i];
#pragma unroll
    for (int d = 0; d < FJ_TP_MAX_RANK; ++d)
      if (d == dim) c.v[d] = v;
    return c;
  }
  FJ_DEV bool ok(int i) const {
    const int v = idx[i];
    return v >= 0 && (i64)v <= last;
  }
};
// The gather of `p` along `dim` from `base`.
FJ_DEV coord_gather gather_of(const tensor_param& p, const coords& base,
                              int dim, const int* idx) {
  coord_gather g;
  g.base = base;
  g.dim = dim;
  g.idx = idx;
  g.last = p.shape[dim] - p.box[dim];
  return g;
}

// Entering a copy call: the block's barrier, or the warp's.
FJ_DEV void enter_scope(block_t) { __syncthreads(); }
FJ_DEV void enter_scope(warp_t) { __syncwarp(); }

// The runtime swizzle of a tile (tensor_param::swizzle): the XOR mask of
// the 16-byte chunk bits, 0 for none. swz() maps a tile byte offset.
FJ_DEV unsigned swz_mask(const tensor_param& p) {
  return (1u << (p.swizzle & 3u)) - 1u;
}
FJ_DEV unsigned swz(unsigned b, unsigned mask) {
  return b ^ (((b >> 7) & mask) << 4);
}
FJ_DEV unsigned smem_u32(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
FJ_DEV u64 addr(const void* p) { return (u64)p; }

// ---------------------------------------------------------------- clusters
// Thread-block clusters exist from sm_90 on; below, every block is a
// cluster of one. These depend on the architecture, not on the copy impl.
FJ_DEV unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  return 0;
#endif
}
FJ_DEV unsigned cluster_size() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
#else
  return 1;
#endif
}

// Block-wide barrier across the cluster (every thread of every CTA); a
// plain __syncthreads() below sm_90. The proxy fence first makes this
// thread's earlier SMEM writes ordered before copy-engine writes that other
// CTAs issue after the barrier (a multicast into this CTA).
FJ_DEV void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "fence.proxy.async.shared::cta;\n\t"
      "barrier.cluster.arrive.release;\n\t"
      "barrier.cluster.wait.acquire;" ::
          : "memory");
#else
  __syncthreads();
#endif
}

// --------------------------------------------------------------- OOB fill
// The 8-byte pattern (one element repeated) that fills out-of-bounds
// elements of a tile. NaN for float dtypes under oob_nan, zero otherwise
// (integer dtypes have no NaN; oob_nan reads as zeros for them).
FJ_DEV u64 oob_fill_pattern(const tensor_param& p) {
  if (p.oob != oob_nan) return 0;
  switch (p.dtype) {
    case dtype_f32:
      return 0x7FC000007FC00000ull;
    case dtype_f64:
      return 0x7FF8000000000000ull;
    case dtype_f16:
      return 0x7E007E007E007E00ull;
    case dtype_bf16:
      return 0x7FC07FC07FC07FC0ull;
    case dtype_f8e4m3:
      return 0x7F7F7F7F7F7F7F7Full;
    case dtype_f8e5m2:
      return 0x7E7E7E7E7E7E7E7Eull;
    default:
      return 0;
  }
}

// ------------------------------------------------- plain (generic) moves
// Copies `w` bytes (1, 2, 4, 8 or 16; both addresses aligned to w).
FJ_DEV void move(void* dst, const void* src, unsigned w) {
  switch (w) {
    case 16:
      *(uint4*)dst = *(const uint4*)src;
      break;
    case 8:
      *(u64*)dst = *(const u64*)src;
      break;
    case 4:
      *(unsigned*)dst = *(const unsigned*)src;
      break;
    case 2:
      *(unsigned short*)dst = *(const unsigned short*)src;
      break;
    default:
      *(unsigned char*)dst = *(const unsigned char*)src;
      break;
  }
}
// Stores the first `w` bytes of the repeated 8-byte `pattern` (dst aligned).
FJ_DEV void put(void* dst, u64 pattern, unsigned w) {
  switch (w) {
    case 16: {
      uint4 v;
      v.x = v.z = (unsigned)pattern;
      v.y = v.w = (unsigned)(pattern >> 32);
      *(uint4*)dst = v;
      break;
    }
    case 8:
      *(u64*)dst = pattern;
      break;
    case 4:
      *(unsigned*)dst = (unsigned)pattern;
      break;
    case 2:
      *(unsigned short*)dst = (unsigned short)pattern;
      break;
    default:
      *(unsigned char*)dst = (unsigned char)pattern;
      break;
  }
}
// A chunk of k elements of eb bytes of which [lo, hi) lie inside the
// tensor: copies those, fills the rest with `pattern`. Kept rolled: the
// unrolled loop, times the element widths, was a third of a tile kernel's
// build time, for a path only ragged edges take.
FJ_DEV void move_part(unsigned char* s, const unsigned char* g, unsigned lo,
                      unsigned hi, unsigned k, unsigned eb, u64 pattern) {
#pragma unroll 1
  for (unsigned e = 0; e < k; ++e) {
    if (e >= lo && e < hi) {
      move(s + e * eb, g + e * eb, eb);
    } else {
      put(s + e * eb, pattern, eb);
    }
  }
}

// The widest power of two <= 16 dividing `bits` (an OR of offsets).
FJ_DEV unsigned widest(u64 bits) {
  unsigned w = 16;
  while (w > 1 && (bits & (w - 1))) w >>= 1;
  return w;
}

// Block-cooperative fill of `bytes` bytes of SMEM with the repeated 8-byte
// `pattern`, byte i of dst getting byte (i % 8) of the pattern. Not inlined:
// only false predicates under pred_zero reach it, and one copy instead of
// one per call site (each a loop over put()'s five widths) keeps NVRTC
// builds fast.
__device__ __noinline__ FJ_SLOW_INLINE void fill_block(void* dst,
                                                       unsigned bytes,
                                                       u64 pattern,
                                                       team tm = block_team())
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  unsigned char* d = (unsigned char*)dst;
  const unsigned w = widest(addr(d) | bytes);
  for (unsigned i = tm.rank * w; i < bytes; i += tm.size * w)
    put(d + i, pattern >> ((i & 7) * 8), w);
}
#endif

// Chunks per thread moved between a batch of loads and its stores (the
// last batch predicated, so a short tile still has its loads in flight).
// A build may set it (-DFJ_FAST_UNROLL=N): more loads in flight per thread
// against more registers.
#ifndef FJ_FAST_UNROLL
#define FJ_FAST_UNROLL 8
#endif
// The batch of the out-of-line slow paths (boxes that need the chunk
// cursor). Those functions share the kernel's registers, and ptxas sizes
// the whole kernel for its hungriest callee: at 8, the sync tile load's
// cursor path alone set the transpose example at 167 registers and the
// tile store's at 126 under cp_async, where the code the kernel runs
// needs 72 and 64 (NVRTC 13, sm_90). At 2 they are 106 and 96.
// -DFJ_SLOW_UNROLL=N for more loads in flight on those boxes.
#ifndef FJ_SLOW_UNROLL
#define FJ_SLOW_UNROLL 2
#endif
// 1: the narrow row path (rows only 4- or 8-byte aligned) is tried at the
// call site, before the out-of-line rest (more code and registers in the
// kernel; no call per tile on those tensors).
#ifndef FJ_NARROW_INLINE
#define FJ_NARROW_INLINE 0
#endif

// Block-cooperative generic copy of `bytes` bytes (any alignment). The
// 16-byte body goes in batches of FJ_FAST_UNROLL loads, then their stores:
// moved one chunk at a time, each load waits for the store before it (the
// compiler cannot tell generic SMEM and GMEM addresses apart), so a thread
// had one load in flight and sync's spans (the row kernels' loads) paid a
// memory round trip per 16 bytes.
FJ_DEV void move_block(void* dst, const void* src, unsigned bytes,
                       team tm = block_team()) {
  unsigned char* d = (unsigned char*)dst;
  const unsigned char* s = (const unsigned char*)src;
  const unsigned w = widest(addr(d) - addr(s));
  unsigned head = (unsigned)(-addr(d) & (w - 1));
  if (head > bytes) head = bytes;
  const unsigned body = (bytes - head) & ~(w - 1);
  const unsigned t = tm.rank, n = tm.size;
  for (unsigned i = t; i < head; i += n) d[i] = s[i];
  if (w == 16) {
    const unsigned end = head + body, step = n * 16;
    for (unsigned i = head + t * 16; i < end; i += FJ_FAST_UNROLL * step) {
      uint4 v[FJ_FAST_UNROLL];
#pragma unroll
      for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
        if (i + j * step < end) v[j] = *(const uint4*)(s + i + j * step);
      }
#pragma unroll
      for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
        if (i + j * step < end) *(uint4*)(d + i + j * step) = v[j];
      }
    }
  } else {
    for (unsigned i = head + t * w; i < head + body; i += n * w)
      move(d + i, s + i, w);
  }
  for (unsigned i = head + body + t; i < bytes; i += n) d[i] = s[i];
}

// Block-cooperative bytewise copy and fill, for the ends of a span.
FJ_DEV void move_bytes(void* dst, const void* src, unsigned n,
                       team tm = block_team()) {
  for (unsigned i = tm.rank; i < n; i += tm.size)
    ((unsigned char*)dst)[i] = ((const unsigned char*)src)[i];
}
FJ_DEV void zero_bytes(void* dst, unsigned n, team tm = block_team()) {
  for (unsigned i = tm.rank; i < n; i += tm.size) ((unsigned char*)dst)[i] = 0;
}

// How a contiguous copy splits: `head` bytes to reach `w` alignment (w is
// the widest chunk both addresses agree on), a `body` of whole chunks, and
// the `tail`. Bulk and vector paths take the body; the ends go bytewise.
struct span_split {
  unsigned w, head, body, tail;
};
FJ_DEV span_split split_span(const void* dst, const void* src, unsigned bytes) {
  span_split s;
  s.w = widest(addr(dst) - addr(src));
  s.head = (unsigned)(-addr(dst) & (s.w - 1));
  if (s.head > bytes) s.head = bytes;
  s.body = (bytes - s.head) & ~(s.w - 1);
  s.tail = bytes - s.head - s.body;
  return s;
}

// The element offset of row `row` (rows counted over the box's dimensions
// 1..R-1, dimension 1 fastest) of the tile at `c`, without dimension 0's;
// *inside says whether the row lies in the tensor.
template <int R>
FJ_DEV i64 tile_row_offset(const tensor_param& p, const coords& c, unsigned row,
                           bool* inside) {
  i64 goff = 0;
  bool ok = true;
  unsigned rest = row;
#pragma unroll
  for (int d = 1; d < R; ++d) {
    unsigned id = rest;
    if (d < R - 1) {
      id = rest % (unsigned)p.box[d];
      rest /= (unsigned)p.box[d];
    }
    const i64 g = (i64)c.v[d] + id;
    ok = ok && g >= 0 && g < p.shape[d];
    goff += g * p.stride[d];
  }
  *inside = ok;
  return goff;
}

// ------------------------------------------------------------ tile walker
// Walks a tile of `p` starting at `c` in chunks that threads of the block
// share. A chunk is `w` bytes of one box row (dimension-0 line): w is the
// widest of 16/8/4/2/1 that keeps every chunk aligned in SMEM and GMEM
// (one element when dimension 0 is strided). For each chunk the walker
// calls exactly one of
//   op.full(s, g, w)             every element in bounds
//   op.oob(s, w)                 every element out of bounds
//   op.part(s, g, w, lo, hi, k)  elements [lo, hi) of the chunk's k in bounds
// where `s` is the chunk in SMEM (dense box, row-major, dim 0 innermost)
// and `g` the matching GMEM address (computed even when out of bounds; an
// op must not dereference the out-of-bounds part). With `check` false
// (oob_promise_in_bounds) every chunk is `full`.
// Not inlined: one copy per (rank, op) keeps NVRTC builds fast (a kernel
// that loads tiles in several places compiles ~30% faster), and one call
// per tile costs nothing next to the walk.
template <int R, class Op>
__device__ __noinline__ void walk_tile(const tensor_param& p, const coords& c,
                                       unsigned char* smem, bool check, Op& op,
                                       team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  const unsigned m = swz_mask(p);
  const unsigned eb = (unsigned)p.elem_bytes;
  const unsigned box0 = (unsigned)p.box[0];
  const i64 s0 = p.stride[0];
  unsigned w = eb;
  if (s0 == 1) {
    u64 bits =
        addr(smem) | addr(p.data) | (u64)(box0 * eb) | (u64)((i64)c.v[0] * eb);
#pragma unroll
    for (int d = 1; d < R; ++d) bits |= (u64)(p.stride[d] * eb);
    w = widest(bits);
    if (w < eb) w = eb;  // misaligned tensor: still element-wise
  }
  const unsigned k = w / eb;      // elements per chunk
  const unsigned cpr = box0 / k;  // chunks per row
  unsigned rows = 1;
#pragma unroll
  for (int d = 1; d < R; ++d) rows *= (unsigned)p.box[d];
  // Rows go to groups of `lanes` consecutive threads (a power of two up to
  // 32 that covers a row's chunks and divides the team), chunks of a row to
  // a group's threads: each row's address and bounds are worked out once,
  // and a chunk costs adds and compares (no divide per chunk). Consecutive
  // threads still take consecutive chunks of a row.
  unsigned lanes = 1;
  while (lanes < 32 && lanes < cpr) lanes <<= 1;
  while (tm.size % lanes != 0) lanes >>= 1;
  const unsigned sub = tm.rank % lanes, groups = tm.size / lanes;
  const unsigned row_bytes = box0 * eb;
  const unsigned char* base = (const unsigned char*)p.data;
  const i64 lo0 = -(i64)c.v[0], hi0 = p.shape[0] - (i64)c.v[0];
  for (unsigned row = tm.rank / lanes; row < rows; row += groups) {
    // Outer coordinates of this row, and whether they are in bounds.
    bool ok;
    const i64 goff = tile_row_offset<R>(p, c, row, &ok);
    const unsigned char* grow = base + (goff + (i64)c.v[0] * s0) * (i64)eb;
    const i64 gstep = (i64)k * s0 * eb;  // GMEM bytes per chunk
    const unsigned srow = row * row_bytes;
    for (unsigned ch = sub; ch < cpr; ch += lanes) {
      unsigned char* s = smem + swz(srow + ch * w, m);
      const unsigned char* g = grow + (i64)ch * gstep;
      if (!check) {
        op.full(s, g, w);
        continue;
      }
      // Elements [lo, hi) of this chunk's k are inside dimension 0.
      const i64 e0 = (i64)ch * k;
      const i64 lo_ll = lo0 - e0, hi_ll = hi0 - e0;
      const unsigned lo = lo_ll <= 0 ? 0 : (lo_ll >= k ? k : (unsigned)lo_ll);
      const unsigned hi = hi_ll <= 0 ? 0 : (hi_ll >= k ? k : (unsigned)hi_ll);
      if (!ok || hi <= lo) {
        op.oob(s, w);
      } else if (lo == 0 && hi == k) {
        op.full(s, g, w);
      } else {
        op.part(s, g, w, lo, hi, k);
      }
    }
  }
}
#endif

// ---------------------------------------------------- tile fast path
// The common tile: dimension 0 contiguous, every row 16-byte aligned in SMEM
// and GMEM, the whole box inside the tensor (or promised to be). It moves
// in 16-byte chunks with no bounds checks; chunk i of the box sits at SMEM
// offset 16 * i, and each thread steps from its chunk i to i + threads with
// a cursor (adds and compares only: the walker above divides per chunk), so
// the loops can keep several independent 16-byte accesses in flight.
// Whether the box at `c` lies wholly inside the tensor.
template <int R>
FJ_DEV bool box_inside(const tensor_param& p, const coords& c) {
#pragma unroll
  for (int d = 0; d < R; ++d) {
    if (c.v[d] < 0 || (i64)c.v[d] + p.box[d] > p.shape[d]) return false;
  }
  return true;
}
template <int R>
FJ_DEV bool tile_fast(const tensor_param& p, const coords& c, const void* smem,
                      bool check) {
  if (p.stride[0] != 1) return false;
  const i64 eb = p.elem_bytes;
  u64 bits = addr(smem) | addr(p.data) | (u64)(p.box[0] * eb) |
             (u64)((i64)c.v[0] * eb);
#pragma unroll
  for (int d = 1; d < R; ++d) bits |= (u64)(p.stride[d] * eb);
  if ((bits & 15) != 0 || p.box[0] <= 0) return false;
#pragma unroll
  for (int d = 1; d < R; ++d) {
    if (p.box[d] <= 0) return false;  // an empty box: the walker's business
  }
  return !check || box_inside<R>(p, c);
}

// Chunks of a fast-path box: `total` of them, `cpr` per row.
template <int R>
FJ_DEV unsigned fast_chunks(const tensor_param& p) {
  unsigned n = (unsigned)p.box[0] * (unsigned)p.elem_bytes / 16;
#pragma unroll
  for (int d = 1; d < R; ++d) n *= (unsigned)p.box[d];
  return n;
}

// A thread's position in a fast-path box: `g`, the byte offset from p.data
// of its current chunk. next() advances by `step` chunks (the block size);
// the step is split once into a column part and mixed-radix row digits.
template <int R>
struct chunk_cursor {
  i64 g;
  unsigned ch, cpr, dc;  // chunk within its row, chunks per row, step's part
  unsigned idx[R], dr[R], box[R];  // row index / step digits, dims 1..R-1
  i64 sb[R], gstep[R], wrap[R];    // stride, dr * stride, box * stride (bytes)

  FJ_DEV void init(const tensor_param& p, const coords& c, unsigned first,
                   unsigned step) {
    const i64 eb = p.elem_bytes;
    cpr = (unsigned)(p.box[0] * eb) / 16;
    unsigned row = first / cpr, srow = step / cpr;
    ch = first - row * cpr;
    dc = step - srow * cpr;
    g = (i64)c.v[0] * eb + (i64)ch * 16;
#pragma unroll
    for (int d = 1; d < R; ++d) {
      box[d] = (unsigned)p.box[d];
      sb[d] = p.stride[d] * eb;
      if (d < R - 1) {
        idx[d] = row % box[d];
        row /= box[d];
        dr[d] = srow % box[d];
        srow /= box[d];
      } else {  // the outermost digit takes the rest (past the box = done)
        idx[d] = row;
        dr[d] = srow;
      }
      gstep[d] = (i64)dr[d] * sb[d];
      wrap[d] = (i64)box[d] * sb[d];
      g += ((i64)c.v[d] + idx[d]) * sb[d];
    }
  }
  FJ_DEV void next() {
    ch += dc;
    g += (i64)(dc * 16);
    bool carry = ch >= cpr;
    if (carry) {
      ch -= cpr;
      g -= (i64)(cpr * 16);
    }
#pragma unroll
    for (int d = 1; d < R; ++d) {
      g += gstep[d] + (carry ? sb[d] : 0);
      if (d < R - 1) {
        idx[d] += dr[d] + (carry ? 1u : 0u);
        carry = idx[d] >= box[d];
        if (carry) {
          idx[d] -= box[d];
          g -= wrap[d];
        }
      }
    }
  }
};

// The fast path's common case, in a handful of instructions per chunk:
// the block's step is a whole number of rows (the chunks per row divide the
// block size, or the box is one row) and the box's rows are evenly strided
// in memory (rank 2, or outer dims packed over dim 1). A thread's chunks
// are then `count` equal steps apart in GMEM and in SMEM, so each costs one
// add per address instead of chunk_cursor's carries (measured with Nsight
// Compute on the H200: the cursor made the cp.async and sync tile copies
// issue-bound, ~23 instructions per chunk). `ok` is false otherwise.
struct row_walk {
  bool ok;
  unsigned count;     // chunks of this thread
  i64 g, gstep;       // GMEM byte offset (from p.data) of its first chunk; step
  unsigned s, sstep;  // SMEM byte offset of its first chunk; step
};
// `wb` is the chunk width in bytes (16 on the fast path; 4 or 8 on the
// narrow path below).
template <int R>
FJ_DEV row_walk plan_rows(const tensor_param& p, const coords& c,
                          unsigned first, unsigned step, unsigned wb = 16) {
  row_walk w{};
  const i64 eb = p.elem_bytes;
  const unsigned cpr = (unsigned)(p.box[0] * eb) / wb;
  i64 g = (i64)c.v[0] * eb;
  unsigned rows = 1;
#pragma unroll
  for (int d = 1; d < R; ++d) {
    if (d >= 2 && p.stride[d] != (i64)p.box[d - 1] * p.stride[d - 1]) return w;
    rows *= (unsigned)p.box[d];
    g += (i64)c.v[d] * p.stride[d] * eb;
  }
  if (rows == 1) {  // one row: the block walks it with stride `step`
    w.ok = true;
    w.count = first < cpr ? (cpr - first + step - 1) / step : 0;
    w.g = g + (i64)first * wb;
    w.gstep = (i64)step * wb;
  } else {
    if (step % cpr != 0) return w;
    const unsigned row = first / cpr, srow = step / cpr;
    const i64 row_bytes = p.stride[R > 1 ? 1 : 0] * eb;
    w.ok = true;
    w.count = row < rows ? (rows - row + srow - 1) / srow : 0;
    w.g = g + (i64)(first - row * cpr) * wb + (i64)row * row_bytes;
    w.gstep = (i64)srow * row_bytes;
  }
  w.s = first * wb;
  w.sstep = step * wb;
  return w;
}

// ------------------------------------------------------ narrow row path
// Boxes the fast path refuses because their rows are only 4- or 8-byte
// aligned (a row pitch of 3001 floats: no tensor map, no 16-byte chunk),
// walked like plan_rows' boxes in chunks of `wb` = 4 or 8 bytes instead of
// the walker's per-chunk address and bounds arithmetic: the batched loads
// stay in flight, and a chunk costs an add per address. A box that leaves
// the tensor takes this path too when a chunk is one element (wb ==
// elem_bytes) and the rank is at most 2: each chunk is then wholly in or
// out, by two compares on its coordinates (x, y), which step by (dx, dy).
struct narrow_walk {
  row_walk w;   // w.ok false: not this path (the walker's)
  unsigned wb;  // chunk bytes: 4 or 8
  bool check;   // chunks may leave the tensor: test inside(x, y)
  // Chunk coordinates (dims 0, 1), their steps, and the shape clamped to
  // 2^31 - 1: 32-bit, as tile coordinates are.
  int x, dx, y, dy, nx, ny;
  // Unsigned: a negative coordinate is a large one (outside), and the
  // steps wrap without overflow.
  FJ_DEV bool inside(unsigned j) const {
    return !check || ((unsigned)x + j * (unsigned)dx < (unsigned)nx &&
                      (unsigned)y + j * (unsigned)dy < (unsigned)ny);
  }
  FJ_DEV void advance(unsigned j) {
    x = (int)((unsigned)x + j * (unsigned)dx);
    y = (int)((unsigned)y + j * (unsigned)dy);
  }
};
FJ_DEV int clamp_extent(i64 n) { return n > 0x7FFFFFFF ? 0x7FFFFFFF : (int)n; }
template <int R>
FJ_DEV narrow_walk plan_narrow(const tensor_param& p, const coords& c,
                               const void* smem, bool check, team tm) {
  narrow_walk n{};
  const i64 eb = p.elem_bytes;
  if (p.stride[0] != 1 || p.box[0] <= 0) return n;
  u64 bits = addr(smem) | addr(p.data) | (u64)(p.box[0] * eb) |
             (u64)((i64)c.v[0] * eb);
#pragma unroll
  for (int d = 1; d < R; ++d) {
    if (p.box[d] <= 0) return n;
    bits |= (u64)(p.stride[d] * eb);
  }
  const unsigned wb = widest(bits);
  if (wb < 4 || wb > 8 || wb < (unsigned)eb) return n;
  bool inside = true;
  if (check) {
#pragma unroll
    for (int d = 0; d < R; ++d)
      inside = inside && c.v[d] >= 0 && (i64)c.v[d] + p.box[d] <= p.shape[d];
  }
  if (!inside && (R > 2 || wb != (unsigned)eb)) return n;
  n.w = plan_rows<R>(p, c, tm.rank, tm.size, wb);
  if (!n.w.ok) return n;
  n.wb = wb;
  n.check = !inside;
  const unsigned cpr = (unsigned)(p.box[0] * eb) / wb;
  unsigned rows = 1;
#pragma unroll
  for (int d = 1; d < R; ++d) rows *= (unsigned)p.box[d];
  const int y0 = R > 1 ? c.v[1] : 0;
  n.nx = clamp_extent(p.shape[0]);
  n.ny = R > 1 ? clamp_extent(p.shape[R > 1 ? 1 : 0]) : 1;
  if (rows == 1) {  // the thread's chunks step along the row
    n.x = c.v[0] + (int)tm.rank;
    n.dx = (int)tm.size;
    n.y = y0;
    n.dy = 0;
  } else {  // a fixed column; the rows step by size / cpr
    n.x = c.v[0] + (int)(tm.rank % cpr);
    n.dx = 0;
    n.y = y0 + (int)(tm.rank / cpr);
    n.dy = (int)(tm.size / cpr);
  }
  return n;
}

// 4- and 8-byte moves with explicit state spaces, for the narrow path.
template <class U>
FJ_DEV U ld_global_n(const void* g) {
#ifdef FJ_COPY_HOST_EMULATION
  return *(const U*)g;
#else
  U v;
  if (sizeof(U) == 8) {
    asm volatile("ld.global.u64 %0, [%1];"
                 : "=l"(*(u64*)&v)
                 : "l"(__cvta_generic_to_global(g))
                 : "memory");
  } else {
    asm volatile("ld.global.u32 %0, [%1];"
                 : "=r"(*(unsigned*)&v)
                 : "l"(__cvta_generic_to_global(g))
                 : "memory");
  }
  return v;
#endif
}
template <class U>
FJ_DEV void st_global_n(void* g, U v) {
#ifdef FJ_COPY_HOST_EMULATION
  *(U*)g = v;
#else
  if (sizeof(U) == 8) {
    asm volatile("st.global.u64 [%0], %1;" ::"l"(__cvta_generic_to_global(g)),
                 "l"((u64)v)
                 : "memory");
  } else {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(__cvta_generic_to_global(g)),
                 "r"((unsigned)v)
                 : "memory");
  }
#endif
}
template <class U>
FJ_DEV U ld_shared_n(const void* s) {
#ifdef FJ_COPY_HOST_EMULATION
  return *(const U*)s;
#else
  U v;
  if (sizeof(U) == 8) {
    asm volatile("ld.shared.u64 %0, [%1];"
                 : "=l"(*(u64*)&v)
                 : "r"((unsigned)__cvta_generic_to_shared(s))
                 : "memory");
  } else {
    asm volatile("ld.shared.u32 %0, [%1];"
                 : "=r"(*(unsigned*)&v)
                 : "r"((unsigned)__cvta_generic_to_shared(s))
                 : "memory");
  }
  return v;
#endif
}

// Narrow-path tile store: two ld.shared, then the st.global of the chunks
// inside the tensor. (A second copy without the swizzle arithmetic, as
// cp_async's narrow load has, made ptxas give the sync transpose 128
// registers instead of 106, NVRTC 13, sm_90: the store keeps one.)
template <class U>
FJ_DEV void store_narrow_body(narrow_walk n, const unsigned char* smem,
                              unsigned char* g, unsigned m) {
  const row_walk& w = n.w;
  unsigned s = w.s;
  // A batch of 2: stores do not wait, so a deep batch buys nothing, and
  // one of FJ_FAST_UNROLL cost the transpose's and copy_bench's kernels
  // ~30 registers under tma and cp_async (ptxas, sm_90).
  constexpr int B = 2;
  unsigned k = 0;
  for (; k + B <= w.count; k += B) {  // whole batches: no count test
    U v[B];
#pragma unroll
    for (int j = 0; j < B; ++j)
      v[j] = ld_shared_n<U>(smem + swz(s + j * w.sstep, m));
#pragma unroll
    for (int j = 0; j < B; ++j) {
      if (n.inside(j)) st_global_n<U>(g + j * w.gstep, v[j]);
    }
    s += B * w.sstep;
    g += B * w.gstep;
    n.advance(B);
  }
  for (; k < w.count; ++k, s += w.sstep, g += w.gstep, n.advance(1)) {
    const U v = ld_shared_n<U>(smem + swz(s, m));
    if (n.inside(0)) st_global_n<U>(g, v);
  }
}
template <int R>
FJ_DEV bool store_narrow(const tensor_param& p, const coords& c,
                         const unsigned char* smem, team tm) {
  const narrow_walk n = plan_narrow<R>(p, c, smem, true, tm);
  if (!n.w.ok) return false;
  unsigned char* g = (unsigned char*)p.data + n.w.g;
  const unsigned m = swz_mask(p);
  if (n.wb == 8) {
    store_narrow_body<u64>(n, smem, g, m);
  } else {
    store_narrow_body<unsigned>(n, smem, g, m);
  }
  return true;
}

// 16-byte moves with explicit state spaces (both addresses 16-aligned).
FJ_DEV uint4 ld_global16(const void* g) {
#ifdef FJ_COPY_HOST_EMULATION
  return *(const uint4*)g;  // test seam: the CPU replay of the fast paths
#else
  uint4 v;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(__cvta_generic_to_global(g))
               : "memory");
  return v;
#endif
}
FJ_DEV void st_global16(void* g, const uint4& v) {
#ifdef FJ_COPY_HOST_EMULATION
  *(uint4*)g = v;
#else
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(
                   __cvta_generic_to_global(g)),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}
FJ_DEV uint4 ld_shared16(const void* s) {
#ifdef FJ_COPY_HOST_EMULATION
  return *(const uint4*)s;
#else
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem_u32(s))
               : "memory");
  return v;
#endif
}
FJ_DEV void st_shared16(void* s, const uint4& v) {
#ifdef FJ_COPY_HOST_EMULATION
  *(uint4*)s = v;
#else
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(smem_u32(s)),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}

// Fast-path tile store (see tile_fast), its common case (plan_rows): a
// batch of ld.shared, then the st.global. False when the box needs the
// chunk cursor.
// Under a swizzle (m != 0) each chunk's SMEM offset goes through swz().
template <bool SW>
FJ_DEV void store_rows_body(const row_walk& w, const unsigned char* smem,
                            unsigned char* g, unsigned m) {
  unsigned s = w.s;
  unsigned k = 0;
  for (; k + FJ_FAST_UNROLL <= w.count; k += FJ_FAST_UNROLL) {
    uint4 v[FJ_FAST_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) {
      const unsigned o = s + j * w.sstep;
      v[j] = ld_shared16(smem + (SW ? swz(o, m) : o));
    }
#pragma unroll
    for (int j = 0; j < FJ_FAST_UNROLL; ++j) st_global16(g + j * w.gstep, v[j]);
    s += FJ_FAST_UNROLL * w.sstep;
    g += FJ_FAST_UNROLL * w.gstep;
  }
  for (; k < w.count; ++k, s += w.sstep, g += w.gstep)
    st_global16(g, ld_shared16(smem + (SW ? swz(s, m) : s)));
}
template <int R>
FJ_DEV bool store_rows(const tensor_param& p, const coords& c,
                       const unsigned char* smem, team tm) {
  const row_walk w = plan_rows<R>(p, c, tm.rank, tm.size);
  if (!w.ok) return false;
  unsigned char* g = (unsigned char*)p.data + w.g;
  const unsigned m = swz_mask(p);
  if (m != 0) {
    store_rows_body<true>(w, smem, g, m);
  } else {
    store_rows_body<false>(w, smem, g, 0);
  }
  return true;
}

// Bytes of one tile (the box) of `p`.
FJ_DEV unsigned box_bytes(const tensor_param& p, int rank) {
  unsigned n = (unsigned)p.elem_bytes;
  for (int d = 0; d < rank; ++d) n *= (unsigned)p.box[d];
  return n;
}

// FJ_WAIT_READ_LOADS: 1 makes wait_group_read<N>() under cp_async and tma
// also wait for the thread's cp.asyncs, as it did until 2026-12-07
// (docs/copy-macros.md). A store under those implementations either is the
// threads' own (ld.shared + st.global: it has read its SMEM when the
// threads pass the block barrier) or a bulk copy (its bulk group), so that
// wait covered only loads, and it caught every cp.async a barrier tracks:
// a ring that stores a stage, waits for the store to read it and refills
// it had at most one stage of loads in flight (bench/corpus moe_dispatch
// under cp_async: 0.50 of its plain twin on an H100).
#ifndef FJ_WAIT_READ_LOADS
#define FJ_WAIT_READ_LOADS 0
#endif

// ------------------------------------------------------ flat tile lists
// k tiles of one tensor (a gather or a coordinate list, tile i at SMEM
// dst + i * box bytes) moved as one job: the team's threads take the
// 16-byte chunks of all k tiles together (chunk q of the list is chunk
// q % cpt of tile q / cpt), so each thread has chunks of several tiles in
// flight at once and a list of small tiles keeps the whole team busy. A
// loop over the tiles moved one tile per round trip under sync, and a
// 128-byte row kept 8 threads of a block busy while the rest waited.
// The list qualifies when its tiles are unswizzled with rows along
// dimension 1 only (box[d] == 1 for d >= 2); a tile goes flat when it is
// cs.ok and a fast-path tile (tile_fast: aligned, inside or promised to).
// Tiles that do not go through the per-tile path.
// FJ_FLAT_LISTS, bits (docs/copy-macros.md): 2 (the default) under
// cp_async, for tiles smaller than the team (cp_async's issue_list_flat);
// 1 under sync, where each tile was a round trip the team waited for.
// Timed on an H100 (bench/results/2026-12-07-h100-layer-corpus-cf9063b.txt):
// cp_async's lifted bench/corpus rope_gather 0.51 -> 0.64 and moe_dispatch
// 0.50 -> 0.53 of their plain twins, nothing else by more than 0.02, for
// 16-20 % more PTX in a gathering kernel; sync's lifted rope_gather 0.34 ->
// 0.38 but cost moe_dispatch 0.29 -> 0.27 and build time (rope_gather
// 10,854 -> 14,230 PTX lines), so it stays off.
#ifndef FJ_FLAT_LISTS
#define FJ_FLAT_LISTS 2
#endif
#ifndef FJ_FLAT_UNROLL
#define FJ_FLAT_UNROLL (FJ_FAST_UNROLL / 2)
#endif
// The list's own conditions: unswizzled, whole 16-byte chunks per row,
// rows along dimension 1 only (so the chunk arithmetic below holds); each
// tile then goes flat where it is a fast-path tile (tile_fast).
template <int R>
FJ_DEV bool flat_list_ok(const tensor_param& p) {
  if (swz_mask(p) != 0 || p.box[0] <= 0 || (p.box[0] * p.elem_bytes) % 16 != 0)
    return false;
#pragma unroll
  for (int d = 1; d < R; ++d) {
    if (p.box[d] <= 0 || (d >= 2 && p.box[d] != 1)) return false;
  }
  return true;
}
// Tile `c` of a qualifying list at SMEM `d`: whether it goes flat, and its
// GMEM byte offset from p.data.
template <int R>
FJ_DEV bool flat_tile_at(const tensor_param& p, const coords& c, const void* d,
                         i64& g) {
  if (!tile_fast<R>(p, c, d, p.oob != oob_promise_in_bounds)) return false;
  g = 0;
#pragma unroll
  for (int i = 0; i < R; ++i) g += (i64)c.v[i] * p.stride[i] * p.elem_bytes;
  return true;
}
// The list's shape in chunks: per row, per tile, row pitch in GMEM bytes.
struct flat_shape {
  unsigned cpr, cpt;
  i64 pitch;
};
template <int R>
FJ_DEV flat_shape flat_shape_of(const tensor_param& p) {
  flat_shape f;
  f.cpr = (unsigned)(p.box[0] * p.elem_bytes) / 16;
  f.cpt = f.cpr * (R > 1 ? (unsigned)p.box[1] : 1u);
  f.pitch = R > 1 ? p.stride[1] * p.elem_bytes : 0;
  return f;
}
// A thread's place in the list: tile i, chunk w of it; next() steps by the
// team's size (split once into whole tiles and chunks: no division per
// chunk).
struct flat_cursor {
  unsigned i, w, di, dw;
  FJ_DEV flat_cursor(const flat_shape& f, unsigned q, unsigned step) {
    i = q / f.cpt;
    w = q - i * f.cpt;
    di = step / f.cpt;
    dw = step - di * f.cpt;
  }
  FJ_DEV void next(const flat_shape& f) {
    w += dw;
    i += di;
    if (w >= f.cpt) {
      w -= f.cpt;
      ++i;
    }
  }
};
// The cursor's chunk: its GMEM address (null when its tile does not go
// flat or is past the list's k) and its SMEM byte offset from dst.
template <int R, class Coords>
FJ_DEV const unsigned char* flat_chunk(const tensor_param& p, const Coords& cs,
                                       const unsigned char* dst,
                                       const flat_shape& f, unsigned bb, int k,
                                       const flat_cursor& at, unsigned& so) {
  so = at.i * bb + at.w * 16;
  i64 g;
  if (at.i >= (unsigned)k || !cs.ok((int)at.i) ||
      !flat_tile_at<R>(p, cs((int)at.i), dst + at.i * bb, g))
    return nullptr;
  const unsigned r = f.cpr == f.cpt ? 0u : at.w / f.cpr;
  return (const unsigned char*)p.data + g + (i64)r * f.pitch +
         (i64)(at.w - r * f.cpr) * 16;
}
// The tiles of the list that did not go flat, through `one(d, c)` (the
// per-tile path), or the fill for those not cs.ok. Every thread of the team
// walks the same tiles, so the per-tile path sees the whole team.
template <int R, class Coords, class One>
FJ_DEV void flat_rest(unsigned char* dst, const tensor_param& p,
                      const Coords& cs, int k, team tm, One one) {
  const unsigned bb = box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    unsigned char* d = dst + (unsigned)i * bb;
    if (!cs.ok(i)) {
      fill_block(d, bb, oob_fill_pattern(p), tm);
      continue;
    }
    const coords c = cs(i);
    i64 g;
    if (!flat_tile_at<R>(p, c, d, g)) one(d, c);
  }
}

// Whether a tile load takes the fast path (see tile_fast): asked once, at
// the call site, and passed on to the out-of-line rest.
template <int R>
FJ_DEV bool load_fast(const tensor_param& p, const coords& c, const void* smem,
                      bool pred) {
  return pred && tile_fast<R>(p, c, smem, p.oob != oob_promise_in_bounds);
}

// What the sync and cp_async tile loads share off their fast paths: a false
// predicate (zero fill under pred_zero) and boxes the fast path cannot take
// (the walker, with the implementation's `Op`). False for a fast-path box
// (`fast`, from load_fast), which the implementation moves itself.
template <int R, class Op>
FJ_DEV bool load_tile_unusual(void* dst, const tensor_param& p, const coords& c,
                              bool pred, pred_mode mode, bool fast, team tm) {
  if (!pred) {
    if (mode == pred_zero) fill_block(dst, box_bytes(p, R), 0, tm);
    return true;
  }
  if (fast) return false;
  Op op{oob_fill_pattern(p), (unsigned)p.elem_bytes};
  walk_tile<R>(p, c, (unsigned char*)dst, p.oob != oob_promise_in_bounds, op,
               tm);
  return true;
}

// --------------------------------------------------- software tile ops
// Tile store, generic path (every impl without a tensor map): in-bounds
// elements are written to GMEM, the rest is clipped.
struct store_op {
  unsigned eb;
  FJ_DEV void full(unsigned char* s, const unsigned char* g, unsigned w) {
    move((void*)g, s, w);
  }
  FJ_DEV void oob(unsigned char*, unsigned) {}
  FJ_DEV void part(unsigned char* s, const unsigned char* g, unsigned w,
                   unsigned lo, unsigned hi, unsigned) {
    for (unsigned e = lo; e < hi; ++e)
      move((void*)(g + e * eb), s + e * eb, eb);
  }
};

// The rest of a tile store: fast-path boxes that need the chunk cursor
// (batches of ld.shared, then the st.global), and the
// walker. Not inlined: one copy per rank however many call sites.
template <int R>
__device__ __noinline__ void store_tile_slow(const tensor_param& p, coords c,
                                             const unsigned char* smem,
                                             bool fast, team tm)
#ifdef FJ_SLOW_PATHS_EXTERN
    ;  // in the prebuilt slow-path library (FJ_SLOW_PATHS_LIBRARY)
#else
{
  if (!fast) {
    // Under FJ_NARROW_INLINE the call site has tried the narrow path.
    if (!FJ_NARROW_INLINE && store_narrow<R>(p, c, smem, tm)) return;
    store_op op{(unsigned)p.elem_bytes};
    walk_tile<R>(p, c, (unsigned char*)smem, true, op, tm);
    return;
  }
  unsigned char* base = (unsigned char*)p.data;
  const unsigned n = tm.size, total = fast_chunks<R>(p), m = swz_mask(p);
  unsigned i = tm.rank;
  chunk_cursor<R> cur;
  cur.init(p, c, i, n);
  for (; i < total; i += FJ_SLOW_UNROLL * n) {
    uint4 v[FJ_SLOW_UNROLL];
#pragma unroll
    for (int j = 0; j < FJ_SLOW_UNROLL; ++j) {
      if (i + j * n < total)
        v[j] = ld_shared16(smem + swz((i + j * n) * 16, m));
    }
#pragma unroll
    for (int j = 0; j < FJ_SLOW_UNROLL; ++j) {
      if (i + j * n < total) {
        st_global16(base + cur.g, v[j]);
        cur.next();
      }
    }
  }
}
#endif

// The common case is inlined at each call site (as a call it cost a stack
// frame per tile in local memory; see sync.cuh's load_tile_span).
template <int R>
FJ_DEV void store_tile_generic(const tensor_param& p, const coords& c,
                               const void* smem, bool pred,
                               team tm = block_team()) {
  if (!pred) return;
  const unsigned char* s = (const unsigned char*)smem;
  const bool fast = tile_fast<R>(p, c, smem, true);
  if (fast && store_rows<R>(p, c, s, tm)) return;
#if FJ_NARROW_INLINE
  if (!fast && store_narrow<R>(p, c, s, tm)) return;
#endif
  store_tile_slow<R>(p, c, s, fast, tm);
}

// Per-line L2 prefetch of the in-bounds rows of a tile whose dimension 0 is
// contiguous, the team's threads taking the lines in turn (a row's lines
// spread over the team, so a warp puts a whole tile in flight in a few
// instructions per lane). Other tiles: nothing.
template <int R>
FJ_DEV void prefetch_tile_team(const tensor_param& p, const coords& c,
                               team tm) {
  if (p.stride[0] != 1) return;
  const unsigned eb = (unsigned)p.elem_bytes;
  unsigned rows = 1;
#pragma unroll
  for (int d = 1; d < R; ++d) rows *= (unsigned)p.box[d];
  i64 xlo = c.v[0] < 0 ? 0 : c.v[0];
  i64 xhi = (i64)c.v[0] + p.box[0];
  if (xhi > p.shape[0]) xhi = p.shape[0];
  if (xlo >= xhi) return;
  const unsigned char* base = (const unsigned char*)p.data;
  // Lines per row, counted from the row start's line (at most one more).
  const unsigned span = (unsigned)((xhi - xlo) * (i64)eb);
  const unsigned per_row = (span + 127) / 128 + 1;
  for (unsigned i = tm.rank; i < rows * per_row; i += tm.size) {
    const unsigned row = i / per_row, line = i % per_row;
    bool ok;
    const i64 goff = tile_row_offset<R>(p, c, row, &ok);
    const u64 a0 = addr(base + (goff + xlo) * (i64)eb);
    const u64 a = (a0 & ~127ull) + 128ull * line;
    if (ok && a < a0 + span) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(a < a0 ? a0 : a));
    }
  }
}

// Per-line L2 prefetch of the in-bounds part of a tile (no tensor map).
template <int R>
FJ_DEV void prefetch_tile_lines(const tensor_param& p, const coords& c) {
  const unsigned eb = (unsigned)p.elem_bytes;
  unsigned rows = 1;
#pragma unroll
  for (int d = 1; d < R; ++d) rows *= (unsigned)p.box[d];
  i64 xlo = c.v[0] < 0 ? 0 : c.v[0];
  i64 xhi = (i64)c.v[0] + p.box[0];
  if (xhi > p.shape[0]) xhi = p.shape[0];
  if (xlo >= xhi) return;
  const unsigned char* base = (const unsigned char*)p.data;
  for (unsigned row = thread_rank(); row < rows; row += block_threads()) {
    bool ok;
    const i64 goff = tile_row_offset<R>(p, c, row, &ok);
    if (!ok) continue;
    if (p.stride[0] == 1) {
      const u64 a0 = addr(base + (goff + xlo) * (i64)eb);
      const u64 a1 = addr(base + (goff + xhi) * (i64)eb);  // exclusive
      for (u64 a = a0; a < a1; a = (a | 127) + 1)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
    } else {
      for (i64 x = xlo; x < xhi; ++x)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(
            base + (goff + x * p.stride[0]) * (i64)eb));
    }
  }
}

// Per-line L2 prefetch of a span, block-cooperative.
FJ_DEV void prefetch_span_lines(const void* gmem, unsigned long long bytes) {
  if (bytes == 0) return;
  const u64 a0 = addr(gmem), a1 = a0 + bytes;
  const u64 first = a0 & ~127ull;
  const u64 lines = (a1 - first + 127) / 128;
  for (u64 l = thread_rank(); l < lines; l += block_threads()) {
    u64 a = first + l * 128;
    if (a < a0) a = a0;  // stay inside the span
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a));
  }
}

}  // namespace detail

// The store and prefetch halves of the two software implementations
// (sync.cuh and cp_async.cuh): identical, because neither has a bulk store
// or a tensor-map prefetch. Each implementation names them with
// using-declarations, so its interface still reads in full there.
namespace soft_impl {
template <int R>
FJ_DEV void store_tile(const tensor_param& p, const coords& c, const void* src,
                       bool pred) {
  __syncthreads();
  detail::store_tile_generic<R>(p, c, src, pred);
}
// Warp scope: the warp's 32 lanes store the tile (no block barrier).
template <int R>
FJ_DEV void store_tile(warp_t, const tensor_param& p, const coords& c,
                       const void* src, bool pred) {
  __syncwarp();
  detail::store_tile_generic<R>(p, c, src, pred, detail::warp_team());
}
FJ_DEV void store(warp_t, void* dst, const void* src, unsigned bytes,
                  bool pred) {
  __syncwarp();
  if (pred) detail::move_block(dst, src, bytes, detail::warp_team());
}
// k tiles from SMEM (tile i at src + i * box bytes) to the tiles at
// cs(0..k-1), by the block's or the warp's threads; a tile that is not
// cs.ok (a scatter's index outside the tensor) is not written.
template <int R, class Scope, class Coords>
FJ_DEV void store_tiles(Scope sc, const tensor_param& p, const Coords& cs,
                        int k, const void* src, bool pred) {
  detail::enter_scope(sc);
  if (!pred) return;
  const unsigned bb = detail::box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    if (!cs.ok(i)) continue;
    detail::store_tile_generic<R>(p, cs(i),
                                  (const unsigned char*)src + (unsigned)i * bb,
                                  true, detail::team_of(sc));
  }
}
FJ_DEV void prefetch_l2(const void* src, unsigned long long bytes) {
  detail::prefetch_span_lines(src, bytes);
}
template <int R>
FJ_DEV void prefetch_tile(const tensor_param& p, const coords& c) {
  detail::prefetch_tile_lines<R>(p, c);
}
FJ_DEV void prefetch_tensormap(const tensor_param&) {}
}  // namespace soft_impl
}  // namespace fj

#endif  // FLEETJIT_COPY_COMMON_CUH_
