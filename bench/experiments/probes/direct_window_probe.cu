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
// (block, loads in flight per thread, cache policy, CTAs per SM) against
// the anchor of the same bytes, in the same run; each kernel is first
// checked against a host reference. Standalone (the driver API and nvcc), on
// the GPU host:
//   nvcc -O3 -std=c++17 -arch=sm_90 \
//     bench/experiments/probes/direct_window_probe.cu \
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
// grid's stride with a carry: no division in the loop. kStream: streaming
// loads and stores (ld/st.global.cs), else the default cache policy.
template <int U, bool kStream>
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
        const uint4* from = src + sr * src_row_chunks + k + col_chunk0;
        v[j] = kStream ? __ldcs(from) : *from;
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
      if (at[j] < 0) continue;
      if (kStream) {
        __stcs(dst + at[j], v[j]);
      } else {
        dst[at[j]] = v[j];
      }
    }
  }
}

struct Shape {
  int block, unroll, ctas_per_sm;
  bool stream;  // streaming loads and stores
};

// The window of fj_copy_bench (rows x cols of src_cols, start (-1, col)),
// copied on `stream`.
struct Window {
  CUdeviceptr src, dst;
  long long rows, cols, src_cols;
  CUstream stream;
};

template <int U, bool kStream>
void Launch(const Shape& s, int sms, const Window& w, long long col) {
  direct_window<U, kStream>
      <<<sms * s.ctas_per_sm, s.block, 0, (cudaStream_t)w.stream>>>(
          (const uint4*)w.src, (uint4*)w.dst, w.rows, w.cols / 4, w.rows,
          w.src_cols / 4, -1, col / 4);
}

template <bool kStream>
void LaunchUnrolled(const Shape& s, int sms, const Window& w, long long col) {
  switch (s.unroll) {
    case 2:
      return Launch<2, kStream>(s, sms, w, col);
    case 4:
      return Launch<4, kStream>(s, sms, w, col);
    default:
      return Launch<8, kStream>(s, sms, w, col);
  }
}

void Run(const Shape& s, int sms, const Window& w, long long col) {
  if (s.stream) {
    LaunchUnrolled<true>(s, sms, w, col);
  } else {
    LaunchUnrolled<false>(s, sms, w, col);
  }
  if (cudaPeekAtLastError() != cudaSuccess) {
    printf("launch: %s\n", cudaGetErrorString(cudaGetLastError()));
    exit(1);
  }
}

int main() {
  Probe probe;
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

  const Window w{src, dst, rows, cols, src_cols, probe.stream};
  const Shape shapes[] = {
      {256, 4, 4, true},  {256, 8, 2, true},  {256, 8, 4, true},
      {512, 4, 2, true},  {512, 8, 2, true},  {1024, 4, 1, true},
      {256, 2, 8, true},  {128, 8, 8, true},  {1024, 8, 1, true},
      {256, 4, 4, false}, {256, 8, 2, false}, {512, 8, 2, false}};

  // Each kernel (loads per thread, cache policy) against the host, at each
  // column start, once.
  std::vector<unsigned> h(rows * cols);
  unsigned checked = 0;  // bit (unroll, stream) per kernel checked
  for (const Shape& s : shapes) {
    const unsigned bit = 1u << (s.unroll * 2 + s.stream);
    if (checked & bit) continue;
    checked |= bit;
    for (long long col : {32LL, 64LL}) {
      CK(cuMemsetD32(dst, 0xdeadbeefu, rows * cols));
      Run(s, sms, w, col);
      CK(cuStreamSynchronize(probe.stream));
      CK(cuMemcpyDtoH(h.data(), dst, bytes));
      long long bad = 0;
      for (long long r = 0; r < rows; ++r) {
        for (long long k = 0; k < cols; ++k) {
          const unsigned want =
              r == 0 ? 0u : h_src[(r - 1) * src_cols + col + k];
          bad += h[r * cols + k] != want;
        }
      }
      printf("check x%d %s, start (-1, %lld): %lld of %lld elements differ\n",
             s.unroll, s.stream ? "streaming" : "default", col, bad,
             rows * cols);
      if (bad != 0) return 1;
    }
  }

  printf("%-34s %10s %10s %8s\n", "shape", "start", "ms", "x memcpy");
  for (int round = 0; round < 2; ++round) {
    for (const Shape& s : shapes) {
      for (long long col : {32LL, 64LL}) {
        const double anchor = probe.Time(
            [&] { CK(cuMemcpyDtoDAsync(dst, src, bytes, probe.stream)); });
        const double t = probe.Time([&] { Run(s, sms, w, col); });
        printf(
            "block %4d x%d %-9s %d/SM (-1, %3lld) %10.4f %8.3f  (anchor "
            "%.4f)\n",
            s.block, s.unroll, s.stream ? "streaming" : "default",
            s.ctas_per_sm, col, t, anchor / t, anchor);
      }
    }
  }
  return 0;
}
