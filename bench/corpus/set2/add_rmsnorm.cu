// add_rmsnorm: fused residual add + RMSNorm, bf16 in and out, f32 math.
//   h[r][c] = x[r][c] + res[r][c]           (rounded to bf16: the new residual)
//   y[r][c] = h[r][c] * rsqrt(mean_c(h[r][c]^2) + eps) * w[c]
//
// Arguments: (x, res: const bf16* [rows][cols], w: const bf16* [cols],
//             res_out, y: bf16* [rows][cols], rows: int, cols: int,
//             eps: float)
//   - bf16 travels as unsigned short; cols % 8 == 0 and every pointer
//     16-byte aligned (rows are whole 16-byte vectors; cols = 3000
//     qualifies).
//   - Launch: any grid (blocks walk row groups grid-stride), block =
//     32 * W threads (one row per warp, W rows per stage), dynamic shared
//     memory = 128 + round128(2 * cols) + AR_STAGES * 2 * round128(W * 2 *
//     cols) bytes. W = 2, 2 stages, 3 x SMs CTAs: for cols = 4096 that is
//     73,856 bytes, the SMEM of the tuned RMSNorm example (128 threads, 3
//     CTAs per SM, 2 stages) with two inputs per stage instead of one.
// How it uses <fleetjit/copy.cuh>: as examples/rmsnorm.cu. The W rows of a
// group are one contiguous span in x and one in res, so each stage is two
// fj::load calls on that stage's barrier (block-collective: every thread
// calls both, then arrives once). The weights are loaded once. Each warp
// reads its row of x and res from SMEM twice (sum of squares of h, then
// the outputs) and writes res_out and y with 16-byte stores from
// registers. Under sync, where a load waits for its own bytes, each refill
// also warms L2 with the group after it (fj::prefetch_l2; the guide, 4.).
#include <fleetjit/copy.cuh>

#ifndef AR_STAGES
#define AR_STAGES 2
#endif

namespace {

__device__ __forceinline__ float bf_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
// Two floats to two bf16 (round to nearest even), a in the low half.
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
// h = x + res on two packed bf16 pairs, rounded to bf16.
__device__ __forceinline__ unsigned add2(unsigned a, unsigned b) {
  return bf_pack(bf_lo(a) + bf_lo(b), bf_hi(a) + bf_hi(b));
}
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}

}  // namespace

extern "C" __global__ void add_rmsnorm(
    const unsigned short* x, const unsigned short* res, const unsigned short* w,
    unsigned short* res_out, unsigned short* y, int rows, int cols, float eps) {
  // 1. SMEM: the weights, then AR_STAGES stages of W rows of x and W rows
  //    of res, each 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const unsigned row_bytes = 2u * cols;
  const unsigned half_bytes = round128(warps * row_bytes);  // W rows
  const unsigned stage_bytes = 2 * half_bytes;              // x, then res
  const uint4* wv = (const uint4*)base;
  unsigned char* stages = base + round128(row_bytes);
  __shared__ fj::barrier full[AR_STAGES], wbar;
  if (threadIdx.x == 0) {
    for (int s = 0; s < AR_STAGES; ++s) full[s].init(fj::block_threads());
    wbar.init(fj::block_threads());
  }
  __syncthreads();

  // 2. The weights once, then the prologue: group g = blockIdx.x + k *
  //    gridDim.x lands in stage k % AR_STAGES; a group past the end is
  //    predicated off (its barrier still completes).
  fj::load(base, w, row_bytes, wbar);
  wbar.arrive();
  const int groups = (rows + warps - 1) / warps;
  auto fill = [&](int s, int g) {
    const bool ok = g < groups;
    const int n = ok ? min(warps, rows - g * warps) : 0;
    const long long off = (long long)g * warps * cols;
    unsigned char* st = stages + s * stage_bytes;
    fj::load(st, x + off, n * row_bytes, full[s], ok);
    fj::load(st + half_bytes, res + off, n * row_bytes, full[s], ok);
    full[s].arrive();
  };
  // Under sync: group g's rows of x and res into L2 (block-collective).
  auto l2_ahead = [&](int g) {
    if (fj::copy_impl == 0 && g < groups) {
      const long long off = (long long)g * warps * cols;
      const unsigned long long n =
          (unsigned long long)min(warps, rows - g * warps) * row_bytes;
      fj::prefetch_l2(x + off, n);
      fj::prefetch_l2(res + off, n);
    }
  };
  for (int s = 0; s < AR_STAGES; ++s) fill(s, blockIdx.x + s * gridDim.x);
  l2_ahead(blockIdx.x + AR_STAGES * gridDim.x);
  wbar.wait(0);

  // 3. Steady state: normalise group k's rows, then refill the stage.
  const int vecs = cols / 8;  // 16-byte vectors of 8 bf16 per row
  for (int k = 0;; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= groups) break;
    const int s = k % AR_STAGES;
    full[s].wait((k / AR_STAGES) & 1);
    const long long row = (long long)g * warps + warp;
    if (row < rows) {
      const unsigned char* st = stages + s * stage_bytes;
      const uint4* xv = (const uint4*)(st + (unsigned)warp * row_bytes);
      const uint4* rv =
          (const uint4*)(st + half_bytes + (unsigned)warp * row_bytes);
      uint4* hv = (uint4*)(res_out + row * cols);
      float ss = 0.f;
      for (int v = lane; v < vecs; v += 32) {
        const uint4 a = xv[v], b = rv[v];
        const uint4 h = make_uint4(add2(a.x, b.x), add2(a.y, b.y),
                                   add2(a.z, b.z), add2(a.w, b.w));
        hv[v] = h;
        const unsigned u[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = bf_lo(u[e]), q = bf_hi(u[e]);
          ss += p * p + q * q;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
      const float r = rsqrtf(ss / cols + eps);
      uint4* yv = (uint4*)(y + row * cols);
      for (int v = lane; v < vecs; v += 32) {
        const uint4 a = xv[v], b = rv[v], m = wv[v];
        const unsigned u[4] = {add2(a.x, b.x), add2(a.y, b.y), add2(a.z, b.z),
                               add2(a.w, b.w)};
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
    const int next = g + AR_STAGES * gridDim.x;
    l2_ahead(next + gridDim.x);
    fill(s, next);  // the load's block barrier: no warp still reads stage s
  }
}
