// plain_softmax: the job of examples/softmax.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): y[r][c] = exp(x[r][c] - max_c x[r]) / sum_c
// exp(x[r][c] - max_c x[r]) over each row of a bf16 matrix, f32 math. One
// warp per row, grid-stride over rows: an online max and sum of
// exponentials in one pass over the row, then the normalised output, 16-byte
// loads and stores straight from global memory.
//
// Arguments: as examples/softmax.cu (x, y, rows, cols); cols % 8 == 0 and
// x, y 16-byte aligned.
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
// (m, s) <- the running max and sum of exp(v - m) with v added.
__device__ __forceinline__ void add(float& m, float& s, float v) {
  const float n = fmaxf(m, v);
  s = s * __expf(m - n) + __expf(v - n);
  m = n;
}

}  // namespace

extern "C" __global__ void plain_softmax(const __nv_bfloat16* __restrict__ x,
                                         __nv_bfloat16* __restrict__ y,
                                         int rows, int cols) {
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  const int vecs = cols / 8;
  for (long long row = (long long)blockIdx.x * warps + threadIdx.x / 32;
       row < rows; row += (long long)gridDim.x * warps) {
    const uint4* xv = reinterpret_cast<const uint4*>(x + row * cols);
    float m = -__int_as_float(0x7f800000), s = 0.f;  // -inf
    for (int v = lane; v < vecs; v += 32) {
      const uint4 q = xv[v];
      const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        add(m, s, lo(u[e]));
        add(m, s, hi(u[e]));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(~0u, m, o);
      const float os = __shfl_xor_sync(~0u, s, o);
      const float n = fmaxf(m, om);
      s = (n == -__int_as_float(0x7f800000))
              ? 0.f
              : s * __expf(m - n) + os * __expf(om - n);
      m = n;
    }
    const float inv = 1.f / s;
    uint4* yv = reinterpret_cast<uint4*>(y + row * cols);
    for (int v = lane; v < vecs; v += 32) {
      const uint4 q = xv[v];
      const unsigned u[4] = {q.x, q.y, q.z, q.w};
      unsigned o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        o[e] = pack(__expf(lo(u[e]) - m) * inv, __expf(hi(u[e]) - m) * inv);
      yv[v] = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}
