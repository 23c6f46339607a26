// plain_kv_append: the job of examples/kv_append.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): cache row slot[t] = k[t] for every token t whose
// slot lies inside the cache, f16 rows of D elements; every other cache
// row keeps its contents. One warp per token, grid-stride; 16-byte copies
// when D % 8 == 0 and both rows are 16-byte aligned, 2-byte ones otherwise.
//
// Arguments: (k: const __half* [tokens][D], cache: __half* [cache_rows][D],
//             slot: const int* [tokens], tokens: int, D: int,
//             cache_rows: long long)
// Launch: any grid, block = 32 * W threads, no dynamic shared memory.
#include <cuda_fp16.h>

extern "C" __global__ void plain_kv_append(const __half* __restrict__ k,
                                           __half* __restrict__ cache,
                                           const int* __restrict__ slot,
                                           int tokens, int D,
                                           long long cache_rows) {
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  for (long long t = (long long)blockIdx.x * warps + threadIdx.x / 32;
       t < tokens; t += (long long)gridDim.x * warps) {
    const int s = slot[t];
    if (s < 0 || s >= cache_rows) continue;  // a padding token
    const __half* src = k + t * D;
    __half* dst = cache + (long long)s * D;
    if (D % 8 == 0 && ((reinterpret_cast<unsigned long long>(src) |
                        reinterpret_cast<unsigned long long>(dst)) &
                       15) == 0) {
      const uint4* sv = reinterpret_cast<const uint4*>(src);
      uint4* dv = reinterpret_cast<uint4*>(dst);
      for (int v = lane; v < D / 8; v += 32) dv[v] = sv[v];
    } else {
      for (int e = lane; e < D; e += 32) dst[e] = src[e];
    }
  }
}
