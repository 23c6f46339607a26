// fj_copy's kernel: a window of `src` into `dst`, tile by tile, through
// shared memory with <fleetjit/copy.cuh>, so it runs under every copy
// implementation (sync, cp_async, tma) and inherits the layer's
// out-of-bounds fill (zeros, NaN) and clipped tile stores.
//
// Built by the runtime with -DFJ_EB=<element bytes> -DFJ_RANK=<rank>; the
// element type is an unsigned integer of that width (the tensors carry the
// real dtype, which picks the NaN pattern and the TMA element type).
//
// Tile t of the window starts at window coordinates w (tile index times box
// per dimension, dimension 0 fastest), reads src at w + start and is stored
// at dst coordinates w. With a gather, dimension FJ_RANK-1 (the outermost)
// has box 1 and reads src row index[w] + start: a row outside src is read
// fully out of bounds, hence filled (the runtime passes promise_in_bounds
// copies with oob_zeros). With a scatter, the outermost box is 1 too and
// the tile is stored at dst row scatter[w]: a row outside dst is not
// stored (its predicate is false), so a bad index never faults.
//
// Persistent CTAs: each walks tiles blockIdx.x, + gridDim.x, ...; FJ_STAGES
// buffers keep loads in flight while the previous tile is stored (the
// pipeline of bench/copy_bench.cc). Launch: grid <= tiles, any block size,
// dynamic shared memory FJ_STAGES * tile bytes + 128.
#include <fleetjit/copy.cuh>

#if !defined(FJ_EB) || !defined(FJ_RANK)
#error "tile_copy.cu: build with -DFJ_EB=1|2|4|8 -DFJ_RANK=1..5"
#endif
#ifndef FJ_STAGES
#define FJ_STAGES 2
#endif

#if FJ_EB == 1
typedef unsigned char fj_elem;
#elif FJ_EB == 2
typedef unsigned short fj_elem;
#elif FJ_EB == 4
typedef unsigned int fj_elem;
#elif FJ_EB == 8
typedef unsigned long long fj_elem;
#else
#error "tile_copy.cu: FJ_EB must be 1, 2, 4 or 8"
#endif

// Mirrors fleetjit::copy::CopyKernelArgs (runtime/copy/copy_kernels.h).
struct fj_copy_args {
  long long tiles[5];      // tiles per dimension, dimension 0 innermost
  long long total;         // product of tiles
  int start[5];            // window start in src per dimension
  int index_bytes;         // 0: no gather; 4: int32; 8: int64
  const void* index;       // gather index (entry per outermost dst row)
  long long index_stride;  // elements
  long long src_rows;      // src extent of the outermost dimension
  int scatter_bytes;       // 0: no scatter; 4: int32; 8: int64
  int unused;
  const void* scatter;       // scatter index (dst row per outermost window row)
  long long scatter_stride;  // elements
  long long dst_rows;        // dst extent of the outermost dimension
};

// Entry `row` of a 4- or 8-byte index.
__device__ __forceinline__ long long fj_index_at(int bytes, const void* index,
                                                 long long stride,
                                                 long long row) {
  const long long at = row * stride;
  return bytes == 4 ? (long long)((const int*)index)[at]
                    : ((const long long*)index)[at];
}

// Tile t's dst and src coordinates; false when a scatter sends it outside
// dst (not stored).
__device__ __forceinline__ bool fj_tile_at(
    const fj_copy_args& a, const fj::tensor<fj_elem, FJ_RANK>& dst, long long t,
    fj::coords& d, fj::coords& s) {
  for (int k = 0; k < 5; ++k) {
    d.v[k] = 0;
    s.v[k] = 0;
  }
#pragma unroll
  for (int k = 0; k < FJ_RANK; ++k) {
    const long long i = t % a.tiles[k];
    t /= a.tiles[k];
    d.v[k] = (int)(i * dst.box(k));
    s.v[k] = d.v[k] + a.start[k];
  }
  const long long row = d.v[FJ_RANK - 1];
  if (a.index_bytes != 0) {
    const long long c =
        fj_index_at(a.index_bytes, a.index, a.index_stride, row) +
        a.start[FJ_RANK - 1];
    s.v[FJ_RANK - 1] = (c >= 0 && c < a.src_rows) ? (int)c : -1;
  }
  if (a.scatter_bytes != 0) {
    const long long r =
        fj_index_at(a.scatter_bytes, a.scatter, a.scatter_stride, row);
    if (r < 0 || r >= a.dst_rows) return false;
    d.v[FJ_RANK - 1] = (int)r;
  }
  return true;
}

extern "C" __global__ void fj_tile_copy(FJ_TENSOR(fj_elem, FJ_RANK) src,
                                        FJ_TENSOR(fj_elem, FJ_RANK) dst,
                                        const fj_copy_args a) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ fj::barrier bars[FJ_STAGES];
  const unsigned tile_elems = dst.box_elems();
  // Tiles 128-byte aligned (TMA wants it); the host adds 128 bytes.
  fj_elem* buf =
      (fj_elem*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  if (threadIdx.x == 0) {
    for (int s = 0; s < FJ_STAGES; ++s) bars[s].init(fj::block_threads());
  }
  __syncthreads();
  fj::coords d, s;
  for (int k = 0; k < FJ_STAGES; ++k) {
    const long long t = blockIdx.x + (long long)k * gridDim.x;
    const bool live = t < a.total;
    fj_tile_at(a, dst, live ? t : 0, d, s);
    fj::load_tile(buf + k * tile_elems, src, s, bars[k], live);
    bars[k].arrive();
  }
  // Tile k waits in slot k % FJ_STAGES. After storing it, the slot of tile
  // k - 1 is refilled once that older store has read its SMEM, so one store
  // and FJ_STAGES - 1 loads stay in flight.
  for (long long k = 0;; ++k) {
    const long long t = blockIdx.x + k * gridDim.x;
    if (t >= a.total) break;
    const int slot = (int)(k % FJ_STAGES);
    bars[slot].wait((unsigned)((k / FJ_STAGES) & 1));
    const bool stored = fj_tile_at(a, dst, t, d, s);
    fj::store_tile(dst, d, buf + slot * tile_elems, stored);
    fj::commit_group();
    if (k >= 1) {
      fj::wait_group_read<1>();
      const int p = (int)((k - 1) % FJ_STAGES);
      const long long tn = t + (long long)(FJ_STAGES - 1) * gridDim.x;
      const bool live = tn < a.total;
      fj_tile_at(a, dst, live ? tn : 0, d, s);
      fj::load_tile(buf + p * tile_elems, src, s, bars[p], live);
      bars[p].arrive();
    }
  }
  fj::wait_group<0>();
}
