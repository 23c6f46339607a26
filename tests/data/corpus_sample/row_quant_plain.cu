// The plain twin of row_quant.cu: the same job with plain loads.
__device__ unsigned char to_e4m3(float f) {
  unsigned u = __float_as_uint(f), s = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  if (u >= 0x43e00000u) return (unsigned char)(s | 0x7e);
  const int e = (int)(u >> 23) - 127;
  if (e < -6)
    return (unsigned char)(s | __float2int_rn(__uint_as_float(u) * 512.f));
  const unsigned m = u & 0x7fffffu;
  const unsigned code =
      ((unsigned)(e + 7) << 3) + ((m + 0x7ffffu + ((m >> 20) & 1u)) >> 20);
  return (unsigned char)(s | (code > 0x7eu ? 0x7eu : code));
}

extern "C" __global__ void row_quant_plain(const unsigned short* x,
                                           unsigned char* q, float* scale,
                                           int* done, long long cols) {
  __shared__ float part[32];
  const int r = blockIdx.x;
  const unsigned short* row = x + r * cols;
  float amax = 0.f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    amax = fmaxf(amax, fabsf(__uint_as_float(unsigned(row[c]) << 16)));
  for (int o = 16; o > 0; o /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x < 32) {
    float a = threadIdx.x < blockDim.x / 32 ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o /= 2) a = fmaxf(a, __shfl_xor_sync(~0u, a, o));
    if (threadIdx.x == 0) part[0] = a;
  }
  __syncthreads();
  const float s = part[0] / 448.f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    q[r * cols + c] = to_e4m3(__uint_as_float(unsigned(row[c]) << 16) / s);
  if (threadIdx.x == 0) {
    scale[r] = s;
    atomicAdd(done, 1);
  }
}
