// The tile cells of the matrix: tile loads (every dtype and rank, ragged
// and out-of-bounds fill, multicast, prefetch), clipped tile stores, the
// 3-stage pipeline, and tiles at index lists (stores of a coordinate list,
// scatters, gathers by index, with indices outside the tensor). Each
// generates one launch's cases, runs it and compares with the host
// reference.

#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "conformance/matrix.h"
#include "conformance/reference.h"

namespace fleetjit::selftest::internal {

namespace {

// Where element `e` of a box lands: box index and global coordinates.
std::string ElementText(const fj::tensor_param& p, const int32_t* coords,
                        size_t e) {
  int64_t idx[FJ_TP_MAX_RANK] = {}, g[FJ_TP_MAX_RANK] = {};
  bool in = true;
  size_t rest = e;
  for (int d = 0; d < p.rank; ++d) {
    idx[d] = static_cast<int64_t>(rest % p.box[d]);
    rest /= p.box[d];
    g[d] = coords[d] + idx[d];
    in = in && g[d] >= 0 && g[d] < p.shape[d];
  }
  return absl::StrCat("element ", e, " = box index ", Outer(idx, p.rank),
                      ", tensor index ", Outer(g, p.rank),
                      in ? " (in bounds)" : " (out of bounds)");
}

// Compares `tiles` boxes; tile k's case is cases[k / per_case].
int CompareTiles(const fj::tensor_param& p, const uint8_t* want,
                 const uint8_t* got, int tiles, const int32_t* coords,
                 const uint8_t* preds, int per_case, const char* unit,
                 std::string* first) {
  const size_t elems = BoxElems(p), bytes = elems * p.elem_bytes;
  // Any NaN matches any NaN only under NaN fill (the data holds none).
  const int cmp_dtype = p.oob == fj::oob_nan ? p.dtype : fj::dtype_u8;
  int bad = 0;
  for (int k = 0; k < tiles; ++k) {
    ptrdiff_t f = -1;
    const size_t n = CountMismatches(cmp_dtype, p.elem_bytes, want + k * bytes,
                                     got + k * bytes, elems, &f);
    if (n == 0) continue;
    ++bad;
    if (first->empty()) {
      const int ci = k / per_case;
      const int32_t* cc = coords + static_cast<size_t>(ci) * kCaseInts;
      *first = absl::StrCat(
          unit, " ", k, ": tile at ", Outer(cc, p.rank), ", pred ", preds[ci],
          ", ", TileInBounds(p, cc) ? "in bounds" : "ragged", ": ", n, " of ",
          elems, " elements differ; first: ",
          ElementText(p, cc, static_cast<size_t>(f)), ": expected ",
          Hex(want + k * bytes + f * p.elem_bytes, p.elem_bytes), " got ",
          Hex(got + k * bytes + f * p.elem_bytes, p.elem_bytes));
    }
  }
  return bad;
}

// Draws `n` tiles' coordinates (kCaseInts each) and predicates (true with
// probability `pred_chance` where the variant has predicates, else always):
// per tile, its coordinates then its predicate.
absl::Status MakeTiles(Rng& rng, const Variant& v, const fj::tensor_param& p,
                       bool in_bounds, int n, double pred_chance,
                       std::vector<int32_t>* coords,
                       std::vector<uint8_t>* preds) {
  coords->assign(static_cast<size_t>(n) * kCaseInts, 0);
  preds->assign(n, 0);
  for (int k = 0; k < n; ++k) {
    MakeCoords(rng, p, in_bounds, coords->data() + k * kCaseInts);
    (*preds)[k] = v.preds ? (rng.Chance(pred_chance) ? 1 : 0) : 1;
    if (in_bounds && !TileInBounds(p, coords->data() + k * kCaseInts)) {
      return absl::InternalError(
          "selftest bug: promise_in_bounds tile out of bounds");
    }
  }
  return absl::OkStatus();
}

// How a tile store's output (`got`, the tensor's span) differs from the
// expected contents (g.host): each wrong element is attributed to the tile
// covering it, or counted as a stray write.
Verdict CompareStore(const GenTensor& g, const std::vector<uint8_t>& got,
                     const std::vector<int32_t>& coords,
                     const std::vector<uint8_t>& preds, int blocks,
                     uint8_t poison) {
  const fj::tensor_param& p = g.p;
  const int rank = p.rank;
  const size_t span = g.host.size();
  const int eb = p.elem_bytes;
  std::vector<bool> tile_bad(blocks, false);
  bool stray = false;
  size_t nbad = 0;
  std::string first;
  for (size_t e = 0; e < span / eb; ++e) {
    if (std::memcmp(g.host.data() + e * eb, got.data() + e * eb, eb) == 0)
      continue;
    ++nbad;
    // Tensor index of linear element e, if it is one (else padding).
    int64_t idx[FJ_TP_MAX_RANK] = {};
    bool element = true;
    int64_t rest = static_cast<int64_t>(e);
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rest / p.stride[d];
      rest -= idx[d] * p.stride[d];
      if (idx[d] >= p.shape[d]) element = false;
    }
    if (rest != 0) element = false;
    int owner = -1;
    if (element) {
      for (int k = 0; k < blocks && owner < 0; ++k) {
        const int32_t* cc = coords.data() + k * kCaseInts;
        bool in = true;
        for (int d = 0; d < rank; ++d)
          in = in && idx[d] >= cc[d] && idx[d] < cc[d] + p.box[d];
        if (in) owner = k;
      }
    }
    if (owner >= 0) {
      tile_bad[owner] = true;
    } else {
      stray = true;
    }
    if (first.empty()) {
      std::string where;
      if (!element) {
        where = "a padding element between rows (no store may write it)";
      } else if (owner < 0) {
        where = absl::StrCat("tensor index ", Outer(idx, rank),
                             ", covered by no tile (must keep the poison)");
      } else {
        const int32_t* cc = coords.data() + owner * kCaseInts;
        int64_t bi[FJ_TP_MAX_RANK] = {};
        for (int d = 0; d < rank; ++d) bi[d] = idx[d] - cc[d];
        where = absl::StrCat("tensor index ", Outer(idx, rank), " = block ",
                             owner, "'s tile at ", Outer(cc, rank), " (pred ",
                             preds[owner], ") box index ", Outer(bi, rank));
      }
      first = absl::StrCat("first: linear element ", e, ", ", where,
                           ": expected ", Hex(g.host.data() + e * eb, eb),
                           " got ", Hex(got.data() + e * eb, eb),
                           absl::StrFormat(" (poison 0x%02x)", poison));
    }
  }
  if (nbad == 0) return {};
  int bad =
      static_cast<int>(std::count(tile_bad.begin(), tile_bad.end(), true));
  if (bad == 0) bad = 1;
  return {bad,
          absl::StrCat(nbad, " elements wrong",
                       stray ? " (some outside every tile)" : "", "; ", first)};
}

}  // namespace

absl::Status Matrix::DrawTileLoads(Ctx& c, const GenTensor& g, bool in_bounds,
                                   int tiles, int boxes, double pred_chance,
                                   absl::string_view family, TileLoads& t) {
  FJ_CT_RETURN_IF_ERROR(MakeTiles(c.rng, c.v, g.p, in_bounds, tiles,
                                  pred_chance, &t.coords, &t.preds),
                        "");
  t.pred_mode = c.v.preds ? c.index % 2 : static_cast<int>(c.rng.Int(0, 1));
  t.kernel = absl::StrCat(family, "_e", g.p.elem_bytes, "_r", g.p.rank);
  t.threads = PickThreads(c.rng, c.row, t.kernel);
  t.poison = kPoisons[c.rng.Int(0, 4)];
  const size_t out_bytes = BoxBytes(g.p) * boxes;
  if (g.host.size() + g.shift > kArenaBytes || out_bytes > kArenaBytes) {
    return absl::InternalError("selftest bug: tensor larger than the arena");
  }
  t.want.assign(out_bytes, 0);
  t.got.assign(out_bytes, 0);
  return absl::OkStatus();
}

Matrix::CellLaunch Matrix::TileLoadLaunch(Ctx& c, const GenTensor& g,
                                          TileLoads& t, int32_t arg,
                                          uint32_t grid, uint32_t smem,
                                          int cases) {
  CellLaunch l;
  l.args = {TensorArg(&t.targ),  PtrArg(aux_), PtrArg(aux_ + kAuxPredsOffset),
            I32Arg(t.pred_mode), I32Arg(arg),  PtrArg(out_)};
  l.shape.grid = grid;
  l.shape.smem = smem;
  l.cases = cases;
  l.inputs =
      StageTiles(c, g, in_, {in_ + g.shift, g.host.data(), g.host.size()},
                 t.coords, t.preds, &t.tensor, &t.targ);
  l.poison_at = out_;
  l.poison = t.poison;
  l.poison_bytes = t.got.size();
  l.kernel = t.kernel;
  l.shape.block = t.threads;
  l.got = t.got.data();
  l.got_from = out_;
  l.got_bytes = t.got.size();
  return l;
}

namespace {

// The verdict on `boxes` loaded tiles of `t` (box k loads tile k / per_case).
Verdict TileLoadVerdict(const GenTensor& g, const TileLoads& t, int boxes,
                        int per_case, const char* unit) {
  std::string first;
  const int bad =
      CompareTiles(g.p, t.want.data(), t.got.data(), boxes, t.coords.data(),
                   t.preds.data(), per_case, unit, &first);
  return Verdict{bad,
                 absl::StrCat(bad, " of ", boxes, " tiles wrong; ", first)};
}

}  // namespace

absl::Status Matrix::TileLoad(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const auto [dtype, rank] = PickDtypeRank(c.v, c.index, c.rng);
  const int oob = PickOob(c.v, c.rng, dtype);
  const bool in_bounds = oob == fj::oob_promise_in_bounds;
  GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
  static constexpr int kClusters[] = {1, 2, 4};
  const int cs = v.multicast && c.row.clusters ? kClusters[c.index % 3] : 1;
  const int groups = static_cast<int>(rng.Int(1, 8));
  const int blocks = groups * cs;
  TileLoads t;
  FJ_CT_RETURN_IF_ERROR(
      DrawTileLoads(c, g, in_bounds, groups, blocks, 0.5, "fj_ct_tile_load", t),
      "");
  int flags = 0;
  if (v.done == Done::kGroup || (v.done == Done::kAny && rng.Chance(0.5)))
    flags |= kInGroup;
  if (v.prefetch || rng.Chance(0.15)) flags |= kPrefetch;
  if (v.multicast) flags = (flags & ~kInGroup) | kMulticast;
  HostTensor ht = g.Host();
  RefTileLoad(ht, t.coords.data(), t.preds.data(), t.pred_mode, blocks, cs,
              t.want.data());
  CellLaunch l =
      TileLoadLaunch(c, g, t, flags, blocks, TileSmemBytes(g.p), blocks);
  l.shape.cluster = cs > 1 ? cs : 0;
  l.what = absl::StrCat(
      t.kernel, " <<<", blocks, ", ", t.threads, ", ", l.shape.smem, ">>>",
      cs > 1 ? absl::StrCat(" cluster ", cs) : std::string(), " flags ", flags,
      " (", flags & kInGroup ? "group" : "barrier",
      flags & kPrefetch ? "+prefetch" : "",
      flags & kMulticast ? "+multicast" : "", "), pred_mode ",
      t.pred_mode == kPredZero ? "zero" : "skip", ", tensor ",
      TensorText(c, g, t.targ, t.threads));
  return RunCell(c, l,
                 [&] { return TileLoadVerdict(g, t, blocks, cs, "block"); });
}

absl::Status Matrix::TileStore(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const auto [dtype, rank] = PickDtypeRank(c.v, c.index, c.rng);
  // Stores are clipped at the bounds whatever the mode; promise only with
  // tiles inside the tensor.
  const bool in_bounds = (v.oobs & kOobPromise) != 0 && rng.Chance(0.25);
  const int oob = in_bounds ? fj::oob_promise_in_bounds : fj::oob_zeros;
  GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
  const fj::tensor_param& p = g.p;
  // Tiles on a grid shifted by `origin` (so they straddle the edges),
  // distinct cells, hence no overlap; ragged grids reach one cell past
  // each end.
  int64_t origin[FJ_TP_MAX_RANK] = {}, lo[FJ_TP_MAX_RANK] = {},
          hi[FJ_TP_MAX_RANK] = {};
  int64_t cells = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t b = p.box[d];
    if (in_bounds) {
      origin[d] = 0;
      lo[d] = 0;
      hi[d] = p.shape[d] / b;
    } else {
      origin[d] = -rng.Int(0, b - 1);
      lo[d] = rng.Chance(0.2) ? -1 : 0;
      hi[d] = (p.shape[d] - origin[d] + b - 1) / b + (rng.Chance(0.2) ? 1 : 0);
    }
    cells *= hi[d] - lo[d];
  }
  const int blocks = static_cast<int>(std::min<int64_t>(rng.Int(1, 8), cells));
  std::set<std::vector<int64_t>> used;
  std::vector<int32_t> coords(static_cast<size_t>(blocks) * kCaseInts, 0);
  std::vector<uint8_t> preds(blocks);
  for (int k = 0; k < blocks; ++k) {
    std::vector<int64_t> cell(rank);
    do {
      for (int d = 0; d < rank; ++d) cell[d] = rng.Int(lo[d], hi[d] - 1);
    } while (!used.insert(cell).second);
    for (int d = 0; d < rank; ++d) {
      coords[k * kCaseInts + d] =
          static_cast<int32_t>(origin[d] + cell[d] * p.box[d]);
    }
    preds[k] = v.preds ? (rng.Chance(0.5) ? 1 : 0) : 1;
    if (in_bounds && !TileInBounds(p, coords.data() + k * kCaseInts)) {
      return absl::InternalError(
          "selftest bug: promise_in_bounds store tile out of bounds");
    }
  }
  const size_t elems = BoxElems(p), box_bytes = elems * p.elem_bytes;
  std::vector<uint8_t> src(box_bytes * blocks);
  rng.Fill(src.data(), src.size());
  const std::string kernel =
      absl::StrCat("fj_ct_tile_store_e", p.elem_bytes, "_r", rank);
  const int threads = PickThreads(rng, c.row, kernel);
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  // The tensor lives in `out_`, poisoned; g.host becomes its expected
  // contents. The tiles' source goes in `in_`.
  const size_t span = g.host.size();
  if (span + g.shift > kArenaBytes || src.size() > kArenaBytes) {
    return absl::InternalError("selftest bug: tensor larger than the arena");
  }
  std::fill(g.host.begin(), g.host.end(), poison);
  HostTensor ht = g.Host();
  RefTileStore(ht, coords.data(), preds.data(), blocks, src.data());
  std::vector<uint8_t> got(span);
  fj_tensor tensor;
  fj_tensor_arg targ;
  CellLaunch l;
  l.inputs = StageTiles(c, g, out_, {in_, src.data(), src.size()}, coords,
                        preds, &tensor, &targ);
  l.poison_at = out_ + g.shift;
  l.poison = poison;
  l.poison_bytes = span;
  l.kernel = kernel;
  l.args = {TensorArg(&targ), PtrArg(aux_), PtrArg(aux_ + kAuxPredsOffset),
            PtrArg(in_)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = TileSmemBytes(p);
  l.cases = blocks;
  l.what =
      absl::StrCat(kernel, " <<<", blocks, ", ", threads, ", ", l.shape.smem,
                   ">>>, tensor ", TensorText(c, g, targ, threads));
  l.got = got.data();
  l.got_from = out_ + g.shift;
  l.got_bytes = span;
  return RunCell(c, l, [&] {
    return CompareStore(g, got, coords, preds, blocks, poison);
  });
}

absl::Status Matrix::Pipeline(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const int rank = 1 + c.index % 5;
  const int* list = v.float_only ? kFloatDtypes : kAllDtypes;
  const int dtype = list[rng.Int(0, v.float_only ? 5 : 12)];
  const int oob = PickOob(c.v, c.rng, dtype);
  const bool in_bounds = oob == fj::oob_promise_in_bounds;
  GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
  const int blocks = static_cast<int>(rng.Int(1, 4));
  // Cases alternate between the block-collective ring, the same ring fed
  // by a producer warp (fj::warp, fj::pipeline) and a tile-list load
  // (fj::load_tiles, at most 3 tiles: the ring's SMEM).
  const int form = (c.index + c.index / 5) % 3;
  const char* family = form == 0   ? "fj_ct_pipeline"
                       : form == 1 ? "fj_ct_warp_pipeline"
                                   : "fj_ct_gather";
  int tiles = static_cast<int>(rng.Int(1, 9));
  if (form == 2) tiles = std::min(tiles, 3);
  const int n = blocks * tiles;
  TileLoads t;
  FJ_CT_RETURN_IF_ERROR(DrawTileLoads(c, g, in_bounds, n, n, 0.7, family, t),
                        "");
  if (form == 1) t.threads = WholeWarps(c.row, t.kernel, t.threads);
  HostTensor ht = g.Host();
  if (form == 2) {
    t.pred_mode = -1;  // fj_ct_gather's `dim`: the coordinate list
    std::fill(t.preds.begin(), t.preds.end(), 1);  // one call, no predicates
    RefTileLoad(ht, t.coords.data(), t.preds.data(), t.pred_mode, n, 1,
                t.want.data());
  } else {
    RefPipeline(ht, t.coords.data(), t.preds.data(), t.pred_mode, blocks, tiles,
                t.want.data());
  }
  CellLaunch l =
      TileLoadLaunch(c, g, t, tiles, blocks, PipelineSmemBytes(g.p), n);
  l.what = absl::StrCat(
      t.kernel, " <<<", blocks, ", ", t.threads, ", ", l.shape.smem, ">>> ",
      tiles,
      form == 2   ? " tiles/block in one load_tiles ("
      : form == 1 ? " tiles/block (3-stage ring, producer warp), pred_mode "
                  : " tiles/block (3-stage ring), pred_mode ",
      form == 2                  ? (t.threads % 32 ? "block" : "warp")
      : t.pred_mode == kPredZero ? "zero"
                                 : "skip",
      form == 2 ? ")" : "", ", tensor ", TensorText(c, g, t.targ, t.threads));
  return RunCell(c, l, [&] {
    return TileLoadVerdict(g, t, n, 1, "tile (block * tiles + k)");
  });
}

namespace {

// An index along `dim` that puts its tile outside the tensor (wholly or in
// part): never written by a scatter, the fill for a gather.
int32_t BadIndex(Rng& rng, const fj::tensor_param& p, int dim) {
  const int64_t b = p.box[dim], s = p.shape[dim];
  const int64_t kind = rng.Int(0, 3);
  if (kind == 0) return -1;
  if (kind == 1) return static_cast<int32_t>(-b - rng.Int(0, 3));
  // The tile starts inside but ends past the edge, where it can.
  const int64_t first = std::max<int64_t>(s - b + 1, 0);
  if (kind == 2 && b > 1 && first <= s - 1)
    return static_cast<int32_t>(rng.Int(first, s - 1));
  return static_cast<int32_t>(s + rng.Int(0, 3));
}

}  // namespace

absl::Status Matrix::Scatter(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const auto [dtype, rank] = PickDtypeRank(c.v, c.index, c.rng);
  // Stores clip at the bounds whatever the mode; promise only with tiles
  // inside the tensor (but for bad indices, which write nothing).
  const bool in_bounds = rng.Chance(0.25);
  const int oob = in_bounds ? fj::oob_promise_in_bounds : fj::oob_zeros;
  GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
  const fj::tensor_param& p = g.p;
  // A coordinate list (fj::store_tiles) or a scatter along `dim`.
  const int dim = rng.Chance(0.4) ? -1 : static_cast<int>(rng.Int(0, rank - 1));
  // Tiles on a grid shifted by `origin` (as TileStore), distinct cells.
  int64_t origin[FJ_TP_MAX_RANK] = {}, lo[FJ_TP_MAX_RANK] = {},
          hi[FJ_TP_MAX_RANK] = {};
  for (int d = 0; d < rank; ++d) {
    const int64_t b = p.box[d];
    if (in_bounds) {
      hi[d] = p.shape[d] / b;
    } else {
      origin[d] = -rng.Int(0, b - 1);
      lo[d] = rng.Chance(0.2) ? -1 : 0;
      hi[d] = (p.shape[d] - origin[d] + b - 1) / b + (rng.Chance(0.2) ? 1 : 0);
    }
  }
  const int blocks = static_cast<int>(rng.Int(1, 4));
  const int tiles = static_cast<int>(rng.Int(1, kPipelineStages));
  const int n = blocks * tiles;
  std::set<std::vector<int64_t>> used;
  std::vector<int32_t> coords(static_cast<size_t>(n) * kCaseInts, 0);
  std::vector<uint8_t> preds(blocks), tile_preds(n);
  auto fresh = [&](std::vector<int64_t>& cell, int free_dim) {
    for (int tries = 0; tries < 64; ++tries) {
      for (int d = 0; d < rank; ++d) {
        if (free_dim < 0 || d == free_dim) cell[d] = rng.Int(lo[d], hi[d] - 1);
      }
      if (used.insert(cell).second) return true;
    }
    return false;
  };
  for (int b = 0; b < blocks; ++b) {
    preds[b] = v.preds ? (rng.Chance(0.7) ? 1 : 0) : 1;
    std::vector<int64_t> base(rank);
    for (int d = 0; d < rank; ++d) base[d] = rng.Int(lo[d], hi[d] - 1);
    for (int k = 0; k < tiles; ++k) {
      const int i = b * tiles + k;
      int32_t* cc = coords.data() + static_cast<size_t>(i) * kCaseInts;
      std::vector<int64_t> cell = base;
      const bool ok = fresh(cell, dim < 0 ? -1 : dim);
      for (int d = 0; d < rank; ++d)
        cc[d] = static_cast<int32_t>(origin[d] + cell[d] * p.box[d]);
      if (dim >= 0 && (!ok || rng.Chance(0.2))) {
        cc[dim] = BadIndex(rng, p, dim);
      } else if (!ok) {
        preds[b] = 0;  // no free cell left: the block stores nothing
      }
      if (in_bounds && (dim < 0 || IndexInside(p, cc, dim)) &&
          !TileInBounds(p, cc)) {
        return absl::InternalError(
            "selftest bug: promise_in_bounds scatter tile out of bounds");
      }
    }
  }
  for (int i = 0; i < n; ++i) tile_preds[i] = preds[i / tiles];
  const size_t box_bytes = BoxBytes(p);
  std::vector<uint8_t> src(box_bytes * n);
  rng.Fill(src.data(), src.size());
  const std::string kernel =
      absl::StrCat("fj_ct_scatter_e", p.elem_bytes, "_r", rank);
  const int threads = PickThreads(rng, c.row, kernel);
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  const size_t span = g.host.size();
  if (span + g.shift > kArenaBytes || src.size() > kArenaBytes) {
    return absl::InternalError("selftest bug: tensor larger than the arena");
  }
  std::fill(g.host.begin(), g.host.end(), poison);
  HostTensor ht = g.Host();
  RefScatterTiles(ht, coords.data(), preds.data(), blocks, tiles, dim,
                  src.data());
  std::vector<uint8_t> got(span);
  fj_tensor tensor;
  fj_tensor_arg targ;
  CellLaunch l;
  l.inputs = StageTiles(c, g, out_, {in_, src.data(), src.size()}, coords,
                        preds, &tensor, &targ);
  l.poison_at = out_ + g.shift;
  l.poison = poison;
  l.poison_bytes = span;
  l.kernel = kernel;
  l.args = {TensorArg(&targ), PtrArg(aux_),  PtrArg(aux_ + kAuxPredsOffset),
            I32Arg(dim),      I32Arg(tiles), PtrArg(in_)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = PipelineSmemBytes(p);
  l.cases = blocks;
  l.what = absl::StrCat(kernel, " <<<", blocks, ", ", threads, ", ",
                        l.shape.smem, ">>> ", tiles, " tiles/block by ",
                        dim < 0 ? "fj::store_tiles"
                                : absl::StrCat("fj::scatter_tiles along ", dim),
                        ", tensor ", TensorText(c, g, targ, threads));
  l.got = got.data();
  l.got_from = out_ + g.shift;
  l.got_bytes = span;
  return RunCell(c, l, [&] {
    return CompareStore(g, got, coords, tile_preds, n, poison);
  });
}

absl::Status Matrix::GatherIndex(Ctx& c) {
  Rng& rng = c.rng;
  const auto [dtype, rank] = PickDtypeRank(c.v, c.index, c.rng);
  const int oob = PickOob(c.v, c.rng, dtype);
  const bool in_bounds = oob == fj::oob_promise_in_bounds;
  GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
  const fj::tensor_param& p = g.p;
  const int dim = static_cast<int>(rng.Int(0, rank - 1));
  const int blocks = static_cast<int>(rng.Int(1, 4));
  const int tiles = static_cast<int>(rng.Int(1, kPipelineStages));
  const int n = blocks * tiles;
  TileLoads t;
  t.coords.assign(static_cast<size_t>(n) * kCaseInts, 0);
  t.preds.assign(n, 1);
  t.pred_mode = dim;  // fj_ct_gather's `dim`
  t.kernel = absl::StrCat("fj_ct_gather_e", p.elem_bytes, "_r", rank);
  t.threads = PickThreads(rng, c.row, t.kernel);
  t.poison = kPoisons[rng.Int(0, 4)];
  for (int b = 0; b < blocks; ++b) {
    int32_t base[kCaseInts];
    MakeCoords(rng, p, in_bounds, base);
    for (int k = 0; k < tiles; ++k) {
      int32_t* cc = t.coords.data() + static_cast<size_t>(b * tiles + k) * 5;
      std::copy(base, base + kCaseInts, cc);
      cc[dim] =
          rng.Chance(0.3)
              ? BadIndex(rng, p, dim)
              : static_cast<int32_t>(rng.Int(0, p.shape[dim] - p.box[dim]));
    }
  }
  const size_t out_bytes = BoxBytes(p) * n;
  if (g.host.size() + g.shift > kArenaBytes || out_bytes > kArenaBytes) {
    return absl::InternalError("selftest bug: tensor larger than the arena");
  }
  t.want.assign(out_bytes, 0);
  t.got.assign(out_bytes, 0);
  HostTensor ht = g.Host();
  RefGatherTiles(ht, t.coords.data(), n, dim, t.want.data());
  CellLaunch l =
      TileLoadLaunch(c, g, t, tiles, blocks, PipelineSmemBytes(p), n);
  l.what = absl::StrCat(t.kernel, " <<<", blocks, ", ", t.threads, ", ",
                        l.shape.smem, ">>> ", tiles,
                        " tiles/block by fj::gather_tiles along ", dim, " (",
                        t.threads % 32 ? "block" : "warp", "), tensor ",
                        TensorText(c, g, t.targ, t.threads));
  return RunCell(c, l, [&] {
    return TileLoadVerdict(g, t, n, 1, "tile (block * tiles + k)");
  });
}

}  // namespace fleetjit::selftest::internal
