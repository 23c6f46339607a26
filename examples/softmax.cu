// softmax: y[r][c] = exp(x[r][c] - max_c x[r]) / sum_c exp(x[r][c] - max_c
// x[r]) over each row of a bf16 matrix, f32 math. One source for every
// copy implementation (sync, cp_async, tma).
//
// Arguments: (x: const __nv_bfloat16* [rows][cols], y: __nv_bfloat16*
//             [rows][cols], rows: int, cols: int)
//   - cols % 8 == 0 and x, y 16-byte aligned (rows are whole 16-byte
//     vectors). The math reads bf16 pairs as bits.
//   - Launch: any grid (blocks walk row groups grid-stride), block =
//     32 * W threads (one row per warp, W rows per stage), dynamic shared
//     memory = 128 + SMX_STAGES * round128(W * 2 * cols) bytes.
//   - -DSMX_STAGES=N sets the pipeline depth (default 2).
// How it uses <fleetjit/copy.cuh>: as examples/rmsnorm.cu, a stage is the
// W rows of a group, one contiguous span, one fj::load on its barrier.
// Each warp makes two passes over its row in SMEM: an online max and sum
// of exponentials (one read), then the normalised output, written with
// 16-byte stores from registers. Each exponential is one ex2.approx.ftz of
// x * log2(e) - max * log2(e) (one FFMA). With -DSMX_RVECS=N a row that
// fits is read from SMEM once into registers instead, and its stage
// refilled at once, so the next group's copy is in flight while the row
// is reduced and written.
#include <cuda_bf16.h>

#include <fleetjit/copy.cuh>

#ifndef SMX_STAGES
#define SMX_STAGES 2
#endif
// -DSMX_RVECS=N (N > 0): rows of at most 32 * N 16-byte vectors are held
// in registers (N uint4 per lane; at N = 16, 4096 bf16, the kernel takes
// about 160 registers under NVRTC 13 for sm_90, against 32-40 without).
// Default 0: every row is read from SMEM twice.
#ifndef SMX_RVECS
#define SMX_RVECS 0
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
constexpr float kLog2e = 1.4426950408889634f;
// 2^x in one MUFU op (ex2(-inf) = 0); exp2f adds range handling that this
// kernel, bound by the MUFU and the copy together, cannot afford.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace

extern "C" __global__ void softmax(const __nv_bfloat16* x, __nv_bfloat16* y,
                                   int rows, int cols) {
  // 1. SMEM: SMX_STAGES stages of W rows, 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* stages =
      smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const unsigned row_bytes = 2u * cols;
  const unsigned stage_bytes = round128(warps * row_bytes);
  __shared__ fj::barrier full[SMX_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < SMX_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  // 2. Prologue: group g = blockIdx.x + k * gridDim.x lands in stage
  //    k % SMX_STAGES; a group past the end is predicated off.
  const int groups = (rows + warps - 1) / warps;
  for (int s = 0; s < SMX_STAGES; ++s) {
    const int g = blockIdx.x + s * gridDim.x;
    const bool ok = g < groups;
    const int n = ok ? min(warps, rows - g * warps) : 0;
    fj::load(stages + s * stage_bytes, x + (long long)g * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }

  // 3. Steady state: one row per warp. With SMX_RVECS > 0, a row of at
  //    most 32 * SMX_RVECS 16-byte vectors is read from SMEM once, into
  //    registers; the stage is refilled right then, so the next group's
  //    copy is in flight while this row is reduced and written. Otherwise
  //    the row is read from SMEM twice (an online max and sum, then the
  //    output) and its stage refilled after.
  const int vecs = cols / 8;
  const bool in_regs = SMX_RVECS > 0 && vecs <= 32 * SMX_RVECS;
  for (int k = 0;; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= groups) break;
    const int s = k % SMX_STAGES;
    full[s].wait((k / SMX_STAGES) & 1);
    const long long row = (long long)g * warps + warp;
    const bool mine = row < rows;
    const uint4* xv =
        (const uint4*)(stages + s * stage_bytes + (unsigned)warp * row_bytes);
    uint4* yv = (uint4*)(y + row * cols);
    const int next = g + SMX_STAGES * gridDim.x;
    const bool ok = next < groups;
    const int n = ok ? min(warps, rows - next * warps) : 0;
    if (in_regs) {
      // Lanes past the row's end hold -inf (bf16 0xff80): no max, 2^-inf = 0.
      uint4 q[SMX_RVECS > 0 ? SMX_RVECS : 1];
#pragma unroll
      for (int i = 0; i < SMX_RVECS; ++i) {
        const int v = lane + 32 * i;
        q[i] = mine && v < vecs ? xv[v]
                                : make_uint4(0xff80ff80u, 0xff80ff80u,
                                             0xff80ff80u, 0xff80ff80u);
      }
      // The load's block barrier: every warp has its row in registers.
      fj::load(stages + s * stage_bytes, x + (long long)next * warps * cols,
               n * row_bytes, full[s], ok);
      full[s].arrive();
      if (!mine) continue;
      float mx = -__int_as_float(0x7f800000);
#pragma unroll
      for (int i = 0; i < SMX_RVECS; ++i) {
        const unsigned u[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
#pragma unroll
        for (int e = 0; e < 4; ++e)
          mx = fmaxf(mx, fmaxf(bf_lo(u[e]), bf_hi(u[e])));
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(~0u, mx, o));
      const float mb = mx * kLog2e;  // exponentials as 2^(x * log2e - mb)
      float l = 0.f;
#pragma unroll
      for (int i = 0; i < SMX_RVECS; ++i) {
        const unsigned u[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          l += ex2(fmaf(bf_lo(u[e]), kLog2e, -mb)) +
               ex2(fmaf(bf_hi(u[e]), kLog2e, -mb));
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(~0u, l, o);
      const float inv = 1.f / l;
#pragma unroll
      for (int i = 0; i < SMX_RVECS; ++i) {
        const int v = lane + 32 * i;
        if (v >= vecs) break;
        const unsigned u[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
        unsigned o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          o[e] = bf_pack(ex2(fmaf(bf_lo(u[e]), kLog2e, -mb)) * inv,
                         ex2(fmaf(bf_hi(u[e]), kLog2e, -mb)) * inv);
        }
        yv[v] = make_uint4(o[0], o[1], o[2], o[3]);
      }
      continue;
    }
    if (mine) {
      // Online max and sum, in log2 units: sum of 2^(x*log2e - m).
      float m = -__int_as_float(0x7f800000), l = 0.f;
      for (int v = lane; v < vecs; v += 32) {
        const uint4 q = xv[v];
        const unsigned u[4] = {q.x, q.y, q.z, q.w};
        float vm = -__int_as_float(0x7f800000);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          vm = fmaxf(vm, fmaxf(bf_lo(u[e]), bf_hi(u[e])));
        const float nm = fmaxf(m, vm * kLog2e);
        float add = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          add += ex2(fmaf(bf_lo(u[e]), kLog2e, -nm)) +
                 ex2(fmaf(bf_hi(u[e]), kLog2e, -nm));
        }
        l = l * ex2(m - nm) + add;
        m = nm;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float om = __shfl_xor_sync(~0u, m, o);
        const float ol = __shfl_xor_sync(~0u, l, o);
        const float nm = fmaxf(m, om);
        // A lane that saw no element has m = -inf, l = 0: adds nothing.
        l = (m == nm ? l : l * ex2(m - nm)) +
            (om == nm ? ol : ol * ex2(om - nm));
        m = nm;
      }
      const float inv = 1.f / l;
      for (int v = lane; v < vecs; v += 32) {
        const uint4 q = xv[v];
        const unsigned u[4] = {q.x, q.y, q.z, q.w};
        unsigned o[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          o[e] = bf_pack(ex2(fmaf(bf_lo(u[e]), kLog2e, -m)) * inv,
                         ex2(fmaf(bf_hi(u[e]), kLog2e, -m)) * inv);
        }
        yv[v] = make_uint4(o[0], o[1], o[2], o[3]);
      }
    }
    fj::load(stages + s * stage_bytes, x + (long long)next * warps * cols,
             n * row_bytes, full[s], ok);
    full[s].arrive();
  }
}
