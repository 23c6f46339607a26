// The space of bench/tune_bench.sh: y = a*x + y, each block over TILE
// consecutive elements. WRONG skips the odd elements: a faster, wrong
// candidate that the tuning must refuse.
extern "C" __global__ void tiled_axpy(float a, const float* x, float* y,
                                      int n) {
  const int begin = blockIdx.x * TILE;
  const int end = min(n, begin + TILE);
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
#ifdef WRONG
    if (i & 1) continue;
#endif
    y[i] = a * x[i] + y[i];
  }
}
