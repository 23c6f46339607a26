// rope_gather_plain: rotary embedding (NeoX / Llama "rotate_half" layout)
// of q [T][H][128] bf16, out of place, cos and sin rows gathered from
// [max_pos][64] bf16 tables by each token's position id; f32 math, without
// the copy layer.
//   out[t][h][i]      = q[t][h][i] * cos[p][i] - q[t][h][i + 64] * sin[p][i]
//   out[t][h][i + 64] = q[t][h][i + 64] * cos[p][i] + q[t][h][i] * sin[p][i]
// for i < 64, p = pos[t].
//
// Arguments: (q: const bf16* [T][H][128], out: bf16* [T][H][128],
//             cos, sin: const bf16* [max_pos][64], pos: const int* [T],
//             tokens: int = T, heads: int = H)
//   - Launch: block = 256 threads, grid = ceil(T * H * 8 / 256). A thread
//     takes one pair of 16-byte chunks (dims 8j..8j+7 and 64+8j..64+8j+7
//     of one head): two 16-byte loads of q, one of cos, one of sin, two
//     16-byte stores.
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
__device__ __forceinline__ void rot2(unsigned& a, unsigned& b, unsigned c,
                                     unsigned s) {
  const float a0 = bf_lo(a), a1 = bf_hi(a), b0 = bf_lo(b), b1 = bf_hi(b);
  const float c0 = bf_lo(c), c1 = bf_hi(c), s0 = bf_lo(s), s1 = bf_hi(s);
  a = bf_pack(a0 * c0 - b0 * s0, a1 * c1 - b1 * s1);
  b = bf_pack(b0 * c0 + a0 * s0, b1 * c1 + a1 * s1);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    rope_gather_plain(const unsigned short* __restrict__ q,
                      unsigned short* __restrict__ out,
                      const unsigned short* __restrict__ cos_t,
                      const unsigned short* __restrict__ sin_t,
                      const int* __restrict__ pos, int tokens, int heads) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long th = i / 8;  // token * heads + head
  if (th >= (long long)tokens * heads) return;
  const int j = (int)(i % 8);
  const long long t = th / heads;
  const int p = __ldg(pos + t);
  const uint4 c = __ldg((const uint4*)(cos_t + (long long)p * 64) + j);
  const uint4 s = __ldg((const uint4*)(sin_t + (long long)p * 64) + j);
  const uint4* src = (const uint4*)(q + th * 128);
  uint4 x = __ldg(src + j), y = __ldg(src + 8 + j);
  rot2(x.x, y.x, c.x, s.x);
  rot2(x.y, y.y, c.y, s.y);
  rot2(x.z, y.z, c.z, s.z);
  rot2(x.w, y.w, c.w, s.w);
  uint4* dst = (uint4*)(out + th * 128);
  dst[j] = x;
  dst[8 + j] = y;
}
