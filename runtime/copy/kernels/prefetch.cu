// fj_prefetch's kernel: warms L2 with the rows of a range or a tensor tile
// through fj::prefetch_l2 (prefetch.global.L2 per line under sync and
// cp_async; cp.async.bulk.prefetch.L2 over the aligned interior under tma).
//
// It runs on the GPU that owns the memory: the reader's for its own
// memory, the owner's for FJ_PREFETCH_WARM_OWNER_L2 (the owner's L2 serves
// NVLink reads; a reader-side prefetch of a peer address warms nothing).
//
// Rows: `rows` runs of `row_bytes` bytes; run r starts at base + the sum
// over its coordinates (count[0] fastest) times stride[] bytes. Each block
// takes pieces of at most `piece` bytes in turn.
#include <fleetjit/copy.cuh>

// Mirrors fleetjit::copy::PrefetchKernelArgs (runtime/copy/copy_kernels.h).
struct fj_prefetch_args {
  unsigned long long base;
  unsigned long long row_bytes;
  long long count[4];
  long long stride[4];  // bytes
  unsigned long long piece;
  long long pieces_per_row;
  long long total;  // rows * pieces_per_row
};

extern "C" __global__ void fj_prefetch_rows(const fj_prefetch_args a) {
  for (long long w = blockIdx.x; w < a.total; w += gridDim.x) {
    long long row = w / a.pieces_per_row;
    const unsigned long long at =
        (unsigned long long)(w % a.pieces_per_row) * a.piece;
    unsigned long long addr = a.base + at;
    for (int k = 0; k < 4; ++k) {
      addr += (unsigned long long)((row % a.count[k]) * a.stride[k]);
      row /= a.count[k];
    }
    const unsigned long long left = a.row_bytes - at;
    fj::prefetch_l2((const void*)addr, left < a.piece ? left : a.piece);
  }
}
