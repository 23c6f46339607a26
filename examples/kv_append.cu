// kv_append: a paged KV-cache append (vLLM's reshape_and_cache, one side):
// the K (or V) rows of this step's tokens are written into the cache rows
// their slots name, f16, any row width. The same source runs under every
// copy implementation (sync, cp_async, tma).
//
// Arguments: (k: FJ_TENSOR(__half, 2), cache: FJ_TENSOR(__half, 2),
//             slot: const int*, tokens: int)
//   - k: this step's rows, [tokens][D] (DLPack order, outermost first),
//     passed with box (ROWS, D) and oob zeros (the last group of rows may
//     run past `tokens`).
//   - cache: the paged cache [pages][PAGE][D] passed as 2-D [pages * PAGE]
//     [D] with box (1, D): one tile is one cache row. Any oob mode: a row
//     is written only when its slot lies inside the cache.
//   - slot: int32 [tokens], the cache row of token t (page * PAGE +
//     offset); -1 (or any row outside the cache) skips the token (a padding
//     token).
//   - Launch: any grid (blocks walk groups of ROWS tokens grid-stride; up
//     to ceil(tokens / ROWS) blocks), THREADS threads, dynamic shared
//     memory 2 * ROWS * D * 2 + 128 bytes (D = 1024: 32,896).
// Result: cache row slot[t] = k[t] for every t with a slot inside the
// cache; every other cache row keeps its contents.
//
// How it uses <fleetjit/copy.cuh>: a group of ROWS tokens is one fj::load_tile
// of k into a SMEM stage, then ONE fj::scatter_tiles of its rows into the
// cache along dimension 1 (the cache's rows: fj::dim<1>, checked at compile
// time), at the slots the group copied to SMEM. Under tma each row goes out
// as a tensor store (its pieces when D is wider than TMA's 256-element
// box); under cp_async and sync the block's threads store the rows. Two
// stages: the next group loads while this one is scattered.
//
// Without a kernel of your own, fj_copy does the same job from the host:
// src = k, dst = cache (2-D), scatter_index = slot (<fleetjit/fleetjit.h>).
#include <cuda_fp16.h>

#include <fleetjit/copy.cuh>

#ifndef ROWS
#define ROWS 8
#endif
#ifndef THREADS
#define THREADS 128
#endif

// Both numbers of the bound: THREADS and 4 resident CTAs let ptxas take the
// 110-128 registers the code wants; THREADS alone made it aim lower and
// spill 8-52 bytes at the layer's out-of-line calls (ptxas -v, CUDA 13).
extern "C" __global__ void __launch_bounds__(THREADS, 4)
    kv_append(FJ_TENSOR(__half, 2) k, FJ_TENSOR(__half, 2) cache,
              const int* __restrict__ slot, int tokens) {
  extern __shared__ unsigned char smem_raw[];
  // Stages 128-byte aligned, as TMA wants (the host adds 128 bytes).
  __half* buf =
      (__half*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier full[2];
  __shared__ int rows[2][ROWS];
  const int groups = (tokens + ROWS - 1) / ROWS;
  const unsigned stage = ROWS * (unsigned)k.box(0);  // elements per stage
  if (threadIdx.x == 0) {
    full[0].init(fj::block_threads());
    full[1].init(fj::block_threads());
  }
  __syncthreads();
  int g = blockIdx.x;
  fj::load_tile(buf, k, fj::at(0, g * ROWS), full[0], g < groups);
  full[0].arrive();
  for (int n = 0; g < groups; g += gridDim.x, ++n) {
    const int s = n & 1;
    // The next group into the other stage, once the scatter that read it
    // two groups ago has read its SMEM.
    const int next = g + gridDim.x;
    fj::wait_group_read<0>();
    fj::load_tile(buf + (s ^ 1) * stage, k, fj::at(0, next * ROWS), full[s ^ 1],
                  next < groups);
    full[s ^ 1].arrive();
    // This group's cache rows; -1 past the last token: not written.
    if (threadIdx.x < ROWS) {
      const int t = g * ROWS + threadIdx.x;
      rows[s][threadIdx.x] = t < tokens ? slot[t] : -1;
    }
    full[s].wait((n >> 1) & 1);
    // Row i of the stage goes to cache row rows[s][i] (the scatter's block
    // barrier publishes rows[s] first).
    fj::scatter_tiles(cache, fj::at(0, 0), fj::dim<1>, rows[s], ROWS,
                      buf + s * stage);
    fj::commit_group();
  }
  fj::wait_group<0>();  // the stores are done before the block exits
}
