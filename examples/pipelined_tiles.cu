// pipelined_tiles: row sums of a 2-D f32 tensor with a 3-stage pipeline of
// predicated tile loads on a ring of barriers, so loading tile k + 3
// overlaps summing tile k. The same source runs under every copy
// implementation (sync, cp_async, tma).
//
// Arguments: (in: FJ_TENSOR(float, 2), row_sums: float*)
//   - in's box is {bx, by} with by <= the block size; in.oob = zeros, so
//     the ragged last tile of a row adds nothing.
//   - Launch: grid = ceil(in.shape[1] / by) blocks (one band of by rows
//     each), block size >= by, dynamic shared memory =
//     3 * round_up(bx * by * 4, 128) + 128 bytes.
// Result: row_sums[y] = sum over x of in[y][x], summed left to right.
#include <fleetjit/copy.cuh>

#define STAGES 3

extern "C" __global__ void pipelined_tiles(FJ_TENSOR(float, 2) in,
                                           float* row_sums) {
  // 1. STAGES tile slots (128-byte aligned) and one barrier per slot.
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127);
  const int bx = in.box(0), by = in.box(1);
  const unsigned slot_bytes = (in.box_bytes() + 127) & ~127u;
  __shared__ fj::barrier full[STAGES];
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) full[s].init(fj::block_threads());
  }
  __syncthreads();

  const int y0 = blockIdx.x * by;
  const int tiles = (int)((in.shape(0) + bx - 1) / bx);

  // 2. Prologue: fill every slot. Tiles past the row's end are predicated
  //    off rather than skipped, so every slot's phases advance in step:
  //    a false predicate still needs the arrivals, and never hangs.
  for (int s = 0; s < STAGES; ++s) {
    float* slot = (float*)(base + s * slot_bytes);
    fj::load_tile(slot, in, fj::at(s * bx, y0), full[s], s < tiles);
    full[s].arrive();
  }

  // 3. Steady state: wait for tile k in slot k % STAGES (its use number
  //    k / STAGES gives the phase parity), add it up, then refill the slot
  //    with tile k + STAGES. The load starts with a block barrier, so no
  //    thread is still reading the slot when it is overwritten.
  float sum = 0.f;
  for (int k = 0; k < tiles; ++k) {
    const int s = k % STAGES;
    float* slot = (float*)(base + s * slot_bytes);
    full[s].wait((k / STAGES) & 1);
    if ((int)threadIdx.x < by) {
      for (int x = 0; x < bx; ++x) sum += slot[threadIdx.x * bx + x];
    }
    const int next = k + STAGES;
    fj::load_tile(slot, in, fj::at(next * bx, y0), full[s], next < tiles);
    full[s].arrive();
  }

  // 4. One thread per row writes its sum (rows past the end have none).
  const long long y = y0 + (long long)threadIdx.x;
  if ((int)threadIdx.x < by && y < in.shape(1)) row_sums[y] = sum;
}
