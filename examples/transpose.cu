// transpose: out[c][r] = in[r][c] for a 2-D f32 tensor, tile by tile,
// ragged edges included. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(float, 2) [rows][cols], out: FJ_TENSOR(float,
//             2) [cols][rows], tiles_x: int, tiles: int)
//   - in and out have the same square box {T, T}, T a multiple of 32
//     (64: 16 KiB tiles); in.oob = zeros.
//   - tiles_x = ceil(cols / T), tiles = tiles_x * ceil(rows / T).
//   - Launch: any grid (blocks walk the tiles grid-stride), block a
//     multiple of 32 threads, dynamic shared memory =
//     128 + (TR_STAGES + 2) * T * T * 4 bytes.
//   - -DTR_STAGES=N sets the number of input tiles in flight (default 3).
// How it uses <fleetjit/copy.cuh>: each input tile is one fj::load_tile
// on its stage's barrier (TMA when the tensor has a tensor map); each
// output tile one fj::store_tile from one of two SMEM out tiles, so one
// store stays in flight while the next tile is transposed. The transpose
// in SMEM needs no padding: lane l of a warp moves element
// (i, j) = (l, l ^ k) of a 32 x 32 sub-block at step k, so the 32 reads
// hit 32 banks (columns l ^ k) and so do the 32 writes (columns l).
#include <fleetjit/copy.cuh>

#ifndef TR_STAGES
#define TR_STAGES 3
#endif

extern "C" __global__ void transpose(FJ_TENSOR(float, 2) in,
                                     FJ_TENSOR(float, 2) out, int tiles_x,
                                     int tiles) {
  // 1. TR_STAGES input tiles, then two output tiles, 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  float* buf = (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  const int T = in.box(0);
  const unsigned tile = (unsigned)T * T;
  float* outs = buf + TR_STAGES * tile;
  __shared__ fj::barrier full[TR_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < TR_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  // 2. Prologue: tile t = blockIdx.x + k * gridDim.x lands in stage
  //    k % TR_STAGES; a tile past the end is predicated off.
  for (int s = 0; s < TR_STAGES; ++s) {
    const int t = blockIdx.x + s * gridDim.x;
    fj::load_tile(buf + s * tile, in,
                  fj::at((t % tiles_x) * T, (t / tiles_x) * T), full[s],
                  t < tiles);
    full[s].arrive();
  }

  // 3. Steady state.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32, subs = T / 32;
  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    const int s = k % TR_STAGES;
    const int x0 = (t % tiles_x) * T, y0 = (t / tiles_x) * T;
    float* src = buf + s * tile;
    float* dst = outs + (k & 1) * tile;
    // The store of tile k - 2 read dst: wait until at most one store
    // (tile k - 1's) may still read its SMEM.
    fj::wait_group_read<1>();
    full[s].wait((k / TR_STAGES) & 1);
    // Steps (sub-block bi, bj; k) spread over the warps.
    for (int q = warp; q < subs * subs * 32; q += warps) {
      const int step = q & 31, sb = q >> 5;
      const int i = (sb / subs) * 32 + lane;
      const int j = (sb % subs) * 32 + (lane ^ step);
      dst[j * T + i] = src[i * T + j];
    }
    // The store starts with a block barrier: dst is complete.
    fj::store_tile(out, fj::at(y0, x0), dst);
    fj::commit_group();
    // Refill the stage (the load's block barrier: src is no longer read).
    const int tn = t + TR_STAGES * gridDim.x;
    fj::load_tile(src, in, fj::at((tn % tiles_x) * T, (tn / tiles_x) * T),
                  full[s], tn < tiles);
    full[s].arrive();
  }
  fj::wait_group<0>();
}
