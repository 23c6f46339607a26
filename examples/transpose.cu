// transpose: out[c][r] = in[r][c] for a 2-D f32 tensor, tile by tile,
// ragged edges included. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(float, 2) [rows][cols], out: FJ_TENSOR(float,
//             2) [cols][rows], tiles_x: int, tiles: int)
//   - in and out have the same square box {TR_BOX, TR_BOX} (-DTR_BOX=T, a
//     multiple of 32; default 64: 16 KiB tiles); in.oob = zeros. A box of
//     another size traps.
//   - tiles_x = ceil(cols / T), tiles = tiles_x * ceil(rows / T).
//   - Launch: any grid (blocks walk the tiles grid-stride), block a
//     multiple of 32 threads, dynamic shared memory =
//     128 + (TR_STAGES + TR_OUTS) * T * T * 4 bytes, TR_OUTS = 2 under
//     tma, 1 under cp_async and sync.
//   - -DTR_STAGES=N sets the number of input tiles in flight (default 3).
// How it uses <fleetjit/copy.cuh>: each input tile is one fj::load_tile
// on its stage's barrier (TMA when the tensor has a tensor map); each
// output tile one fj::store_tile from an SMEM out tile. Under tma, two
// out tiles, so one bulk store stays in flight while the next tile is
// transposed; under cp_async and sync the store is the threads' own
// ld.shared + st.global, done reading when it returns, so one out tile
// (the refill's block barrier orders it before the next transpose) and
// the SMEM saved goes to more resident CTAs. The transpose
// in SMEM needs no padding: lane l of a warp moves element
// (i, j) = (l, l ^ k) of a 32 x 32 sub-block at step k, so the 32 reads
// hit 32 banks (columns l ^ k) and so do the 32 writes (columns l).
#include <fleetjit/copy.cuh>

#ifndef TR_STAGES
#define TR_STAGES 3
#endif
#ifndef TR_BOX
#define TR_BOX 64
#endif
#if FJ_COPY_IMPL == 2
#define TR_OUTS 2
#else
#define TR_OUTS 1
#endif

extern "C" __global__ void transpose(FJ_TENSOR(float, 2) in,
                                     FJ_TENSOR(float, 2) out, int tiles_x,
                                     int tiles) {
  // 1. TR_STAGES input tiles, then TR_OUTS output tiles, 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  float* buf = (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  // The tile size is a compile-time constant, so the SMEM addresses of the
  // transpose fold into immediates.
  constexpr int T = TR_BOX;
  constexpr unsigned tile = (unsigned)T * T;
  if (in.box(0) != T || in.box(1) != T || out.box(0) != T || out.box(1) != T) {
    __trap();
  }
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
  const int warps = blockDim.x / 32;
  constexpr int subs = T / 32;
  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    const int s = k % TR_STAGES;
    const int x0 = (t % tiles_x) * T, y0 = (t / tiles_x) * T;
    float* src = buf + s * tile;
    float* dst = outs + (k % TR_OUTS) * tile;
    // The store of tile k - TR_OUTS read dst: wait until at most
    // TR_OUTS - 1 stores may still read their SMEM (a no-op where stores
    // are the threads' own).
    fj::wait_group_read<TR_OUTS - 1>();
    full[s].wait((k / TR_STAGES) & 1);
    // The 32 steps spread over the warps; each step covers every 32 x 32
    // sub-block (bi, bj) at once.
    for (int step = warp; step < 32; step += warps) {
      const int j0 = lane ^ step;
      const float* s0 = src + lane * T + j0;  // (i, j) = (lane, j0)
      float* d0 = dst + j0 * T + lane;
      float v[subs][subs];  // all reads first: src and dst may alias
#pragma unroll
      for (int bi = 0; bi < subs; ++bi) {
#pragma unroll
        for (int bj = 0; bj < subs; ++bj)
          v[bi][bj] = s0[(bi * 32) * T + bj * 32];
      }
#pragma unroll
      for (int bi = 0; bi < subs; ++bi) {
#pragma unroll
        for (int bj = 0; bj < subs; ++bj)
          d0[(bj * 32) * T + bi * 32] = v[bi][bj];
      }
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
