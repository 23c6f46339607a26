// moe_dispatch: MoE token dispatch, out[i][:] = x[idx[i]][:] for the
// tokens * topk rows of an expert-sorted buffer, bf16 rows of `hidden`.
// One source for every copy implementation (sync, cp_async, tma).
//
// Arguments: (x: FJ_TENSOR(bf16, 2) [tokens][hidden], out: FJ_TENSOR(bf16,
//             2) [rows][hidden], idx: const int* [rows])
//   - x's box is (1, BC), out's box (G, BC), outermost-first. The manifest
//     uses G = 16 and BC = hidden / ceil(hidden / 1024), a column tile of
//     at most 1024 that divides the row (1024 for 4096 and 7168, 960 for
//     2880): the guide says a tile store that leaves the tensor becomes
//     the threads' clipped stores, so the column tiles stay inside. One
//     stage is 16 gathered rows, at most 32 KiB. BC % 64 == 0 keeps every
//     gathered row's SMEM destination on a 128-byte boundary. x.oob =
//     zeros (any other BC works too: a column tile past the row reads
//     zeros and its store is clipped).
//   - hidden % 8 == 0 (rows start on 16-byte boundaries, as a tensor map
//     needs); 0 <= idx[i] < tokens.
//   - Launch: any grid (blocks walk the tiles grid-stride), any block of
//     whole warps, dynamic shared memory = 128 + MD_STAGES * G * BC * 2
//     bytes (98,432 for BC = 1024).
//   - -DMD_STAGES=N sets the pipeline depth (default 3, at least 2).
// How it uses <fleetjit/copy.cuh>: a tile of the output is G rows by BC
// columns; its rows are one fj::gather_tiles of x (tile i is x's (1, BC)
// box at column c0 with the row coordinate replaced by idx[i0 + i], the
// index list read from GMEM), landing dense as out's (G, BC) box, which
// one fj::store_tile writes back (clipped at the last row group and
// column tile). Block-collective calls on a ring of MD_STAGES stages: a
// stage is refilled one iteration after its store was committed, once
// fj::wait_group_read<1>() says that store has read its SMEM, so the
// copy engine's store and the next gathers overlap.
#include <cuda_bf16.h>

#include <fleetjit/copy.cuh>

#ifndef MD_STAGES
#define MD_STAGES 3
#endif
static_assert(MD_STAGES >= 2, "moe_dispatch: MD_STAGES >= 2");

extern "C" __global__ void moe_dispatch(FJ_TENSOR(__nv_bfloat16, 2) x,
                                        FJ_TENSOR(__nv_bfloat16, 2) out,
                                        const int* __restrict__ idx) {
  constexpr int S = MD_STAGES;
  const int BC = out.box(0), G = out.box(1);
  if (x.box(0) != BC || x.box(1) != 1) __trap();
  extern __shared__ unsigned char smem_raw[];
  __nv_bfloat16* ring =
      (__nv_bfloat16*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  const unsigned stage_elems = out.box_elems();  // G * BC, 128-byte multiple
  __shared__ fj::barrier full[S];
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  const long long rows = out.shape(1), cols = out.shape(0);
  const int col_tiles = (int)((cols + BC - 1) / BC);
  const int tiles = (int)((rows + G - 1) / G) * col_tiles;
  // Tile k of this block (t = blockIdx.x + k * gridDim.x) into stage k % S;
  // a tile past the end is predicated off (its barrier still completes).
  auto fill = [&](int k) {
    const int t = blockIdx.x + k * gridDim.x;
    const bool ok = t < tiles;
    const int i0 = ok ? (t / col_tiles) * G : 0;
    const int c0 = ok ? (t % col_tiles) * BC : 0;
    const int n = ok ? (int)min((long long)G, rows - i0) : 0;
    fj::gather_tiles(ring + (k % S) * stage_elems, x, fj::at(c0, 0), 1,
                     idx + i0, n, full[k % S], ok);
    full[k % S].arrive();
  };
  for (int k = 0; k < S; ++k) fill(k);

  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    const int s = k % S;
    full[s].wait((k / S) & 1);
    const int i0 = (t / col_tiles) * G, c0 = (t % col_tiles) * BC;
    fj::store_tile(out, fj::at(c0, i0), ring + s * stage_elems);
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
