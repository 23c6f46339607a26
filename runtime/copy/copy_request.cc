#include "runtime/copy/copy_request.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "base/dlpack_codes.h"
#include "base/status_macros.h"

namespace fleetjit::copy {
namespace {

using dlpack::kDLCPU;
using dlpack::kDLCUDAHost;
using dlpack::kDLInt;
// Window starts beyond this are refused before any arithmetic on them.
constexpr int64_t kMaxStart = int64_t{1} << 48;

absl::Status Invalid(absl::string_view what, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", message));
}

// DescribeTensor's checks (rank, dtype, shape, strides, alignment) for a
// tensor that is not a kernel argument. Plain host memory (kDLCPU) is
// described like pinned host memory; whether it is pinned is the driver's
// to say (placement.h).
absl::StatusOr<TensorDesc> Describe(const std::optional<DlTensor>& t,
                                    absl::string_view name,
                                    int32_t* device_type, int32_t* device_id) {
  if (!t.has_value()) return Invalid(name, "is NULL");
  *device_type = t->device_type;
  *device_id = t->device_id;
  DlTensor copy = *t;
  if (copy.device_type == kDLCPU) copy.device_type = kDLCUDAHost;
  // One box entry per dimension: entries past ndim must stay 0.
  uint32_t box[FJ_TP_MAX_RANK] = {};
  for (int i = 0; i < copy.ndim && i < FJ_TP_MAX_RANK; ++i) box[i] = 1;
  auto desc =
      DescribeTensor(copy, box, fj::oob_promise_in_bounds, fj::swizzle_none, 0);
  if (!desc.ok()) {
    absl::string_view m = desc.status().message();
    absl::ConsumePrefix(&m, "argument 0 (tensor): ");
    return Invalid(name, m);
  }
  return *desc;
}

absl::StatusOr<Span> SpanOf(const TensorDesc& t, absl::string_view name) {
  __int128 lo = 0, hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return Span{t.address, t.address};
    const __int128 reach =
        __int128(t.shape[d] - 1) * t.stride[d] * t.elem_bytes;
    (reach < 0 ? lo : hi) += reach;
  }
  lo += t.address;
  hi += t.address + uint64_t(t.elem_bytes);
  if (lo < 0 || hi >= (__int128(1) << 64)) {
    return Invalid(name, "its elements run outside the 64-bit address space");
  }
  return Span{uint64_t(lo), uint64_t(hi)};
}

std::string SpanText(const Span& s) {
  return absl::StrFormat("[0x%x, 0x%x)", s.lo, s.hi);
}

// A gather or scatter index: 1-D, int32 or int64, described like any
// operand.
absl::StatusOr<GatherIndex> ReadIndex(const DlTensor& t,
                                      absl::string_view name) {
  int32_t dt = 0, id = 0;
  FJ_ASSIGN_OR_RETURN(TensorDesc idx, Describe(t, name, &dt, &id));
  if (idx.rank != 1) {
    return Invalid(name,
                   absl::StrCat("has rank ", idx.rank, "; an index is 1-D"));
  }
  if (t.dtype.code != kDLInt || (t.dtype.bits != 32 && t.dtype.bits != 64)) {
    return Invalid(name, absl::StrCat("has dtype ", DtypeName(idx.dtype),
                                      "; an index is int32 or int64"));
  }
  GatherIndex g;
  g.address = idx.address;
  g.elem_bytes = idx.elem_bytes;
  g.length = idx.shape[0];
  g.stride = idx.stride[0];
  g.device_type = dt;
  g.device_id = id;
  FJ_ASSIGN_OR_RETURN(g.span, SpanOf(idx, name));
  return g;
}

}  // namespace

bool ValidatedCopy::WindowInBounds() const {
  for (int d = 0; d < dst.rank; ++d) {
    if (start[d] < 0 || start[d] + window[d] > src.shape[d]) return false;
  }
  return true;
}

Span TensorSpan(const TensorDesc& t) {
  auto s = SpanOf(t, "tensor");
  return s.ok() ? *s : Span{t.address, t.address};
}

bool IsDense(const TensorDesc& t) {
  int64_t expected = 1;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 1) continue;
    if (t.stride[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

TensorDesc WindowView(const ValidatedCopy& v) {
  TensorDesc w = v.src;
  int64_t offset = 0;
  for (int d = 0; d < v.src.rank; ++d) {
    offset += v.start[d] * v.src.stride[d];
    w.shape[d] = v.window[d];
  }
  w.address = v.src.address + uint64_t(offset * v.src.elem_bytes);
  return w;
}

TensorDesc WindowDesc(const ValidatedCopy& v) {
  TensorDesc w = v.dst;
  for (int d = 0; d < w.rank; ++d) w.shape[d] = v.window[d];
  return w;
}

absl::StatusOr<ValidatedCopy> ValidateCopy(const CopySpec& spec) {
  ValidatedCopy v;
  FJ_ASSIGN_OR_RETURN(
      v.src, Describe(spec.src, "src", &v.src_device_type, &v.src_device_id));
  FJ_ASSIGN_OR_RETURN(
      v.dst, Describe(spec.dst, "dst", &v.dst_device_type, &v.dst_device_id));
  const int rank = v.dst.rank;
  if (v.src.rank != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("src has rank ", v.src.rank, " but dst rank ", rank,
                     "; a copy keeps the rank (give extent-1 dimensions)"));
  }
  if (v.src.dtype != v.dst.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dtype mismatch: src is ", DtypeName(v.src.dtype), ", dst is ",
        DtypeName(v.dst.dtype), "; fj_copy does not convert"));
  }
  switch (spec.oob) {
    case fj::oob_promise_in_bounds:
      v.oob = fj::oob_promise_in_bounds;
      break;
    case fj::oob_zeros:
      v.oob = fj::oob_zeros;
      break;
    case fj::oob_nan:
      if (!DtypeIsFloat(v.src.dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat("oob FJ_OOB_NAN needs a floating-point dtype, not ",
                         DtypeName(v.src.dtype)));
      }
      v.oob = fj::oob_nan;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("oob is ", spec.oob, ", not an fj_oob value"));
  }
  // The window start, reversed into the parameter order.
  for (int i = 0; i < FJ_TP_MAX_RANK; ++i) {
    const int64_t s = spec.start[i];
    if (i >= rank) {
      if (s != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "start[", i, "] is ", s, " but the tensors have rank ", rank));
      }
      continue;
    }
    if (s <= -kMaxStart || s >= kMaxStart) {
      return absl::InvalidArgumentError(
          absl::StrCat("start[", i, "] is ", s, ", beyond any tensor"));
    }
    v.start[rank - 1 - i] = s;
  }
  // A destination element written twice would race.
  for (int d = 0; d < rank; ++d) {
    if (v.dst.stride[d] == 0 && v.dst.shape[d] > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("dst strides[", rank - 1 - d, "] is 0 with extent ",
                       v.dst.shape[d], ": its elements overlap"));
    }
  }
  for (int d = 0; d < rank; ++d) v.window[d] = v.dst.shape[d];
  if (spec.scatter.has_value()) {
    FJ_ASSIGN_OR_RETURN(v.scatter, ReadIndex(*spec.scatter, "scatter_index"));
    v.window[rank - 1] = v.scatter->length;  // one window row per entry
  }
  v.elements = 1;
  for (int d = 0; d < rank; ++d) v.elements *= v.window[d];

  if (spec.index.has_value()) {
    FJ_ASSIGN_OR_RETURN(v.gather, ReadIndex(*spec.index, "index"));
    if (v.gather->length != v.window[rank - 1]) {
      return Invalid(
          "index",
          v.scatter.has_value()
              ? absl::StrCat(
                    "has ", v.gather->length, " entries but scatter_index has ",
                    v.window[rank - 1], " (one per row of the window, in both)")
              : absl::StrCat("has ", v.gather->length, " entries but dst has ",
                             v.window[rank - 1],
                             " rows (its outermost extent)"));
    }
  }
  // Under promise_in_bounds nothing may fall outside src (a gathered
  // dimension is checked per row by the kernel, which fills a bad row).
  if (v.oob == fj::oob_promise_in_bounds) {
    for (int d = 0; d < rank; ++d) {
      if (v.gather.has_value() && d == rank - 1) continue;
      if (v.start[d] < 0 || v.start[d] + v.window[d] > v.src.shape[d]) {
        const int i = rank - 1 - d;
        return absl::InvalidArgumentError(absl::StrCat(
            "the window [", v.start[d], ", ", v.start[d] + v.window[d],
            ") of dimension ", i, " leaves src (extent ", v.src.shape[d],
            ") under FJ_OOB_PROMISE_IN_BOUNDS; use FJ_OOB_ZEROS or FJ_OOB_NAN "
            "to fill what lies outside"));
      }
    }
  }
  FJ_ASSIGN_OR_RETURN(v.src_span, SpanOf(v.src, "src"));
  FJ_ASSIGN_OR_RETURN(v.dst_span, SpanOf(v.dst, "dst"));
  if (v.elements > 0 && v.src_span.Overlaps(v.dst_span)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "src ", SpanText(v.src_span), " and dst ", SpanText(v.dst_span),
        " overlap; fj_copy needs disjoint memory"));
  }
  if (v.gather.has_value() && v.elements > 0 &&
      v.gather->span.Overlaps(v.dst_span)) {
    return absl::InvalidArgumentError(
        absl::StrCat("index ", SpanText(v.gather->span), " and dst ",
                     SpanText(v.dst_span), " overlap"));
  }
  if (v.scatter.has_value() && v.elements > 0 &&
      v.scatter->span.Overlaps(v.dst_span)) {
    return absl::InvalidArgumentError(
        absl::StrCat("scatter_index ", SpanText(v.scatter->span), " and dst ",
                     SpanText(v.dst_span), " overlap"));
  }
  v.impl = spec.impl;
  return v;
}

TileShape ChooseTiles(const TensorDesc& dst, bool gather,
                      uint32_t max_row_bytes, uint32_t max_tile_bytes) {
  TileShape t;
  const int rank = dst.rank;
  const int64_t eb = dst.elem_bytes;
  auto extent = [&](int d) { return std::max<int64_t>(dst.shape[d], 1); };
  if (gather && rank == 1) {
    t.box[0] = 1;
  } else {
    // Past 256 elements (TMA's box limit) the layer splits a row into
    // hardware boxes of 256 under tma (HardwareBox): a power of two over
    // 256 always splits, and a long row reads a page of memory in one run.
    const int64_t cap = std::min<int64_t>(
        kMaxTileRowElems,
        std::max<uint32_t>(16, std::min(max_row_bytes, max_tile_bytes)) / eb);
    int64_t want = 1;
    while (want < extent(0) && want < cap) want *= 2;
    t.box[0] = static_cast<int32_t>(std::max<int64_t>(want, 16 / eb));
  }
  int64_t budget = std::max<int64_t>(1, max_tile_bytes / (t.box[0] * eb));
  for (int d = 1; d < rank; ++d) {
    int64_t b = (gather && d == rank - 1)
                    ? 1
                    : std::min({budget, extent(d), int64_t{256}});
    t.box[d] = static_cast<int32_t>(b);
    budget = std::max<int64_t>(1, budget / b);
  }
  t.total = 1;
  t.tile_bytes = static_cast<uint32_t>(eb);
  for (int d = 0; d < rank; ++d) {
    t.tiles[d] = (dst.shape[d] + t.box[d] - 1) / t.box[d];
    t.total *= t.tiles[d];
    t.tile_bytes *= static_cast<uint32_t>(t.box[d]);
  }
  return t;
}

const char* PrefetchModeName(PrefetchMode mode) {
  switch (mode) {
    case PrefetchMode::kAuto:
      return "auto";
    case PrefetchMode::kLocalL2:
      return "local_l2";
    case PrefetchMode::kWarmOwnerL2:
      return "warm_owner_l2";
    case PrefetchMode::kStageLocal:
      return "stage_local";
  }
  return "unknown";
}

absl::StatusOr<ValidatedPrefetch> ValidatePrefetch(const PrefetchSpec& spec) {
  ValidatedPrefetch v;
  if (spec.mode < 0 ||
      spec.mode > static_cast<int32_t>(PrefetchMode::kStageLocal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode is ", spec.mode, ", not an fj_prefetch_mode value"));
  }
  v.mode = static_cast<PrefetchMode>(spec.mode);
  if (spec.reader_device < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reader_device is ", spec.reader_device, "; -1 or an ordinal"));
  }
  v.reader_device = spec.reader_device;
  PrefetchRows& rows = v.rows;
  uint64_t dense_bytes = 0;
  if (spec.tensor.has_value()) {
    int32_t dt = 0, id = 0;
    FJ_ASSIGN_OR_RETURN(TensorDesc t,
                        Describe(spec.tensor, "tensor", &dt, &id));
    const int rank = t.rank;
    TensorDesc tile = t;
    int64_t offset = 0;
    for (int i = 0; i < FJ_TP_MAX_RANK; ++i) {
      if (i >= rank) {
        if (spec.start[i] != 0 || spec.extent[i] != 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "start/extent[", i, "] set beyond the tensor's rank ", rank));
        }
        continue;
      }
      const int d = rank - 1 - i;
      if (spec.start[i] < 0 || spec.extent[i] < 0 ||
          spec.start[i] >= kMaxStart || spec.extent[i] >= kMaxStart) {
        return absl::InvalidArgumentError(absl::StrCat(
            "start[", i, "] = ", spec.start[i], ", extent[", i, "] = ",
            spec.extent[i], ": a prefetched tile starts inside the tensor"));
      }
      const int64_t lo = std::min(spec.start[i], t.shape[d]);
      const int64_t hi =
          spec.extent[i] == 0
              ? t.shape[d]
              : std::min(t.shape[d], spec.start[i] + spec.extent[i]);
      tile.shape[d] = std::max<int64_t>(0, hi - lo);
      offset += lo * t.stride[d];
    }
    tile.address = t.address + uint64_t(offset * t.elem_bytes);
    FJ_ASSIGN_OR_RETURN(rows.span, SpanOf(tile, "tensor tile"));
    int64_t elements = 1;
    for (int d = 0; d < rank; ++d) elements *= tile.shape[d];
    dense_bytes = uint64_t(elements) * tile.elem_bytes;
    if (elements == 0) {
      rows.row_bytes = 0;
    } else if (tile.stride[0] == 1 && rank <= 5) {
      // One row per innermost run; the outer dimensions index the rows.
      rows.base = tile.address;
      rows.row_bytes = uint64_t(tile.shape[0]) * tile.elem_bytes;
      for (int d = 1; d < rank; ++d) {
        rows.count[d - 1] = tile.shape[d];
        rows.stride[d - 1] = tile.stride[d] * tile.elem_bytes;
      }
    } else {
      // Elements are not contiguous along the inner dimension: warm the
      // tile's whole span (more than the tile, never outside the tensor).
      rows.base = rows.span.lo;
      rows.row_bytes = rows.span.size();
    }
    v.tile = tile;
  } else {
    if (spec.address == 0 && spec.bytes != 0) {
      return absl::InvalidArgumentError("address is 0 (and no tensor given)");
    }
    rows.base = spec.address;
    rows.row_bytes = spec.bytes;
    if (spec.bytes > ~uint64_t{0} - spec.address) {
      return absl::InvalidArgumentError("address + bytes overflows");
    }
    rows.span = Span{spec.address, spec.address + spec.bytes};
    dense_bytes = spec.bytes;
  }
  if (v.mode == PrefetchMode::kStageLocal && spec.stage_address == 0) {
    return absl::InvalidArgumentError(
        "FJ_PREFETCH_STAGE_LOCAL needs stage_address: a buffer on the reader");
  }
  // A stage buffer given with AUTO serves pinned host data.
  if (spec.stage_address != 0) {
    if (spec.stage_bytes < dense_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_bytes is ", spec.stage_bytes, "; the data needs ",
                       dense_bytes));
    }
    if (spec.stage_bytes > ~uint64_t{0} - spec.stage_address) {
      return absl::InvalidArgumentError(
          "stage_address + stage_bytes overflows");
    }
    const Span stage{spec.stage_address, spec.stage_address + dense_bytes};
    if (stage.Overlaps(rows.span)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the stage buffer ", SpanText(stage),
                       " overlaps the prefetched data ", SpanText(rows.span)));
    }
    v.stage_address = spec.stage_address;
    v.stage_bytes = spec.stage_bytes;
  }
  return v;
}

}  // namespace fleetjit::copy
