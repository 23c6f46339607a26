// transpose: out[c][r] = in[r][c] for a 2-D f32 tensor, tile by tile,
// ragged edges included. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(float, 2) [rows][cols], out: FJ_TENSOR(float,
//             2) [cols][rows], tiles_x: int, tiles: int)
//   - in and out have the same square box {TR_BOX, TR_BOX} (-DTR_BOX=T:
//     32, 64 or 128; default 64: 16 KiB tiles); in.oob = zeros. A box of
//     another size traps.
//   - tiles_x = ceil(cols / T), tiles = tiles_x * ceil(rows / T).
//   - Launch: any grid (blocks walk the tiles grid-stride), block a
//     multiple of 32 threads, dynamic shared memory =
//     128 + (TR_STAGES + TR_OUTS) * T * T * 4 bytes, TR_OUTS = 2 under
//     tma, 1 under cp_async and sync.
//   - -DTR_STAGES=N sets the number of input tiles in flight (default 3).
//   - -DTR_L2AHEAD=1 also warms L2 with the tile after the one each refill
//     loads (fj::prefetch_tile). Meant for sync, whose fj::load_tile is
//     the block's own loads and waits for them.
// How it uses <fleetjit/copy.cuh>: each input tile is one fj::load_tile
// on its stage's barrier (TMA when the tensor has a tensor map); each
// output tile one fj::store_tile from an SMEM out tile. Under tma, two
// out tiles, so one bulk store stays in flight while the next tile is
// transposed; under cp_async and sync the store is the threads' own
// ld.shared + st.global, done reading when it returns, so one out tile
// (the refill's block barrier orders it before the next transpose) and
// the SMEM saved goes to more resident CTAs. The transpose in SMEM moves
// 4 x 4 blocks with 16-byte accesses (a quarter of the SMEM instructions
// of 4-byte ones) and needs no padding: at step k the lanes with block row
// a = 0..7 read 16-byte chunk a ^ k of their rows and write chunk a of
// theirs, so the 8 lanes of each SMEM wavefront hit 8 distinct 16-byte
// bank groups on both sides.
#include <fleetjit/copy.cuh>

#ifndef TR_STAGES
#define TR_STAGES 3
#endif
#ifndef TR_BOX
#define TR_BOX 64
#endif
#ifndef TR_L2AHEAD
#define TR_L2AHEAD 0
#endif
#if FJ_COPY_IMPL == 2
#define TR_OUTS 2
#else
#define TR_OUTS 1
#endif

// -DTR_MAXNREG=N caps the kernel's registers (more resident CTAs, against
// spills in the layer's rarely taken paths).
#ifdef TR_MAXNREG
#define TR_REG_CAP __maxnreg__(TR_MAXNREG)
#else
#define TR_REG_CAP
#endif

extern "C" __global__ void TR_REG_CAP transpose(FJ_TENSOR(float, 2) in,
                                                FJ_TENSOR(float, 2) out,
                                                int tiles_x, int tiles) {
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
  // TR_L2AHEAD: tile t into L2 (block-collective, no wait).
  auto l2_ahead = [&](int t) {
    if (TR_L2AHEAD && t < tiles) {
      fj::prefetch_tile(in, fj::at((t % tiles_x) * T, (t / tiles_x) * T));
    }
  };
  l2_ahead(blockIdx.x + TR_STAGES * gridDim.x);

  // 3. Steady state.
  constexpr int Q = T / 4;  // 16-byte chunks per tile row
  static_assert(Q == 8 || Q == 16 || Q == 32, "TR_BOX is 32, 64 or 128");
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
    // The tile is (T/4)^2 blocks of 4 x 4 elements; item w = k * Q + a
    // (Q = T/4) moves block (a, c = a ^ k): four 16-byte reads of src rows
    // 4a..4a+3 at chunk c, a transpose in registers, four 16-byte writes
    // to dst rows 4c..4c+3 at chunk a.
    for (unsigned w = threadIdx.x; w < (unsigned)(Q * Q); w += blockDim.x) {
      const unsigned a = w % Q, c = a ^ (w / Q);
      float4 r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        r[i] = *(const float4*)(src + (4 * a + i) * T + 4 * c);
      const float4 o0 = make_float4(r[0].x, r[1].x, r[2].x, r[3].x);
      const float4 o1 = make_float4(r[0].y, r[1].y, r[2].y, r[3].y);
      const float4 o2 = make_float4(r[0].z, r[1].z, r[2].z, r[3].z);
      const float4 o3 = make_float4(r[0].w, r[1].w, r[2].w, r[3].w);
      float* d = dst + 4 * c * T + 4 * a;
      *(float4*)(d + 0 * T) = o0;
      *(float4*)(d + 1 * T) = o1;
      *(float4*)(d + 2 * T) = o2;
      *(float4*)(d + 3 * T) = o3;
    }
    // The store starts with a block barrier: dst is complete.
    fj::store_tile(out, fj::at(y0, x0), dst);
    fj::commit_group();
    // Refill the stage (the load's block barrier: src is no longer read).
    const int tn = t + TR_STAGES * gridDim.x;
    l2_ahead(tn + gridDim.x);
    fj::load_tile(src, in, fj::at((tn % tiles_x) * T, (tn / tiles_x) * T),
                  full[s], tn < tiles);
    full[s].arrive();
  }
  fj::wait_group<0>();
}
