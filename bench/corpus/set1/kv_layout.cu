// kv_layout: KV-cache layout conversion, head-major [heads][tokens][128]
// to token-major [tokens][heads][128], f16: out[t][h][:] = in[h][t][:].
// One source for every copy implementation (sync, cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(f16, 2), out: FJ_TENSOR(f16, 2), heads: int)
//   - in is the [heads][tokens][128] cache passed as the 2-D view
//     [heads * tokens][128], out the [tokens][heads][128] buffer as the 2-D
//     view [tokens][heads * 128] (DLPack order, outermost first). Both
//     boxes are (TT, 128): TT token rows of one head (the manifest uses
//     TT = 128, 32 KiB); in.oob = zeros. As 2-D views a tile crosses a
//     tensor edge only along the rows, which the layer's guide says keeps
//     the software paths off the per-element walker (rank > 2 across an
//     edge takes it).
//   - Launch: any grid (blocks walk the tiles grid-stride), any block of
//     whole warps, dynamic shared memory = 128 + KV_STAGES * TT * 256
//     bytes (98,432 with the manifest's box).
//   - -DKV_STAGES=N sets the pipeline depth (default 3, at least 2).
// How it uses <fleetjit/copy.cuh>: a tile (head h, tokens t0 .. t0 + TT - 1)
// is the same dense [TT][128] block in both layouts: rows h * tokens + t0..
// of in, and rows t0.. at column h * 128 of out. So each tile is one
// fj::load_tile of in and one fj::store_tile of out from the same SMEM
// (the last token tile of a head reads past its head, or zeros past the
// tensor, and the store is clipped at `tokens`). Block-collective calls on
// a ring of KV_STAGES stages: a stage is refilled one iteration after its
// store was committed, once fj::wait_group_read<1>() says that store has
// read its SMEM. Tiles are ordered head-fastest, so neighbouring tiles
// write neighbouring 256-byte pieces of the same output rows.
#include <cuda_fp16.h>

#include <fleetjit/copy.cuh>

#ifndef KV_STAGES
#define KV_STAGES 3
#endif
static_assert(KV_STAGES >= 2, "kv_layout: KV_STAGES >= 2");

extern "C" __global__ void kv_layout(FJ_TENSOR(__half, 2) in,
                                     FJ_TENSOR(__half, 2) out, int heads) {
  constexpr int S = KV_STAGES;
  const int D = in.box(0), TT = in.box(1);
  if (out.box(0) != D || out.box(1) != TT || in.shape(0) != D) __trap();
  extern __shared__ unsigned char smem_raw[];
  __half* ring =
      (__half*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  const unsigned stage_elems = in.box_elems();  // TT * D
  __shared__ fj::barrier full[S];
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  const int tokens = (int)out.shape(1);
  const int tiles = ((tokens + TT - 1) / TT) * heads;
  // Tile k of this block (t = blockIdx.x + k * gridDim.x) into stage k % S;
  // a tile past the end is predicated off (its barrier still completes).
  auto fill = [&](int k) {
    const int t = blockIdx.x + k * gridDim.x;
    const bool ok = t < tiles;
    const int h = ok ? t % heads : 0, t0 = ok ? (t / heads) * TT : 0;
    fj::load_tile(ring + (k % S) * stage_elems, in, fj::at(0, h * tokens + t0),
                  full[k % S], ok);
    full[k % S].arrive();
  };
  for (int k = 0; k < S; ++k) fill(k);

  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    const int s = k % S;
    full[s].wait((k / S) & 1);
    const int h = t % heads, t0 = (t / heads) * TT;
    fj::store_tile(out, fj::at(h * D, t0), ring + s * stage_elems);
    fj::commit_group();
    if (k >= 1) {
      // The store of tile k - 1 has read its stage: refill it with the
      // tile S ahead of it.
      fj::wait_group_read<1>();
      fill(k - 1 + S);
    }
  }
  fj::wait_group<0>();  // stores done before the block exits
}
