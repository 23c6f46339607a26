// embedding_plain: out[t][:] = table[ids[t]][:] * scale, bf16 table and
// output, f32 multiply, without the copy layer.
//
// Arguments: (table: const bf16* [vocab][H], ids: const int* [T],
//             out: bf16* [T][H], tokens: int = T, hidden: int = H,
//             scale: float)
//   - H % 8 == 0; table and out 16-byte aligned; 0 <= ids[t] < vocab.
//   - Launch: block = 256 threads, grid = T blocks: block t copies row
//     ids[t], its threads striding over the row's 16-byte vectors, up to
//     EP_VPT (4) loads issued before their stores (H = 4096: 2 per
//     thread).
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
__device__ __forceinline__ unsigned scale2(unsigned v, float k) {
  return bf_pack(bf_lo(v) * k, bf_hi(v) * k);
}

}  // namespace

#define EP_VPT 4  // 16-byte vectors per thread per batch

extern "C" __global__ void __launch_bounds__(256)
    embedding_plain(const unsigned short* __restrict__ table,
                    const int* __restrict__ ids,
                    unsigned short* __restrict__ out, int tokens, int hidden,
                    float scale) {
  const long long t = blockIdx.x;
  if (t >= tokens) return;
  const int vrow = hidden / 8;
  const uint4* src = (const uint4*)(table + (long long)__ldg(ids + t) * hidden);
  uint4* dst = (uint4*)(out + t * hidden);
  for (int v0 = threadIdx.x; v0 < vrow; v0 += EP_VPT * blockDim.x) {
    uint4 e[EP_VPT];
#pragma unroll
    for (int i = 0; i < EP_VPT; ++i) {
      const int v = v0 + i * blockDim.x;
      if (v < vrow) e[i] = __ldg(src + v);
    }
#pragma unroll
    for (int i = 0; i < EP_VPT; ++i) {
      const int v = v0 + i * blockDim.x;
      if (v < vrow) {
        dst[v] = make_uint4(scale2(e[i].x, scale), scale2(e[i].y, scale),
                            scale2(e[i].z, scale), scale2(e[i].w, scale));
      }
    }
  }
}
