// rowquant_fp8: per-row (per-token) quantization of a bf16 [rows][cols]
// matrix to fp8 e4m3 with one f32 scale per row:
//   scale[r] = max(amax_c |x[r][c]|, 1e-12) / 448
//   q[r][c]  = e4m3(clamp(x[r][c] * (1 / scale[r]), -448, 448))  (RN,
//   satfinite)
// One source for every copy implementation (sync, cp_async, tma).
//
// Arguments: (x: const bf16* [rows][cols], q: fp8e4m3* [rows][cols],
//             scales: f32* [rows], rows: int, cols: int)
//   - cols % 8 == 0; x 16-byte and q 8-byte aligned.
//   - Launch: any grid (blocks walk row groups grid-stride), block =
//     32 * W threads (one row per warp, W rows per stage), dynamic shared
//     memory = 128 + RQ_STAGES * round128(W * 2 * cols) bytes.
//   - -DRQ_STAGES=N sets the pipeline depth (default 2).
// How it uses <fleetjit/copy.cuh>: as examples/rmsnorm.cu, the W
// consecutive rows of a group are one contiguous span, so a stage is ONE
// fj::load (block-collective) on that stage's barrier; a stage is refilled
// with the group RQ_STAGES ahead as soon as its rows are quantized (the
// load's block barrier keeps it from overwriting a row a warp still reads).
// Each warp reads its row from SMEM twice: the absolute maximum, then the
// scaled conversion, written as 8 fp8 bytes per lane per 16-byte chunk.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <fleetjit/copy.cuh>

#ifndef RQ_STAGES
#define RQ_STAGES 2
#endif

namespace {

__device__ __forceinline__ float bf_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}
// Two floats to two e4m3 bytes (round to nearest even, saturating), a low.
__device__ __forceinline__ unsigned fp8x2(float a, float b) {
  return (unsigned)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                            __NV_E4M3);
}

}  // namespace

extern "C" __global__ void rowquant_fp8(const __nv_bfloat16* x,
                                        __nv_fp8_e4m3* q, float* scales,
                                        int rows, int cols) {
  // 1. SMEM: RQ_STAGES stages of W rows, 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages =
      smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const unsigned row_bytes = 2u * cols;
  const unsigned stage_bytes = round128(warps * row_bytes);
  __shared__ fj::barrier full[RQ_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < RQ_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  // 2. Prologue: group g = blockIdx.x + k * gridDim.x lands in stage
  //    k % RQ_STAGES; a group past the end is predicated off.
  const int groups = (rows + warps - 1) / warps;
  for (int s = 0; s < RQ_STAGES; ++s) {
    const int g = blockIdx.x + s * gridDim.x;
    const bool ok = g < groups;
    const int n = ok ? min(warps, rows - g * warps) : 0;
    fj::load(stages + s * stage_bytes, x + (long long)g * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }

  // 3. Steady state: quantize group k's rows, then refill the stage.
  const int vecs = cols / 8;  // 16-byte vectors of 8 bf16 per row
  for (int k = 0;; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= groups) break;
    const int s = k % RQ_STAGES;
    full[s].wait((k / RQ_STAGES) & 1);
    const long long row = (long long)g * warps + warp;
    if (row < rows) {
      const uint4* xv =
          (const uint4*)(stages + s * stage_bytes + (unsigned)warp * row_bytes);
      float amax = 0.f;
      for (int v = lane; v < vecs; v += 32) {
        const uint4 c = xv[v];
        const unsigned u[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          amax = fmaxf(amax, fmaxf(fabsf(bf_lo(u[e])), fabsf(bf_hi(u[e]))));
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
      const float scale = __fdiv_rn(fmaxf(amax, 1e-12f), 448.f);
      const float inv = __fdiv_rn(1.f, scale);
      if (lane == 0) scales[row] = scale;
      uint2* qv = (uint2*)(q + row * cols);
      for (int v = lane; v < vecs; v += 32) {
        const uint4 c = xv[v];
        const unsigned u[4] = {c.x, c.y, c.z, c.w};
        unsigned p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          p[e] = fp8x2(bf_lo(u[e]) * inv, bf_hi(u[e]) * inv);
        qv[v] = make_uint2(p[0] | (p[1] << 16), p[2] | (p[3] << 16));
      }
    }
    const int next = g + RQ_STAGES * gridDim.x;
    const bool ok = next < groups;
    const int n = ok ? min(warps, rows - next * warps) : 0;
    fj::load(stages + s * stage_bytes, x + (long long)next * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }
}
