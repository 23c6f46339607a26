// dequant_int8: per-group dequantization of an int8 weight matrix,
//   out[r][c] = bf16(float(q[r][c]) * float(scales[r][c / 128]))
// q int8 [R][C], scales f16 [R][ceil(C / 128)], out bf16 [R][C].
//
// Arguments: (q: FJ_TENSOR(signed char, 2) [R][C],
//             scales: FJ_TENSOR(unsigned short, 2) [R][ceil(C / 128)],
//             out: bf16* [R][C], tiles_x: int, tiles: int)
//   - q's box is (16, 1024) (16 rows of 1024 int8: eight 128-column
//     groups), scales' box (16, 8) (the same rows' eight scales: 16
//     bytes, the least a tensor map takes); oob = zeros for both. C % 8
//     == 0 (out is written in 16-byte vectors of 8); out 16-byte aligned.
//   - tiles_x = ceil(C / 1024), tiles = tiles_x * ceil(R / 16).
//   - Launch: block = 256 threads, dynamic shared memory =
//     DQ_STAGES * (16,384 + 256) + 128 = 50,048 bytes, any grid (CTAs walk
//     the tiles grid-stride; 4 x SMs suits).
//
// How it uses <fleetjit/copy.cuh>: a ring of DQ_STAGES stages, as
// examples/pipelined_tiles.cu and transpose.cu. A stage is one q tile and
// its scale tile, two fj::load_tile on the stage's barrier
// (block-collective). The block converts the tile from SMEM, 8 int8 per
// thread per step, and writes out with 16-byte stores from registers; the
// stage is refilled with the tile DQ_STAGES ahead, the load's block barrier
// keeping it from overwriting a tile still read. Under sync each refill
// also warms L2 with the q tile after it (fj::prefetch_tile; the guide,
// 4.).
#include <fleetjit/copy.cuh>

#ifndef DQ_STAGES
#define DQ_STAGES 3
#endif
#define GROUP 128  // columns per scale

namespace {

__device__ __forceinline__ float h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
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
// Byte k of w as a signed integer, in float.
__device__ __forceinline__ float i8(unsigned w, int k) {
  return (float)((int)(w << (24 - 8 * k)) >> 24);
}
// Four int8 (one word) times s: two packed bf16 pairs.
__device__ __forceinline__ uint2 deq4(unsigned w, float s) {
  return make_uint2(bf_pack(i8(w, 0) * s, i8(w, 1) * s),
                    bf_pack(i8(w, 2) * s, i8(w, 3) * s));
}
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    dequant_int8(FJ_TENSOR(signed char, 2) q,
                 FJ_TENSOR(unsigned short, 2) scales,
                 unsigned short* __restrict__ out, int tiles_x, int tiles) {
  // 1. DQ_STAGES stages: the q tile, then its scales, 128-byte aligned.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int bx = q.box(0), by = q.box(1);  // 1024 columns, 16 rows
  const int gx = scales.box(0);            // bx / GROUP scales per row
  const long long cols = q.shape(0), rows = q.shape(1);
  const unsigned q_bytes = round128(q.box_bytes());
  const unsigned stage_bytes = q_bytes + round128(scales.box_bytes());
  __shared__ fj::barrier full[DQ_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < DQ_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  // Tile t into stage s (block-collective); past the end: predicated off.
  auto fill = [&](int s, int t) {
    const bool ok = t < tiles;
    const int tx = ok ? t % tiles_x : 0, ty = ok ? t / tiles_x : 0;
    unsigned char* st = base + s * stage_bytes;
    fj::load_tile((signed char*)st, q, fj::at(tx * bx, ty * by), full[s], ok);
    fj::load_tile((unsigned short*)(st + q_bytes), scales,
                  fj::at(tx * gx, ty * by), full[s], ok);
    full[s].arrive();
  };
  auto l2_ahead = [&](int t) {
    if (fj::copy_impl == 0 && t < tiles) {
      fj::prefetch_tile(q, fj::at((t % tiles_x) * bx, (t / tiles_x) * by));
    }
  };

  // 2. Prologue: tile blockIdx.x + k * gridDim.x lands in stage k.
  for (int s = 0; s < DQ_STAGES; ++s) fill(s, blockIdx.x + s * gridDim.x);
  l2_ahead(blockIdx.x + DQ_STAGES * gridDim.x);

  // 3. Steady state: 8 int8 (8 bytes of SMEM) in, one 16-byte vector of
  //    8 bf16 out per thread per step, so a warp's stores are 512
  //    contiguous bytes.
  const int vrow = bx / 8;  // vectors per tile row
  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    const int s = k % DQ_STAGES;
    const long long c0 = (long long)(t % tiles_x) * bx;
    const long long r0 = (long long)(t / tiles_x) * by;
    full[s].wait((k / DQ_STAGES) & 1);
    const unsigned char* st = base + s * stage_bytes;
    const unsigned short* sc = (const unsigned short*)(st + q_bytes);
    for (int v = threadIdx.x; v < by * vrow; v += blockDim.x) {
      const int r = v / vrow, cv = v % vrow;
      const long long row = r0 + r, col = c0 + cv * 8;
      if (row < rows && col < cols) {
        const uint2 w = *(const uint2*)(st + v * 8);
        const float f = h2f(sc[r * gx + cv * 8 / GROUP]);
        const uint2 a = deq4(w.x, f), b = deq4(w.y, f);
        *(uint4*)(out + row * cols + col) = make_uint4(a.x, a.y, b.x, b.y);
      }
    }
    const int next = t + DQ_STAGES * gridDim.x;
    l2_ahead(next + gridDim.x);
    fill(s, next);  // the load's block barrier: the tile is no longer read
  }
}
