// plain_paged_decode: the job of examples/paged_decode.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): one decode step of paged attention, one query token
// per sequence, f16 in and out, f32 softmax and accumulation, head_dim 128,
// 16-token pages, ragged sequence lengths. out[b][h] = softmax(q k^T *
// scale) v over the first seq_lens[b] tokens of sequence b; tokens past the
// length are never read.
//
// Arguments: (k_cache, v_cache: const __half* [num_pages * H * 16][128],
//             q: const __half* [B][H][128], page_table: const int*
//             [B][max_pages], seq_lens: const int* [B] (each >= 1),
//             max_pages: int, scale_log2: float (the softmax scale times
//             log2(e)), out: __half* [B][H][128])
// Launch: grid = (H, B), block = 32 * W threads (W <= 32 warps), no
// dynamic shared memory.
//
// How: one CTA per (head, sequence), no split over the sequence (the
// example splits it into chunks and merges their partials). Warp w takes
// tokens w, w + W, ...; lane l holds dimensions 4l..4l+3 of q, of each key
// and of its accumulator (an 8-byte load per lane per row), the dot product
// is a warp reduction, and each warp keeps an online softmax (running max,
// sum and accumulator). The warps merge through shared memory at the end.
#include <cuda_fp16.h>

namespace {
constexpr int kDim = 128;
constexpr int kPage = 16;
constexpr int kMaxWarps = 32;

__device__ float4 load4(const __half* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const __half2 lo = *reinterpret_cast<const __half2*>(&raw.x);
  const __half2 hi = *reinterpret_cast<const __half2*>(&raw.y);
  const float2 a = __half22float2(lo), b = __half22float2(hi);
  return make_float4(a.x, a.y, b.x, b.y);
}
}  // namespace

extern "C" __global__ void plain_paged_decode(
    const __half* __restrict__ k_cache, const __half* __restrict__ v_cache,
    const __half* __restrict__ q, const int* __restrict__ page_table,
    const int* __restrict__ seq_lens, int max_pages, float scale_log2,
    __half* __restrict__ out) {
  __shared__ float s_max[kMaxWarps], s_sum[kMaxWarps];
  __shared__ float s_acc[kMaxWarps][kDim];
  const int h = blockIdx.x, b = blockIdx.y, heads = gridDim.x;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warps > kMaxWarps || blockDim.x % 32 != 0) __trap();
  const int len = seq_lens[b];
  const int* pages = page_table + (long long)b * max_pages;
  const float4 qv = load4(q + ((long long)b * heads + h) * kDim + lane * 4);
  const float neg_inf = __int_as_float(0xff800000u);

  float m = neg_inf, l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int t = warp; t < len; t += warps) {
    const long long row =
        ((long long)pages[t / kPage] * heads + h) * kPage + t % kPage;
    const float4 kv = load4(k_cache + row * kDim + lane * 4);
    float dot = qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
    for (int o = 16; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float s = dot * scale_log2;
    const float m_new = fmaxf(m, s);
    const float corr = exp2f(m - m_new), p = exp2f(s - m_new);
    const float4 vv = load4(v_cache + row * kDim + lane * 4);
    l = l * corr + p;
    acc.x = acc.x * corr + p * vv.x;
    acc.y = acc.y * corr + p * vv.y;
    acc.z = acc.z * corr + p * vv.z;
    acc.w = acc.w * corr + p * vv.w;
    m = m_new;
  }
  if (lane == 0) {
    s_max[warp] = m;
    s_sum[warp] = l;
  }
  s_acc[warp][lane * 4 + 0] = acc.x;
  s_acc[warp][lane * 4 + 1] = acc.y;
  s_acc[warp][lane * 4 + 2] = acc.z;
  s_acc[warp][lane * 4 + 3] = acc.w;
  __syncthreads();
  // Merge: thread d < 128 sums dimension d over the warps that saw a token
  // (a warp that saw no token keeps m = -inf and contributes nothing).
  for (int d = threadIdx.x; d < kDim; d += blockDim.x) {
    float gm = neg_inf;
    for (int w = 0; w < warps; ++w) gm = fmaxf(gm, s_max[w]);
    float num = 0.f, den = 0.f;
    for (int w = 0; w < warps; ++w) {
      if (s_max[w] == neg_inf) continue;
      const float f = exp2f(s_max[w] - gm);
      num += f * s_acc[w][d];
      den += f * s_sum[w];
    }
    out[((long long)b * heads + h) * kDim + d] = __float2half(num / den);
  }
}
