// paged_decode: one decode step of paged attention (one query token per
// sequence), f16 in and out, f32 softmax and accumulation, head_dim 128,
// 16-token pages, ragged sequence lengths. The same source runs under every
// copy implementation (sync, cp_async, tma).
//
// Arguments: (k_cache, v_cache: FJ_TENSOR(__half, 2), q, page_table,
//             seq_lens, max_pages, scale_log2, part, counters, out)
//   - k_cache, v_cache: f16 pages [num_pages][H][16][128] passed as 2-D
//     [num_pages * H * 16][128] (DLPack order, outermost first) with box
//     (16, 128): one tile is one head's page, 4 KiB, at row
//     (page * H + head) * 16. (As 2-D, the software tile path walks a page
//     as evenly strided rows; a 4-D box (1, 1, 16, 128) took the slower
//     chunk cursor.) Any oob mode: tiles never leave the cache.
//   - q, out: f16 [B][H][128]; page_table: int32 [B][max_pages] (page ids
//     of sequence b in order); seq_lens: int32 [B], each >= 1.
//   - scale_log2: softmax scale times log2(e) (1/sqrt(128) * 1.4427...).
//   - part: f32 workspace [B * H][max_chunks][130]; counters: u32 [B * H],
//     zero before the first launch (every launch leaves them zero).
//     A sequence may span at most WARPS * 65 chunks (260 by default:
//     66,560 tokens with CHUNK_PAGES = 16); a longer one traps.
//   - Launch: grid = (max_chunks, H, B) with max_chunks =
//     ceil(max_pages / CHUNK_PAGES), block = 32 * (WARPS + PRODUCER)
//     threads (256 by default; another block size traps rather than
//     hang), dynamic shared memory = NSTAGES * STAGE_PAGES * 8192 + 128
//     bytes (49,280 by default).
// Result: out[b][h] = softmax(q k^T * scale) v over the first seq_lens[b]
// tokens of sequence b. Tokens past the length are never used, whatever
// their pages hold (the benchmark fills them with NaN).
//
// How it works: split-K over the sequence. CTA (c, h, b) takes pages
// [c * CHUNK_PAGES, (c + 1) * CHUNK_PAGES) of sequence b and streams them
// through a NSTAGES-deep ring of SMEM slots, STAGE_PAGES K pages and as many
// V pages per slot: per slot, one fj::gather_tiles of the K pages the table
// names and one of the V pages, each behind the slot's one barrier. With
// PRODUCER=4 (the default) four extra warps issue the gathers (fj::warp
// scope) on a full/empty barrier pair per slot (fj::pipeline), and the
// WARPS consumer warps only wait: two pairs take alternate slots, and in a
// pair one warp gathers the K pages and the other the V pages. PRODUCER=2
// is one such pair, PRODUCER=1 one warp for both gathers, PRODUCER=0 the
// block between slots, as the layer's first API had to. Where the threads
// copy (sync) each producer warp has its own loads in flight, so more
// producers keep more of them: on the H200, sync 408 / 326 / 273 us with
// 1 / 2 / 4 producer warps, cp_async 186 / 166 / 162 us, tma 278 / 214 /
// 223 us (kernels_bench, each at its best stages).
// Every warp keeps its own online softmax (max, sum, 128-wide accumulator)
// over its share of each slot, so the consumers never synchronise inside a
// slot; the warps merge in SMEM at the end. A sequence of one chunk writes
// `out` directly. Otherwise each CTA writes its unnormalised partial to
// `part`, and the last CTA of (b, h) to finish (a counter) merges them.
#include <cuda_fp16.h>

#include <fleetjit/copy.cuh>

#ifndef NSTAGES
#define NSTAGES 3
#endif
#ifndef STAGE_PAGES
#define STAGE_PAGES 2
#endif
#ifndef CHUNK_PAGES
#define CHUNK_PAGES 16
#endif
#ifndef WARPS  // consumer warps
#define WARPS 4
#endif
#ifndef PRODUCER  // producer warps: 4 (two pairs), 2 (one pair: K and V), 1, or
#define PRODUCER 4  // 0 (the block issues the gathers between slots)
#endif
// -DMIN_CTAS=N: __launch_bounds__' resident CTAs per SM (default 2). The
// bound names both numbers so that ptxas keeps what the code needs: 2 lets
// it take 96-128 registers (256 threads) and spill nothing under any
// implementation (ptxas -v, CUDA 13: sm_90 tma / cp_async / sync, sm_80,
// sm_75). The thread count alone made ptxas aim at 3 CTAs (80 registers)
// and spill 24-76 bytes at the layer's out-of-line calls, as MIN_CTAS=3
// does; the tuned spaces measured those (reference/reference_kernels_attn.cc).
// MIN_CTAS=4 caps the registers at 64: a fourth resident CTA, more loads
// in flight where the threads copy (sync: 248 against 259 us on the H200,
// 2 stages, level with SDPA), at 64-116 bytes of spills: measure it.
#ifndef MIN_CTAS
#define MIN_CTAS 2
#endif
#define DEC_BOUNDS __launch_bounds__((WARPS + PRODUCER) * 32, MIN_CTAS)
#if PRODUCER != 0 && PRODUCER != 1 && PRODUCER != 2 && PRODUCER != 4
#error "paged_decode: PRODUCER is 0, 1, 2 or 4"
#endif
#if PRODUCER == 4 && NSTAGES < 2
// Two producer pairs on one stage would wait on its empty barrier's parity
// a whole ring apart, which a parity cannot tell apart.
#error "paged_decode: PRODUCER=4 needs NSTAGES >= 2"
#endif

#define PAGE 16         // tokens per page
#define DIM 128         // head_dim
#define PART (DIM + 2)  // floats per partial: accumulator, max, sum
#define NEG_INF __int_as_float(0xFF800000u)

// The slot's tokens split evenly over the warps, 4 tokens per score pass.
#define SLOT_TOKENS (STAGE_PAGES * PAGE)
#define WARP_TOKENS (SLOT_TOKENS / WARPS)
#define PASSES (WARP_TOKENS / 4)
#if WARP_TOKENS % 4 != 0 || PASSES < 1
#error "paged_decode: STAGE_PAGES * 16 must be a multiple of 4 * WARPS"
#endif
#if CHUNK_PAGES % STAGE_PAGES != 0
#error "paged_decode: CHUNK_PAGES must be a multiple of STAGE_PAGES"
#endif

namespace {

__device__ __forceinline__ float h2f(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ __half f2h(float f) { return __float2half_rn(f); }
// Both halves of a packed f16 pair, low half first.
__device__ __forceinline__ void h2x2(unsigned v, float& lo, float& hi) {
  lo = h2f((unsigned short)(v & 0xFFFFu));
  hi = h2f((unsigned short)(v >> 16));
}
// A load that skips L1: partials other CTAs wrote.
__device__ __forceinline__ float ld_cg(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
__device__ __forceinline__ float exp2_(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace

extern "C" __global__ void DEC_BOUNDS
paged_decode(FJ_TENSOR(__half, 2) k_cache, FJ_TENSOR(__half, 2) v_cache,
             const __half* __restrict__ q, const int* __restrict__ page_table,
             const int* __restrict__ seq_lens, int max_pages, float scale_log2,
             float* __restrict__ part, unsigned* __restrict__ counters,
             __half* __restrict__ out) {
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int heads = gridDim.y, max_chunks = gridDim.x;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The warps' roles follow from the block size: any other size would
  // leave a gather unissued and the consumers waiting forever.
  if (blockDim.x != (WARPS + PRODUCER) * 32 || blockDim.y * blockDim.z != 1)
    __trap();
  // The tensor maps' descriptors (under tma) come in while the page table
  // and the length load: a short-lived CTA otherwise waits for them at its
  // first gather.
  fj::prefetch_tensormap(k_cache);
  fj::prefetch_tensormap(v_cache);
  // The chunk's page ids do not depend on the length: their load overlaps
  // the length's (entries past the sequence are read, never used).
  int my_page = 0;
  if (tid < CHUNK_PAGES && c * CHUNK_PAGES + tid < max_pages) {
    my_page = page_table[(long long)b * max_pages + c * CHUNK_PAGES + tid];
  }
  const int len = seq_lens[b];
  const int seq_pages = (len + PAGE - 1) / PAGE;
  const int p0 = c * CHUNK_PAGES;
  if (p0 >= seq_pages) return;  // the whole CTA: nothing of this sequence
  const int chunks = (seq_pages + CHUNK_PAGES - 1) / CHUNK_PAGES;
  const int pages = min(CHUNK_PAGES, seq_pages - p0);
  const int slots = (pages + STAGE_PAGES - 1) / STAGE_PAGES;

  // 1. NSTAGES slots of STAGE_PAGES K pages then STAGE_PAGES V pages, a
  //    barrier per slot, this chunk's page ids.
  extern __shared__ unsigned char smem_raw[];
  __half* ring =
      (__half*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier full[NSTAGES];
#if PRODUCER
  __shared__ fj::barrier empty[NSTAGES];
#endif
  __shared__ int page_rows[CHUNK_PAGES];  // cache row of each page's head h
  __shared__ float merge[WARPS][PART];
  __shared__ int last;
  if (tid < CHUNK_PAGES) {
    page_rows[tid] = tid < pages ? (my_page * heads + h) * PAGE : 0;
  }
  if (tid == 0) {
    for (int s = 0; s < NSTAGES; ++s) {
#if PRODUCER
      full[s].init(PRODUCER == 1 ? 1 : 2);  // one per warp filling it
      empty[s].init(WARPS);                 // one per consumer warp
#else
      full[s].init(fj::block_threads());
#endif
    }
  }
  __syncthreads();

  // Slot k (of this chunk) into ring stage `st`: its K pages, then its V
  // pages, two gathers on the stage's barrier (the chunk's last slot may
  // hold fewer pages; the rest of its SMEM is never read).
  auto slot_of = [&](int st) {
    return ring + st * (2 * STAGE_PAGES * PAGE * DIM);
  };
#if PRODUCER
  if (warp >= WARPS) {
    // The producer warp(s): wait until the consumers released the stage,
    // then gather into it. No block barrier anywhere in this loop. In a
    // pair, the first warp gathers the K pages and the second the V pages;
    // pair q of PAIRS fills slots q, q + PAIRS, ...
    const int pairs = PRODUCER == 1 ? 1 : PRODUCER / 2;
    const int p = warp - WARPS;
    const bool gather_k = PRODUCER == 1 || p % 2 == 0;
    const bool gather_v = PRODUCER == 1 || p % 2 == 1;
    for (int k = PRODUCER == 1 ? 0 : p / 2; k < slots; k += pairs) {
      const int st = k % NSTAGES, phase = (k / NSTAGES) & 1;
      const int n = min(STAGE_PAGES, pages - k * STAGE_PAGES);
      __half* slot = slot_of(st);
      fj::barrier& bar = full[st];
      empty[st].wait(phase ^ 1);
      if (gather_k) {
        fj::gather_tiles(fj::warp, slot, k_cache, fj::at(0, 0), 1,
                         page_rows + k * STAGE_PAGES, n, bar);
      }
      if (gather_v) {
        fj::gather_tiles(fj::warp, slot + STAGE_PAGES * PAGE * DIM, v_cache,
                         fj::at(0, 0), 1, page_rows + k * STAGE_PAGES, n, bar);
      }
      bar.arrive(fj::warp);
    }
  }
#else
  auto fill = [&](int k) {
    const int st = k % NSTAGES;
    const int n = min(STAGE_PAGES, pages - k * STAGE_PAGES);
    __half* slot = slot_of(st);
    fj::gather_tiles(slot, k_cache, fj::at(0, 0), 1,
                     page_rows + k * STAGE_PAGES, n, full[st]);
    fj::gather_tiles(slot + STAGE_PAGES * PAGE * DIM, v_cache, fj::at(0, 0), 1,
                     page_rows + k * STAGE_PAGES, n, full[st]);
    full[st].arrive();
  };
  for (int k = 0; k < NSTAGES && k < slots; ++k) fill(k);
#endif

  // 2. This lane's share of q: dims [8 * sub, +8) and [64 + 8 * sub, +8)
  //    for the score passes (8 lanes per token, 4 tokens per pass).
  const int grp = lane / 8, sub = lane % 8;
  float qf[16];
  {
    const uint4* qv =
        (const uint4*)(q + ((long long)b * heads + h) * DIM) + sub;
    const uint4 a = qv[0], z = qv[8];
    const unsigned w[8] = {a.x, a.y, a.z, a.w, z.x, z.y, z.z, z.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) h2x2(w[i], qf[2 * i], qf[2 * i + 1]);
  }

  // 3. Per warp: running max m (log2 domain), sum l, and the accumulator of
  //    dims [4 * lane, +4).
  float m = NEG_INF, l = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
  const int tok_base = p0 * PAGE + warp * WARP_TOKENS;
  fj::pipeline<NSTAGES> pl;
  for (int k = 0; k < slots && warp < WARPS; ++k, pl.advance()) {
    const __half* slot = slot_of(pl.stage());
    full[pl.stage()].wait(pl.phase());
    const __half* kw = slot + warp * WARP_TOKENS * DIM;
    const __half* vw = kw + STAGE_PAGES * PAGE * DIM;
    const int tok0 = tok_base + k * SLOT_TOKENS;     // this warp's first token
    const int valid = min(WARP_TOKENS, len - tok0);  // may be <= 0
    if (valid > 0) {
      // Scores: pass r gives token 4 r + grp to lanes 8 grp .. 8 grp + 7.
      float s[PASSES];
#pragma unroll
      for (int r = 0; r < PASSES; ++r) {
        const int t = 4 * r + grp;
        const uint4* row = (const uint4*)(kw + t * DIM) + sub;
        const uint4 a = row[0], z = row[8];
        const unsigned w[8] = {a.x, a.y, a.z, a.w, z.x, z.y, z.z, z.w};
        float d = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          float lo, hi;
          h2x2(w[i], lo, hi);
          d = fmaf(qf[2 * i], lo, d);
          d = fmaf(qf[2 * i + 1], hi, d);
        }
        d += __shfl_xor_sync(0xFFFFFFFFu, d, 1);
        d += __shfl_xor_sync(0xFFFFFFFFu, d, 2);
        d += __shfl_xor_sync(0xFFFFFFFFu, d, 4);
        s[r] = t < valid ? d * scale_log2 : NEG_INF;
      }
      float mx = s[0];
#pragma unroll
      for (int r = 1; r < PASSES; ++r) mx = fmaxf(mx, s[r]);
      mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 16));
      const float m_new = fmaxf(m, mx);  // finite: token 0 is valid
      const float corr = exp2_(m - m_new);
      float ps = 0.f;
#pragma unroll
      for (int r = 0; r < PASSES; ++r) {
        s[r] = exp2_(s[r] - m_new);  // 0 for tokens past the length
        ps += s[r];
      }
      ps += __shfl_xor_sync(0xFFFFFFFFu, ps, 8);
      ps += __shfl_xor_sync(0xFFFFFFFFu, ps, 16);
      l = l * corr + ps;
      m = m_new;
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] *= corr;
        // acc += p_t v_t over the valid tokens only: V past the length may
        // be NaN, and 0 * NaN is NaN.
#pragma unroll
      for (int t = 0; t < WARP_TOKENS; ++t) {
        const float p = __shfl_sync(0xFFFFFFFFu, s[t / 4], (t % 4) * 8);
        if (t < valid) {
          const uint2 v = *((const uint2*)(vw + t * DIM) + lane);
          float v0, v1, v2, v3;
          h2x2(v.x, v0, v1);
          h2x2(v.y, v2, v3);
          acc[0] = fmaf(p, v0, acc[0]);
          acc[1] = fmaf(p, v1, acc[1]);
          acc[2] = fmaf(p, v2, acc[2]);
          acc[3] = fmaf(p, v3, acc[3]);
        }
      }
    }
#if PRODUCER
    empty[pl.stage()].arrive(fj::warp);  // this warp is done with the stage
#else
    // Refill the stage: block-collective (the block is uniform in k), and
    // the call's block barrier keeps it from overwriting what a warp reads.
    if (k + NSTAGES < slots) fill(k + NSTAGES);
#endif
  }

  // 4. Merge the consumer warps: thread d < 128 owns dim d.
  if (warp < WARPS) {
#pragma unroll
    for (int i = 0; i < 4; ++i) merge[warp][4 * lane + i] = acc[i];
    if (lane == 0) {
      merge[warp][DIM] = m;
      merge[warp][DIM + 1] = l;
    }
  }
  __syncthreads();
  const int bh = b * heads + h;
  float* mine = part + ((long long)bh * max_chunks + c) * PART;
  for (int d = tid; d < DIM; d += blockDim.x) {
    float M = NEG_INF;
    for (int w = 0; w < WARPS; ++w) M = fmaxf(M, merge[w][DIM]);
    float A = 0.f, L = 0.f;
    for (int w = 0; w < WARPS; ++w) {
      const float mw = merge[w][DIM];
      if (mw == NEG_INF) continue;  // a warp that saw no valid token
      const float e = exp2_(mw - M);
      A = fmaf(merge[w][d], e, A);
      L = fmaf(merge[w][DIM + 1], e, L);
    }
    if (chunks == 1) {
      out[(long long)bh * DIM + d] = f2h(A / L);
    } else {
      mine[d] = A;
      if (d == 0) {
        mine[DIM] = M;
        mine[DIM + 1] = L;
      }
    }
  }
  if (chunks == 1) return;

  // 5. The last CTA of (b, h) merges the chunks (threadFenceReduction).
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(&counters[bh], 1u) == (unsigned)chunks - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Every chunk's max and sum into SMEM at once (the warps' merge area is
  // free now), then each thread's column with 8 loads in flight: a loop of
  // dependent L2 loads cost one L2 round trip per chunk, serialised.
  const float* all = part + (long long)bh * max_chunks * PART;
  float* cm = &merge[0][0];  // chunk maxima, then chunk sums
  float* cl = cm + chunks;
  if (2 * chunks > WARPS * PART) __trap();  // see the header: length bound
  for (int j = tid; j < chunks; j += blockDim.x) {
    cm[j] = ld_cg(all + j * PART + DIM);
    cl[j] = ld_cg(all + j * PART + DIM + 1);
  }
  __syncthreads();
  float M = NEG_INF;
  for (int j = 0; j < chunks; ++j) M = fmaxf(M, cm[j]);
  float L = 0.f;
  for (int j = 0; j < chunks; ++j) L = fmaf(cl[j], exp2_(cm[j] - M), L);
  for (int d = tid; d < DIM; d += blockDim.x) {
    float A = 0.f;
    for (int j0 = 0; j0 < chunks; j0 += 8) {
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        v[i] = j0 + i < chunks ? ld_cg(all + (j0 + i) * PART + d) : 0.f;
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (j0 + i < chunks) A = fmaf(v[i], exp2_(cm[j0 + i] - M), A);
      }
    }
    out[(long long)bh * DIM + d] = f2h(A / L);
  }
  if (tid == 0) counters[bh] = 0;  // ready for the next launch
}
