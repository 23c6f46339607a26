// Host reference for the copy-layer conformance kernels
// (conformance/conformance_kernels.cu): given the inputs a kernel got, what
// its output buffer must hold. `fleetjit selftest` launches a kernel on
// fresh random data with poisoned outputs, runs the matching Ref* function
// on the same inputs, and compares with CountMismatches.
//
// Conventions:
//  1. Sizes and launch shapes are those in the table at the top of
//     conformance_kernels.cu; the *SmemBytes helpers give dynamic SMEM.
//  2. Tensors are described by the fj::tensor_param the kernel receives
//     (its device `data` pointer is ignored here) plus `HostTensor::data`,
//     the same elements in host memory at the same element strides.
//  3. Out-of-bounds NaN is written as the layer's canonical quiet NaN;
//     CountMismatches accepts any NaN for a NaN (TMA's fill may differ).
//  4. Behaviour outside the contract (oob_promise_in_bounds with a tile
//     that leaves the tensor, overlapping destinations) is not modelled:
//     the host must not generate such cases.
#ifndef FLEETJIT_CONFORMANCE_REFERENCE_H_
#define FLEETJIT_CONFORMANCE_REFERENCE_H_

#include <cstddef>
#include <cstdint>

#include "fleetjit/copy/tensor_param.h"

namespace fleetjit::selftest {

// Values of the FJ_CT_* macros in conformance_kernels.cu.
inline constexpr int kSpanCap = 8192;      // SMEM buffer of the span kernels
inline constexpr int kGroupSlots = 4;      // ring of fj_ct_groups
inline constexpr int kPipelineStages = 3;  // ring of fj_ct_pipeline_*
inline constexpr int kCaseInts = 5;        // ints per case, and per coords
enum CaseFlags : int { kInGroup = 1, kPrefetch = 2, kMulticast = 4 };
enum PredMode : int { kPredSkip = 0, kPredZero = 1 };  // fj::pred_mode

// The SMEM byte `i` of block `block` before any copy (fj_ct_stale).
uint8_t StaleByte(uint32_t block, uint32_t i);
// The word thread `thread` of `block` publishes in `phase` (fj_ct_word).
uint32_t BarrierWord(uint32_t block, uint32_t phase, uint32_t thread);

// Dynamic shared memory per block.
uint32_t BarrierSmemBytes(int threads);
uint32_t SpanSmemBytes();
uint32_t GroupsSmemBytes(int chunk_bytes);
uint32_t TileSmemBytes(const fj::tensor_param& p);
uint32_t PipelineSmemBytes(const fj::tensor_param& p);
size_t BoxElems(const fj::tensor_param& p);

// fj_ct_barrier: `out` gets blocks * (phases + 1) * threads words.
void RefBarrier(int blocks, int threads, int phases, uint32_t* out);

// One span case, laid out as the kernels read it (5 ints).
struct SpanCase {
  int32_t src_off;  // load: offset into src; store: offset into SMEM
  int32_t dst_off;  // load: offset into SMEM; store: into the block's region
  int32_t bytes;
  int32_t pred;  // 0 = false
  int32_t mode;  // PredMode (loads only)
};
static_assert(sizeof(SpanCase) == kCaseInts * sizeof(int32_t));

// fj_ct_span_load: `out` gets blocks * kSpanCap bytes. `cluster` is the
// cluster size when flags has kMulticast (blocks share cases by cluster),
// else 1. `cases` holds (blocks / cluster) * cases_per_block cases.
void RefSpanLoad(const uint8_t* src, const SpanCase* cases, int cases_per_block,
                 int blocks, int cluster, uint8_t* out);
// fj_ct_span_store: `out` (blocks * kSpanCap bytes) holds the poisoned
// buffer on entry and is updated in place; `src` has blocks * kSpanCap.
void RefSpanStore(const uint8_t* src, const SpanCase* cases,
                  int cases_per_block, int blocks, uint8_t* out);
// fj_ct_groups: every chunk is copied, so `out` equals `src`
// (blocks * chunks * chunk_bytes bytes).
void RefGroups(const uint8_t* src, int blocks, int chunks, int chunk_bytes,
               uint8_t* out);

// A tensor as the kernel sees it, with its elements in host memory.
struct HostTensor {
  fj::tensor_param param;  // rank, dtype, elem_bytes, shape, stride, box, oob
  void* data;              // element (0, ..., 0) in host memory
};

// One tile load applied to `tile` (box bytes, the SMEM image before the
// copy): the semantics every tile kernel is built from.
void RefLoadTileInto(const HostTensor& t, const int32_t* coords, bool pred,
                     int pred_mode, uint8_t* tile);
// fj_ct_tile_load_e*_r*: `out` gets blocks * box elements; `cluster` as
// for RefSpanLoad (case = block / cluster).
void RefTileLoad(const HostTensor& t, const int32_t* coords,
                 const uint8_t* preds, int pred_mode, int blocks, int cluster,
                 void* out);
// fj_ct_tile_store_e*_r*: `t.data` holds the poisoned tensor on entry and is
// updated in place; `src` has blocks * box elements.
void RefTileStore(const HostTensor& t, const int32_t* coords,
                  const uint8_t* preds, int blocks, const void* src);
// fj_ct_pipeline_e*_r*: `out` gets blocks * tiles * box elements.
void RefPipeline(const HostTensor& t, const int32_t* coords,
                 const uint8_t* preds, int pred_mode, int blocks, int tiles,
                 void* out);

// The index rule of gathers and scatters (<fleetjit/copy.cuh>, contract
// 7): the tile at `coords` lies inside the tensor along dimension `dim`.
bool IndexInside(const fj::tensor_param& p, const int32_t* coords, int dim);
// fj_ct_gather_e*_r* with a dimension (fj::gather_tiles): `out` gets
// `tiles` boxes, tile k the tile at coords[k] when IndexInside along `dim`,
// else the whole box the fill (NaN under oob_nan for float dtypes, zeros).
void RefGatherTiles(const HostTensor& t, const int32_t* coords, int tiles,
                    int dim, void* out);
// fj_ct_scatter_e*_r*: block b stores its `tiles` tiles (coords[b * tiles +
// k], data src + (b * tiles + k) * box) when preds[b], each clipped at the
// bounds (fj::store_tiles, dim < 0), or skipped whole when not IndexInside
// along `dim` (fj::scatter_tiles). `t.data` holds the poisoned tensor on
// entry and is updated in place.
void RefScatterTiles(const HostTensor& t, const int32_t* coords,
                     const uint8_t* preds, int blocks, int tiles, int dim,
                     const void* src);

// The layer's NaN for `dtype` (fj::dtype_code) as elem_bytes little-endian
// bytes in the low bits; 0 for integer dtypes.
uint64_t NanPattern(int dtype);
// Whether the element at `p` is a NaN of `dtype`.
bool IsNan(int dtype, const void* p);
// Equal bytes, or both NaN for a floating-point dtype.
bool SameElement(int dtype, int elem_bytes, const void* a, const void* b);
// Elements of `n` that differ; *first (if not null) gets the index of the
// first one, or -1.
size_t CountMismatches(int dtype, int elem_bytes, const void* expected,
                       const void* actual, size_t n, ptrdiff_t* first);

}  // namespace fleetjit::selftest

#endif  // FLEETJIT_CONFORMANCE_REFERENCE_H_
