// bias_gelu_plain: y[t][n] = gelu_tanh(x[t][n] + b[n]) over a bf16 [T][N]
// matrix, f32 math, bf16 out; the same job as bias_gelu.cu without the copy
// layer. GELU is the tanh approximation (F.gelu(..., approximate='tanh')),
// tanh from tanh.approx.f32.
//
// Arguments: (x: const bf16* [T][N], b: const bf16* [N], y: bf16* [T][N],
//             N: int)
//   - N % 8 == 0; x, b, y 16-byte aligned.
//   - Launch: grid = T (one row per block), block = 256 threads, no
//     dynamic shared memory.
// Each thread moves 16-byte vectors of its row, BGP_UNROLL (4) loads in
// flight before the math and the stores.
#include <cuda_bf16.h>

#ifndef BGP_UNROLL
#define BGP_UNROLL 4
#endif

namespace {

__device__ __forceinline__ float bf_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ unsigned bf_pack(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ float tanh_fast(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float gelu_tanh(float v) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;
  const float u = k0 * fmaf(k1 * v, v * v, v);
  return 0.5f * v * (1.f + tanh_fast(u));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    bias_gelu_plain(const __nv_bfloat16* __restrict__ x,
                    const __nv_bfloat16* __restrict__ b,
                    __nv_bfloat16* __restrict__ y, int N) {
  const int nch = N / 8;  // 16-byte chunks per row
  const uint4* xr = (const uint4*)(x + (long long)blockIdx.x * N);
  const uint4* bv = (const uint4*)b;
  uint4* yr = (uint4*)(y + (long long)blockIdx.x * N);
  for (int c0 = threadIdx.x; c0 < nch; c0 += BGP_UNROLL * blockDim.x) {
    uint4 q[BGP_UNROLL], w[BGP_UNROLL];
#pragma unroll
    for (int j = 0; j < BGP_UNROLL; ++j) {
      const int c = c0 + j * blockDim.x;
      if (c < nch) {
        q[j] = __ldg(xr + c);
        w[j] = __ldg(bv + c);
      }
    }
#pragma unroll
    for (int j = 0; j < BGP_UNROLL; ++j) {
      const int c = c0 + j * blockDim.x;
      if (c < nch) {
        const unsigned u[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
        const unsigned v[4] = {w[j].x, w[j].y, w[j].z, w[j].w};
        unsigned o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          o[e] = bf_pack(gelu_tanh(bf_lo(u[e]) + bf_lo(v[e])),
                         gelu_tanh(bf_hi(u[e]) + bf_hi(v[e])));
        }
        yr[c] = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
  }
}
