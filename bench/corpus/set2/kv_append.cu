// kv_append: paged KV-cache append (vLLM's reshape_and_cache, K side):
//   cache[slot[t] / 16][slot[t] % 16][:] = k[t][:]
// k f16 [T][D] (D = kv_heads * head_dim), cache f16 [num_blocks][16][D],
// slot_mapping int32 [T]: a scatter of whole rows.
//
// Arguments: (k: FJ_TENSOR(unsigned short, 2) [T][D],
//             cache: FJ_TENSOR(unsigned short, 2) [num_blocks * 16][D],
//             slot_mapping: const int* [T])
//   - k's box is (KB, D): KB tokens (4 here); cache is passed as its 2-D
//     view [num_blocks * 16][D] (a slot is a row) with the box (1, D): one
//     row. oob = zeros for k (the last group may be short); cache's tiles
//     never leave it. KB <= 32; D % 64 == 0 (each row of a stage starts
//     128-byte aligned, as a TMA store wants). 0 <= slot[t] < num_blocks *
//     16, no two equal.
//   - Launch: block = 32 * KV_WARPS = 128 threads, dynamic shared memory =
//     KV_WARPS * KV_STAGES * round128(k box bytes) + 128 (98,432 bytes for
//     D = 1024: 2 CTAs per SM on sm_90), any grid (2 x SMs suits).
//
// How it uses <fleetjit/copy.cuh>: nothing here needs the block, so every
// warp runs its own pipeline (warp scope, no block barrier after the
// start): it takes the token groups w, w + W, ... (W = warps in the grid),
// keeps KV_STAGES of them in a ring of SMEM stages, each one
// fj::load_tile(fj::warp, ...) of KB rows of k on the stage's barrier, and
// writes each row with fj::store_tile(fj::warp, cache, at(0, slot), row)
// (the scatter: the tile coordinate is the slot). A stage is reloaded
// one step after its stores were committed, once
// fj::wait_group_read<1>(fj::warp) says they have read it, so one group's
// stores stay in flight while the next is written.
#include <fleetjit/copy.cuh>

#ifndef KV_STAGES
#define KV_STAGES 3
#endif
#define KV_WARPS 4

namespace {
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}
}  // namespace

extern "C" __global__ void __launch_bounds__(KV_WARPS * 32)
    kv_append(FJ_TENSOR(unsigned short, 2) k,
              FJ_TENSOR(unsigned short, 2) cache,
              const int* __restrict__ slot_mapping) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  __shared__ fj::barrier full[KV_WARPS][KV_STAGES];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (blockDim.x != KV_WARPS * 32) __trap();
  if (threadIdx.x < KV_WARPS * KV_STAGES) {
    // One arrival per phase: the warp's own (a warp-scope load attaches
    // its bytes without counting).
    full[threadIdx.x / KV_STAGES][threadIdx.x % KV_STAGES].init(1);
  }
  __syncthreads();  // the only block barrier

  const int kb = k.box(1), dim = k.box(0);  // tokens per group, row length
  if (kb > 32) __trap();                    // one slot per lane
  const long long tokens = k.shape(1);
  const unsigned stage_bytes = round128(k.box_bytes());
  unsigned char* ring = base + warp * KV_STAGES * stage_bytes;
  fj::barrier* bar = full[warp];
  const int groups = (int)((tokens + kb - 1) / kb);
  const int first = blockIdx.x * KV_WARPS + warp, step = gridDim.x * KV_WARPS;

  // Group g into stage s (warp scope); a group past the end is predicated
  // off and its phase still completes on the warp's arrival.
  auto fill = [&](int s, int g) {
    const bool ok = g < groups;
    fj::load_tile(fj::warp, (unsigned short*)(ring + s * stage_bytes), k,
                  fj::at(0, ok ? (long long)g * kb : 0), bar[s], ok);
    bar[s].arrive(fj::warp);
  };
  // Prologue: the warp's groups 0 .. KV_STAGES - 2; the last stage is
  // filled at the first step.
  for (int s = 0; s < KV_STAGES - 1; ++s) fill(s, first + s * step);

  for (int i = 0;; ++i) {
    const int g = first + i * step;
    if (g >= groups) break;
    const int s = i % KV_STAGES;
    const long long t0 = (long long)g * kb;
    const int n = (int)min((long long)kb, tokens - t0);
    // The group's slots, one per lane, loaded while its rows land.
    const int my_slot = lane < n ? __ldg(slot_mapping + t0 + lane) : 0;
    bar[s].wait((i / KV_STAGES) & 1);
    const unsigned short* rows =
        (const unsigned short*)(ring + s * stage_bytes);
    for (int r = 0; r < n; ++r) {
      const int slot = __shfl_sync(0xffffffffu, my_slot, r);
      fj::store_tile(fj::warp, cache, fj::at(0, slot), rows + r * dim);
    }
    fj::commit_group(fj::warp);
    // Group i - 1's stores have read their stage: reload it.
    fj::wait_group_read<1>(fj::warp);
    fill((i + KV_STAGES - 1) % KV_STAGES, g + (KV_STAGES - 1) * step);
  }
  fj::wait_group<0>(fj::warp);  // the stores are done before the warp exits
}
