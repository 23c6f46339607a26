// swiglu: out[t][i] = silu(x[t][i]) * x[t][I + i], bf16 in and out, f32
// math. x holds the gate half and the up half side by side ([T][2 I]), as
// a fused gate_up projection writes them.
//
// Arguments: (x: FJ_TENSOR(unsigned short, 2) [T][2 I], out: bf16* [T][I],
//             inter: int = I)
//   - x's box is (16, 256) (outermost first: 16 rows of 256 columns),
//     oob = zeros. I % 8 == 0 (the up half starts on a 16-byte boundary,
//     and out is written in 16-byte vectors); out 16-byte aligned.
//   - Launch: block = 320 threads (10 warps), dynamic shared memory =
//     SG_STAGES * 4 * box_bytes + 128 = 98,432 bytes (2 CTAs per SM on
//     sm_90), any grid (CTAs walk the tiles grid-stride; 2 x SMs suits).
//
// How it uses <fleetjit/copy.cuh>: the guide's idiom (producer warps, a
// ring of SG_STAGES stages with full/empty barriers, fj::pipeline). A
// stage is one tile of 32 rows x 256 columns of the output: the gate half
// (two 16 x 256 boxes at column c) and the up half (two boxes at column
// I + c), so four fj::load_tile(fj::warp, ...) per stage. Under tma two
// producer warps issue them (the guide: "measure 1 against 2"); where the
// threads copy (cp_async, sync) four producer warps do, one box each
// (the guide: "branch on fj::copy_impl to give the load to more warps").
// The consumer warps read gate and up from SMEM in 16-byte vectors and
// write out with 16-byte stores from registers.
#include <fleetjit/copy.cuh>

#ifndef SG_STAGES
#define SG_STAGES 3
#endif
#define SG_WARPS 10                                // warps per block
#define SG_PRODUCERS (fj::copy_impl == 2 ? 2 : 4)  // warps that load
#define SG_LOADS 4  // boxes per stage: gate rows 0-15, 16-31, up the same

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
__device__ __forceinline__ float silu(float g) {
  return g / (1.f + __expf(-g));
}
// silu(gate) * up on two packed bf16 pairs.
__device__ __forceinline__ unsigned swiglu2(unsigned g, unsigned u) {
  return bf_pack(silu(bf_lo(g)) * bf_lo(u), silu(bf_hi(g)) * bf_hi(u));
}

}  // namespace

extern "C" __global__ void __launch_bounds__(SG_WARPS * 32)
    swiglu(FJ_TENSOR(unsigned short, 2) x, unsigned short* __restrict__ out,
           int inter) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  __shared__ fj::barrier full[SG_STAGES], empty[SG_STAGES];

  const int bc = x.box(0), br = x.box(1);  // one box: br rows of bc columns
  const int rows_per_tile = 2 * br;        // two boxes per half
  const unsigned box_bytes = (x.box_bytes() + 127) & ~127u;
  const unsigned stage_bytes = SG_LOADS * box_bytes;
  const long long rows = x.shape(1);
  const int tiles_x = (inter + bc - 1) / bc;
  const long long tiles_y = (rows + rows_per_tile - 1) / rows_per_tile;
  const long long tiles = tiles_x * tiles_y;

  const int warp = threadIdx.x / 32;
  const int producers = SG_PRODUCERS;
  const int consumers = SG_WARPS - producers;
  if (blockDim.x != SG_WARPS * 32) __trap();  // the roles follow the size
  if (threadIdx.x == 0) {
    for (int s = 0; s < SG_STAGES; ++s) {
      full[s].init(producers);   // one arrival per producer warp
      empty[s].init(consumers);  // one arrival per consumer warp
    }
  }
  __syncthreads();  // the only block barrier

  // Box j of a stage: half j / 2 (0 gate, 1 up), row block j % 2; it lands
  // at stage + j * box_bytes (the gate's two boxes, then the up half's).
  fj::pipeline<SG_STAGES> p;
  if (warp < producers) {
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x, p.advance()) {
      const int c0 = (int)(t % tiles_x) * bc;
      const long long r0 = t / tiles_x * rows_per_tile;
      unsigned char* stage = base + p.stage() * stage_bytes;
      empty[p.stage()].wait(p.phase() ^ 1);  // the consumers freed it
      for (int j = warp; j < SG_LOADS; j += producers) {
        const long long r = r0 + (j % 2) * br;
        fj::load_tile(fj::warp, (unsigned short*)(stage + j * box_bytes), x,
                      fj::at(c0 + (j / 2) * inter, r), full[p.stage()],
                      r < rows);
      }
      full[p.stage()].arrive(fj::warp);
    }
    return;  // no block barrier follows
  }

  // Consumers: 16-byte vectors of the tile, row-major.
  const int ct = threadIdx.x - producers * 32, nct = consumers * 32;
  const int vrow = bc / 8;  // vectors per tile row
  const int vecs = rows_per_tile * vrow;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x, p.advance()) {
    const int c0 = (int)(t % tiles_x) * bc;
    const long long r0 = t / tiles_x * rows_per_tile;
    const unsigned char* stage = base + p.stage() * stage_bytes;
    full[p.stage()].wait(p.phase());
    for (int v = ct; v < vecs; v += nct) {
      const int r = v / vrow, c = c0 + (v % vrow) * 8;
      if (r0 + r < rows && c < inter) {
        // Row r is row r % br of box r / br (gate), box 2 + r / br (up).
        const unsigned at = (r / br) * box_bytes +
                            (unsigned)((r % br) * bc + (v % vrow) * 8) * 2;
        const uint4 g = *(const uint4*)(stage + at);
        const uint4 u = *(const uint4*)(stage + 2 * box_bytes + at);
        uint4 o;
        o.x = swiglu2(g.x, u.x);
        o.y = swiglu2(g.y, u.y);
        o.z = swiglu2(g.z, u.z);
        o.w = swiglu2(g.w, u.w);
        *(uint4*)(out + (r0 + r) * inter + c) = o;
      }
    }
    empty[p.stage()].arrive(fj::warp);
  }
}
