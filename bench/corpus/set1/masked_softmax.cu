// masked_softmax: causal (upper-triangular) masked softmax of attention
// scores, bf16 in and out, f32 math:
//   y[h][i][j] = softmax_j(scale * x[h][i][j]) over j <= i + (K - Q),
//   y[h][i][j] = 0 for the masked j > i + (K - Q)
// over scores x [H][Q][K] (rows = H * Q; query i attends to the first
// i + K - Q + 1 keys, the bottom-right-aligned causal mask). Masked scores
// are never read. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (x: const bf16* [rows][K], y: bf16* [rows][K], rows: int,
//             Q: int, K: int, scale: float)
//   - Any K >= Q (K need not be a multiple of 8: a row may start at any
//     2-byte offset); x and y 16-byte aligned.
//   - Launch: any grid (each warp walks rows grid-stride), block = 32 * W
//     threads, W <= 32, dynamic shared memory =
//     128 + W * MS_STAGES * round128(2 * K + 32) bytes.
//   - -DMS_STAGES=N sets each warp's pipeline depth (default 3).
// How it uses <fleetjit/copy.cuh>: every warp runs its own pipeline of
// MS_STAGES row slots, each with its own barrier (count 1). A row's
// unmasked prefix is one contiguous span, so a slot is filled by ONE
// warp-scope fj::load (the warp's lanes call it; it attaches to the slot's
// barrier, then the warp arrives with arrive(fj::warp)): no block barrier
// after the set-up, and rows of different lengths never wait for each
// other. The span lands at the same offset modulo 16 bytes as its source
// (the layer's advice: matching 16-byte alignment is fastest), so SMEM
// 16-byte chunk j of a slot is global 16-byte chunk j of the row's first
// chunk, read and written whole where the row covers it. Each warp makes
// two passes over its row in SMEM: an online max and sum of exponentials,
// then the normalised output, written with 16-byte stores from registers
// (element stores at the ends of an unaligned row; zeros past the mask).
#include <cuda_bf16.h>

#include <fleetjit/copy.cuh>

#ifndef MS_STAGES
#define MS_STAGES 3
#endif
#define MS_MAX_WARPS 32

namespace {

__device__ __forceinline__ float bf_lo(unsigned v) {
  return __uint_as_float(v << 16);
}
__device__ __forceinline__ float bf_hi(unsigned v) {
  return __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ float bf_at(const uint4& q, int e) {
  const unsigned w = e < 4 ? (e < 2 ? q.x : q.y) : (e < 6 ? q.z : q.w);
  return (e & 1) ? bf_hi(w) : bf_lo(w);
}
__device__ __forceinline__ unsigned bf_pack(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
__device__ __forceinline__ unsigned round128(unsigned n) {
  return (n + 127u) & ~127u;
}
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define NEG_INF (-__int_as_float(0x7f800000))

}  // namespace

extern "C" __global__ void masked_softmax(const __nv_bfloat16* x,
                                          __nv_bfloat16* y, int rows, int Q,
                                          int K, float scale) {
  constexpr int S = MS_STAGES;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warps > MS_MAX_WARPS) __trap();
  const unsigned slot_bytes = round128(2u * K + 32u);
  unsigned char* slots = base + (unsigned)warp * S * slot_bytes;
  __shared__ fj::barrier full[MS_MAX_WARPS][S];
  if (threadIdx.x == 0) {
    for (int w = 0; w < warps; ++w)
      for (int s = 0; s < S; ++s) full[w][s].init(1);  // the warp's arrival
  }
  __syncthreads();  // the only block barrier

  const int gw = blockIdx.x * warps + warp;  // this warp's first row
  const int tw = gridDim.x * warps;          // rows per grid step
  const int diag = K - Q;                    // query i sees keys <= i + diag
  // Row r's unmasked prefix into slot k % S (its ring position): one span.
  auto issue = [&](int k) {
    const long long r = gw + (long long)k * tw;
    const bool ok = r < rows;
    const int len = ok ? (int)(r % Q) + diag + 1 : 0;
    const long long e0 = ok ? r * K : 0;
    const unsigned mis = (unsigned)(e0 & 7);  // elements past a 16-byte chunk
    fj::load(fj::warp, slots + (k % S) * slot_bytes + 2u * mis, x + e0,
             2u * len, full[warp][k % S], ok);
    full[warp][k % S].arrive(fj::warp);
  };
  for (int k = 0; k < S; ++k) issue(k);

  const float sl2 = scale * kLog2e;  // exponentials as 2^(x * sl2 - m)
  for (int k = 0;; ++k) {
    const long long r = gw + (long long)k * tw;
    if (r >= rows) break;
    full[warp][k % S].wait((k / S) & 1);
    const uint4* xs = (const uint4*)(slots + (k % S) * slot_bytes);
    const int len = (int)(r % Q) + diag + 1;  // unmasked keys, 1..K
    const long long e0 = r * K;
    const int mis = (int)(e0 & 7);
    const int nread = (mis + len - 1) / 8 + 1;  // chunks holding the prefix
    const int nall = (mis + K - 1) / 8 + 1;     // chunks holding the row
    // 1. Online max and sum, in log2 units. Chunk j holds row elements
    //    8 j - mis .. 8 j - mis + 7; each chunk read holds one valid one.
    float m = NEG_INF, l = 0.f;
    for (int j = lane; j < nread; j += 32) {
      const uint4 q = xs[j];
      float v[8], vm = NEG_INF;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int idx = 8 * j + e - mis;
        v[e] = (idx >= 0 && idx < len) ? bf_at(q, e) * sl2 : NEG_INF;
        vm = fmaxf(vm, v[e]);
      }
      const float nm = fmaxf(m, vm);
      float add = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) add += ex2(v[e] - nm);
      l = l * ex2(m - nm) + add;
      m = nm;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(~0u, m, o);
      const float ol = __shfl_xor_sync(~0u, l, o);
      const float nm = fmaxf(m, om);
      // A lane that saw no element has m = -inf, l = 0: adds nothing.
      l = (m == nm ? l : l * ex2(m - nm)) + (om == nm ? ol : ol * ex2(om - nm));
      m = nm;
    }
    const float inv = 1.f / l;
    // 2. The output: chunk j of the row's span is global chunk j of y's.
    uint4* yc = (uint4*)(y + (e0 - mis));
    for (int j = lane; j < nall; j += 32) {
      float p[8];
      if (j < nread) {
        const uint4 q = xs[j];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int idx = 8 * j + e - mis;
          p[e] =
              (idx >= 0 && idx < len) ? ex2(bf_at(q, e) * sl2 - m) * inv : 0.f;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) p[e] = 0.f;
      }
      const uint4 o = make_uint4(bf_pack(p[0], p[1]), bf_pack(p[2], p[3]),
                                 bf_pack(p[4], p[5]), bf_pack(p[6], p[7]));
      const int first = 8 * j - mis;  // row element of the chunk's first
      if (first >= 0 && first + 8 <= K) {
        yc[j] = o;
      } else {
        const unsigned short* h = (const unsigned short*)&o;
        unsigned short* yh = (unsigned short*)(y + e0);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (first + e >= 0 && first + e < K) yh[first + e] = h[e];
        }
      }
    }
    // Refill: the warp-scope load syncs the warp first, so every lane is
    // done reading the slot.
    __syncwarp();
    issue(k + S);
  }
}
