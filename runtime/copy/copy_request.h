// What fj_copy and fj_prefetch are asked to do, and the checks that need
// no GPU.
//
// A copy moves a window of a source tensor into a destination tensor:
//
//   dst[i] = src[start + i]            where that lies inside src,
//            fill (0 or NaN)           elsewhere (FJ_OOB_ZEROS / FJ_OOB_NAN),
//
// for every index i of dst (the window's extents are dst's shape). With a
// gather index, the outermost coordinate of src is index[i0] + start[0]
// instead (rows of a paged KV cache); a row whose index falls outside src
// reads as the fill (zeros under FJ_OOB_PROMISE_IN_BOUNDS), so a bad index
// never faults. With a scatter index the window's outermost extent is the
// index's length and window row i0 goes to dst row scatter[i0] (a paged
// KV-cache append); a row whose index falls outside dst is not written, so
// a bad index never faults either: the device gather and scatter
// (<fleetjit/copy.cuh>, contract 7) follow the same rule.
//
// ValidateCopy runs every check that needs only the caller's structs:
// ranks, dtypes (known, equal), element alignment, strides, windows under
// FJ_OOB_PROMISE_IN_BOUNDS, NaN fill on integer dtypes, the gather index,
// and overlap of the byte spans the tensors cover. It is pure (no driver
// call), so the C ABI's bad-input statuses are testable on any machine.
// Where the memory lives (this GPU, a peer, pinned host) is decided later,
// by runtime/copy/placement.h.
#ifndef FLEETJIT_RUNTIME_COPY_COPY_REQUEST_H_
#define FLEETJIT_RUNTIME_COPY_COPY_REQUEST_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "jit/copy_plan.h"
#include "runtime/launch/dl_tensor.h"
#include "runtime/launch/tensor_encoder.h"

namespace fleetjit::copy {

// A copy as the C++ API takes it (capi/convert_copy.cc reads fj_copy_desc
// into it). The tensors' shape and strides are borrowed for the call; an
// unset tensor is a NULL one (an error for src and dst).
struct CopySpec {
  std::optional<DlTensor> src;
  // Window start in src, outermost-first like shape (DLPack order); any
  // value, negative or past the end, as long as the fill mode allows it.
  std::array<int64_t, FJ_TP_MAX_RANK> start{};
  // An fj::oob_mode value, range-checked (capi/convert_copy.cc reads the C
  // field as the int it is in memory, so any value a caller stored reaches
  // ValidateCopy).
  int32_t oob = fj::oob_promise_in_bounds;
  std::optional<DlTensor> dst;
  // Optional gather: a 1-D int32/int64 tensor with an entry per window row
  // (dst->shape[0], or the scatter index's length).
  std::optional<DlTensor> index;
  // Optional scatter: a 1-D int32/int64 tensor, an entry per window row:
  // the dst row it goes to (outermost coordinate).
  std::optional<DlTensor> scatter;
  // Forces the copy implementation of the kernel path (tests, benchmarks);
  // unset = the runtime's choice for the device (and its overrides).
  std::optional<jit::CopyImpl> impl;
  // Takes the copy kernel even where the driver's copy would do (tests and
  // benchmarks compare the two).
  bool force_kernel = false;
};

// A byte range [lo, hi).
struct Span {
  uint64_t lo = 0;
  uint64_t hi = 0;
  uint64_t size() const { return hi - lo; }
  bool Overlaps(const Span& o) const {
    return size() > 0 && o.size() > 0 && lo < o.hi && o.lo < hi;
  }
};

// A gather index after its checks.
struct GatherIndex {
  uint64_t address = 0;  // data + byte_offset
  int elem_bytes = 0;    // 4 (int32) or 8 (int64)
  int64_t length = 0;
  int64_t stride = 0;  // elements
  int32_t device_type = 0;
  int32_t device_id = 0;
  Span span;
};

// A copy after ValidateCopy: tensors in the parameter order (dimension 0
// innermost), the window start in that order too.
struct ValidatedCopy {
  TensorDesc src;
  TensorDesc dst;
  int64_t start[FJ_TP_MAX_RANK] = {};  // dimension 0 innermost
  fj::oob_mode oob = fj::oob_promise_in_bounds;
  std::optional<GatherIndex> gather;
  std::optional<GatherIndex> scatter;
  // The window's extent per dimension (dimension 0 innermost): dst's shape,
  // save the outermost under a scatter (the scatter index's length).
  int64_t window[FJ_TP_MAX_RANK] = {};
  int32_t src_device_type = 0;  // DLPack device types as the caller said
  int32_t dst_device_type = 0;
  int32_t src_device_id = 0;
  int32_t dst_device_id = 0;
  Span src_span;  // bytes src covers (all of src, not only the window)
  Span dst_span;
  int64_t elements = 0;  // of the window
  std::optional<jit::CopyImpl> impl;

  uint64_t bytes() const { return uint64_t(elements) * dst.elem_bytes; }
  // The window lies inside src (always true under promise_in_bounds).
  bool WindowInBounds() const;
};

// Every check that needs no driver. INVALID_ARGUMENT naming the field.
absl::StatusOr<ValidatedCopy> ValidateCopy(const CopySpec& spec);

// The bytes `t` covers: from its lowest to its highest element, inclusive
// (negative strides included). Empty for a tensor with no elements.
Span TensorSpan(const TensorDesc& t);

// True when `t`'s elements are one dense row-major run (dimensions of
// extent 1 ignored), i.e. the bytes of TensorSpan in order.
bool IsDense(const TensorDesc& t);

// The window of src that dst receives, as a view of src (src's strides,
// the window's shape, the address of the window's first element). Only
// meaningful when v.WindowInBounds() and there is no gather.
TensorDesc WindowView(const ValidatedCopy& v);

// dst with the window's shape (dst itself without a scatter): what the
// copy kernel tiles.
TensorDesc WindowDesc(const ValidatedCopy& v);

// ------------------------------------------------------------------ tiles
// How the copy kernel tiles dst: the box (dimension 0 innermost) and the
// tile counts per dimension.
struct TileShape {
  int32_t box[FJ_TP_MAX_RANK] = {1, 1, 1, 1, 1};
  int64_t tiles[FJ_TP_MAX_RANK] = {1, 1, 1, 1, 1};
  int64_t total = 0;
  uint32_t tile_bytes = 0;
};

// The longest tile row, in elements (ChooseTiles).
inline constexpr int64_t kMaxTileRowElems = 65536;

// Chooses the tile for copying into `dst` with tiles of at most
// `max_tile_bytes`: an inner extent of up to `max_row_bytes` (a power of two
// of at least 16 bytes, as TMA wants, no longer than a tile, at most
// kMaxTileRowElems elements; under tma a row longer than 256, TMA's box
// limit, is copied as hardware boxes of 256), then outer dimensions
// innermost-first up to the budget (256 each). With a gather or scatter the
// outermost dimension's box is 1 (each row has its own source or
// destination). `dst` is the window (dst's shape, or WindowDesc).
TileShape ChooseTiles(const TensorDesc& dst, bool gather,
                      uint32_t max_row_bytes, uint32_t max_tile_bytes);

// ---------------------------------------------------------------- prefetch
enum class PrefetchMode {
  kAuto = 0,         // local memory: kLocalL2; a peer's: kWarmOwnerL2
  kLocalL2 = 1,      // prefetch into the reader's L2 (local memory only)
  kWarmOwnerL2 = 2,  // prefetch on the GPU that owns the memory
  kStageLocal = 3,   // copy into a caller-given buffer on the reader
};

struct PrefetchSpec {
  // A byte range, or (when `tensor` is set) the tile of `tensor` at
  // `start` with `extent` elements per dimension (outermost-first; 0 =
  // to the end), clipped to the tensor.
  uint64_t address = 0;
  uint64_t bytes = 0;
  std::optional<DlTensor> tensor;
  std::array<int64_t, FJ_TP_MAX_RANK> start{};
  std::array<int64_t, FJ_TP_MAX_RANK> extent{};
  int32_t mode = 0;            // PrefetchMode, range-checked
  int32_t reader_device = -1;  // -1: the stream's device (or the owner)
  uint64_t stage_address = 0;  // kStageLocal: where the copy goes
  uint64_t stage_bytes = 0;    // its capacity
};

// Rows of a prefetch: `rows` runs of `row_bytes` bytes, the run r starting
// at base + sum_d (r's coordinate d) * row_stride[d] (dimension 0 of the
// row coordinates innermost). A plain range is one row.
struct PrefetchRows {
  uint64_t base = 0;
  uint64_t row_bytes = 0;
  int64_t count[4] = {1, 1, 1, 1};
  int64_t stride[4] = {0, 0, 0, 0};  // bytes
  int64_t rows() const { return count[0] * count[1] * count[2] * count[3]; }
  Span span;  // every byte the rows cover
};

struct ValidatedPrefetch {
  PrefetchMode mode = PrefetchMode::kAuto;
  PrefetchRows rows;
  // The tile as a tensor (kStageLocal of a tile copies it densely).
  std::optional<TensorDesc> tile;
  int32_t reader_device = -1;
  uint64_t stage_address = 0;
  uint64_t stage_bytes = 0;
  uint64_t bytes() const { return rows.row_bytes * uint64_t(rows.rows()); }
};

// Every check of a prefetch that needs no driver.
absl::StatusOr<ValidatedPrefetch> ValidatePrefetch(const PrefetchSpec& spec);

const char* PrefetchModeName(PrefetchMode mode);

}  // namespace fleetjit::copy

#endif  // FLEETJIT_RUNTIME_COPY_COPY_REQUEST_H_
