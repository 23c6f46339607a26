// rmsnorm: y[r][c] = x[r][c] * rsqrt(mean_c(x[r][c]^2) + eps) * w[c], bf16
// in and out, f32 math. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (x: const __nv_bfloat16* [rows][cols], w: const
//             __nv_bfloat16* [cols], y: __nv_bfloat16* [rows][cols],
//             rows: int, cols: int, eps: float)
//   - cols % 8 == 0 and x, y 16-byte aligned (rows are whole 16-byte
//     vectors; cols = 4000 qualifies). The math reads bf16 pairs as bits
//     (a bf16 is the top half of an f32).
//   - Launch: any grid (blocks walk row groups grid-stride), block =
//     32 * W threads (W warps: one row per warp, W rows per stage),
//     dynamic shared memory = rmsnorm_smem(W, cols) bytes:
//       128 + round128(2 * cols) + RMS_STAGES * round128(W * 2 * cols).
//   - -DRMS_STAGES=N sets the pipeline depth (default 2).
//   - -DRMS_L2AHEAD=N also warms L2 with the N groups after the one each
//     refill loads (fj::prefetch_l2). Meant for sync, where fj::load is
//     the block's own loads and waits for them: the refill then reads L2,
//     and DRAM is busy with prefetches no thread waits for. (Under tma and
//     cp_async the copies are already asynchronous.)
// How it uses <fleetjit/copy.cuh>: the W consecutive rows of a group are
// one contiguous span, so each stage is ONE fj::load (a bulk copy under
// tma, cp.async split over the block under cp_async, thread copies under
// sync) on that stage's barrier. Stage s is refilled with the group
// RMS_STAGES ahead as soon as its rows are normalised; the load's block
// barrier is what keeps it from overwriting a row a warp still reads.
// Each warp then reads its row from SMEM twice (sum of squares, then the
// scaled output) and writes y with 16-byte stores straight from registers.
#include <cuda_bf16.h>

#include <fleetjit/copy.cuh>

#ifndef RMS_STAGES
#define RMS_STAGES 2
#endif
#ifndef RMS_L2AHEAD
#define RMS_L2AHEAD 0
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
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}

}  // namespace

extern "C" __global__ void rmsnorm(const __nv_bfloat16* x,
                                   const __nv_bfloat16* w, __nv_bfloat16* y,
                                   int rows, int cols, float eps) {
  // 1. SMEM: the weights, then RMS_STAGES stages of W rows, 128-aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const unsigned row_bytes = 2u * cols;
  const unsigned stage_bytes = round128(warps * row_bytes);
  const uint4* wv = (const uint4*)base;
  unsigned char* stages = base + round128(row_bytes);
  __shared__ fj::barrier full[RMS_STAGES], wbar;
  if (threadIdx.x == 0) {
    for (int s = 0; s < RMS_STAGES; ++s) full[s].init(fj::block_threads());
    wbar.init(fj::block_threads());
  }
  __syncthreads();

  // 2. The weights once, then the prologue: group g = blockIdx.x + k *
  //    gridDim.x lands in stage k % RMS_STAGES. A group past the end is
  //    predicated off (its barrier still completes).
  fj::load(base, w, row_bytes, wbar);
  wbar.arrive();
  const int groups = (rows + warps - 1) / warps;
  // RMS_L2AHEAD: group g's rows into L2 (block-collective, no wait).
  auto l2_ahead = [&](int g) {
    if (g < groups) {
      fj::prefetch_l2(
          x + (long long)g * warps * cols,
          (unsigned long long)min(warps, rows - g * warps) * row_bytes);
    }
  };
  for (int s = 0; s < RMS_STAGES; ++s) {
    const int g = blockIdx.x + s * gridDim.x;
    const bool ok = g < groups;
    const int n = ok ? min(warps, rows - g * warps) : 0;
    fj::load(stages + s * stage_bytes, x + (long long)g * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }
  for (int a = 0; a < RMS_L2AHEAD; ++a) {
    l2_ahead(blockIdx.x + (RMS_STAGES + a) * gridDim.x);
  }
  wbar.wait(0);

  // 3. Steady state: normalise group k's rows, then refill the stage.
  const int vecs = cols / 8;  // 16-byte vectors of 8 bf16 per row
  for (int k = 0;; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= groups) break;
    const int s = k % RMS_STAGES;
    full[s].wait((k / RMS_STAGES) & 1);
    const long long row = (long long)g * warps + warp;
    if (row < rows) {
      const uint4* xv =
          (const uint4*)(stages + s * stage_bytes + (unsigned)warp * row_bytes);
      float ss = 0.f;
      for (int v = lane; v < vecs; v += 32) {
        const uint4 q = xv[v];
        const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float a = bf_lo(u[e]), b = bf_hi(u[e]);
          ss += a * a + b * b;
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(~0u, ss, o);
      const float r = rsqrtf(ss / cols + eps);
      uint4* yv = (uint4*)(y + row * cols);
      for (int v = lane; v < vecs; v += 32) {
        const uint4 q = xv[v], m = wv[v];
        const unsigned u[4] = {q.x, q.y, q.z, q.w};
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
    const int next = g + RMS_STAGES * gridDim.x;
    const bool ok = next < groups;
    const int n = ok ? min(warps, rows - next * warps) : 0;
    if (RMS_L2AHEAD) l2_ahead(next + RMS_L2AHEAD * gridDim.x);
    fj::load(stages + s * stage_bytes, x + (long long)next * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }
}
