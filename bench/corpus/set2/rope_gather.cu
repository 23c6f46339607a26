// rope_gather: rotary embedding (NeoX / Llama "rotate_half" layout) of q
// [T][H][128] bf16, out of place, with each token's cos and sin rows
// gathered from [max_pos][64] bf16 tables by its position id. f32 math:
//   out[t][h][i]      = q[t][h][i] * cos[p][i] - q[t][h][i + 64] * sin[p][i]
//   out[t][h][i + 64] = q[t][h][i + 64] * cos[p][i] + q[t][h][i] * sin[p][i]
// for i < 64, p = pos[t].
//
// Arguments: (q: FJ_TENSOR(unsigned short, 2) [T][H * 128],
//             out: FJ_TENSOR(unsigned short, 2) [T][H * 128],
//             cos, sin: FJ_TENSOR(unsigned short, 2) [max_pos][64],
//             pos: const int* [T])
//   - q and out have the same box (TB, H * 128): TB whole tokens (4 here),
//     q.oob = zeros. cos and sin have the box (1, 64): one row (128 bytes).
//     0 <= pos[t] < max_pos.
//   - Launch: block = 256 threads, dynamic shared memory =
//     RG_STAGES * (q box bytes + 2 * TB * 128) + 128 bytes, any grid (CTAs
//     walk the token groups grid-stride; 2 x SMs suits H = 32).
//
// How it uses <fleetjit/copy.cuh>: a ring of RG_STAGES stages, as
// examples/transpose.cu. A stage is a group of TB tokens: one
// fj::load_tile of their q rows (contiguous: H * 128 elements per token)
// and two fj::gather_tiles of their cos and sin rows, the positions read
// straight from GMEM, all on the stage's barrier (block-collective). The
// block rotates the tile in place in SMEM (each thread owns one pair of
// 16-byte chunks, i and i + 64) and writes it with one fj::store_tile; the
// stage is refilled one step later, after fj::wait_group_read<1> says the
// store has read it, so one store stays in flight while the next group is
// rotated. Under sync each refill also warms L2 with the group after it
// (fj::prefetch_tile; the guide, 4.).
#include <fleetjit/copy.cuh>

#ifndef RG_STAGES
#define RG_STAGES 3
#endif
#define HALF 64  // half the head dimension (rotary dims 0-63 pair with 64-127)

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
// Rotates the pairs (a, b) of two packed bf16 words: a' = a c - b s,
// b' = b c + a s.
__device__ __forceinline__ void rot2(unsigned& a, unsigned& b, unsigned c,
                                     unsigned s) {
  const float a0 = bf_lo(a), a1 = bf_hi(a), b0 = bf_lo(b), b1 = bf_hi(b);
  const float c0 = bf_lo(c), c1 = bf_hi(c), s0 = bf_lo(s), s1 = bf_hi(s);
  a = bf_pack(a0 * c0 - b0 * s0, a1 * c1 - b1 * s1);
  b = bf_pack(b0 * c0 + a0 * s0, b1 * c1 + a1 * s1);
}
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    rope_gather(FJ_TENSOR(unsigned short, 2) q,
                FJ_TENSOR(unsigned short, 2) out,
                FJ_TENSOR(unsigned short, 2) cos_t,
                FJ_TENSOR(unsigned short, 2) sin_t,
                const int* __restrict__ pos) {
  // 1. RG_STAGES stages: the q tile, then TB cos rows, then TB sin rows.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int tb = q.box(1);                  // tokens per group
  const int heads = q.box(0) / (2 * HALF);  // a token's row is H * 128
  const long long tokens = q.shape(1);
  const unsigned q_bytes = round128(q.box_bytes());
  const unsigned cs_bytes = round128(tb * cos_t.box_bytes());
  const unsigned stage_bytes = q_bytes + 2 * cs_bytes;
  __shared__ fj::barrier full[RG_STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < RG_STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  const int groups = (int)((tokens + tb - 1) / tb);
  // Group g into stage s (block-collective); a group past the end is
  // predicated off, and its barrier still completes.
  auto fill = [&](int s, int g) {
    const bool ok = g < groups;
    const long long t0 = ok ? (long long)g * tb : 0;
    const int n = ok ? (int)min((long long)tb, tokens - t0) : 1;
    unsigned char* st = base + s * stage_bytes;
    fj::load_tile((unsigned short*)st, q, fj::at(0, t0), full[s], ok);
    fj::gather_tiles((unsigned short*)(st + q_bytes), cos_t, fj::at(0, 0), 1,
                     pos + t0, n, full[s], ok);
    fj::gather_tiles((unsigned short*)(st + q_bytes + cs_bytes), sin_t,
                     fj::at(0, 0), 1, pos + t0, n, full[s], ok);
    full[s].arrive();
  };
  auto l2_ahead = [&](int g) {
    if (fj::copy_impl == 0 && g < groups) {
      fj::prefetch_tile(q, fj::at(0, (long long)g * tb));
    }
  };

  // 2. Prologue: groups 0 .. RG_STAGES - 2 of this CTA; the last stage is
  //    filled at the first step.
  for (int s = 0; s < RG_STAGES - 1; ++s) fill(s, blockIdx.x + s * gridDim.x);

  // 3. Steady state: rotate group k in stage k % RG_STAGES, store it, then
  //    refill the stage of group k - 1 with group k - 1 + RG_STAGES.
  const int chunks = tb * heads * (HALF / 8);  // pairs of 16-byte chunks
  for (int k = 0;; ++k) {
    const int g = blockIdx.x + k * gridDim.x;
    if (g >= groups) break;
    const int s = k % RG_STAGES;
    full[s].wait((k / RG_STAGES) & 1);
    unsigned char* st = base + s * stage_bytes;
    const long long t0 = (long long)g * tb;
    for (int i = threadIdx.x; i < chunks; i += blockDim.x) {
      const int j = i % (HALF / 8);   // chunk in the half
      const int th = i / (HALF / 8);  // token * heads + head
      const int t = th / heads;       // token in the group
      uint4* a = (uint4*)(st + ((unsigned)th * 2 * HALF + j * 8) * 2);
      uint4* b = a + HALF / 8;
      const uint4 c = *(const uint4*)(st + q_bytes + (t * HALF + j * 8) * 2);
      const uint4 sn =
          *(const uint4*)(st + q_bytes + cs_bytes + (t * HALF + j * 8) * 2);
      uint4 x = *a, y = *b;
      rot2(x.x, y.x, c.x, sn.x);
      rot2(x.y, y.y, c.y, sn.y);
      rot2(x.z, y.z, c.z, sn.z);
      rot2(x.w, y.w, c.w, sn.w);
      *a = x;
      *b = y;
    }
    // The store starts with a block barrier: the tile is rotated. Tokens
    // past the end are clipped.
    fj::store_tile(out, fj::at(0, t0), (const unsigned short*)st);
    fj::commit_group();
    // Group k - 1's store has read its stage: refill it.
    fj::wait_group_read<1>();
    const int sp = (k + RG_STAGES - 1) % RG_STAGES;
    const int next = g + (RG_STAGES - 1) * gridDim.x;
    l2_ahead(next + gridDim.x);
    fill(sp, next);
  }
  fj::wait_group<0>();  // stores done before the block exits
}
