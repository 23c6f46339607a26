// conv3x3_plain: depthwise 3x3 convolution (cross-correlation, as
// F.conv2d with groups = channels) with a zero halo, f32, without the copy
// layer:
//   y[i][r][c] = sum_{a,b in 0..2} w[i % C][a][b] * x[i][r + a - 1][c + b - 1]
// over images i of [images][H][W] (images = batch * channels).
//
// Arguments: (x: const f32* [images][H][W], w: const f32* [C][3][3],
//             y: f32* [images][H][W], H: int, W: int, C: int)
//   - Any H, W.
//   - Launch: grid = (ceil(W / 64), ceil(H / 32), images), block = (32, 8),
//     no dynamic shared memory.
// The textbook tiled stencil: a block stages its 34 x 66 input tile (halo
// included, zeros outside the image) in SMEM with coalesced loads, then
// each thread computes columns tx and tx + 32 of 4 consecutive rows and
// writes them with coalesced stores.
#define CP_TW 64
#define CP_TH 32

extern "C" __global__ void __launch_bounds__(256)
    conv3x3_plain(const float* __restrict__ x, const float* __restrict__ w,
                  float* __restrict__ y, int H, int W, int C) {
  __shared__ float tile[CP_TH + 2][CP_TW + 2];
  const int c0 = blockIdx.x * CP_TW, r0 = blockIdx.y * CP_TH;
  const int img = blockIdx.z;
  const float* xi = x + (long long)img * H * W;
  float* yi = y + (long long)img * H * W;
  const int tid = threadIdx.y * 32 + threadIdx.x;
  for (int i = tid; i < (CP_TH + 2) * (CP_TW + 2); i += 256) {
    const int r = i / (CP_TW + 2), c = i % (CP_TW + 2);
    const int gr = r0 - 1 + r, gc = c0 - 1 + c;
    tile[r][c] = (gr >= 0 && gr < H && gc >= 0 && gc < W)
                     ? __ldg(xi + (long long)gr * W + gc)
                     : 0.f;
  }
  float wt[9];
  const float* wk = w + (img % C) * 9;
#pragma unroll
  for (int i = 0; i < 9; ++i) wt[i] = __ldg(wk + i);
  __syncthreads();
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int tc = threadIdx.x + 32 * half;  // tile column of the output
    float v[6][3];
#pragma unroll
    for (int j = 0; j < 6; ++j)
#pragma unroll
      for (int b = 0; b < 3; ++b) v[j][b] = tile[4 * threadIdx.y + j][tc + b];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int orow = r0 + 4 * threadIdx.y + i, ocol = c0 + tc;
      float acc = 0.f;
#pragma unroll
      for (int a = 0; a < 3; ++a)
#pragma unroll
        for (int b = 0; b < 3; ++b) acc = fmaf(wt[3 * a + b], v[i + a][b], acc);
      if (orow < H && ocol < W) yi[(long long)orow * W + ocol] = acc;
    }
  }
}
