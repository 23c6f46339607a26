// dequant_int8_plain: per-group dequantization of an int8 weight matrix,
//   out[r][c] = bf16(float(q[r][c]) * float(scales[r][c / 128]))
// q int8 [R][C], scales f16 [R][ceil(C / 128)], out bf16 [R][C], without
// the copy layer.
//
// Arguments: (q: const int8* [R][C], scales: const f16* [R][G],
//             out: bf16* [R][C], rows: int = R, cols: int = C,
//             groups: int = G = ceil(C / 128))
//   - C % 8 == 0; q 8-byte and out 16-byte aligned.
//   - Launch: block = 256 threads, grid = ceil(R * C / 8 / 256): a thread
//     converts 8 int8 (one 8-byte load, so a warp reads 256 contiguous
//     bytes) into one 16-byte store of 8 bf16; its scale is one 2-byte
//     load that the 16 threads of the group share through L1.
#define GROUP 128

namespace {

__device__ __forceinline__ float h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
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
__device__ __forceinline__ float i8(unsigned w, int k) {
  return (float)((int)(w << (24 - 8 * k)) >> 24);
}
__device__ __forceinline__ uint2 deq4(unsigned w, float s) {
  return make_uint2(bf_pack(i8(w, 0) * s, i8(w, 1) * s),
                    bf_pack(i8(w, 2) * s, i8(w, 3) * s));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    dequant_int8_plain(const signed char* __restrict__ q,
                       const unsigned short* __restrict__ scales,
                       unsigned short* __restrict__ out, int rows, int cols,
                       int groups) {
  const int vrow = cols / 8;
  const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= (long long)rows * vrow) return;
  const long long r = v / vrow;
  const int c = (int)(v - r * vrow) * 8;
  const uint2 w = __ldg((const uint2*)(q + r * cols + c));
  const float f = h2f(__ldg(scales + r * groups + c / GROUP));
  const uint2 a = deq4(w.x, f), b = deq4(w.y, f);
  *(uint4*)(out + r * cols + c) = make_uint4(a.x, a.y, b.x, b.y);
}
