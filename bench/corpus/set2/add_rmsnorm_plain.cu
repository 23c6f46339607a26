// add_rmsnorm_plain: fused residual add + RMSNorm, bf16 in and out, f32
// math, without the copy layer.
//   h[r][c] = x[r][c] + res[r][c]           (rounded to bf16: the new residual)
//   y[r][c] = h[r][c] * rsqrt(mean_c(h[r][c]^2) + eps) * w[c]
//
// Arguments: (x, res: const bf16* [rows][cols], w: const bf16* [cols],
//             res_out, y: bf16* [rows][cols], rows: int, cols: int,
//             eps: float)
//   - cols % 8 == 0, every pointer 16-byte aligned, cols <= 8 * 4 *
//     blockDim.x (a thread holds at most 4 vectors of h in registers).
//   - Launch: grid = rows (one row per block), block = 256 threads.
// Each thread loads its 16-byte vectors of x and res, keeps h in
// registers, the block reduces the sum of squares (shuffles, then one
// SMEM word per warp), and each thread writes its vectors of y.
namespace {

__device__ __forceinline__ float bf_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ unsigned bf_pack(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
#else
  unsigned ua = __float_as_uint(a), ub = __float_as_uint(b);
  ua = (a != a) ? 0x7fc00000u : ua + 0x7fffu + ((ua >> 16) & 1u);
  ub = (b != b) ? 0x7fc00000u : ub + 0x7fffu + ((ub >> 16) & 1u);
  return (ua >> 16) | (ub & 0xffff0000u);
#endif
}
__device__ __forceinline__ unsigned add2(unsigned a, unsigned b) {
  return bf_pack(bf_lo(a) + bf_lo(b), bf_hi(a) + bf_hi(b));
}

}  // namespace

#define VPT 4  // 16-byte vectors per thread, at most

extern "C" __global__ void __launch_bounds__(256)
    add_rmsnorm_plain(const unsigned short* __restrict__ x,
                      const unsigned short* __restrict__ res,
                      const unsigned short* __restrict__ w,
                      unsigned short* __restrict__ res_out,
                      unsigned short* __restrict__ y, int rows, int cols,
                      float eps) {
  __shared__ float partial[32];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const int vecs = cols / 8;
  if (vecs > VPT * (int)blockDim.x) __trap();
  const uint4* xv = (const uint4*)(x + row * cols);
  const uint4* rv = (const uint4*)(res + row * cols);
  uint4* hv = (uint4*)(res_out + row * cols);

  uint4 h[VPT];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v < vecs) {
      const uint4 a = __ldg(xv + v), b = __ldg(rv + v);
      h[i] = make_uint4(add2(a.x, b.x), add2(a.y, b.y), add2(a.z, b.z),
                        add2(a.w, b.w));
      hv[v] = h[i];
      const unsigned u[4] = {h[i].x, h[i].y, h[i].z, h[i].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = bf_lo(u[e]), q = bf_hi(u[e]);
        ss += p * p + q * q;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x / 32;
    float t = lane < nw ? partial[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(~0u, t, o);
    if (lane == 0) partial[0] = t;
  }
  __syncthreads();
  const float r = rsqrtf(partial[0] / cols + eps);

  const uint4* wv = (const uint4*)w;
  uint4* yv = (uint4*)(y + row * cols);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v < vecs) {
      const uint4 m = __ldg(wv + v);
      const unsigned u[4] = {h[i].x, h[i].y, h[i].z, h[i].w};
      const unsigned c[4] = {m.x, m.y, m.z, m.w};
      unsigned o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[e] = bf_pack(bf_lo(u[e]) * r * bf_lo(c[e]),
                       bf_hi(u[e]) * r * bf_hi(c[e]));
      }
      yv[v] = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}
