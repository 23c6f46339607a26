// swiglu_plain: out[t][i] = silu(x[t][i]) * x[t][I + i], bf16 in and out,
// f32 math, without the copy layer.
//
// Arguments: (x: const bf16* [T][2 I], out: bf16* [T][I], tokens: int = T,
//             inter: int = I)
//   - I % 8 == 0; x and out 16-byte aligned.
//   - Launch: block = 256 threads, grid = ceil(T * I / 8 / 256): one
//     16-byte vector of 8 outputs per thread (two 16-byte loads, one
//     16-byte store).
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
__device__ __forceinline__ float silu(float g) {
  return g / (1.f + __expf(-g));
}
__device__ __forceinline__ unsigned swiglu2(unsigned g, unsigned u) {
  return bf_pack(silu(bf_lo(g)) * bf_lo(u), silu(bf_hi(g)) * bf_hi(u));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    swiglu_plain(const unsigned short* __restrict__ x,
                 unsigned short* __restrict__ out, int tokens, int inter) {
  const int vrow = inter / 8;  // output vectors per row
  const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= (long long)tokens * vrow) return;
  const long long t = v / vrow;
  const int c = (int)(v - t * vrow) * 8;
  const unsigned short* row = x + t * 2 * inter;
  const uint4 g = __ldg((const uint4*)(row + c));
  const uint4 u = __ldg((const uint4*)(row + inter + c));
  uint4 o;
  o.x = swiglu2(g.x, u.x);
  o.y = swiglu2(g.y, u.y);
  o.z = swiglu2(g.z, u.z);
  o.w = swiglu2(g.w, u.w);
  *(uint4*)(out + t * inter + c) = o;
}
