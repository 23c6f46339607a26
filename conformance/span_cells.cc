// The span and synchronisation cells of the matrix: barrier phases, span
// loads and stores (contiguous copies, predicates, multicast, prefetch) and
// the cp.async group ring. Each generates one launch's cases, runs it and
// compares with the host reference.

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "conformance/matrix.h"
#include "conformance/reference.h"

namespace fleetjit::selftest::internal {

namespace {

// How one block's kSpanCap bytes differ from the reference: the count,
// the first differing byte, the cases (spans) with a wrong byte (a wrong
// byte outside every span counts as one more), and the span owning the
// first byte (-1: none).
struct SpanDiff {
  size_t bytes = 0;
  int first_byte = -1;
  int bad_cases = 0;
  int first_owner = -1;
};
static SpanDiff DiffSpans(const uint8_t* want, const uint8_t* got,
                          const SpanCase* bc, int cpb) {
  SpanDiff d;
  std::vector<bool> case_bad(cpb, false);
  bool stray = false;
  for (int i = 0; i < kSpanCap; ++i) {
    if (want[i] == got[i]) continue;
    ++d.bytes;
    if (d.first_byte < 0) d.first_byte = i;
    bool hit = false;
    for (int j = 0; j < cpb; ++j) {
      if (i >= bc[j].dst_off && i < bc[j].dst_off + bc[j].bytes) {
        case_bad[j] = true;
        hit = true;
        if (i == d.first_byte) d.first_owner = j;
      }
    }
    if (!hit) stray = true;
  }
  d.bad_cases =
      static_cast<int>(std::count(case_bad.begin(), case_bad.end(), true));
  if (d.bytes > 0 && d.bad_cases == 0 && stray) d.bad_cases = 1;
  return d;
}

// Compares `blocks` blocks of `per` elements of `dtype` (`elem` bytes
// each); returns the wrong blocks and describes the first in *first with
// describe(b, wrong elements, first wrong element).
template <typename T, typename Describe>
int CompareBlocks(int blocks, size_t per, int dtype, int elem, const T* want,
                  const T* got, Describe describe, std::string* first) {
  int bad = 0;
  for (int b = 0; b < blocks; ++b) {
    ptrdiff_t f = -1;
    const size_t n =
        CountMismatches(dtype, elem, want + b * per, got + b * per, per, &f);
    if (n == 0) continue;
    ++bad;
    if (first->empty()) *first = describe(b, n, f);
  }
  return bad;
}

// Compares `blocks` blocks of kSpanCap bytes, block b's spans being
// cases_of(b); returns the wrong spans and describes the first wrong block
// in *first with describe(b, diff, spans).
template <typename CasesOf, typename Describe>
int CompareSpanBlocks(int blocks, int cpb, const uint8_t* want,
                      const uint8_t* got, CasesOf cases_of, Describe describe,
                      std::string* first) {
  int bad = 0;
  for (int b = 0; b < blocks; ++b) {
    const size_t region = static_cast<size_t>(b) * kSpanCap;
    const SpanCase* bc = cases_of(b);
    const SpanDiff d = DiffSpans(want + region, got + region, bc, cpb);
    if (d.bytes == 0) continue;
    bad += d.bad_cases;
    if (first->empty()) *first = describe(b, d, bc);
  }
  return bad;
}

static std::string SpanText(const SpanCase& s, bool load) {
  return absl::StrFormat("{%s %d, %s %d, %d bytes, pred %d%s}",
                         load ? "src" : "smem", s.src_off,
                         load ? "smem" : "out", s.dst_off, s.bytes, s.pred,
                         load ? (s.mode == kPredZero ? " zero" : " skip") : "");
}

}  // namespace

absl::Status Matrix::Barrier(Ctx& c) {
  Rng& rng = c.rng;
  const int threads = PickThreads(rng, c.row, "fj_ct_barrier");
  const int phases = static_cast<int>(rng.Int(0, 9));
  const int blocks = static_cast<int>(rng.Int(1, 6));
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  const size_t words = static_cast<size_t>(blocks) * (phases + 1) * threads;
  std::vector<uint32_t> got(words), want(words);
  RefBarrier(blocks, threads, phases, want.data());
  CellLaunch l;
  l.poison_at = out_;
  l.poison = poison;
  l.poison_bytes = words * 4;
  l.kernel = "fj_ct_barrier";
  l.args = {PtrArg(out_), I32Arg(phases)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = BarrierSmemBytes(threads);
  l.cases = blocks;
  l.what = absl::StrFormat("fj_ct_barrier <<<%d, %d, %u>>> phases %d", blocks,
                           threads, l.shape.smem, phases);
  l.got = got.data();
  l.got_from = out_;
  l.got_bytes = words * 4;
  return RunCell(c, l, [&] {
    const size_t per = static_cast<size_t>(phases + 1) * threads;
    auto describe = [&](int b, size_t n, ptrdiff_t f) {
      const size_t k = static_cast<size_t>(f) / threads,
                   th = static_cast<size_t>(f) % threads;
      return absl::StrFormat(
          "block %d: %zu of %zu words differ; first: %s of thread %zu: "
          "expected 0x%08x got "
          "0x%08x",
          b, n, per,
          k < static_cast<size_t>(phases)
              ? absl::StrCat("phase ", k, " word")
              : std::string("flags word (1 = test(1) fresh, 2 = "
                            "!test(0) before arrival, 4 = test "
                            "of the last phase)"),
          th, want[b * per + f], got[b * per + f]);
    };
    std::string first;
    const int bad = CompareBlocks(blocks, per, fj::dtype_u32, 4, want.data(),
                                  got.data(), describe, &first);
    return Verdict{bad,
                   absl::StrCat(bad, " of ", blocks, " blocks wrong; ", first)};
  });
}

absl::Status Matrix::SpanLoad(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const int cpb = static_cast<int>(rng.Int(1, 6));
  const int groups = static_cast<int>(rng.Int(1, 6));
  static constexpr int kClusters[] = {1, 2, 4};
  const int cs = v.multicast && c.row.clusters ? kClusters[c.index % 3] : 1;
  const int blocks = groups * cs;
  const int64_t src_size = rng.Int(kSpanCap + 64, 64 * 1024);
  int flags = 0;
  if (v.done == Done::kGroup || (v.done == Done::kAny && rng.Chance(0.5)))
    flags |= kInGroup;
  if (v.prefetch || rng.Chance(0.15)) flags |= kPrefetch;
  if (v.multicast) flags = (flags & ~kInGroup) | kMulticast;
  std::vector<uint8_t> src(static_cast<size_t>(src_size));
  rng.Fill(src.data(), src.size());
  std::vector<SpanCase> cases;
  MakeSpans(rng, groups, cpb, src_size, v.preds, c.index, cases);
  FJ_CT_RETURN_IF_ERROR(CheckSpans(cases, cpb, src_size, true), "");
  const int threads = PickThreads(rng, c.row, "fj_ct_span_load");
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  const size_t out_bytes = static_cast<size_t>(blocks) * kSpanCap;
  std::vector<uint8_t> want(out_bytes), got(out_bytes);
  RefSpanLoad(src.data(), cases.data(), cpb, blocks, cs, want.data());
  CellLaunch l;
  l.inputs = {{in_, src.data(), src.size()},
              {aux_, cases.data(), cases.size() * sizeof(SpanCase)}};
  l.poison_at = out_;
  l.poison = poison;
  l.poison_bytes = out_bytes;
  l.kernel = "fj_ct_span_load";
  l.args = {PtrArg(in_), PtrArg(out_), PtrArg(aux_), I32Arg(cpb),
            I32Arg(flags)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = SpanSmemBytes();
  l.shape.cluster = cs > 1 ? cs : 0;
  l.cases = groups * cpb;
  l.what = absl::StrFormat(
      "fj_ct_span_load <<<%d, %d, %u>>>%s flags %d (%s%s%s), %d cases/block, "
      "src %d B",
      blocks, threads, l.shape.smem,
      cs > 1 ? absl::StrCat(" cluster ", cs) : std::string(), flags,
      flags & kInGroup ? "group" : "barrier",
      flags & kPrefetch ? "+prefetch" : "",
      flags & kMulticast ? "+multicast" : "", cpb, src_size);
  l.got = got.data();
  l.got_from = out_;
  l.got_bytes = out_bytes;
  return RunCell(c, l, [&] {
    auto describe = [&](int b, const SpanDiff& d, const SpanCase* bc) {
      const uint8_t* w = want.data() + static_cast<size_t>(b) * kSpanCap;
      const uint8_t* g = got.data() + static_cast<size_t>(b) * kSpanCap;
      const int fb = d.first_byte;
      const std::string owner =
          d.first_owner < 0
              ? std::string(
                    "a byte outside every span (must keep its stale value)")
              : absl::StrCat("span ", SpanText(bc[d.first_owner], true),
                             " at byte ", fb - bc[d.first_owner].dst_off);
      return absl::StrFormat(
          "block %d (cluster rank %d): %zu of %d SMEM bytes differ; first: "
          "SMEM byte %d, %s: "
          "expected 0x%02x got 0x%02x (poison 0x%02x, stale 0x%02x)",
          b, b % cs, d.bytes, kSpanCap, fb, owner, w[fb], g[fb], poison,
          StaleByte(b, fb));
    };
    std::string first;
    const int bad = CompareSpanBlocks(
        blocks, cpb, want.data(), got.data(),
        [&](int b) { return cases.data() + static_cast<size_t>(b / cs) * cpb; },
        describe, &first);
    return Verdict{bad, absl::StrCat(bad, " spans wrong; ", first)};
  });
}

absl::Status Matrix::SpanStore(Ctx& c) {
  Rng& rng = c.rng;
  const Variant& v = c.v;
  const int cpb = static_cast<int>(rng.Int(1, 6));
  const int blocks = static_cast<int>(rng.Int(1, 8));
  const size_t bytes = static_cast<size_t>(blocks) * kSpanCap;
  std::vector<uint8_t> src(bytes);
  rng.Fill(src.data(), bytes);
  // A store case is (smem_off, out_off, bytes, pred): MakeSpans gives
  // disjoint destinations (out_off) and any source inside the SMEM image.
  std::vector<SpanCase> cases;
  MakeSpans(rng, blocks, cpb, kSpanCap, v.preds, c.index, cases);
  for (auto& sc : cases) sc.mode = 0;
  FJ_CT_RETURN_IF_ERROR(CheckSpans(cases, cpb, kSpanCap, false), "");
  const int threads = PickThreads(rng, c.row, "fj_ct_span_store");
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  std::vector<uint8_t> want(bytes, poison), got(bytes);
  RefSpanStore(src.data(), cases.data(), cpb, blocks, want.data());
  CellLaunch l;
  l.inputs = {{in_, src.data(), bytes},
              {aux_, cases.data(), cases.size() * sizeof(SpanCase)}};
  l.poison_at = out_;
  l.poison = poison;
  l.poison_bytes = bytes;
  l.kernel = "fj_ct_span_store";
  l.args = {PtrArg(in_), PtrArg(out_), PtrArg(aux_), I32Arg(cpb)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = SpanSmemBytes();
  l.cases = blocks * cpb;
  l.what = absl::StrFormat("fj_ct_span_store <<<%d, %d, %u>>>, %d cases/block",
                           blocks, threads, l.shape.smem, cpb);
  l.got = got.data();
  l.got_from = out_;
  l.got_bytes = bytes;
  return RunCell(c, l, [&] {
    auto describe = [&](int b, const SpanDiff& d, const SpanCase* bc) {
      const size_t region = static_cast<size_t>(b) * kSpanCap;
      const int fb = d.first_byte;
      const std::string owner =
          d.first_owner < 0
              ? std::string("a byte no store covers (must keep the poison)")
              : absl::StrCat("store ", SpanText(bc[d.first_owner], false),
                             " at byte ", fb - bc[d.first_owner].dst_off);
      return absl::StrFormat(
          "block %d: %zu of %d output bytes differ; first: out byte %d of the "
          "block, %s: "
          "expected 0x%02x got 0x%02x (poison 0x%02x)",
          b, d.bytes, kSpanCap, fb, owner, want[region + fb], got[region + fb],
          poison);
    };
    std::string first;
    const int bad = CompareSpanBlocks(
        blocks, cpb, want.data(), got.data(),
        [&](int b) { return cases.data() + static_cast<size_t>(b) * cpb; },
        describe, &first);
    return Verdict{bad, absl::StrCat(bad, " stores wrong; ", first)};
  });
}

absl::Status Matrix::Groups(Ctx& c) {
  Rng& rng = c.rng;
  const int blocks = static_cast<int>(rng.Int(1, 8));
  const int chunks = static_cast<int>(rng.Int(1, 12));
  const int r = static_cast<int>(rng.Int(0, 3));
  const int chunk_bytes = r == 0   ? static_cast<int>(rng.Int(1, 16))
                          : r == 1 ? 16 * static_cast<int>(rng.Int(1, 64))
                                   : static_cast<int>(rng.Int(17, 2048));
  const size_t bytes = static_cast<size_t>(blocks) * chunks * chunk_bytes;
  std::vector<uint8_t> src(bytes), want(bytes), got(bytes);
  rng.Fill(src.data(), bytes);
  RefGroups(src.data(), blocks, chunks, chunk_bytes, want.data());
  const int threads = PickThreads(rng, c.row, "fj_ct_groups");
  const uint8_t poison = kPoisons[rng.Int(0, 4)];
  CellLaunch l;
  l.inputs = {{in_, src.data(), bytes}};
  l.poison_at = out_;
  l.poison = poison;
  l.poison_bytes = bytes;
  l.kernel = "fj_ct_groups";
  l.args = {PtrArg(in_), PtrArg(out_), I32Arg(chunks), I32Arg(chunk_bytes)};
  l.shape.grid = blocks;
  l.shape.block = threads;
  l.shape.smem = GroupsSmemBytes(chunk_bytes);
  l.cases = blocks;
  l.what = absl::StrFormat(
      "fj_ct_groups <<<%d, %d, %u>>> %d chunks of %d bytes (4-slot ring, "
      "wait_group<2>)",
      blocks, threads, l.shape.smem, chunks, chunk_bytes);
  l.got = got.data();
  l.got_from = out_;
  l.got_bytes = bytes;
  return RunCell(c, l, [&] {
    const size_t per = static_cast<size_t>(chunks) * chunk_bytes;
    auto describe = [&](int b, size_t n, ptrdiff_t f) {
      return absl::StrFormat(
          "block %d: %zu of %zu bytes differ; first: chunk %d byte %d: "
          "expected 0x%02x got "
          "0x%02x (poison 0x%02x)",
          b, n, per, static_cast<int>(f / chunk_bytes),
          static_cast<int>(f % chunk_bytes), want[b * per + f],
          got[b * per + f], poison);
    };
    std::string first;
    const int bad = CompareBlocks(blocks, per, fj::dtype_u8, 1, want.data(),
                                  got.data(), describe, &first);
    return Verdict{bad, absl::StrCat(bad, " blocks wrong; ", first)};
  });
}

}  // namespace fleetjit::selftest::internal
