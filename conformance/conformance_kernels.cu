// fleetjit conformance kernels: every feature of <fleetjit/copy.cuh>, for
// the host-driven matrix of `fleetjit selftest` (feature x implementation x
// dtype x ragged shapes x random predicates). Each kernel writes what it
// observed to a global buffer; jit/selftest/reference.h computes the
// expected contents from the same inputs. Change both together.
//
// The kernels follow the layer's contract and nothing more: a kernel that
// only passes because of an implementation detail is a bug here.
//
// kernel                      features exercised          arguments
// --------------------------  --------------------------  -------------------
// fj_ct_barrier               barrier init/arrive/wait/   (u32* out, int
// phases)
//                             test, parity, phases
// fj_ct_span_load             copy_g2s on a barrier or a  (const u8* src, u8*
// out,
//                             group, predicate skip/zero,  const int* cases,
//                             any alignment, several       int cases_per_block,
//                             copies per phase, multicast, int flags)
//                             l2_prefetch (flags)
// fj_ct_span_store            copy_s2g, predicate, group  (const u8* src, u8*
// out,
//                             wait                         const int* cases,
//                                                          int cases_per_block)
// fj_ct_groups                group_wait<2>/<0> with a    (const u8* src, u8*
// out,
//                             4-slot ring, empty groups    int chunks, int
//                             chunk_bytes)
// fj_ct_tile_load_e{E}_r{R}   tile_copy, oob_zeros/nan/   (FJ_TENSOR(T, R) t,
//                             promise, predicate, group    const int* coords,
//                             or barrier, multicast,       const u8* preds,
//                             tile prefetch (flags)        int pred_mode, int
//                             flags,
//                                                          T* out)
// fj_ct_tile_store_e{E}_r{R}  tile store clipped at the   (FJ_TENSOR(T, R) t,
//                             bounds, predicate            const int* coords,
//                                                          const u8* preds,
//                                                          const T* src)
// fj_ct_pipeline_e{E}_r{R}    3-stage barrier ring,       (FJ_TENSOR(T, R) t,
//                             parity reuse, per-tile       const int* coords,
//                             predicates                   const u8* preds,
//                                                          int pred_mode, int
//                                                          tiles, T* out)
// fj_ct_warp_pipeline_e{E}_r{R} the same ring fed by      (as fj_ct_pipeline)
//                             one producer warp (fj::warp,
//                             fj::pipeline, full/empty
//                             barriers); blockDim.x % 32 == 0
// fj_ct_gather_e{E}_r{R}      `tiles` tiles per block in   (as fj_ct_pipeline,
//                             one fj::load_tiles or, with  pred_mode is `dim`,
//                             dim >= 0, fj::gather_tiles   -1 for the list;
//                             (warp scope when blockDim.x  preds unused)
//                             % 32 == 0), one barrier      smem: as pipeline
// fj_ct_scatter_e{E}_r{R}     `tiles` tiles per block in   (FJ_TENSOR(T, R) t,
//                             one fj::store_tiles or, with  const int* coords,
//                             dim >= 0, fj::scatter_tiles   const u8* preds,
//                             (warp scope on odd blocks     int dim, int tiles,
//                             when blockDim.x % 32 == 0)    const T* src)
//                                                          smem: as pipeline
// E = element bytes (1, 2, 4, 8; T = u8, u16, u32, u64: the copies are
// bitwise, the tensor's dtype decides the NaN fill), R = rank 1..5.
//
// Inputs and launches (reference.h has the matching helpers):
//  - A "case" is 5 ints; coords are 5 ints per case (unused dims 0); preds
//    are one byte per case (0 = false); pred_mode is fj::pred_mode.
//  - flags: 1 = in_group (else a barrier), 2 = prefetch first,
//    4 = multicast (launch 1-D clusters of size cs along x; blocks
//    b*cs .. b*cs+cs-1 share case b and multicast to each other).
//    Without flag 4, block b takes case b (cases_per_block cases for spans).
//  - Dynamic shared memory: fj_ct_barrier 8 * blockDim.x; span kernels
//    FJ_CT_SPAN_CAP + 128; fj_ct_groups 4 * round_up(chunk_bytes, 128) +
//    128; tile load/store round_up(box bytes, 128) + 128; pipeline
//    3 * round_up(box bytes, 128) + 128. Any 1-D block size.
//  - Output per block: fj_ct_barrier (phases + 1) * blockDim.x words;
//    fj_ct_span_load FJ_CT_SPAN_CAP bytes (the whole SMEM buffer, so
//    skipped and untouched bytes are checked too); fj_ct_groups chunks *
//    chunk_bytes bytes; tile load box elements; pipeline tiles * box
//    elements. fj_ct_span_store and fj_ct_tile_store write into a buffer
//    (or tensor) the host poisoned first: block b owns span bytes
//    [b * FJ_CT_SPAN_CAP, (b + 1) * FJ_CT_SPAN_CAP) of `out` and reads its
//    SMEM image from the same range of `src`.
//  - Case rules the host keeps: spans stay inside the SMEM buffer and the
//    source; destinations of one block's cases do not overlap; tiles of
//    fj_ct_tile_store blocks do not overlap in bounds; oob_promise_in_bounds
//    only with in-bounds tiles; pred uniform per case (it is, by layout).
//
// The refusals of docs/copy-matrix.md (JAX Mosaic GPU), as runs of these
// kernels:
//  - wait_gmem_to_smem on Hopper (seed 002): fj_ct_groups, or any kernel
//    with flags & 1, under tma;
//  - copy_gmem_to_smem without a barrier on Hopper: fj_ct_span_load /
//    fj_ct_tile_load_* with flags & 1 under tma;
//  - copy_gmem_to_smem with a barrier before Hopper: fj_ct_span_load /
//    fj_ct_tile_load_* / fj_ct_pipeline_* without flags & 1 under cp_async
//    and sync;
//  - user predicates on cp.async (seed 004): any kernel with random preds,
//    both pred modes, under cp_async;
//  - oob_mode zeros/nan on cp.async: fj_ct_tile_load_* on ragged tiles
//    with oob_zeros / oob_nan tensors under cp_async;
//  - collective copies on cp.async: fj_ct_tile_load_* / fj_ct_span_load
//    with flags & 4 (launched with clusters on sm_90) under cp_async/sync.
#include <fleetjit/copy.cuh>

#define FJ_CT_SPAN_CAP 8192
#define FJ_CT_GROUP_SLOTS 4
#define FJ_CT_STAGES 3
#define FJ_CT_IN_GROUP 1
#define FJ_CT_PREFETCH 2
#define FJ_CT_MULTICAST 4

// What SMEM holds before a copy: the bytes a skipped copy leaves behind.
__device__ __forceinline__ unsigned char fj_ct_stale(unsigned block,
                                                     unsigned i) {
  return (unsigned char)(i * 7u + block * 13u + 0x5Au);
}
__device__ __forceinline__ unsigned fj_ct_word(unsigned block, unsigned phase,
                                               unsigned thread) {
  return block * 0x9E3779B9u + phase * 0x85EBCA6Bu + thread * 0xC2B2AE35u;
}

extern __shared__ unsigned char fj_ct_smem[];
// The dynamic SMEM buffer, 128-byte aligned (the host adds 128 bytes).
__device__ __forceinline__ unsigned char* fj_ct_buffer() {
  return fj_ct_smem + (-__cvta_generic_to_shared(fj_ct_smem) & 127);
}
__device__ __forceinline__ unsigned fj_ct_round128(unsigned n) {
  return (n + 127) & ~127u;
}
// Mask of every CTA of this cluster.
__device__ __forceinline__ unsigned short fj_ct_cluster_mask() {
  const unsigned n = fj::cluster_size();
  return (unsigned short)(n >= 16 ? 0xFFFFu : (1u << n) - 1);
}
__device__ __forceinline__ unsigned fj_ct_case(int flags) {
  return (flags & FJ_CT_MULTICAST) ? blockIdx.x / fj::cluster_size()
                                   : blockIdx.x;
}

// ----------------------------------------------------------------------------
// Barriers: per phase k every thread writes a word, arrives, waits for phase
// k, and reads its neighbour's word (double-buffered by parity, so the
// barrier alone orders the reuse). The last row holds flags: 1 = test(1) on
// the fresh barrier, 2 = !test(0) before this thread's first arrival,
// 4 = test() of the last phase after it (expected 7, or 3 if phases == 0).
extern "C" __global__ void fj_ct_barrier(unsigned* out, int phases) {
  unsigned* words = (unsigned*)fj_ct_smem;  // 2 * blockDim.x words
  __shared__ fj::barrier bar;
  const unsigned t = threadIdx.x, n = blockDim.x;
  if (t == 0) bar.init(n);
  __syncthreads();
  unsigned flags = 0;
  if (bar.test(1)) flags |= 1;
  if (!bar.test(0)) flags |= 2;
  unsigned* o = out + (unsigned long long)blockIdx.x * (phases + 1) * n;
  for (int k = 0; k < phases; ++k) {
    words[(k & 1) * n + t] = fj_ct_word(blockIdx.x, k, t);
    bar.arrive();
    bar.wait(k & 1);
    o[(unsigned long long)k * n + t] = words[(k & 1) * n + (t + 1) % n];
  }
  if (phases > 0 && bar.test((phases - 1) & 1)) flags |= 4;
  o[(unsigned long long)phases * n + t] = flags;
}

// ----------------------------------------------------------------------------
// Contiguous GMEM -> SMEM: the block's cases (src_off, dst_off, bytes, pred,
// mode) all complete on one barrier phase (or one group), then the whole
// SMEM buffer is dumped.
extern "C" __global__ void fj_ct_span_load(const unsigned char* src,
                                           unsigned char* out, const int* cases,
                                           int cases_per_block, int flags) {
  unsigned char* sm = fj_ct_buffer();
  __shared__ fj::barrier bar;
  for (unsigned i = threadIdx.x; i < FJ_CT_SPAN_CAP; i += blockDim.x)
    sm[i] = fj_ct_stale(blockIdx.x, i);
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  fj::cluster_sync();  // barriers and stale bytes in before any multicast
  const int* c =
      cases + (unsigned long long)fj_ct_case(flags) * cases_per_block * 5;
  for (int j = 0; j < cases_per_block; ++j, c += 5) {
    const unsigned char* s = src + c[0];
    unsigned char* d = sm + c[1];
    const unsigned n = (unsigned)c[2];
    const bool p = c[3] != 0;
    const fj::pred_mode m = (fj::pred_mode)c[4];
    if (flags & FJ_CT_PREFETCH) fj::prefetch_l2(s, n);
    if (flags & FJ_CT_IN_GROUP) {
      fj::load(d, s, n, fj::in_group, p, m);
    } else if (flags & FJ_CT_MULTICAST) {
      fj::load_multicast(d, s, n, bar, fj_ct_cluster_mask(), p, m);
    } else {
      fj::load(d, s, n, bar, p, m);
    }
  }
  if (flags & FJ_CT_IN_GROUP) {
    fj::commit_group();
    fj::wait_group<0>();
  } else {
    bar.arrive();
    bar.wait(0);
  }
  unsigned char* o = out + (unsigned long long)blockIdx.x * FJ_CT_SPAN_CAP;
  for (unsigned i = threadIdx.x; i < FJ_CT_SPAN_CAP; i += blockDim.x)
    o[i] = sm[i];
  if (flags & FJ_CT_MULTICAST) fj::cluster_sync();
}

// ----------------------------------------------------------------------------
// Contiguous SMEM -> GMEM: SMEM is filled from src by plain stores and the
// cases (smem_off, out_off, bytes, pred, -) are stored right away: the
// store's own block barrier is the only synchronisation (contract 2).
extern "C" __global__ void fj_ct_span_store(const unsigned char* src,
                                            unsigned char* out,
                                            const int* cases,
                                            int cases_per_block) {
  unsigned char* sm = fj_ct_buffer();
  const unsigned long long region =
      (unsigned long long)blockIdx.x * FJ_CT_SPAN_CAP;
  for (unsigned i = threadIdx.x; i < FJ_CT_SPAN_CAP; i += blockDim.x)
    sm[i] = src[region + i];
  const int* c = cases + (unsigned long long)blockIdx.x * cases_per_block * 5;
  for (int j = 0; j < cases_per_block; ++j, c += 5)
    fj::store(out + region + c[1], sm + c[0], (unsigned)c[2], c[3] != 0);
  fj::commit_group();
  fj::wait_group<0>();
}

// ----------------------------------------------------------------------------
// Group waits: chunk k of the block's region goes to slot k % 4, three
// chunks ahead; wait_group<2> must guarantee chunk k has landed. Loads past
// the last chunk are predicated off but still committed (empty groups).
extern "C" __global__ void fj_ct_groups(const unsigned char* src,
                                        unsigned char* out, int chunks,
                                        int chunk_bytes) {
  unsigned char* sm = fj_ct_buffer();
  const unsigned stride = fj_ct_round128((unsigned)chunk_bytes);
  const unsigned long long region =
      (unsigned long long)blockIdx.x * chunks * chunk_bytes;
  auto issue = [&](int k) {
    fj::load(sm + (k % FJ_CT_GROUP_SLOTS) * stride,
             src + region + (unsigned long long)k * chunk_bytes,
             (unsigned)chunk_bytes, fj::in_group, k < chunks);
    fj::commit_group();
  };
  for (int k = 0; k < FJ_CT_GROUP_SLOTS - 1; ++k) issue(k);
  for (int k = 0; k < chunks; ++k) {
    fj::wait_group<FJ_CT_GROUP_SLOTS - 2>();
    const unsigned char* slot = sm + (k % FJ_CT_GROUP_SLOTS) * stride;
    unsigned char* o = out + region + (unsigned long long)k * chunk_bytes;
    for (int i = threadIdx.x; i < chunk_bytes; i += blockDim.x) o[i] = slot[i];
    issue(k + FJ_CT_GROUP_SLOTS - 1);  // into the slot read one step ago
  }
  fj::wait_group<0>();
}

// ----------------------------------------------------------------------------
// Tiles.
__device__ __forceinline__ fj::coords fj_ct_coords(const int* c) {
  return fj::at(c[0], c[1], c[2], c[3], c[4]);
}

// One tile per block (per cluster with multicast) into stale SMEM, dumped.
template <class T, int R>
__device__ void fj_ct_tile_load(const fj::tensor<T, R>& t, const int* coords,
                                const unsigned char* preds, int pred_mode,
                                int flags, T* out) {
  unsigned char* sm = fj_ct_buffer();
  __shared__ fj::barrier bar;
  const unsigned bytes = t.box_bytes(), elems = t.box_elems();
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x)
    sm[i] = fj_ct_stale(blockIdx.x, i);
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  fj::cluster_sync();
  const unsigned ci = fj_ct_case(flags);
  const fj::coords at = fj_ct_coords(coords + ci * 5);
  const bool p = preds[ci] != 0;
  const fj::pred_mode m = (fj::pred_mode)pred_mode;
  if (flags & FJ_CT_PREFETCH) {
    fj::prefetch_tensormap(t);
    fj::prefetch_tile(t, at);
  }
  T* tile = (T*)sm;
  if (flags & FJ_CT_IN_GROUP) {
    fj::load_tile(tile, t, at, fj::in_group, p, m);
    fj::commit_group();
    fj::wait_group<0>();
  } else {
    if (flags & FJ_CT_MULTICAST) {
      fj::load_tile_multicast(tile, t, at, bar, fj_ct_cluster_mask(), p, m);
    } else {
      fj::load_tile(tile, t, at, bar, p, m);
    }
    bar.arrive();
    bar.wait(0);
  }
  T* o = out + (unsigned long long)blockIdx.x * elems;
  for (unsigned i = threadIdx.x; i < elems; i += blockDim.x) o[i] = tile[i];
  if (flags & FJ_CT_MULTICAST) fj::cluster_sync();
}

// One tile per block from src (box elements per block) into the tensor.
template <class T, int R>
__device__ void fj_ct_tile_store(const fj::tensor<T, R>& t, const int* coords,
                                 const unsigned char* preds, const T* src) {
  T* tile = (T*)fj_ct_buffer();
  const unsigned elems = t.box_elems();
  const T* s = src + (unsigned long long)blockIdx.x * elems;
  for (unsigned i = threadIdx.x; i < elems; i += blockDim.x) tile[i] = s[i];
  fj::store_tile(t, fj_ct_coords(coords + blockIdx.x * 5), tile,
                 preds[blockIdx.x] != 0);
  fj::commit_group();
  fj::wait_group<0>();
}

// `tiles` tiles per block through a 3-slot ring of barriers; tile k is
// case blockIdx.x * tiles + k and lands in slot k % 3 (stale at first; a
// skipped tile leaves the slot's previous tile), dumped after its wait.
template <class T, int R>
__device__ void fj_ct_pipeline(const fj::tensor<T, R>& t, const int* coords,
                               const unsigned char* preds, int pred_mode,
                               int tiles, T* out) {
  unsigned char* sm = fj_ct_buffer();
  __shared__ fj::barrier full[FJ_CT_STAGES];
  const unsigned slot = fj_ct_round128(t.box_bytes()), elems = t.box_elems();
  for (unsigned i = threadIdx.x; i < FJ_CT_STAGES * slot; i += blockDim.x)
    sm[i] = fj_ct_stale(blockIdx.x, i);
  if (threadIdx.x == 0) {
    for (int s = 0; s < FJ_CT_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();
  const unsigned first = blockIdx.x * tiles;
  auto issue = [&](int k) {
    const int s = k % FJ_CT_STAGES;
    const bool real = k < tiles;
    const unsigned ci = first + (real ? k : 0);
    fj::load_tile((T*)(sm + s * slot), t, fj_ct_coords(coords + ci * 5),
                  full[s], real && preds[ci] != 0,
                  real ? (fj::pred_mode)pred_mode : fj::pred_skip);
    full[s].arrive();
  };
  for (int k = 0; k < FJ_CT_STAGES; ++k) issue(k);
  for (int k = 0; k < tiles; ++k) {
    const int s = k % FJ_CT_STAGES;
    full[s].wait((k / FJ_CT_STAGES) & 1);
    const T* tile = (const T*)(sm + s * slot);
    T* o = out + (unsigned long long)(first + k) * elems;
    for (unsigned i = threadIdx.x; i < elems; i += blockDim.x) o[i] = tile[i];
    issue(k + FJ_CT_STAGES);
  }
}

// fj_ct_pipeline's ring with a producer warp: warp 0 issues every tile
// (after the consumers freed its slot: the empty barriers), every warp
// dumps it. Same output as fj_ct_pipeline (a skipped tile keeps the slot's
// previous tile). blockDim.x must be a multiple of 32.
template <class T, int R>
__device__ void fj_ct_warp_pipeline(const fj::tensor<T, R>& t,
                                    const int* coords,
                                    const unsigned char* preds, int pred_mode,
                                    int tiles, T* out) {
  unsigned char* sm = fj_ct_buffer();
  __shared__ fj::barrier full[FJ_CT_STAGES], empty[FJ_CT_STAGES];
  const unsigned slot = fj_ct_round128(t.box_bytes()), elems = t.box_elems();
  const unsigned warps = blockDim.x / 32;
  for (unsigned i = threadIdx.x; i < FJ_CT_STAGES * slot; i += blockDim.x)
    sm[i] = fj_ct_stale(blockIdx.x, i);
  if (threadIdx.x == 0) {
    for (int s = 0; s < FJ_CT_STAGES; ++s) {
      full[s].init(1);
      empty[s].init(warps);
    }
  }
  __syncthreads();
  const unsigned first = blockIdx.x * tiles;
  const bool producer = threadIdx.x < 32;
  fj::pipeline<FJ_CT_STAGES> pp, cp;
  auto issue = [&](int k) {
    empty[pp.stage()].wait(pp.phase() ^ 1);
    const unsigned ci = first + k;
    fj::load_tile(fj::warp, (T*)(sm + pp.stage() * slot), t,
                  fj_ct_coords(coords + ci * 5), full[pp.stage()],
                  preds[ci] != 0, (fj::pred_mode)pred_mode);
    full[pp.stage()].arrive(fj::warp);
    pp.advance();
  };
  if (producer)
    for (int k = 0; k < FJ_CT_STAGES && k < tiles; ++k) issue(k);
  for (int k = 0; k < tiles; ++k) {
    full[cp.stage()].wait(cp.phase());
    const T* tile = (const T*)(sm + cp.stage() * slot);
    T* o = out + (unsigned long long)(first + k) * elems;
    for (unsigned i = threadIdx.x; i < elems; i += blockDim.x) o[i] = tile[i];
    empty[cp.stage()].arrive(fj::warp);
    cp.advance();
    if (producer && k + FJ_CT_STAGES < tiles) issue(k + FJ_CT_STAGES);
  }
}

// `tiles` tiles per block (cases blockIdx.x * tiles + k) in one tile-list
// load on one barrier: by warp 0 (fj::warp) when blockDim.x is a multiple
// of 32, else by the block; all dumped. With dim >= 0 it is an
// fj::gather_tiles along `dim` instead: the block's tiles share their other
// coordinates (the first tile's are the base) and the indices, copied to
// SMEM, are their coordinates along dim (some outside the tensor: their
// whole tile is the fill).
#define FJ_CT_MAX_LIST 8
template <class T, int R>
__device__ void fj_ct_gather(const fj::tensor<T, R>& t, const int* coords,
                             int dim, int tiles, T* out) {
  unsigned char* sm = fj_ct_buffer();
  __shared__ fj::barrier bar;
  __shared__ int idx[FJ_CT_MAX_LIST];
  const unsigned elems = t.box_elems(), bytes = tiles * t.box_bytes();
  const bool warp = blockDim.x % 32 == 0;
  for (unsigned i = threadIdx.x; i < bytes; i += blockDim.x)
    sm[i] = fj_ct_stale(blockIdx.x, i);
  const int* c = coords + blockIdx.x * tiles * 5;
  for (int i = threadIdx.x; dim >= 0 && i < tiles; i += blockDim.x)
    idx[i] = c[i * 5 + dim];
  if (threadIdx.x == 0) bar.init(warp ? 1 : fj::block_threads());
  __syncthreads();
  const fj::coords* cs = (const fj::coords*)c;
  if (!warp) {
    if (dim >= 0) {
      fj::gather_tiles((T*)sm, t, fj_ct_coords(c), dim, idx, tiles, bar);
    } else {
      fj::load_tiles((T*)sm, t, cs, tiles, bar);
    }
    bar.arrive();
  } else if (threadIdx.x < 32) {
    if (dim >= 0) {
      fj::gather_tiles(fj::warp, (T*)sm, t, fj_ct_coords(c), dim, idx, tiles,
                       bar);
    } else {
      fj::load_tiles(fj::warp, (T*)sm, t, cs, tiles, bar);
    }
    bar.arrive(fj::warp);
  }
  bar.wait(0);
  T* o = out + (unsigned long long)blockIdx.x * tiles * elems;
  for (unsigned i = threadIdx.x; i < tiles * elems; i += blockDim.x)
    o[i] = ((const T*)sm)[i];
}

// `tiles` tiles per block from src (block b's tile k at src + (b * tiles +
// k) * box) into the tensor in one call: fj::store_tiles at the tiles'
// coordinates (dim < 0), or fj::scatter_tiles along `dim` (the tiles share
// their other coordinates, the first tile's are the base; the indices,
// copied to SMEM, are their coordinates along dim, some outside the
// tensor: those tiles are not written). Predicate preds[b]; odd blocks use
// warp 0 (fj::warp) when blockDim.x is a multiple of 32.
template <class T, int R>
__device__ void fj_ct_scatter(const fj::tensor<T, R>& t, const int* coords,
                              const unsigned char* preds, int dim, int tiles,
                              const T* src) {
  T* tile = (T*)fj_ct_buffer();
  __shared__ int idx[FJ_CT_MAX_LIST];
  const unsigned elems = tiles * t.box_elems();
  const T* s = src + (unsigned long long)blockIdx.x * elems;
  for (unsigned i = threadIdx.x; i < elems; i += blockDim.x) tile[i] = s[i];
  const int* c = coords + blockIdx.x * tiles * 5;
  for (int i = threadIdx.x; dim >= 0 && i < tiles; i += blockDim.x)
    idx[i] = c[i * 5 + dim];
  fj::fence_smem();  // the warp-scope store reads what every thread wrote
  __syncthreads();
  const bool p = preds[blockIdx.x] != 0;
  const bool warp = blockDim.x % 32 == 0 && (blockIdx.x & 1);
  const fj::coords* cs = (const fj::coords*)c;
  if (!warp) {
    if (dim >= 0) {
      fj::scatter_tiles(t, fj_ct_coords(c), dim, idx, tiles, tile, p);
    } else {
      fj::store_tiles(t, cs, tiles, tile, p);
    }
    fj::commit_group();
    fj::wait_group<0>();
  } else if (threadIdx.x < 32) {
    if (dim >= 0) {
      fj::scatter_tiles(fj::warp, t, fj_ct_coords(c), dim, idx, tiles, tile, p);
    } else {
      fj::store_tiles(fj::warp, t, cs, tiles, tile, p);
    }
    fj::commit_group(fj::warp);
    fj::wait_group<0>(fj::warp);
  }
}

#define FJ_CT_TILE_KERNELS(E, T, R)                                     \
  extern "C" __global__ void fj_ct_tile_load_e##E##_r##R(               \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      int pred_mode, int flags, T* out) {                               \
    fj_ct_tile_load<T, R>(t, coords, preds, pred_mode, flags, out);     \
  }                                                                     \
  extern "C" __global__ void fj_ct_tile_store_e##E##_r##R(              \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      const T* src) {                                                   \
    fj_ct_tile_store<T, R>(t, coords, preds, src);                      \
  }                                                                     \
  extern "C" __global__ void fj_ct_pipeline_e##E##_r##R(                \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      int pred_mode, int tiles, T* out) {                               \
    fj_ct_pipeline<T, R>(t, coords, preds, pred_mode, tiles, out);      \
  }                                                                     \
  extern "C" __global__ void fj_ct_warp_pipeline_e##E##_r##R(           \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      int pred_mode, int tiles, T* out) {                               \
    fj_ct_warp_pipeline<T, R>(t, coords, preds, pred_mode, tiles, out); \
  }                                                                     \
  extern "C" __global__ void fj_ct_gather_e##E##_r##R(                  \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      int dim, int tiles, T* out) {                                     \
    fj_ct_gather<T, R>(t, coords, dim, tiles, out);                     \
  }                                                                     \
  extern "C" __global__ void fj_ct_scatter_e##E##_r##R(                 \
      FJ_TENSOR(T, R) t, const int* coords, const unsigned char* preds, \
      int dim, int tiles, const T* src) {                               \
    fj_ct_scatter<T, R>(t, coords, preds, dim, tiles, src);             \
  }

// -DFJ_CT_ELEM=e and/or -DFJ_CT_RANK=r build only those tile kernels (the
// whole file takes NVRTC several seconds; a host can build parts in
// parallel or only what a matrix row needs).
#if !defined(FJ_CT_RANK) || FJ_CT_RANK == 1
#define FJ_CT_R1(E, T) FJ_CT_TILE_KERNELS(E, T, 1)
#else
#define FJ_CT_R1(E, T)
#endif
#if !defined(FJ_CT_RANK) || FJ_CT_RANK == 2
#define FJ_CT_R2(E, T) FJ_CT_TILE_KERNELS(E, T, 2)
#else
#define FJ_CT_R2(E, T)
#endif
#if !defined(FJ_CT_RANK) || FJ_CT_RANK == 3
#define FJ_CT_R3(E, T) FJ_CT_TILE_KERNELS(E, T, 3)
#else
#define FJ_CT_R3(E, T)
#endif
#if !defined(FJ_CT_RANK) || FJ_CT_RANK == 4
#define FJ_CT_R4(E, T) FJ_CT_TILE_KERNELS(E, T, 4)
#else
#define FJ_CT_R4(E, T)
#endif
#if !defined(FJ_CT_RANK) || FJ_CT_RANK == 5
#define FJ_CT_R5(E, T) FJ_CT_TILE_KERNELS(E, T, 5)
#else
#define FJ_CT_R5(E, T)
#endif
#define FJ_CT_TILE_KERNELS_ALL_RANKS(E, T) \
  FJ_CT_R1(E, T) FJ_CT_R2(E, T) FJ_CT_R3(E, T) FJ_CT_R4(E, T) FJ_CT_R5(E, T)

#if !defined(FJ_CT_ELEM) || FJ_CT_ELEM == 1
FJ_CT_TILE_KERNELS_ALL_RANKS(1, unsigned char)
#endif
#if !defined(FJ_CT_ELEM) || FJ_CT_ELEM == 2
FJ_CT_TILE_KERNELS_ALL_RANKS(2, unsigned short)
#endif
#if !defined(FJ_CT_ELEM) || FJ_CT_ELEM == 4
FJ_CT_TILE_KERNELS_ALL_RANKS(4, unsigned int)
#endif
#if !defined(FJ_CT_ELEM) || FJ_CT_ELEM == 8
FJ_CT_TILE_KERNELS_ALL_RANKS(8, unsigned long long)
#endif
