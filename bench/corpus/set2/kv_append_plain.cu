// kv_append_plain: paged KV-cache append (vLLM's reshape_and_cache, K
// side), without the copy layer:
//   cache[slot[t] / 16][slot[t] % 16][:] = k[t][:]
// k f16 [T][D] (D = kv_heads * head_dim), cache f16 [num_blocks][16][D],
// slot_mapping int32 [T]: a scatter of whole rows.
//
// Arguments: (k: const f16* [T][D], cache: f16* [num_blocks][16][D],
//             slot_mapping: const int* [T], tokens: int = T, dim: int = D)
//   - D % 8 == 0; k and cache 16-byte aligned; 0 <= slot[t] <
//     num_blocks * 16.
//   - Launch: block = 256 threads, grid = ceil(T * D / 8 / 256): one
//     16-byte vector per thread (a 16-byte load of k, its token's slot,
//     a 16-byte store into the cache row; a slot is block * 16 + offset,
//     so the row is cache + slot * D).
extern "C" __global__ void __launch_bounds__(256)
    kv_append_plain(const unsigned short* __restrict__ k,
                    unsigned short* __restrict__ cache,
                    const int* __restrict__ slot_mapping, int tokens, int dim) {
  const int vrow = dim / 8;
  const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= (long long)tokens * vrow) return;
  const long long t = v / vrow;
  const int c = (int)(v - t * vrow) * 8;
  const long long slot = __ldg(slot_mapping + t);
  const uint4 x = __ldg((const uint4*)(k + t * dim + c));
  *(uint4*)(cache + slot * dim + c) = x;
}
