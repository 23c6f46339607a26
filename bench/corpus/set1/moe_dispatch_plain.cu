// moe_dispatch_plain: MoE token dispatch, out[i][:] = x[idx[i]][:] for the
// tokens * topk rows of an expert-sorted buffer, bf16 rows of `hidden`,
// without the copy layer.
//
// Arguments: (x: const bf16* [tokens][hidden], idx: const int* [rows],
//             out: bf16* [rows][hidden], rows: int, hidden: int)
//   - hidden % 8 == 0; x and out 16-byte aligned; 0 <= idx[i] < tokens.
//   - Launch: grid = ceil(rows / 8), block = 256 threads (one row per
//     warp), no dynamic shared memory.
// Each lane copies 16-byte chunks of its warp's row, MDP_UNROLL (4) loads
// in flight before their stores.
#include <cuda_bf16.h>

#ifndef MDP_UNROLL
#define MDP_UNROLL 4
#endif

extern "C" __global__ void __launch_bounds__(256)
    moe_dispatch_plain(const __nv_bfloat16* __restrict__ x,
                       const int* __restrict__ idx,
                       __nv_bfloat16* __restrict__ out, int rows, int hidden) {
  const long long row =
      (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const int nch = hidden / 8;
  const uint4* src = (const uint4*)(x + (long long)__ldg(idx + row) * hidden);
  uint4* dst = (uint4*)(out + row * hidden);
  for (int c0 = lane; c0 < nch; c0 += 32 * MDP_UNROLL) {
    uint4 v[MDP_UNROLL];
#pragma unroll
    for (int j = 0; j < MDP_UNROLL; ++j) {
      const int c = c0 + 32 * j;
      if (c < nch) v[j] = __ldg(src + c);
    }
#pragma unroll
    for (int j = 0; j < MDP_UNROLL; ++j) {
      const int c = c0 + 32 * j;
      if (c < nch) dst[c] = v[j];
    }
  }
}
