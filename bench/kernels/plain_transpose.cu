// plain_transpose: out[c][r] = in[r][c] for a 2-D f32 tensor, written the
// way one would without <fleetjit/copy.cuh>: one P_T x P_T tile per block,
// loaded by a (P_T, P_R) block into padded SMEM (P_T + 1 columns: no bank
// conflicts), then stored transposed; ragged edges by bounds checks.
// bench/transpose_variants.py times it as the anchor of the transpose
// example (examples/transpose.cu).
//
// Arguments: (in: float* [rows][cols], out: float* [cols][rows], rows, cols)
// Launch: grid (ceil(cols / P_T), ceil(rows / P_T)), block (P_T, P_R).
#ifndef P_T
#define P_T 32
#endif
#ifndef P_R
#define P_R 8
#endif

extern "C" __global__ void plain_transpose(const float* __restrict__ in,
                                           float* __restrict__ out, int rows,
                                           int cols) {
  __shared__ float tile[P_T][P_T + 1];
  const int x = blockIdx.x * P_T + threadIdx.x;
  const int y0 = blockIdx.y * P_T;
#pragma unroll
  for (int j = threadIdx.y; j < P_T; j += P_R) {
    const int y = y0 + j;
    if (x < cols && y < rows)
      tile[j][threadIdx.x] = in[(long long)y * cols + x];
  }
  __syncthreads();
  const int ox = y0 + threadIdx.x;  // a column of `out` is a row of `in`
  const int oy0 = blockIdx.x * P_T;
#pragma unroll
  for (int j = threadIdx.y; j < P_T; j += P_R) {
    const int oy = oy0 + j;
    if (ox < rows && oy < cols) {
      out[(long long)oy * rows + ox] = tile[threadIdx.x][j];
    }
  }
}
