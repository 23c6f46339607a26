// embedding: out[t][:] = table[ids[t]][:] * scale, bf16 table and output,
// f32 multiply (Gemma-style scaled embedding lookup).
//
// Arguments: (table: FJ_TENSOR(unsigned short, 2) [vocab][H],
//             ids: const int* [T], out: bf16* [T][H], tokens: int = T,
//             scale: float)
//   - table's box is (1, H): one whole row (the host splits a row wider
//     than 256 into hardware boxes: H = 4096 and 3584 split into boxes of
//     256). H % 64 == 0 (each row of a stage starts 128-byte aligned, as
//     TMA wants). 0 <= ids[t] < vocab.
//   - Launch: block = 256 threads (8 warps), dynamic shared memory =
//     EM_STAGES * EM_ROWS * 2 * H + 128 bytes (98,432 for H = 4096: 2 CTAs
//     per SM on sm_90), any grid (CTAs walk the token groups grid-stride;
//     2 x SMs suits).
//
// How it uses <fleetjit/copy.cuh>: the guide's idiom, as
// examples/paged_decode.cu: producer warps gather the table rows that a
// group of EM_ROWS tokens names (fj::gather_tiles(fj::warp, ...), the ids
// read straight from GMEM) into a ring of EM_STAGES stages with full/empty
// barriers (fj::pipeline), and the consumer warps scale the rows and write
// them out with 16-byte stores. Each producer warp gathers its share of a
// stage's rows on the stage's barrier (one arrival per producer warp).
// Under tma two producer warps issue them (two rows each); where the
// threads copy (cp_async, sync) four do, one row each (the guide, 4.:
// "branch on fj::copy_impl to give the load to more warps").
#include <fleetjit/copy.cuh>

#ifndef EM_STAGES
#define EM_STAGES 3
#endif
#define EM_ROWS 4                                  // tokens per stage
#define EM_WARPS 8                                 // warps per block
#define EM_PRODUCERS (fj::copy_impl == 2 ? 2 : 4)  // warps that gather

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
__device__ __forceinline__ unsigned scale2(unsigned v, float k) {
  return bf_pack(bf_lo(v) * k, bf_hi(v) * k);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(EM_WARPS * 32)
    embedding(FJ_TENSOR(unsigned short, 2) table, const int* __restrict__ ids,
              unsigned short* __restrict__ out, int tokens, float scale) {
  extern __shared__ unsigned char smem_raw[];
  unsigned short* ring =
      (unsigned short*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier full[EM_STAGES], empty[EM_STAGES];
  const int hidden = (int)table.shape(0);  // innermost first: the row length
  const unsigned stage_elems = EM_ROWS * table.box_elems();
  const int groups = (tokens + EM_ROWS - 1) / EM_ROWS;
  const int warp = threadIdx.x / 32;
  const int producers = EM_PRODUCERS, consumers = EM_WARPS - producers;
  const int share = EM_ROWS / producers;      // rows per producer warp
  if (blockDim.x != EM_WARPS * 32) __trap();  // the roles follow the size
  if (threadIdx.x == 0) {
    for (int s = 0; s < EM_STAGES; ++s) {
      full[s].init(producers);   // one arrival per producer warp
      empty[s].init(consumers);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only block barrier

  fj::pipeline<EM_STAGES> p;
  if (warp < producers) {
    for (int g = blockIdx.x; g < groups; g += gridDim.x, p.advance()) {
      const int t0 = g * EM_ROWS + warp * share;  // this warp's first token
      const int n = min(share, tokens - t0);      // may be <= 0
      unsigned short* dst =
          ring + p.stage() * stage_elems + warp * share * table.box_elems();
      empty[p.stage()].wait(p.phase() ^ 1);  // the consumers freed it
      if (n > 0) {
        fj::gather_tiles(fj::warp, dst, table, fj::at(0, 0), 1, ids + t0, n,
                         full[p.stage()]);
      }
      full[p.stage()].arrive(fj::warp);
    }
    return;  // no block barrier follows
  }

  // Consumers: the stage's rows as 16-byte vectors, row-major.
  const int ct = threadIdx.x - producers * 32, nct = consumers * 32;
  const int vrow = hidden / 8;
  for (int g = blockIdx.x; g < groups; g += gridDim.x, p.advance()) {
    const int t0 = g * EM_ROWS;
    const int n = min(EM_ROWS, tokens - t0);
    const uint4* src = (const uint4*)(ring + p.stage() * stage_elems);
    uint4* dst = (uint4*)(out + (long long)t0 * hidden);
    full[p.stage()].wait(p.phase());
    for (int v = ct; v < n * vrow; v += nct) {
      const uint4 e = src[v];
      dst[v] = make_uint4(scale2(e.x, scale), scale2(e.y, scale),
                          scale2(e.z, scale), scale2(e.w, scale));
    }
    empty[p.stage()].arrive(fj::warp);
  }
}
