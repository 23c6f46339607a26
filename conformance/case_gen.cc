#include "conformance/case_gen.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace fleetjit::selftest::internal {

namespace {

constexpr uint32_t kBoxBudget = 8192;         // bytes of one tile
constexpr int64_t kMaxTensorElems = 1 << 16;  // logical elements per tensor

}  // namespace

const std::vector<Variant>& Variants() {
  static const auto* v = new std::vector<Variant>{
      // barrier: init/arrive/wait/test/parity; copies completing on one.
      {"barrier", "barrier", Kind::kBarrier, 12},
      {"span_load.barrier", "barrier", Kind::kSpanLoad, 8, Done::kBarrier},
      {"tile_load.barrier", "barrier", Kind::kTileLoad, 10, Done::kBarrier},
      // group_wait: the ring of fj_ct_groups, loads completed by groups.
      {"groups", "group_wait", Kind::kGroups, 12},
      {"span_load.group", "group_wait", Kind::kSpanLoad, 8, Done::kGroup},
      {"tile_load.group", "group_wait", Kind::kTileLoad, 10, Done::kGroup},
      // contiguous copies, every size and alignment.
      {"span_load", "copy_g2s", Kind::kSpanLoad, 16},
      {"span_store", "copy_s2g", Kind::kSpanStore, 16},
      // per-copy predicates, skip and zero.
      {"span_load.pred", "predicate", Kind::kSpanLoad, 8, Done::kAny, true},
      {"span_store.pred", "predicate", Kind::kSpanStore, 8, Done::kAny, true},
      {"tile_load.pred", "predicate", Kind::kTileLoad, 10, Done::kAny, true,
       false, false, kOobPromise | kOobZeros | kOobNan},
      {"tile_store.pred", "predicate", Kind::kTileStore, 10, Done::kAny, true},
      // tiles: every dtype at every rank, loads and clipped stores.
      {"tile_load", "tile_copy", Kind::kTileLoad, 65, Done::kAny, false, false,
       false, kOobPromise | kOobZeros, false, true},
      {"tile_store", "tile_copy", Kind::kTileStore, 65, Done::kAny, false,
       false, false, kOobPromise | kOobZeros, false, true},
      // out-of-bounds fill on ragged tiles.
      {"tile_load.oob_zeros", "oob_zeros", Kind::kTileLoad, 20, Done::kAny,
       false, false, false, kOobZeros},
      {"pipeline.oob_zeros", "oob_zeros", Kind::kPipeline, 5, Done::kAny, false,
       false, false, kOobZeros},
      {"tile_load.oob_nan", "oob_nan", Kind::kTileLoad, 30, Done::kAny, false,
       false, false, kOobNan, true, true},
      {"pipeline.oob_nan", "oob_nan", Kind::kPipeline, 5, Done::kAny, false,
       false, false, kOobNan, true},
      // cluster collective copies (clusters of 1, 2 and 4 where possible).
      {"span_load.multicast", "multicast", Kind::kSpanLoad, 9, Done::kBarrier,
       false, true},
      {"tile_load.multicast", "multicast", Kind::kTileLoad, 15, Done::kBarrier,
       true, true, false, kOobPromise | kOobZeros | kOobNan},
      // L2 prefetch of spans and tiles, then the copy.
      {"span_load.prefetch", "l2_prefetch", Kind::kSpanLoad, 8, Done::kAny,
       false, false, true},
      {"tile_load.prefetch", "l2_prefetch", Kind::kTileLoad, 10, Done::kAny,
       false, false, true, kOobPromise | kOobZeros | kOobNan},
      // 3-stage barrier ring with per-tile predicates.
      {"pipeline", "pipeline", Kind::kPipeline, 15, Done::kBarrier, true, false,
       false, kOobPromise | kOobZeros | kOobNan},
      // Tiles at index lists: stores of a coordinate list and scatters
      // (every dtype at every rank), gathers; indices outside the tensor
      // (never written, read as the fill).
      {"scatter", "indexed", Kind::kScatter, 65, Done::kAny, true, false, false,
       kOobPromise | kOobZeros, false, true},
      {"gather.index", "indexed", Kind::kGather, 30, Done::kBarrier, false,
       false, false, kOobPromise | kOobZeros | kOobNan},
  };
  return *v;
}

fj_dl_dtype DlDtype(int dtype) {
  fj_dl_dtype d{0, 8, 1};
  switch (dtype) {
    case fj::dtype_f32:
      d = {2, 32, 1};
      break;
    case fj::dtype_f16:
      d = {2, 16, 1};
      break;
    case fj::dtype_bf16:
      d = {4, 16, 1};
      break;
    case fj::dtype_f8e4m3:
      d = {FJ_DL_FLOAT8_E4M3, 8, 1};
      break;
    case fj::dtype_f8e5m2:
      d = {FJ_DL_FLOAT8_E5M2, 8, 1};
      break;
    case fj::dtype_i8:
      d = {0, 8, 1};
      break;
    case fj::dtype_u8:
      d = {1, 8, 1};
      break;
    case fj::dtype_i32:
      d = {0, 32, 1};
      break;
    case fj::dtype_u32:
      d = {1, 32, 1};
      break;
    case fj::dtype_f64:
      d = {2, 64, 1};
      break;
    case fj::dtype_i64:
      d = {0, 64, 1};
      break;
    case fj::dtype_i16:
      d = {0, 16, 1};
      break;
    case fj::dtype_u16:
      d = {1, 16, 1};
      break;
  }
  return d;
}

const char* OobName(int oob) {
  return oob == fj::oob_zeros ? "zeros"
         : oob == fj::oob_nan ? "nan"
                              : "promise_in_bounds";
}

// Float data must hold no NaN, so a NaN in the output can only be the fill:
// clearing bit 6 of the top byte clears the exponent's top bit for every
// float dtype here.
void ClearNans(int dtype, int eb, uint8_t* p, size_t elems) {
  if (!fj::dtype_info(dtype).is_float) return;
  for (size_t i = 0; i < elems; ++i) {
    uint8_t* e = p + i * eb;
    if (IsNan(dtype, e)) e[eb - 1] &= 0xBF;
  }
}

std::string Hex(const uint8_t* p, int n) {
  std::string s = "0x";
  for (int i = n - 1; i >= 0; --i) absl::StrAppendFormat(&s, "%02x", p[i]);
  return s;
}

size_t BoxBytes(const fj::tensor_param& p) {
  return BoxElems(p) * p.elem_bytes;
}

// A random tensor of `rank` and `dtype`. With `in_bounds` every dimension
// is at least its box (promise_in_bounds tiles fit). About 70% are shaped
// so TMA can describe them; the rest break one or more of TMA's rules
// (inner stride, row stride not a multiple of 16 bytes, base not 16-byte
// aligned, inner box not a multiple of 16 bytes, box over 256).
GenTensor MakeTensor(Rng& rng, int rank, int dtype, int oob, bool in_bounds) {
  GenTensor g;
  fj::tensor_param& p = g.p;
  std::memset(&p, 0, sizeof(p));
  const int eb = fj::dtype_info(dtype).bytes;
  const int unit = 16 / eb;  // elements per 16 bytes
  p.rank = rank;
  p.dtype = dtype;
  p.elem_bytes = eb;
  p.oob = oob;
  const bool friendly = rng.Chance(0.7);
  bool inner_stride = false, row_pad = false, misaligned = false,
       odd_box = false, big_box = false;
  if (!friendly) {
    do {
      inner_stride = rng.Chance(0.35);
      row_pad = rank > 1 && rng.Chance(0.4);
      misaligned = rng.Chance(0.35);
      odd_box = rng.Chance(0.4);
      big_box = rank <= 2 && eb <= 2 && rng.Chance(0.2);
    } while (!(inner_stride || row_pad || misaligned || odd_box || big_box));
  }
  // Box, dimension 0 innermost.
  static constexpr int kOuterMax[6] = {0, 1, 16, 8, 4, 3};
  if (big_box) {
    p.box[0] = static_cast<int>(rng.Int(257, 400));
  } else if (odd_box) {
    do {
      p.box[0] = static_cast<int>(rng.Int(1, 40));
    } while (p.box[0] % unit == 0);
  } else {
    p.box[0] = unit * static_cast<int>(rng.Int(1, rank <= 2 ? 16 : 4));
  }
  for (int d = 1; d < rank; ++d) {
    p.box[d] = static_cast<int>(rng.Int(1, kOuterMax[rank]));
  }
  while (BoxBytes(p) > kBoxBudget) {
    int d = 1;
    for (int k = 2; k < rank; ++k) {
      if (p.box[k] > p.box[d]) d = k;
    }
    if (rank > 1 && p.box[d] > 1) {
      --p.box[d];
    } else {
      p.box[0] = std::max(1, p.box[0] / 2);
    }
  }
  // Shape: ragged (not a multiple of the box) most of the time.
  for (int d = 0; d < rank; ++d) {
    const int64_t b = p.box[d];
    int64_t s = in_bounds ? b + rng.Int(0, 2 * b + 3) : rng.Int(1, 3 * b + 4);
    if (s % b == 0 && rng.Chance(0.8)) ++s;
    p.shape[d] = s;
  }
  auto total = [&] {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= p.shape[d];
    return n;
  };
  while (total() > kMaxTensorElems) {
    // Shrink the largest dimension that can still shrink (box elements are
    // at most kBoxBudget < kMaxTensorElems, so one always can).
    int d = -1;
    for (int k = 0; k < rank; ++k) {
      const int64_t floor = in_bounds ? p.box[k] : 1;
      if (p.shape[k] > floor && (d < 0 || p.shape[k] > p.shape[d])) d = k;
    }
    if (d < 0) break;
    const int64_t floor = in_bounds ? p.box[d] : 1;
    p.shape[d] = std::max<int64_t>(floor, p.shape[d] * 3 / 4);
  }
  // Strides in elements.
  p.stride[0] = inner_stride ? rng.Int(2, 3) : 1;
  bool compact = p.stride[0] == 1;
  for (int d = 1; d < rank; ++d) {
    const int64_t dense = p.stride[d - 1] * p.shape[d - 1];
    int64_t s;
    if (row_pad) {
      s = dense + rng.Int(1, 5);
      if (s % unit == 0) ++s;  // bytes not a multiple of 16
    } else {
      s = (dense + unit - 1) / unit * unit;
      if (rng.Chance(0.3)) s += unit * rng.Int(1, 3);
    }
    if (s != dense) compact = false;
    p.stride[d] = s;
  }
  g.pass_strides = !compact || rng.Chance(0.5);
  if (misaligned) {
    g.shift = static_cast<uint64_t>(eb) * rng.Int(1, std::max(1, 15 / eb));
    if (g.shift % 16 == 0) g.shift += eb;
  }
  g.split_offset = rng.Chance(0.3);
  int64_t span = 1;
  for (int d = 0; d < rank; ++d) span += (p.shape[d] - 1) * p.stride[d];
  g.host.resize(static_cast<size_t>(span) * eb);
  rng.Fill(g.host.data(), g.host.size());
  ClearNans(dtype, eb, g.host.data(), static_cast<size_t>(span));
  for (int i = 0; i < rank; ++i) {
    g.dl_shape[i] = p.shape[rank - 1 - i];
    g.dl_strides[i] = p.stride[rank - 1 - i];
  }
  return g;
}

// Tile start coordinates (kCaseInts ints). In bounds: inside the tensor.
// Ragged: straddling an edge, inside, or now and then entirely outside.
void MakeCoords(Rng& rng, const fj::tensor_param& p, bool in_bounds,
                int32_t* c) {
  for (int d = 0; d < kCaseInts; ++d) c[d] = 0;
  const bool outside = !in_bounds && rng.Chance(0.1);
  const int far_dim = static_cast<int>(rng.Int(0, p.rank - 1));
  for (int d = 0; d < p.rank; ++d) {
    const int64_t b = p.box[d], s = p.shape[d];
    int64_t v;
    if (in_bounds) {
      v = rng.Int(0, s - b);
    } else if (outside && d == far_dim) {
      v = rng.Chance(0.5) ? -b - rng.Int(0, 3) : s + rng.Int(0, 3);
    } else {
      v = rng.Int(-b + 1, s - 1);
    }
    c[d] = static_cast<int32_t>(v);
  }
}

bool TileInBounds(const fj::tensor_param& p, const int32_t* c) {
  for (int d = 0; d < p.rank; ++d) {
    if (c[d] < 0 || c[d] + p.box[d] > p.shape[d]) return false;
  }
  return true;
}

// Span cases for `groups` case groups of `cpb` cases: destinations of a
// group in disjoint slots of [0, kSpanCap); sources inside [0, src_size).
// `dst_cap` bounds the destination, `src_cap` the source offsets.
void MakeSpans(Rng& rng, int groups, int cpb, int64_t src_cap, bool preds,
               int mode_base, std::vector<SpanCase>& cases) {
  const int slot = kSpanCap / cpb;
  for (int gi = 0; gi < groups; ++gi) {
    std::vector<SpanCase> group;
    for (int j = 0; j < cpb; ++j) {
      const int r = static_cast<int>(rng.Int(0, 9));
      int bytes = r < 2   ? static_cast<int>(rng.Int(0, 16))
                  : r < 6 ? static_cast<int>(rng.Int(17, std::min(512, slot)))
                          : static_cast<int>(rng.Int(1, slot));
      bytes = std::min(bytes, slot);
      SpanCase sc{};
      sc.dst_off = j * slot + static_cast<int>(rng.Int(0, slot - bytes));
      // Source offset: often with the destination's alignment mod 16
      // (bulk/vector paths), else mod 8 or 4, else anything.
      const int64_t any = rng.Int(0, src_cap - bytes);
      const int rel = static_cast<int>(rng.Int(0, 3));
      const int m = rel == 0 ? 16 : rel == 1 ? 8 : rel == 2 ? 4 : 1;
      int64_t so = any - ((any - sc.dst_off) % m + m) % m;
      if (so < 0) so += m;
      if (so < 0 || so + bytes > src_cap) so = any;  // no such offset fits
      sc.src_off = static_cast<int32_t>(so);
      sc.bytes = bytes;
      sc.pred = preds ? (rng.Chance(0.5) ? 1 : 0) : 1;
      sc.mode =
          preds ? (mode_base + j) % 2 : static_cast<int32_t>(rng.Int(0, 1));
      group.push_back(sc);
    }
    std::shuffle(group.begin(), group.end(), rng);
    cases.insert(cases.end(), group.begin(), group.end());
  }
}

absl::Status CheckSpans(const std::vector<SpanCase>& cases, int cpb,
                        int64_t src_cap, bool load) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const SpanCase& a = cases[i];
    if (a.bytes < 0 || a.dst_off < 0 || a.src_off < 0 ||
        a.dst_off + a.bytes > kSpanCap ||
        a.src_off + a.bytes > (load ? src_cap : kSpanCap)) {
      return absl::InternalError(
          absl::StrCat("selftest bug: span case ", i, " out of range"));
    }
    const size_t g0 = i / cpb * cpb;
    for (size_t j = g0; j < i; ++j) {
      const SpanCase& b = cases[j];
      if (a.dst_off < b.dst_off + b.bytes && b.dst_off < a.dst_off + a.bytes &&
          a.bytes > 0 && b.bytes > 0) {
        return absl::InternalError(absl::StrCat(
            "selftest bug: span destinations ", j, " and ", i, " overlap"));
      }
    }
  }
  return absl::OkStatus();
}

// The (dtype, rank) of launch `i` of a tile variant.
std::pair<int, int> PickDtypeRank(const Variant& v, int index, Rng& rng) {
  const int rank = 1 + index % 5;
  const int j = index / 5;
  const int* list = v.float_only ? kFloatDtypes : kAllDtypes;
  const int n = v.float_only ? 6 : 13;
  if (v.all_dtypes) return {list[j % n], rank};
  // Cycle the element sizes, pick a dtype of that size.
  static constexpr int kSizes[] = {4, 2, 1, 8};
  const int eb = kSizes[j % 4];
  std::vector<int> pool;
  for (int k = 0; k < n; ++k) {
    if (fj::dtype_info(list[k]).bytes == eb) pool.push_back(list[k]);
  }
  if (pool.empty()) return {list[rng.Int(0, n - 1)], rank};
  return {pool[rng.Int(0, static_cast<int64_t>(pool.size()) - 1)], rank};
}
int PickOob(const Variant& v, Rng& rng, int dtype) {
  std::vector<int> modes;
  for (int m = 0; m < 3; ++m) {
    if ((v.oobs & (1 << m)) == 0) continue;
    if (m == fj::oob_nan && !fj::dtype_info(dtype).is_float) continue;
    modes.push_back(m);
  }
  if (modes.empty()) return fj::oob_zeros;
  return modes[rng.Int(0, static_cast<int64_t>(modes.size()) - 1)];
}

}  // namespace fleetjit::selftest::internal
