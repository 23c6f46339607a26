// fj_copy / fj_prefetch validation on the CPU: every bad input the
// callers' structs alone reveal is a status naming it (no driver call),
// and the tile choice meets the copy layer's and TMA's limits.
#include "runtime/copy/copy_request.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fleetjit::copy {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ull;

// A tensor with its own shape/stride storage.
struct T {
  std::vector<int64_t> shape, strides;
  fj_tensor t{};
  T(uint64_t address, std::vector<int64_t> s, fj_dl_dtype dtype = {2, 32, 1},
    std::vector<int64_t> st = {}, int32_t device_type = 2)
      : shape(std::move(s)), strides(std::move(st)) {
    t.data = reinterpret_cast<void*>(address);
    t.device = {device_type, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
  }
};

CopySpec Spec(const T& src, const T& dst,
              int32_t oob = FJ_OOB_PROMISE_IN_BOUNDS) {
  CopySpec s;
  s.src = DlTensorOf(src.t);
  s.dst = DlTensorOf(dst.t);
  s.oob = oob;
  return s;
}

void ExpectInvalid(const CopySpec& s, const char* needle) {
  auto v = ValidateCopy(s);
  ASSERT_FALSE(v.ok()) << needle;
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument)
      << v.status();
  EXPECT_NE(v.status().message().find(needle), absl::string_view::npos)
      << v.status();
}

TEST(ValidateCopy, AcceptsAWindowAndDescribesIt) {
  T src(kBase, {8, 16}), dst(kBase + (1 << 20), {4, 8});
  CopySpec s = Spec(src, dst);
  s.start = {2, 4};
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->start[0], 4);  // parameter order: dimension 0 innermost
  EXPECT_EQ(v->start[1], 2);
  EXPECT_EQ(v->elements, 32);
  EXPECT_TRUE(v->WindowInBounds());
  EXPECT_EQ(v->src_span.size(), 8u * 16 * 4);
  const TensorDesc w = WindowView(*v);
  EXPECT_EQ(w.address, kBase + (2 * 16 + 4) * 4);
  EXPECT_FALSE(IsDense(w));  // rows of 8 in rows of 16
  EXPECT_TRUE(IsDense(v->dst));
}

TEST(ValidateCopy, FullRowsWindowIsDense) {
  T src(kBase, {8, 16}), dst(kBase + (1 << 20), {3, 16});
  CopySpec s = Spec(src, dst);
  s.start = {5, 0};
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(IsDense(WindowView(*v)));
}

TEST(ValidateCopy, RefusesNulls) {
  T a(kBase, {4}), b(kBase + 4096, {4});
  CopySpec s = Spec(a, b);
  s.src = std::nullopt;
  ExpectInvalid(s, "src: is NULL");
  s = Spec(a, b);
  s.dst = std::nullopt;
  ExpectInvalid(s, "dst: is NULL");
}

TEST(ValidateCopy, RefusesRankAndDtypeMismatch) {
  T a(kBase, {4, 4}), b(kBase + 4096, {16});
  ExpectInvalid(Spec(a, b), "rank");
  T h(kBase + 4096, {4, 4}, {2, 16, 1});
  ExpectInvalid(Spec(a, h), "dtype mismatch");
}

TEST(ValidateCopy, RefusesUnknownDtypes) {
  T a(kBase, {4}, {2, 24, 1}), b(kBase + 4096, {4}, {2, 24, 1});
  ExpectInvalid(Spec(a, b), "unsupported dtype");
  T c(kBase, {4}, {2, 32, 4}), d(kBase + 4096, {4}, {2, 32, 4});
  ExpectInvalid(Spec(c, d), "lanes");
}

TEST(ValidateCopy, RefusesMisalignedAddresses) {
  T a(kBase + 2, {4}), b(kBase + 4096, {4});
  ExpectInvalid(Spec(a, b), "aligned");
  T c(kBase, {4}), d(kBase + 4097, {4});
  ExpectInvalid(Spec(c, d), "aligned");
}

TEST(ValidateCopy, RefusesWindowsOutsideSrcUnderPromise) {
  T src(kBase, {8, 8}), dst(kBase + 4096, {4, 4});
  CopySpec s = Spec(src, dst);
  s.start = {-1, 0};
  ExpectInvalid(s, "FJ_OOB_PROMISE_IN_BOUNDS");
  s.start = {0, 5};
  ExpectInvalid(s, "leaves src");
  // The same windows are fine with a fill.
  s.oob = FJ_OOB_ZEROS;
  EXPECT_TRUE(ValidateCopy(s).ok());
  s.start = {-1, 0};
  s.oob = FJ_OOB_NAN;
  EXPECT_TRUE(ValidateCopy(s).ok());
}

TEST(ValidateCopy, RefusesBadFillModes) {
  T a(kBase, {4}, {0, 32, 1}), b(kBase + 4096, {4}, {0, 32, 1});
  ExpectInvalid(Spec(a, b, FJ_OOB_NAN), "floating-point");
  ExpectInvalid(Spec(a, b, 7), "not an fj_oob");
}

TEST(ValidateCopy, RefusesStartsBeyondTheRank) {
  T a(kBase, {4}), b(kBase + 4096, {4});
  CopySpec s = Spec(a, b);
  s.start = {0, 1};
  ExpectInvalid(s, "start[1]");
}

TEST(ValidateCopy, RefusesOverlappingMemory) {
  T a(kBase, {64}), b(kBase + 128, {64});  // 256 bytes each, 128 apart
  ExpectInvalid(Spec(a, b), "overlap");
  T c(kBase, {64});
  ExpectInvalid(Spec(a, c), "overlap");  // in place
  // Strided views whose spans interleave count as overlapping (conservative).
  T even(kBase, {8}, {2, 32, 1}, {2}), odd(kBase + 4, {8}, {2, 32, 1}, {2});
  ExpectInvalid(Spec(even, odd), "overlap");
  // Adjacent is fine.
  T d(kBase + 256, {64});
  EXPECT_TRUE(ValidateCopy(Spec(a, d)).ok());
}

TEST(ValidateCopy, RefusesADestinationThatAliasesItself) {
  T a(kBase, {4, 4}), b(kBase + 4096, {4, 4}, {2, 32, 1}, {0, 1});
  ExpectInvalid(Spec(a, b), "overlap");
}

TEST(ValidateCopy, ChecksTheGatherIndex) {
  T src(kBase, {16, 8}), dst(kBase + 4096, {3, 8});
  T idx(kBase + 8192, {3}, {0, 32, 1});
  CopySpec s = Spec(src, dst);
  s.index = DlTensorOf(idx.t);
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->gather.has_value());
  EXPECT_EQ(v->gather->elem_bytes, 4);
  EXPECT_EQ(v->gather->length, 3);

  T fidx(kBase + 8192, {3}, {2, 32, 1});
  s.index = DlTensorOf(fidx.t);
  ExpectInvalid(s, "int32 or int64");
  T idx2(kBase + 8192, {3, 1}, {0, 64, 1});
  s.index = DlTensorOf(idx2.t);
  ExpectInvalid(s, "1-D");
  T short_idx(kBase + 8192, {2}, {0, 64, 1});
  s.index = DlTensorOf(short_idx.t);
  ExpectInvalid(s, "rows");
  T over(kBase + 4096 + 16, {3}, {0, 64, 1});
  s.index = DlTensorOf(over.t);
  ExpectInvalid(s, "overlap");
}

// A scatter index (since 1.4): the window has one row per entry (its
// outermost extent), the other extents are dst's; the gather index, with
// both, has as many entries; the index is 1-D int32/int64 and does not
// overlap dst; a scatter never takes the driver's copy.
TEST(ValidateCopy, ChecksTheScatterIndex) {
  // k [5][8] rows into a cache of 64 rows of 8.
  T src(kBase, {5, 8}), dst(kBase + 4096, {64, 8});
  T idx(kBase + 8192, {5}, {0, 32, 1});
  CopySpec s = Spec(src, dst);
  s.scatter = DlTensorOf(idx.t);
  auto v = ValidateCopy(s);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_TRUE(v->scatter.has_value());
  EXPECT_EQ(v->scatter->length, 5);
  EXPECT_EQ(v->window[1], 5);  // parameter order: dimension 1 outermost
  EXPECT_EQ(v->window[0], 8);
  EXPECT_EQ(v->elements, 40);  // the window's, not dst's 512
  EXPECT_TRUE(v->WindowInBounds());
  EXPECT_EQ(WindowDesc(*v).shape[1], 5);
  // Without the index the same tensors are a window of dst's 64 rows,
  // which leaves src under promise_in_bounds.
  s.scatter.reset();
  ExpectInvalid(s, "leaves src");
  // A window past src's rows under promise_in_bounds.
  T long_idx(kBase + 8192, {6}, {0, 32, 1});
  s.scatter = DlTensorOf(long_idx.t);
  ExpectInvalid(s, "leaves src");
  s.oob = FJ_OOB_ZEROS;
  EXPECT_TRUE(ValidateCopy(s).ok());
  // With a gather index too: one entry per window row in both.
  s.oob = FJ_OOB_PROMISE_IN_BOUNDS;
  s.scatter = DlTensorOf(idx.t);
  T gidx(kBase + 12288, {5}, {0, 64, 1});
  s.index = DlTensorOf(gidx.t);
  EXPECT_TRUE(ValidateCopy(s).ok());
  T gidx_short(kBase + 12288, {4}, {0, 64, 1});
  s.index = DlTensorOf(gidx_short.t);
  ExpectInvalid(s, "scatter_index has 5");
  s.index.reset();
  T fidx(kBase + 8192, {5}, {2, 32, 1});
  s.scatter = DlTensorOf(fidx.t);
  ExpectInvalid(s, "scatter_index: has dtype f32");
  T idx2(kBase + 8192, {5, 1}, {0, 32, 1});
  s.scatter = DlTensorOf(idx2.t);
  ExpectInvalid(s, "1-D");
  T over(kBase + 4096 + 64, {5}, {0, 32, 1});
  s.scatter = DlTensorOf(over.t);
  ExpectInvalid(s, "scatter_index");
  ExpectInvalid(s, "overlap");
}

TEST(ValidateCopy, EmptyCopiesValidate) {
  T a(kBase, {0, 4}), b(kBase + 4096, {0, 4});
  auto v = ValidateCopy(Spec(a, b));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->elements, 0);
}

TEST(ChooseTiles, MeetsTheLayerAndTmaLimits) {
  for (int eb : {1, 2, 4, 8}) {
    for (int64_t inner : {1, 3, 17, 100, 1000, 100000}) {
      for (bool gather : {false, true}) {
        for (uint32_t row : {512u, 1024u, 4096u, 65536u}) {
          TensorDesc d;
          d.rank = 3;
          d.elem_bytes = eb;
          d.shape[0] = inner;
          d.shape[1] = 37;
          d.shape[2] = 5;
          const TileShape t = ChooseTiles(d, gather, row, 32768);
          EXPECT_EQ(t.box[0] * eb % 16, 0) << eb << " " << inner;
          EXPECT_LE(t.box[0] * eb, static_cast<int64_t>(row));
          // Rows past TMA's 256 are powers of two (HardwareBox splits them
          // into boxes of 256); outer dimensions stay within 256.
          EXPECT_LE(t.box[0], kMaxTileRowElems);
          if (t.box[0] > 256) {
            EXPECT_EQ(t.box[0] & (t.box[0] - 1), 0) << t.box[0];
          }
          const int64_t longest = std::min<uint32_t>(row, 32768);
          if (inner * eb >= longest) {
            EXPECT_EQ(t.box[0] * eb, longest)
                << "a row of " << inner << " takes the longest tile row";
          }
          for (int k = 0; k < 3; ++k) {
            EXPECT_GE(t.box[k], 1);
            if (k > 0) EXPECT_LE(t.box[k], 256);
          }
          EXPECT_LE(t.tile_bytes, 32768u);
          if (gather) EXPECT_EQ(t.box[2], 1);
          int64_t total = 1;
          for (int k = 0; k < 3; ++k) {
            EXPECT_GE(t.tiles[k] * t.box[k], d.shape[k]);
            EXPECT_LT((t.tiles[k] - 1) * t.box[k], d.shape[k]);
            total *= t.tiles[k];
          }
          EXPECT_EQ(t.total, total);
        }
      }
    }
  }
}

TEST(ValidatePrefetch, ChecksModesAndStageBuffers) {
  PrefetchSpec p;
  p.address = kBase;
  p.bytes = 4096;
  EXPECT_TRUE(ValidatePrefetch(p).ok());
  p.mode = 9;
  EXPECT_EQ(ValidatePrefetch(p).status().code(),
            absl::StatusCode::kInvalidArgument);
  p.mode = static_cast<int32_t>(PrefetchMode::kStageLocal);
  EXPECT_NE(ValidatePrefetch(p).status().message().find("stage_address"),
            absl::string_view::npos);
  p.stage_address = kBase + 8192;
  p.stage_bytes = 100;
  EXPECT_NE(ValidatePrefetch(p).status().message().find("stage_bytes"),
            absl::string_view::npos);
  p.stage_bytes = 4096;
  EXPECT_TRUE(ValidatePrefetch(p).ok());
  p.stage_address = kBase + 2048;
  EXPECT_NE(ValidatePrefetch(p).status().message().find("overlaps"),
            absl::string_view::npos);
  PrefetchSpec q;
  q.bytes = 16;
  EXPECT_EQ(ValidatePrefetch(q).status().code(),
            absl::StatusCode::kInvalidArgument);
  q.address = kBase;
  q.reader_device = -2;
  EXPECT_EQ(ValidatePrefetch(q).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ValidatePrefetch, TurnsATileIntoRows) {
  T t(kBase, {10, 20, 64});  // f32
  PrefetchSpec p;
  p.tensor = DlTensorOf(t.t);
  p.start = {1, 2, 8};
  p.extent = {3, 4, 16};
  auto v = ValidatePrefetch(p);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->rows.row_bytes, 16u * 4);
  EXPECT_EQ(v->rows.count[0], 4);
  EXPECT_EQ(v->rows.count[1], 3);
  EXPECT_EQ(v->rows.stride[0], 64 * 4);
  EXPECT_EQ(v->rows.stride[1], 20 * 64 * 4);
  EXPECT_EQ(v->rows.base, kBase + ((1 * 20 + 2) * 64 + 8) * 4);
  EXPECT_EQ(v->bytes(), 3u * 4 * 16 * 4);
  // Clipped at the tensor's end; extent 0 = to the end.
  p.start = {9, 0, 60};
  p.extent = {5, 0, 0};
  v = ValidatePrefetch(p);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->rows.row_bytes, 4u * 4);
  EXPECT_EQ(v->rows.rows(), 20);
  p.start = {-1, 0, 0};
  EXPECT_FALSE(ValidatePrefetch(p).ok());
}

}  // namespace
}  // namespace fleetjit::copy
