// plain_tiled_copy: the job of examples/tiled_copy.cu written without
// <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): out[y][x] = in[y][x] where (x, y) is inside `in`,
// 0 elsewhere, for row-major f32 matrices, through SMEM one tile per block.
//
// Arguments: (in: const float* [in_rows][in_cols], in_rows, in_cols,
//             out: float* [out_rows][out_cols], out_rows, out_cols)
// Launch: grid = (ceil(out_cols / PC_BX), ceil(out_rows / PC_BY)), any
// block size.
#ifndef PC_BX
#define PC_BX 64
#endif
#ifndef PC_BY
#define PC_BY 32
#endif

extern "C" __global__ void plain_tiled_copy(const float* __restrict__ in,
                                            int in_rows, int in_cols,
                                            float* __restrict__ out,
                                            int out_rows, int out_cols) {
  __shared__ float tile[PC_BY][PC_BX];
  const int x0 = blockIdx.x * PC_BX, y0 = blockIdx.y * PC_BY;
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  const int me =
      threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  for (int i = me; i < PC_BX * PC_BY; i += threads) {
    const int r = i / PC_BX, c = i % PC_BX;
    const int y = y0 + r, x = x0 + c;
    tile[r][c] =
        (y < in_rows && x < in_cols) ? in[(long long)y * in_cols + x] : 0.f;
  }
  __syncthreads();
  for (int i = me; i < PC_BX * PC_BY; i += threads) {
    const int r = i / PC_BX, c = i % PC_BX;
    const int y = y0 + r, x = x0 + c;
    if (y < out_rows && x < out_cols)
      out[(long long)y * out_cols + x] = tile[r][c];
  }
}
