// Probe: does a copy that skips shared memory (16-byte loads to registers,
// several in flight per thread, straight to dst) reach 0.95x of
// cuMemcpyDtoDAsync for fj_copy_bench's window, where the layer's tile
// kernel stops at tma 0.93 / cp_async 0.92 / sync 0.90 (reads 128 B past a
// 256-byte boundary) and sync at 0.91 even on a boundary
// (docs/measurements.md, "The window's geometry")?
//
// The window is fj_copy_bench's: f32, src rows of 64 KiB + 256 B, dst rows
// of 64 KiB, start (-1, COL): dst row 0 is the zero fill, dst row r reads
// src row r - 1 from column COL. Each row of the table is one kernel shape
// (block, loads in flight per thread, CTAs per SM) against the anchor of
// the same bytes, in the same run; the first shape is checked against a
// host reference. Standalone (the driver API and nvcc), on the GPU host:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/direct_window_probe.cu \
//     -lcuda -o direct_window && ./direct_window
// If a shape reaches 0.95x at both column starts, fj_copy's window can
// take it as a tuning candidate next to the tile kernel's shapes (it needs
// no copy feature, so it serves every implementation).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "probe_util.h"

// Chunk c of dst (16 bytes, row-major over rows x row_chunks) reads src at
// row (c / row_chunks) + row0, chunk (c % row_chunks) + col_chunk0; a row
// outside src is filled with zeros. U chunks per thread per round, all
// loaded before any is stored. The (row, chunk) cursor advances by the
// grid's stride with a carry: no division in the loop.
template <int U>
__global__ void __launch_bounds__(1024)
    direct_window(const uint4* __restrict__ src, uint4* __restrict__ dst,
                  long long rows, long long row_chunks, long long src_rows,
                  long long src_row_chunks, long long row0,
                  long long col_chunk0) {
  const long long step = (long long)gridDim.x * blockDim.x;
  const long long step_r = step / row_chunks, step_k = step % row_chunks;
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long r = first / row_chunks, k = first % row_chunks;
  while (r < rows) {
    uint4 v[U];
    long long at[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      at[j] = r < rows ? r * row_chunks + k : -1;
      v[j] = make_uint4(0, 0, 0, 0);
      const long long sr = r + row0;
      if (r < rows && sr >= 0 && sr < src_rows) {
        v[j] = __ldcs(src + sr * src_row_chunks + k + col_chunk0);
      }
      k += step_k;
      r += step_r;
      if (k >= row_chunks) {
        k -= row_chunks;
        ++r;
      }
    }
#pragma unroll
    for (int j = 0; j < U; ++j) {
      if (at[j] >= 0) __stcs(dst + at[j], v[j]);
    }
  }
}

static CUstream st;  // the probe's stream

struct Shape {
  int block, unroll, ctas_per_sm;
};

template <int U>
void Launch(const Shape& s, int sms, CUdeviceptr src, CUdeviceptr dst,
            long long rows, long long row_chunks, long long src_rows,
            long long src_row_chunks, long long row0, long long col_chunk0) {
  direct_window<U><<<sms * s.ctas_per_sm, s.block, 0, (cudaStream_t)st>>>(
      (const uint4*)src, (uint4*)dst, rows, row_chunks, src_rows,
      src_row_chunks, row0, col_chunk0);
}

int main() {
  Probe probe;
  st = probe.stream;
  int sms = 0;
  CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                          probe.device));

  // fj_copy_bench's window: 32768 rows of 16384 f32 out of rows of 16448.
  const long long rows = 32768, cols = 16384, src_cols = 16448;
  const long long bytes = rows * cols * 4;
  CUdeviceptr src, dst;
  CK(cuMemAlloc(&src, rows * src_cols * 4));
  CK(cuMemAlloc(&dst, bytes));
  std::vector<unsigned> h_src(rows * src_cols);
  unsigned x = 12345u;
  for (auto& v : h_src) v = (x = x * 1664525u + 1013904223u) | 1u;
  CK(cuMemcpyHtoD(src, h_src.data(), h_src.size() * 4));

  const Shape shapes[] = {{256, 4, 4}, {256, 8, 2}, {256, 8, 4},
                          {512, 4, 2}, {512, 8, 2}, {1024, 4, 1},
                          {256, 2, 8}, {128, 8, 8}, {1024, 8, 1}};
  auto run = [&](const Shape& s, long long col) {
    const long long row_chunks = cols / 4, src_row_chunks = src_cols / 4;
    const long long col_chunk0 = col / 4;
    switch (s.unroll) {
      case 2:
        Launch<2>(s, sms, src, dst, rows, row_chunks, rows, src_row_chunks, -1,
                  col_chunk0);
        break;
      case 4:
        Launch<4>(s, sms, src, dst, rows, row_chunks, rows, src_row_chunks, -1,
                  col_chunk0);
        break;
      default:
        Launch<8>(s, sms, src, dst, rows, row_chunks, rows, src_row_chunks, -1,
                  col_chunk0);
        break;
    }
    if (cudaPeekAtLastError() != cudaSuccess) {
      printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
      exit(1);
    }
  };

  // Check the first shape at each column start against the host.
  for (long long col : {32LL, 64LL}) {
    CK(cuMemsetD32(dst, 0xdeadbeefu, rows * cols));
    run(shapes[0], col);
    CK(cuStreamSynchronize(st));
    std::vector<unsigned> h(rows * cols);
    CK(cuMemcpyDtoH(h.data(), dst, bytes));
    long long bad = 0;
    for (long long r = 0; r < rows; ++r) {
      for (long long k = 0; k < cols; ++k) {
        const unsigned want = r == 0 ? 0u : h_src[(r - 1) * src_cols + col + k];
        bad += h[r * cols + k] != want;
      }
    }
    printf("check, start (-1, %lld): %lld of %lld elements differ\n", col, bad,
           rows * cols);
    if (bad != 0) return 1;
  }

  printf("%-22s %10s %10s %8s\n", "shape", "start", "ms", "x memcpy");
  for (int round = 0; round < 2; ++round) {
    for (const Shape& s : shapes) {
      for (long long col : {32LL, 64LL}) {
        const double anchor =
            probe.Time([&] { CK(cuMemcpyDtoDAsync(dst, src, bytes, st)); });
        const double t = probe.Time([&] { run(s, col); });
        printf(
            "block %4d x%d, %d/SM   (-1, %3lld) %10.4f %8.3f  (anchor %.4f)\n",
            s.block, s.unroll, s.ctas_per_sm, col, t, anchor / t, anchor);
      }
    }
  }
  return 0;
}
