// masked_softmax_plain: causal (upper-triangular) masked softmax of
// attention scores, bf16 in and out, f32 math, without the copy layer:
//   y[h][i][j] = softmax_j(scale * x[h][i][j]) over j <= i + (K - Q),
//   y[h][i][j] = 0 for the masked j > i + (K - Q)
// over scores x [H][Q][K] (rows = H * Q). Masked scores are never read.
//
// Arguments: (x: const bf16* [rows][K], y: bf16* [rows][K], Q: int, K: int,
//             scale: float)
//   - Any K >= Q with K + 7 <= 8 * MSP_VECS * blockDim.x (8184 with the
//     defaults); rows need not be 16-byte aligned; x and y 16-byte aligned.
//   - Launch: grid = rows (one row per block), block = 256 threads, no
//     dynamic shared memory.
// Each thread loads its share of the row's unmasked prefix as 16-byte
// chunks (the row's chunks counted from the 16-byte boundary at or before
// its start, so they are aligned whatever K is) into registers, keeps an
// online max and sum, and the block merges them once; then each thread
// writes its chunks (16-byte stores; element stores where a chunk is only
// partly this row's; zeros past the mask).
#include <cuda_bf16.h>

#ifndef MSP_VECS
#define MSP_VECS 4
#endif

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
constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define NEG_INF (-__int_as_float(0x7f800000))

// Merges (om, ol) into (m, l): sums of 2^(v - m).
__device__ __forceinline__ void merge(float& m, float& l, float om, float ol) {
  const float nm = fmaxf(m, om);
  l = (m == nm ? l : l * ex2(m - nm)) + (om == nm ? ol : ol * ex2(om - nm));
  m = nm;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    masked_softmax_plain(const __nv_bfloat16* __restrict__ x,
                         __nv_bfloat16* __restrict__ y, int Q, int K,
                         float scale) {
  __shared__ float red_m[32], red_l[32];
  const long long r = blockIdx.x;
  const int len = (int)(r % Q) + (K - Q) + 1;  // unmasked keys, 1..K
  const long long e0 = r * K;
  const int mis = (int)(e0 & 7);
  const int nread = (mis + len - 1) / 8 + 1;  // chunks holding the prefix
  const int nall = (mis + K - 1) / 8 + 1;     // chunks holding the row
  if (nall > MSP_VECS * (int)blockDim.x) __trap();
  // The tensor's elements end at `total`: a chunk past it is read per
  // element (only the very last row's last chunk can be).
  const long long total = (long long)gridDim.x * K;
  const long long c0 = e0 - mis;  // element index of the row's chunk 0
  const uint4* xc = (const uint4*)(x + c0);
  const float sl2 = scale * kLog2e;

  uint4 q[MSP_VECS];
#pragma unroll
  for (int i = 0; i < MSP_VECS; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    q[i] = make_uint4(0u, 0u, 0u, 0u);
    if (j < nread) {
      if (c0 + 8 * j + 8 <= total) {
        q[i] = __ldg(xc + j);
      } else {
        unsigned short h[8];
        const unsigned short* xh = (const unsigned short*)x;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          h[e] = c0 + 8 * j + e < total ? xh[c0 + 8 * j + e] : 0;
        q[i] = make_uint4(
            h[0] | ((unsigned)h[1] << 16), h[2] | ((unsigned)h[3] << 16),
            h[4] | ((unsigned)h[5] << 16), h[6] | ((unsigned)h[7] << 16));
      }
    }
  }
  // 1. This thread's online max and sum, then the block's.
  float m = NEG_INF, l = 0.f;
#pragma unroll
  for (int i = 0; i < MSP_VECS; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < nread) {
      float v[8], vm = NEG_INF;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int idx = 8 * j + e - mis;
        v[e] = (idx >= 0 && idx < len) ? bf_at(q[i], e) * sl2 : NEG_INF;
        vm = fmaxf(vm, v[e]);
      }
      const float nm = fmaxf(m, vm);
      float add = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) add += ex2(v[e] - nm);
      l = l * ex2(m - nm) + add;
      m = nm;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    merge(m, l, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, l, o));
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    red_m[warp] = m;
    red_l[warp] = l;
  }
  __syncthreads();
  if (warp == 0) {
    const bool has = lane < (int)(blockDim.x / 32);
    m = has ? red_m[lane] : NEG_INF;
    l = has ? red_l[lane] : 0.f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      merge(m, l, __shfl_xor_sync(~0u, m, o), __shfl_xor_sync(~0u, l, o));
    }
    if (lane == 0) {
      red_m[0] = m;
      red_l[0] = l;
    }
  }
  __syncthreads();
  m = red_m[0];
  const float inv = 1.f / red_l[0];

  // 2. The output.
  uint4* yc = (uint4*)(y + c0);
#pragma unroll
  for (int i = 0; i < MSP_VECS; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j >= nall) continue;
    float p[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int idx = 8 * j + e - mis;
      p[e] = (j < nread && idx >= 0 && idx < len)
                 ? ex2(bf_at(q[i], e) * sl2 - m) * inv
                 : 0.f;
    }
    const uint4 o = make_uint4(bf_pack(p[0], p[1]), bf_pack(p[2], p[3]),
                               bf_pack(p[4], p[5]), bf_pack(p[6], p[7]));
    const int first = 8 * j - mis;
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
}
