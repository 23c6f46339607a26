// tiled_copy: copy a 2-D f32 tensor through shared memory, one tile per
// block, ragged edges included. The same source runs under every copy
// implementation (sync, cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(float, 2), out: FJ_TENSOR(float, 2))
//   - `in` and `out` have the same box (tile) {bx, by}, in.oob = zeros.
//   - Launch: grid = (ceil(out.shape[0] / bx), ceil(out.shape[1] / by)),
//     any block size, dynamic shared memory = bx * by * 4 + 128 bytes.
// Result: out[y][x] = in[y][x] where (x, y) is inside `in`, 0 elsewhere, so
// an `out` larger than `in` receives `in` zero-padded.
#include <fleetjit/copy.cuh>

extern "C" __global__ void tiled_copy(FJ_TENSOR(float, 2) in,
                                      FJ_TENSOR(float, 2) out) {
  // 1. One tile of SMEM, 128-byte aligned (TMA wants it), and a barrier.
  extern __shared__ unsigned char smem_raw[];
  float* tile =
      (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier loaded;

  // 2. One thread initialises the barrier for every thread of the block;
  //    the block synchronises before anyone uses it.
  if (threadIdx.x == 0) loaded.init(fj::block_threads());
  __syncthreads();

  // 3. Load this block's tile. Every thread calls the load (it is
  //    block-collective); elements past in's edges read as zeros.
  const fj::coords at = fj::at(blockIdx.x * in.box(0), blockIdx.y * in.box(1));
  fj::load_tile(tile, in, at, loaded);

  // 4. Every thread arrives, then waits for phase 0: the tile has landed.
  loaded.arrive();
  loaded.wait(0);

  // 5. Store the tile; the part outside `out` is clipped. Stores complete
  //    in groups: wait for them before the block exits.
  fj::store_tile(out, at, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
