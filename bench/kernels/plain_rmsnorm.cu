// plain_rmsnorm: the job of examples/rmsnorm.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): y[r][c] = x[r][c] * rsqrt(mean_c(x[r][c]^2) + eps)
// * w[c], bf16 in and out, f32 math. One warp per row, grid-stride over
// rows; 16-byte loads and stores straight from global memory (the second
// pass re-reads the row, mostly from L1/L2).
//
// Arguments: as examples/rmsnorm.cu (x, w, y, rows, cols, eps); cols % 8 ==
// 0 and x, w, y 16-byte aligned.
// Launch: any grid, block = 32 * W threads, no dynamic shared memory.
#include <cuda_bf16.h>

namespace {

__device__ __forceinline__ float lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ unsigned pack(float a, float b) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(a, b);  // a in the low half
  return *reinterpret_cast<const unsigned*>(&p);
}

}  // namespace

extern "C" __global__ void plain_rmsnorm(const __nv_bfloat16* __restrict__ x,
                                         const __nv_bfloat16* __restrict__ w,
                                         __nv_bfloat16* __restrict__ y,
                                         int rows, int cols, float eps) {
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  const int vecs = cols / 8;
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  for (long long row = (long long)blockIdx.x * warps + threadIdx.x / 32;
       row < rows; row += (long long)gridDim.x * warps) {
    const uint4* xv = reinterpret_cast<const uint4*>(x + row * cols);
    float ss = 0.f;
    for (int v = lane; v < vecs; v += 32) {
      const uint4 q = xv[v];
      const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ss += lo(u[e]) * lo(u[e]) + hi(u[e]) * hi(u[e]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
    const float r = rsqrtf(ss / cols + eps);
    uint4* yv = reinterpret_cast<uint4*>(y + row * cols);
    for (int v = lane; v < vecs; v += 32) {
      const uint4 q = xv[v], m = wv[v];
      const unsigned u[4] = {q.x, q.y, q.z, q.w};
      const unsigned c[4] = {m.x, m.y, m.z, m.w};
      unsigned o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[e] = pack(lo(u[e]) * r * lo(c[e]), hi(u[e]) * r * hi(c[e]));
      yv[v] = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}
