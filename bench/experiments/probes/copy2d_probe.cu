// Probe: can the driver copy fj_copy's 2-D window as fast as a dense copy?
// Times cuMemcpy2DAsync (the in-bounds rectangle) plus cuMemsetD32Async /
// cuMemsetD2D32Async (the fill bands) against cuMemcpyDtoDAsync of the
// same bytes, for the window of fj_copy_bench (rows of 64 KiB) and narrower
// rows. Standalone (the driver API only), built and run on the GPU host:
//   nvcc -O2 -std=c++17 bench/experiments/probes/copy2d_probe.cu \
//     -lcuda -o copy2d && ./copy2d
// Its result is in docs/measurements.md: the driver's pitched copy ran at
// 0.40x, so fj_copy keeps its kernel for windows.
#include <cstdio>

#include "probe_util.h"

// A pitched device-to-device copy on `st`.
static void Copy2D(CUdeviceptr from, size_t from_pitch, CUdeviceptr to,
                   size_t to_pitch, size_t width_bytes, size_t height,
                   CUstream st) {
  CUDA_MEMCPY2D m = {};
  m.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  m.srcDevice = from;
  m.srcPitch = from_pitch;
  m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  m.dstDevice = to;
  m.dstPitch = to_pitch;
  m.WidthInBytes = width_bytes;
  m.Height = height;
  CK(cuMemcpy2DAsync(&m, st));
}

int main() {
  Probe probe;
  const CUstream st = probe.stream;
  const size_t R = 32768, SC = 16448;
  CUdeviceptr src, dst;
  CK(cuMemAlloc(&src, R * SC * 4));
  CK(cuMemAlloc(&dst, R * SC * 4));
  CK(cuMemsetD32(src, 0x3f800000u, R * SC));
  struct Shape {
    size_t rows, cols, scols;
  };
  Shape shapes[] = {{32768, 16384, 16448},    {32768 * 4, 4096, 4160},
                    {32768 * 16, 1024, 1088}, {32768 * 64, 256, 320},
                    {32768 * 128, 128, 192},  {32768 * 256, 64, 80}};
  for (auto s : shapes) {
    size_t bytes = s.rows * s.cols * 4;
    double anchor =
        probe.Time([&] { CK(cuMemcpyDtoDAsync(dst, src, bytes, st)); });
    // window at (-1, 32): dst row 0 filled, rows 1.. from src rows 0..rows-2,
    // cols 32..
    auto win = [&] {
      CK(cuMemsetD32Async(dst, 0, s.cols, st));
      Copy2D(src + 32 * 4, s.scols * 4, dst + s.cols * 4, s.cols * 4,
             s.cols * 4, s.rows - 1, st);
    };
    double w = probe.Time(win);
    // column band fill too: cols shifted so 16 columns out of bounds on the
    // right
    auto win2 = [&] {
      size_t in = s.cols - 16;
      Copy2D(src + (s.scols - in) * 4, s.scols * 4, dst, s.cols * 4, in * 4,
             s.rows, st);
      CK(cuMemsetD2D32Async(dst + in * 4, s.cols * 4, 0, 16, s.rows, st));
    };
    double w2 = probe.Time(win2);
    // also memset band alone
    double mb = probe.Time([&] {
      CK(cuMemsetD2D32Async(dst + (s.cols - 16) * 4, s.cols * 4, 0, 16, s.rows,
                            st));
    });
    printf(
        "rows %8zu x %6zu B: memcpy %.3f ms | 2D+row fill %.3f ms %.3fx | "
        "2D+col band %.3f ms %.3fx (band alone %.3f ms)\n",
        s.rows, s.cols * 4, anchor, w, anchor / w, w2, anchor / w2, mb);
  }
  // verify one: window 0
  {
    Shape s = shapes[0];
    CK(cuMemsetD32(dst, 0xdeadbeef, R * SC));
    CK(cuMemsetD32Async(dst, 0, s.cols, st));
    Copy2D(src + 32 * 4, s.scols * 4, dst + s.cols * 4, s.cols * 4, s.cols * 4,
           s.rows - 1, st);
    CK(cuStreamSynchronize(st));
    std::vector<float> h(s.cols * 3);
    CK(cuMemcpyDtoH(h.data(), dst, h.size() * 4));
    printf("verify: row0 %g %g row1 %g %g\n", h[0], h[s.cols - 1], h[s.cols],
           h[2 * s.cols - 1]);
  }
  return 0;
}
