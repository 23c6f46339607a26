// plain_pipelined_tiles: the job of examples/pipelined_tiles.cu written
// without <fleetjit/copy.cuh> (its "plain twin" for build-cost comparisons,
// bench/build_cost.py): row_sums[y] = sum over x of in[y][x] for a
// row-major f32 matrix [rows][cols]. One block per band of blockDim.x rows;
// the band is read in tiles of PT_BX columns, each tile staged in SMEM by
// coalesced loads (double buffered: the next tile's loads are issued into
// registers before the current tile is summed), one thread per row adds
// its row of the tile left to right.
//
// Arguments: (in: const float* [rows][cols], row_sums: float* [rows],
//             rows: int, cols: int)
// Launch: grid = ceil(rows / blockDim.x), any block size <= 128.
#ifndef PT_BX
#define PT_BX 32
#endif

extern "C" __global__ void plain_pipelined_tiles(const float* __restrict__ in,
                                                 float* __restrict__ row_sums,
                                                 int rows, int cols) {
  __shared__ float tile[2][128][PT_BX + 1];
  const int by = blockDim.x;
  const long long y0 = (long long)blockIdx.x * by;
  const int tiles = (cols + PT_BX - 1) / PT_BX;
  const int n = by * PT_BX;  // elements of one tile
  auto fill = [&](int buf, int t) {
    for (int i = threadIdx.x; i < n; i += by) {
      const int r = i / PT_BX, c = i % PT_BX;
      const long long y = y0 + r;
      const int x = t * PT_BX + c;
      tile[buf][r][c] = (y < rows && x < cols) ? in[y * cols + x] : 0.f;
    }
  };
  float sum = 0.f;
  if (tiles > 0) fill(0, 0);
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int buf = t & 1;
    if (t + 1 < tiles) fill(buf ^ 1, t + 1);
    for (int x = 0; x < PT_BX; ++x) sum += tile[buf][threadIdx.x][x];
    __syncthreads();
  }
  const long long y = y0 + threadIdx.x;
  if (y < rows) row_sums[y] = sum;
}
