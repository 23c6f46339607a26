// kv_layout_plain: KV-cache layout conversion, head-major
// [heads][tokens][128] to token-major [tokens][heads][128], f16:
// out[t][h][:] = in[h][t][:], without the copy layer.
//
// Arguments: (in: const f16* [heads][tokens][128],
//             out: f16* [tokens][heads][128], heads: int, tokens: int)
//   - in and out 16-byte aligned.
//   - Launch: grid = ceil(tokens * heads * 16 / (256 * KVP_UNROLL)) (1024
//     16-byte chunks per block by default), block = 256 threads, no
//     dynamic shared memory.
// Threads walk the output's 16-byte chunks in order (each 256-byte row is
// 16 chunks, read from one 256-byte row of the input), KVP_UNROLL (4)
// loads in flight before their stores: both sides move whole 256-byte
// rows per half-warp.
#include <cuda_fp16.h>

#ifndef KVP_UNROLL
#define KVP_UNROLL 4
#endif

extern "C" __global__ void __launch_bounds__(256)
    kv_layout_plain(const __half* __restrict__ in, __half* __restrict__ out,
                    int heads, int tokens) {
  const long long total = (long long)tokens * heads * 16;  // output chunks
  const uint4* src = (const uint4*)in;
  uint4* dst = (uint4*)out;
  const long long base = (long long)blockIdx.x * blockDim.x * KVP_UNROLL;
  uint4 v[KVP_UNROLL];
#pragma unroll
  for (int j = 0; j < KVP_UNROLL; ++j) {
    const long long i = base + j * blockDim.x + threadIdx.x;
    if (i < total) {
      const long long o =
          i / 16;  // output row: token o / heads, head o % heads
      const int t = (int)(o / heads), h = (int)(o % heads);
      v[j] = __ldg(src + ((long long)h * tokens + t) * 16 + (i % 16));
    }
  }
#pragma unroll
  for (int j = 0; j < KVP_UNROLL; ++j) {
    const long long i = base + j * blockDim.x + threadIdx.x;
    if (i < total) dst[i] = v[j];
  }
}
