// plain_gemm_mma: the job of examples/gemm_mma.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): C = A B^T, f16 operands, f32 accumulation on the
// tensor cores, f16 result; c[i][j] = sum over l of a[i][l] * b[j][l].
//
// Arguments: (a: const __half* [M][K], b: const __half* [N][K] (both
//             K-contiguous, as torch.nn.functional.linear takes them),
//             c: __half* [M][N] row-major, m, n, k: int)
// Launch: grid = (N / 128, M / 128), block = 256 threads, no dynamic shared
// memory; M % 128 == 0, N % 128 == 0, K % 32 == 0, rows 16-byte aligned.
//
// How: the classic shape, none of the example's pipeline. A 128 x 128 block
// tile, k steps of 32: the block's threads copy both operand tiles into
// padded shared memory with 16-byte loads, then 8 warps (2 x 4, 64 x 32
// each) multiply them with WMMA 16 x 16 x 16 fragments (the example uses
// mma.sync m16n8k16 fed by ldmatrix, which is what WMMA compiles to). The
// result goes out through a per-warp 16 x 16 staging tile, converted to f16.
#include <cuda_fp16.h>
#include <mma.h>

namespace {
constexpr int kBM = 128, kBN = 128, kBK = 32;
constexpr int kPad = kBK + 8;  // halves per SMEM row: 80 bytes, no conflicts
constexpr int kWarpM = 64, kWarpN = 32;
constexpr int kFragM = kWarpM / 16, kFragN = kWarpN / 16;
}  // namespace

extern "C" __global__ void __launch_bounds__(256)
    plain_gemm_mma(const __half* __restrict__ a, const __half* __restrict__ b,
                   __half* __restrict__ c, int m, int n, int k) {
  using namespace nvcuda;
  __shared__ __align__(16) __half as[kBM][kPad];
  __shared__ __align__(16) __half bs[kBN][kPad];
  __shared__ __align__(16) float stage[8][16][16];
  if (blockDim.x != 256) __trap();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;  // 2 x 4 warps
  const long long row0 = (long long)blockIdx.y * kBM;
  const long long col0 = (long long)blockIdx.x * kBN;
  if (row0 + kBM > m || col0 + kBN > n) __trap();  // the grid is (N/128, M/128)

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragM][kFragN];
  for (int i = 0; i < kFragM; ++i)
    for (int j = 0; j < kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < k; k0 += kBK) {
    // 128 rows x 32 halves = 512 chunks of 16 bytes per operand: two per
    // thread each.
    for (int q = threadIdx.x; q < kBM * kBK / 8; q += blockDim.x) {
      const int r = q / (kBK / 8), ch = q % (kBK / 8);
      *reinterpret_cast<uint4*>(&as[r][ch * 8]) =
          *reinterpret_cast<const uint4*>(a + (row0 + r) * k + k0 + ch * 8);
      *reinterpret_cast<uint4*>(&bs[r][ch * 8]) =
          *reinterpret_cast<const uint4*>(b + (col0 + r) * k + k0 + ch * 8);
    }
    __syncthreads();
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>
          fa[kFragM];
      // B^T's (l, j) is b[j][l]: bs read column-major, one column per row.
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>
          fb[kFragN];
      for (int i = 0; i < kFragM; ++i)
        wmma::load_matrix_sync(fa[i], &as[wm * kWarpM + i * 16][kk], kPad);
      for (int j = 0; j < kFragN; ++j)
        wmma::load_matrix_sync(fb[j], &bs[wn * kWarpN + j * 16][kk], kPad);
      for (int i = 0; i < kFragM; ++i)
        for (int j = 0; j < kFragN; ++j)
          wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }

  for (int i = 0; i < kFragM; ++i) {
    for (int j = 0; j < kFragN; ++j) {
      wmma::store_matrix_sync(&stage[warp][0][0], acc[i][j], 16,
                              wmma::mem_row_major);
      __syncwarp();
      const long long r = row0 + wm * kWarpM + i * 16;
      const long long cc = col0 + wn * kWarpN + j * 16;
      for (int e = lane; e < 256; e += 32)
        c[(r + e / 16) * n + cc + e % 16] =
            __float2half(stage[warp][e / 16][e % 16]);
      __syncwarp();
    }
  }
}
