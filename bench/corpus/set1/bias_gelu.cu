// bias_gelu: y[t][n] = gelu_tanh(x[t][n] + b[n]) over a bf16 [T][N] matrix
// (an MLP's up-projection output, N = 4 x hidden), f32 math, bf16 out.
// GELU is the tanh approximation, as torch's F.gelu(..., approximate='tanh'):
//   gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3)))
// with tanh from the hardware's tanh.approx.f32 (sm_75+).
//
// Arguments: (x: FJ_TENSOR(bf16, 2) [T][N], b: FJ_TENSOR(bf16, 1) [N],
//             y: bf16* [T][N])
//   - x's box is (BG_BR, BG_BC) outermost-first (default (8, 512)), b's box
//     (BG_BC); both oob = zeros. Another box traps.
//   - N % 8 == 0 (rows are whole 16-byte vectors); y 16-byte aligned.
//   - Launch: any grid (blocks walk the tiles grid-stride; about 2 per SM
//     fit), block = 256 threads, dynamic shared memory =
//     128 + BG_STAGES * (BG_BOXES * BG_BR * BG_BC * 2 + round128(BG_BC * 2))
//     bytes (101,504 by default).
//
// How it uses <fleetjit/copy.cuh>: the guide's idiom 1 (a producer warp and
// a ring of BG_STAGES buffers on full/empty barrier pairs, fj::pipeline).
// A stage is a band of BG_BOXES * BG_BR rows by BG_BC columns of x (BG_BOXES
// tiles of x's box stacked, so each stage is dense [rows][BG_BC]) plus the
// matching BG_BC-wide tile of b, all on the stage's full barrier. Under tma
// one producer warp issues the copies (the copy engine moves the bytes);
// where the threads copy (cp_async, sync) the guide says one warp moves the
// tile at a fraction of the bandwidth, so four producer warps split a
// stage's x tiles there (one arrival each on the full barrier). The
// consumer warps read the stage from SMEM, add the bias, apply GELU and
// write y with 16-byte stores straight from registers, then release the
// stage on its empty barrier. No block barrier after the set-up.
#include <cuda_bf16.h>

#include <fleetjit/copy.cuh>

#ifndef BG_STAGES
#define BG_STAGES 3
#endif
#ifndef BG_BOXES  // x tiles per stage, stacked along the rows
#define BG_BOXES 4
#endif
#ifndef BG_BR  // rows of x's box
#define BG_BR 8
#endif
#ifndef BG_BC  // columns of x's (and b's) box
#define BG_BC 512
#endif
#ifndef BG_PRODUCERS  // producer warps: the copy engine needs one
#define BG_PRODUCERS (fj::copy_impl == 2 ? 1 : 4)
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
__host__ __device__ constexpr unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    bias_gelu(FJ_TENSOR(__nv_bfloat16, 2) x, FJ_TENSOR(__nv_bfloat16, 1) b,
              __nv_bfloat16* __restrict__ y) {
  constexpr int S = BG_STAGES, P = BG_PRODUCERS;
  constexpr int BR = BG_BR, BC = BG_BC, BOXES = BG_BOXES;
  constexpr unsigned x_bytes = BOXES * BR * BC * 2u;  // a multiple of 128
  constexpr unsigned stage_bytes = x_bytes + round128(BC * 2u);
  static_assert(BC % 8 == 0 && x_bytes % 128 == 0, "BG_BC: whole vectors");
  if (x.box(0) != BC || x.box(1) != BR || b.box(0) != BC) __trap();

  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  __shared__ fj::barrier full[S], empty[S];
  const int warp = threadIdx.x / 32;
  const int consumers = blockDim.x / 32 - P;
  if (consumers < 1) __trap();
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      full[s].init(P);           // one arrival per producer warp
      empty[s].init(consumers);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only block barrier

  const long long rows = x.shape(1), cols = x.shape(0);
  const int col_tiles = (int)((cols + BC - 1) / BC);
  const int row_tiles = (int)((rows + BR * BOXES - 1) / (BR * BOXES));
  const int tiles = row_tiles * col_tiles;
  fj::pipeline<S> p;

  if (warp >= consumers) {
    // Producer warp(s): all 32 lanes call the warp-scope copies.
    const int pw = warp - consumers;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, p.advance()) {
      unsigned char* st = base + p.stage() * stage_bytes;
      const int r0 = (t / col_tiles) * BR * BOXES, c0 = (t % col_tiles) * BC;
      empty[p.stage()].wait(p.phase() ^ 1);  // consumers freed it
      for (int j = pw; j < BOXES; j += P) {
        fj::load_tile(fj::warp, (__nv_bfloat16*)st + j * BR * BC, x,
                      fj::at(c0, r0 + j * BR), full[p.stage()],
                      r0 + j * BR < rows);
      }
      if (pw == 0) {
        fj::load_tile(fj::warp, (__nv_bfloat16*)(st + x_bytes), b, fj::at(c0),
                      full[p.stage()]);
      }
      full[p.stage()].arrive(fj::warp);  // attach, then arrive
    }
    return;
  }

  // Consumers: 16-byte chunks of the stage, row-major.
  constexpr int CPR = BC / 8;  // chunks per row
  constexpr int CHUNKS = BOXES * BR * CPR;
  const int nthreads = consumers * 32;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x, p.advance()) {
    const unsigned char* st = base + p.stage() * stage_bytes;
    const int r0 = (t / col_tiles) * BR * BOXES, c0 = (t % col_tiles) * BC;
    full[p.stage()].wait(p.phase());
    const uint4* xs = (const uint4*)st;
    const uint4* bs = (const uint4*)(st + x_bytes);
    for (int i = threadIdx.x; i < CHUNKS; i += nthreads) {
      const int r = i / CPR, cc = i % CPR;
      const long long row = r0 + r;
      const long long col = c0 + cc * 8;
      if (row >= rows || col >= cols) continue;
      const uint4 q = xs[i], w = bs[cc];
      const unsigned u[4] = {q.x, q.y, q.z, q.w};
      const unsigned v[4] = {w.x, w.y, w.z, w.w};
      unsigned o[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[e] = bf_pack(gelu_tanh(bf_lo(u[e]) + bf_lo(v[e])),
                       gelu_tanh(bf_hi(u[e]) + bf_hi(v[e])));
      }
      *(uint4*)(y + row * cols + col) = make_uint4(o[0], o[1], o[2], o[3]);
    }
    empty[p.stage()].arrive(fj::warp);  // this warp is done with the stage
  }
}
