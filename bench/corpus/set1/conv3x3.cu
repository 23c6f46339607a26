// conv3x3: depthwise 3x3 convolution (cross-correlation, as F.conv2d with
// groups = channels) with a zero halo, f32:
//   y[i][r][c] = sum_{a,b in 0..2} w[i % C][a][b] * x[i][r + a - 1][c + b - 1]
// over images i of [images][H][W] (images = batch * channels), x read as 0
// outside each image. One source for every copy implementation (sync,
// cp_async, tma).
//
// Arguments: (x: FJ_TENSOR(float, 2), w: const f32* [C][3][3],
//             y: f32* [images][H][W], H: int, C: int)
//   - x is the [images][H][W] batch passed as the 2-D view
//     [images * H][W] (DLPack order, outermost first) with box
//     (CV_TH + 2, CV_TW + 8) = (34, 136) by default, oob = zeros. A tile
//     for outputs (r0.., c0..) starts at (r0 - 1, c0 - 4): one halo row
//     above and below, and 4 columns to the left so that its first column
//     stays on a 16-byte boundary (the guide's rule for a tensor-map copy;
//     the halo column is the 4th). Columns outside the image read the
//     tensor's zero fill; rows of a neighbouring image (the view has them)
//     are zeroed in the math.
//   - As 2-D a tile crosses the tensor's edge only in rank 2, which the
//     guide says keeps the software paths off the per-element walker.
//   - Launch: any grid (blocks walk the tiles grid-stride), block =
//     CV_TW / 4 * CV_TH / 4 = 256 threads, dynamic shared memory =
//     128 + CV_STAGES * round128((CV_TH + 2) * (CV_TW + 8) * 4) bytes
//     (55,808 by default).
//   - -DCV_STAGES=N sets the pipeline depth (default 3).
// How it uses <fleetjit/copy.cuh>: as examples/transpose.cu, each input
// tile is one fj::load_tile on its stage's barrier, block-collective, on a
// ring of CV_STAGES stages; a stage is refilled with the tile CV_STAGES
// ahead once its outputs are written (the load's block barrier keeps it
// from overwriting what a thread still reads). Each thread computes 4 x 4
// outputs from 6 SMEM rows (16-byte reads plus the two neighbours) and
// writes them as 16-byte stores where W allows (W % 4 == 0), else as
// element stores.
#include <fleetjit/copy.cuh>

#ifndef CV_STAGES
#define CV_STAGES 3
#endif
#ifndef CV_TH
#define CV_TH 32
#endif
#ifndef CV_TW
#define CV_TW 128
#endif

extern "C" __global__ void __launch_bounds__(CV_TW / 4 * CV_TH / 4)
    conv3x3(FJ_TENSOR(float, 2) x, const float* __restrict__ w,
            float* __restrict__ y, int H, int C) {
  constexpr int S = CV_STAGES, TH = CV_TH, TW = CV_TW;
  constexpr int BW = TW + 8, BH = TH + 2;  // the box: row pitch in SMEM
  constexpr unsigned stage_floats = ((BH * BW * 4 + 127) & ~127) / 4;
  constexpr int CG = TW / 4;  // column groups of 4 outputs
  if (x.box(0) != BW || x.box(1) != BH || blockDim.x != CG * (TH / 4)) {
    __trap();
  }
  extern __shared__ unsigned char smem_raw[];
  float* ring =
      (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier full[S];
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  const int W = (int)x.shape(0);
  const int images = (int)(x.shape(1) / H);
  const int tx_n = (W + TW - 1) / TW, ty_n = (H + TH - 1) / TH;
  const int per_image = tx_n * ty_n;
  const int tiles = images * per_image;
  // Tile t: image t / per_image, then row band, then column band.
  auto origin = [&](int t, int& img, int& r0, int& c0) {
    img = t / per_image;
    const int rem = t % per_image;
    r0 = (rem / tx_n) * TH;
    c0 = (rem % tx_n) * TW;
  };
  auto fill = [&](int k) {
    const int t = blockIdx.x + k * gridDim.x;
    int img = 0, r0 = 0, c0 = 0;
    if (t < tiles) origin(t, img, r0, c0);
    fj::load_tile(ring + (k % S) * stage_floats, x,
                  fj::at(c0 - 4, img * H + r0 - 1), full[k % S], t < tiles);
    full[k % S].arrive();
  };
  for (int k = 0; k < S; ++k) fill(k);

  const int cg = threadIdx.x % CG, rg = threadIdx.x / CG;
  const bool vec_out = W % 4 == 0;
  for (int k = 0;; ++k) {
    const int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    int img, r0, c0;
    origin(t, img, r0, c0);
    const float* wk = w + (img % C) * 9;
    float wt[9];
#pragma unroll
    for (int i = 0; i < 9; ++i) wt[i] = __ldg(wk + i);
    const int s = k % S;
    full[s].wait((k / S) & 1);
    const float* tile = ring + s * stage_floats;
    // SMEM row j is image row r0 - 1 + j; this thread's outputs are rows
    // 4 rg .. 4 rg + 3, so it reads SMEM rows 4 rg .. 4 rg + 5.
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;
#pragma unroll
    for (int j = 0; j < 6; ++j) {
      const int sr = 4 * rg + j;
      const int ir = r0 - 1 + sr;                      // image row
      const float* row = tile + sr * BW + 4 + 4 * cg;  // output column c0+4cg
      float v[6];
      const float4 m = *(const float4*)row;
      v[0] = row[-1];
      v[1] = m.x;
      v[2] = m.y;
      v[3] = m.z;
      v[4] = m.w;
      v[5] = row[4];
      if (ir < 0 || ir >= H) {
#pragma unroll
        for (int e = 0; e < 6; ++e) v[e] = 0.f;
      }
      // Input row j feeds output rows j - 2 .. j (filter rows 2 .. 0).
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        const int o = j - a;
        if (o < 0 || o > 3) continue;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[o][c] = fmaf(wt[3 * a + 0], v[c], acc[o][c]);
          acc[o][c] = fmaf(wt[3 * a + 1], v[c + 1], acc[o][c]);
          acc[o][c] = fmaf(wt[3 * a + 2], v[c + 2], acc[o][c]);
        }
      }
    }
    const int oc = c0 + 4 * cg;
    float* yi = y + (long long)img * H * W;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int orow = r0 + 4 * rg + i;
      if (orow >= H) break;
      float* yr = yi + (long long)orow * W;
      if (vec_out && oc + 3 < W) {
        *(float4*)(yr + oc) =
            make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (oc + c < W) yr[oc + c] = acc[i][c];
      }
    }
    // Refill the stage (the load's block barrier: the tile is no longer read).
    fill(k + S);
  }
}
