// A sample for the corpus harness's own tests (bench/corpus/README.md):
// y[r][c] = bf16(x[idx[r]][c] * scale) and sums[r] = sum_c of x[idx[r]][c]
// * scale, x and y bf16 (as unsigned short), sums f32. One block per row;
// the row's tiles of TILE columns come through <fleetjit/copy.cuh>.
#include <fleetjit/copy.cuh>

#ifndef TILE
#define TILE 256
#endif

extern "C" __global__ void gather_scale(FJ_TENSOR(unsigned short, 2) x,
                                        const int* idx, unsigned short* y,
                                        float* sums, int rows, int cols,
                                        float scale) {
  __shared__ __align__(128) unsigned short tile[TILE];
  __shared__ fj::barrier bar;
  __shared__ float partial[32];
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  unsigned phase = 0;
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const int src = idx[r];
    float sum = 0.f;
    for (int c0 = 0; c0 < cols; c0 += TILE, phase ^= 1) {
      fj::load_tile(tile, x, fj::at(c0, src), bar);
      bar.arrive();
      bar.wait(phase);
      for (int c = threadIdx.x; c < TILE && c0 + c < cols; c += blockDim.x) {
        const float v = __uint_as_float(unsigned(tile[c]) << 16) * scale;
        sum += v;
        unsigned u = __float_as_uint(v);
        u = u + 0x7fffu + ((u >> 16) & 1u);  // to nearest even (no NaN here)
        y[size_t(r) * cols + c0 + c] = (unsigned short)(u >> 16);
      }
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_down_sync(~0u, sum, o);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      float s = 0.f;
      for (int w = 0; w < int(blockDim.x / 32); ++w) s += partial[w];
      sums[r] = s;
    }
    __syncthreads();
  }
}
