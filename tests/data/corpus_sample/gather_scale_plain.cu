// The plain twin of gather_scale.cu: the same job with plain loads.
extern "C" __global__ void gather_scale_plain(const unsigned short* x,
                                              const int* idx, unsigned short* y,
                                              float* sums, int rows, int cols,
                                              float scale) {
  __shared__ float partial[32];
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    const unsigned short* row = x + size_t(idx[r]) * cols;
    float sum = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = __uint_as_float(unsigned(row[c]) << 16) * scale;
      sum += v;
      unsigned u = __float_as_uint(v);
      u = u + 0x7fffu + ((u >> 16) & 1u);
      y[size_t(r) * cols + c] = (unsigned short)(u >> 16);
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
