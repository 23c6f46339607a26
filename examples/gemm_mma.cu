// gemm_mma: one GEMM main loop, C = A B^T, f16 operands, f32 accumulation
// with mma.sync (m16n8k16) fed by ldmatrix, f16 result. The operand tiles
// come through the copy layer (one tile load per operand per k step, on a
// NSTAGES-deep ring of barriers). With PRODUCER=2 (the default) two extra
// warps issue the loads (fj::warp scope), one the A tiles and one the B
// tiles, on full/empty barrier pairs (fj::pipeline), and the WM x WN MMA
// warps never meet at a block barrier. PRODUCER=4 has two such pairs on
// alternate k steps, PRODUCER=1 one warp for both tiles (on the H200 at
// 4096^3, 0.47 against 0.57 of cuBLAS under tma, 0.31 against 0.45 under
// cp_async), PRODUCER=0 loads block-collectively between k steps. The same
// source runs under every copy implementation (sync, cp_async, tma), on sm_75
// and newer.
//
// Arguments: (a: FJ_TENSOR(__half, R), b: FJ_TENSOR(__half, R), c: __half*,
//             m, n, k), R = 2 (SWIZZLE=128, the default) or 3
//             (SWIZZLE=0)
//   - A is f16 [M][K] and B is f16 [N][K] (both K-contiguous, as
//     torch.nn.functional.linear takes them).
//     SWIZZLE=128 (the default): plain 2-D tensors, box (BM, 64) for A and
//     (BN, 64) for B (outermost first, as fj_tensor_arg.box and Python's
//     box= take it) and swizzle 128 (fj_tensor_arg.swizzle =
//     FJ_SWIZZLE_128B, fleetjit.Tensor(x, box=..., swizzle=128)); BK = 64.
//     A tile lands as
//     rows of 128 bytes in the TMA 128-byte XOR pattern (the same bytes
//     under cp_async and sync), read through fj::swizzle<fj::swz128>; TMA
//     moves 128-byte rows.
//     SWIZZLE=0: "panel" views, shape (K / 8, rows, 8) with strides (8, K,
//     1), i.e. x.view(rows, K // 8, 8).permute(1, 0, 2), box (BK / 8, BM,
//     8) / (BK / 8, BN, 8); BK = 32 by default. A tile lands as
//     [BK / 8][rows][8]: the 8 rows one ldmatrix matrix reads are 128
//     contiguous bytes (no bank conflict without a swizzle), but every TMA
//     box row is 16 bytes, half an L2 sector.
//   - c: f16 [M][N] row-major. M % BM == 0, N % BN == 0, K % BK == 0.
//   - Launch: grid = (N / BN, M / BM), block = 32 * (WM * WN + PRODUCER)
//     threads (WM x WN = 4 x 2 when BM > BN, else 2 x 4: 8 MMA warps),
//     dynamic shared memory = NSTAGES * (BM + BN) * BK * 2 + 1024 bytes
//     (+ 128 instead of + 1024 with SWIZZLE=0: the tiles are aligned to the
//     swizzle's 1024-byte repeat, or to TMA's 128 bytes).
// Result: c[i][j] = sum over l of a[i][l] * b[j][l], accumulated in f32.
//
// Measured (H200, M = N = K = 4096 / 8192, fraction of cuBLAS through
// torch.matmul in the same run; bench/attn_gemm_torch.py, bench/results/):
//   tma, BM=256 (64 x 64 warp tiles), 3 stages, swizzled   0.46 / 0.48
//   tma, 128 x 128 (64 x 32 warp tiles), 3 stages, GROUP_M=8  0.47 / 0.49
//   tma, 128 x 128, GROUP_M=1 (row-by-row block order)      0.43 / 0.44
//   tma, 128 x 128, 4 stages (one CTA per SM, not two)      0.27 / 0.27
//   tma, panels (16-byte TMA rows: L2-request-bound)        0.23 / 0.24
//   cp_async, 128 x 128, 3 stages, swizzled, GROUP_M=8      0.30 / 0.31
// so the defaults are the swizzled layout at 3 stages; -DBM=256 for the
// larger warp tiles. SMEM: the default needs 99.4 KB per block (sm_80,
// sm_86, sm_89, sm_90), BM=256 148.5 KB (sm_80, sm_90); on sm_75 (64 KB)
// use -DBN=64 -DNSTAGES=2 (50.2 KB).
#include <cuda_fp16.h>

#include <fleetjit/copy.cuh>

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef NSTAGES
#define NSTAGES 3
#endif
#ifndef WM  // warps along M
#if BM > BN
#define WM 4
#else
#define WM 2
#endif
#endif
#ifndef WN  // warps along N
#define WN (8 / WM)
#endif
#ifndef SWIZZLE  // 128: 2-D tiles in the 128-byte swizzle; 0: panel views
#define SWIZZLE 128
#endif
#if SWIZZLE == 128
#ifdef BK
#if BK != 64
#error "gemm_mma: SWIZZLE=128 takes BK = 64 (one 128-byte row of f16)"
#endif
#else
#define BK 64  // one 128-byte swizzle row of f16
#endif
#define OPERAND_RANK 2
#define ALIGN 1024  // fj::swz128::repeat
#elif SWIZZLE == 0
#ifndef BK
#define BK 32
#endif
#define OPERAND_RANK 3
#define ALIGN 128  // TMA's tile alignment
#else
#error "gemm_mma: SWIZZLE must be 0 or 128"
#endif
// Block order: GROUP_M consecutive blocks walk down GROUP_M block rows of C
// before moving one block column right, so a wave of resident blocks reads
// GROUP_M A panels and few B panels (L2 reuse); 1 = row by row. On the
// H200, 128 x 128 tiles at 3 stages: 8 takes tma from 0.43-0.44 to
// 0.47-0.49 of cuBLAS and cp_async from 0.28-0.29 to 0.30-0.31 (4096^3 /
// 8192^3); 16 measures the same.
#ifndef GROUP_M
#define GROUP_M 8
#endif
#ifndef PRODUCER    // 2: two more warps issue the tile loads (fj::warp), one
#define PRODUCER 2  // the A tiles and one the B tiles; 4: two such pairs,
#endif              // taking alternate k steps; 1: one warp loads both
#if PRODUCER != 0 && PRODUCER != 1 && PRODUCER != 2 && PRODUCER != 4
#error "gemm_mma: PRODUCER is 0, 1, 2 or 4"
#endif
#if PRODUCER == 4 && NSTAGES < 2
// Two producer pairs on one stage would wait on its empty barrier's parity
// a whole ring apart, which a parity cannot tell apart.
#error "gemm_mma: PRODUCER=4 needs NSTAGES >= 2"
#endif
#define MMA_WARPS (WM * WN)

#define WTM (BM / WM)  // warp tile
#define WTN (BN / WN)
#define MI (WTM / 16)  // m16 fragments per warp
#define NI (WTN / 8)   // n8 fragments per warp
#if WTM % 16 != 0 || WTN % 16 != 0 || BK % 16 != 0
#error "gemm_mma: warp tiles must be multiples of 16 x 16, BK of 16"
#endif

namespace {

// `a`: a shared-state-space address (32-bit), so the per-k-step address is
// an add or an XOR on a register the loop keeps, with the fragment's
// offset as the instruction's immediate.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned a) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(a));
}
// d += a b for one 16 x 8 x 16 block. sm_75 has no m16n8k16 for f16: there
// it is two m16n8k8 (a[0..1] and b0 hold k 0-7, a[2..3] and b1 k 8-15).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          unsigned b0, unsigned b1) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b0));
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[2]), "r"(a[3]), "r"(b1));
#endif
}
__device__ __forceinline__ unsigned pack_f16x2(float lo, float hi) {
  unsigned short l, h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(l) : "f"(lo));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(hi));
  return (unsigned)l | ((unsigned)h << 16);
}

// The byte offset in an operand tile of the 8 halves (16 bytes) at `row`,
// K group `kc` (K = 8 kc .. 8 kc + 7). Panels: [BK / 8][rows][8], the 8
// rows of one ldmatrix matrix contiguous. Swizzled: rows of 128 bytes
// with chunk kc of row r at chunk kc ^ (r % 8) (fj::swz128), so the 8 rows
// of a matrix land in 8 different bank groups.
__device__ __forceinline__ unsigned operand_byte(int row, int kc, int rows) {
#if SWIZZLE
  (void)rows;
  return fj::swizzle<fj::swz128>::offset((unsigned)(row * 128 + kc * 16));
#else
  return (unsigned)((kc * rows + row) * 16);
#endif
}
// operand_byte(row, kc + 2 kk, rows) from operand_byte(row, kc, rows), for
// kc = 0 or 1: the swizzle XORs the chunk index (bits 4-6) with row % 8,
// and kc + 2 kk = kc ^ 2 kk, so the step is an XOR of (2 kk) << 4; a panel
// tile steps by 2 kk groups of `rows` 16-byte rows. Rows 16 i further on
// are 16 i * 128 (swizzled) or 16 i * 16 (panels) bytes further on either
// way (row % 8 is unchanged): compile-time offsets.
__device__ __forceinline__ unsigned k_step(unsigned base, int kk, int rows) {
#if SWIZZLE
  (void)rows;
  return base ^ (unsigned)(kk << 5);
#else
  return base + (unsigned)(kk * 32 * rows);
#endif
}
constexpr unsigned kRowBytes = SWIZZLE ? 128 : 16;  // row r to row r + 1

}  // namespace

extern "C" __global__ void __launch_bounds__((MMA_WARPS + PRODUCER) * 32)
    gemm_mma(FJ_TENSOR(__half, OPERAND_RANK) a,
             FJ_TENSOR(__half, OPERAND_RANK) b, __half* __restrict__ c, int m,
             int n, int k) {
  // The warps' roles follow from the block size: any other size would
  // leave a load unissued and the MMA warps waiting forever.
  if (blockDim.x != (MMA_WARPS + PRODUCER) * 32 || blockDim.y * blockDim.z != 1)
    __trap();
  // 1. NSTAGES slots of one A tile [BK/8][BM][8] and one B tile
  //    [BK/8][BN][8], a barrier per slot.
  extern __shared__ unsigned char smem_raw[];
  __half* ring =
      (__half*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & (ALIGN - 1)));
  __shared__ fj::barrier full[NSTAGES];
#if PRODUCER
  __shared__ fj::barrier empty[NSTAGES];
#endif
  if (threadIdx.x == 0) {
    for (int s = 0; s < NSTAGES; ++s) {
#if PRODUCER
      full[s].init(PRODUCER == 1 ? 1 : 2);  // one per warp filling it
      empty[s].init(MMA_WARPS);
#else
      full[s].init(fj::block_threads());
#endif
    }
  }
  __syncthreads();
#if SWIZZLE
  // Tiles laid out otherwise would be read wrong: fail loudly instead.
  if (!a.swizzled_as<fj::swz128>() || !b.swizzled_as<fj::swz128>()) __trap();
#endif
  // The launch order (x fastest) mapped to a block of C, GROUP_M rows of
  // blocks at a time.
  int bm_i = blockIdx.y, bn_i = blockIdx.x;
  if (GROUP_M > 1) {
    const int id = blockIdx.y * gridDim.x + blockIdx.x;
    const int per_group = GROUP_M * gridDim.x;
    const int first = id / per_group * GROUP_M;
    const int rows = min((int)gridDim.y - first, GROUP_M);
    bm_i = first + id % per_group % rows;
    bn_i = id % per_group / rows;
  }
  const int m0 = bm_i * BM, n0 = bn_i * BN;
  const int ktiles = k / BK;
  // Where k step kt of the rows from r0 starts, innermost first.
  auto tile_at = [](int r0, int kt) {
#if SWIZZLE
    return fj::at(kt * BK, r0);
#else
    return fj::at(0, r0, kt * (BK / 8));  // (in the group of 8, row, group)
#endif
  };
  auto slot_a = [&](int s) { return ring + s * (BM + BN) * BK; };
  auto slot_b = [&](int s) { return ring + s * (BM + BN) * BK + BM * BK; };
  // Tile coordinates, innermost first: element in the group of 8, row,
  // group of 8 along K.
#if PRODUCER
  if (threadIdx.x / 32 >= MMA_WARPS) {
    // In a pair of producers, the first loads the A tiles, the second the
    // B; pair q of PAIRS takes k steps q, q + PAIRS, ...
    const int pairs = PRODUCER == 1 ? 1 : PRODUCER / 2;
    const int p = threadIdx.x / 32 - MMA_WARPS;
    const bool load_a = PRODUCER == 1 || p % 2 == 0;
    const bool load_b = PRODUCER == 1 || p % 2 == 1;
    for (int kt = PRODUCER == 1 ? 0 : p / 2; kt < ktiles; kt += pairs) {
      const int s = kt % NSTAGES;
      empty[s].wait(((kt / NSTAGES) & 1) ^ 1);  // the MMA warps are done
      if (load_a)
        fj::load_tile(fj::warp, slot_a(s), a, tile_at(m0, kt), full[s]);
      if (load_b)
        fj::load_tile(fj::warp, slot_b(s), b, tile_at(n0, kt), full[s]);
      full[s].arrive(fj::warp);
    }
    return;  // no block barrier follows
  }
#else
  auto fill = [&](int kt) {
    const int s = kt % NSTAGES;
    fj::load_tile(slot_a(s), a, tile_at(m0, kt), full[s]);
    fj::load_tile(slot_b(s), b, tile_at(n0, kt), full[s]);
    full[s].arrive();
  };
  for (int kt = 0; kt < NSTAGES && kt < ktiles; ++kt) fill(kt);
#endif

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / WN, wn = warp % WN;
  // ldmatrix row addresses: lane l feeds row l % 8 of matrix l / 8.
  // A (x4 per m16 fragment): matrix j covers rows + 8 (j % 2), K + 8 (j / 2).
  // B (x4 per pair of n8 fragments): matrix j covers n + 8 (j / 2), K + 8 (j %
  // 2).
  const int j = lane / 8, r8 = lane % 8;
  const int a_row = wm * WTM + (j % 2) * 8 + r8, a_kc = j / 2;
  const int b_row = wn * WTN + (j / 2) * 8 + r8, b_kc = j % 2;

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int q = 0; q < NI; ++q)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][q][e] = 0.f;

  // 2. Main loop: wait for step kt, multiply it, release its slot (or, with
  //    PRODUCER=0, refill it with step kt + NSTAGES: the load's block barrier
  //    keeps it from overwriting a slot a warp still reads).
  // Each lane's ldmatrix row in slot 0 (shared-space addresses): k step
  // kk of fragment i is k_step(a_base, kk) + i * 16 rows.
  const unsigned ring_s = (unsigned)__cvta_generic_to_shared(ring);
  const unsigned a_base = ring_s + operand_byte(a_row, a_kc, BM);
  const unsigned b_base = ring_s + BM * BK * 2 + operand_byte(b_row, b_kc, BN);
  fj::pipeline<NSTAGES> pl;
  for (int kt = 0; kt < ktiles; ++kt, pl.advance()) {
    const int s = pl.stage();
    full[s].wait(pl.phase());
    // The slot's offset: a multiple of the swizzle's 1024-byte repeat, so
    // it commutes with k_step's XOR.
    const unsigned slot = (unsigned)(s * (BM + BN) * BK * 2);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned fa[MI][4], fb[NI / 2][4];
      const unsigned ka = k_step(a_base, kk, BM) + slot;
      const unsigned kb = k_step(b_base, kk, BN) + slot;
#pragma unroll
      for (int i = 0; i < MI; ++i) ldmatrix_x4(fa[i], ka + i * 16 * kRowBytes);
#pragma unroll
      for (int p = 0; p < NI / 2; ++p)
        ldmatrix_x4(fb[p], kb + p * 16 * kRowBytes);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int q = 0; q < NI; ++q)
          mma_16816(acc[i][q], fa[i], fb[q / 2][(q % 2) * 2],
                    fb[q / 2][(q % 2) * 2 + 1]);
    }
#if PRODUCER
    empty[s].arrive(fj::warp);
#else
    if (kt + NSTAGES < ktiles) fill(kt + NSTAGES);
#endif
  }

  // 3. Epilogue: fragment (i, q) holds rows g, g + 8 and columns 2 t, 2 t + 1
  //    of its 16 x 8 block (g = lane / 4, t = lane % 4).
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int q = 0; q < NI; ++q) {
      const int row = m0 + wm * WTM + i * 16 + g;
      const int col = n0 + wn * WTN + q * 8 + 2 * t;
      if (col < n) {
        if (row < m) {
          *(unsigned*)(c + (long long)row * n + col) =
              pack_f16x2(acc[i][q][0], acc[i][q][1]);
        }
        if (row + 8 < m) {
          *(unsigned*)(c + (long long)(row + 8) * n + col) =
              pack_f16x2(acc[i][q][2], acc[i][q][3]);
        }
      }
    }
  }
}
