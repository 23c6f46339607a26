// Tensor arguments: validation, dimension order, strides, TMA decisions,
// tensor map encoding (with a fake cuTensorMapEncodeTiled) and reuse.
#include "runtime/launch/tensor_encoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "tests/runtime/launch/launch_test_util.h"

namespace fleetjit {
namespace {

using testing::FakeDriver;
using testing::TestTensor;

constexpr uint64_t kBase = 0x7f0000000000ull;  // 16-byte aligned

fj::tensor_param EncodeOrDie(const TensorEncoder& e, const fj_tensor_arg& arg,
                             jit::CopyImpl impl, size_t index = 0) {
  alignas(64) fj::tensor_param p;
  absl::Status s = e.Encode(index, &arg, 0, -1, impl, &p);
  EXPECT_TRUE(s.ok()) << s;
  return p;
}

TEST(DtypeFromDlpack, MapsEverySupportedDtype) {
  struct Case {
    uint8_t code, bits;
    fj::dtype_code want;
  } cases[] = {
      {0, 8, fj::dtype_i8},
      {0, 16, fj::dtype_i16},
      {0, 32, fj::dtype_i32},
      {0, 64, fj::dtype_i64},
      {1, 8, fj::dtype_u8},
      {1, 16, fj::dtype_u16},
      {1, 32, fj::dtype_u32},
      {2, 16, fj::dtype_f16},
      {2, 32, fj::dtype_f32},
      {2, 64, fj::dtype_f64},
      {4, 16, fj::dtype_bf16},
      {6, 8, fj::dtype_u8},
      {FJ_DL_FLOAT8_E4M3, 8, fj::dtype_f8e4m3},
      {FJ_DL_FLOAT8_E5M2, 8, fj::dtype_f8e5m2},
  };
  for (const Case& c : cases) {
    auto d = DtypeFromDlpack({c.code, c.bits, 1});
    ASSERT_TRUE(d.ok()) << int(c.code) << "/" << int(c.bits) << ": "
                        << d.status();
    EXPECT_EQ(*d, c.want);
    EXPECT_EQ(DtypeBytes(*d), c.bits / 8);
  }
}

TEST(DtypeFromDlpack, RejectsUnsupported) {
  for (fj_dl_dtype d :
       {fj_dl_dtype{2, 32, 4}, fj_dl_dtype{1, 64, 1}, fj_dl_dtype{2, 8, 1},
        fj_dl_dtype{3, 64, 1}, fj_dl_dtype{5, 64, 1}, fj_dl_dtype{4, 32, 1},
        fj_dl_dtype{FJ_DL_FLOAT8_E4M3, 16, 1}, fj_dl_dtype{99, 8, 1}}) {
    auto r = DtypeFromDlpack({d.code, d.bits, d.lanes});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << int(d.code) << "/" << int(d.bits) << "x" << d.lanes;
  }
}

TEST(DescribeTensor, ReversesDimensionsAndFillsCompactStrides) {
  TestTensor t;
  t.Set(kBase, 3, 2, 32, {4, 5, 6}, /*explicit_strides=*/false);
  t.tensor.byte_offset = 64;
  t.arg.box[0] = 2;
  t.arg.box[1] = 0;  // whole extent
  t.arg.box[2] = 3;
  auto d = DescribeTensor(&t.arg, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->rank, 3);
  EXPECT_EQ(d->address, kBase + 64);
  EXPECT_EQ(d->dtype, fj::dtype_f32);
  EXPECT_EQ(d->elem_bytes, 4);
  EXPECT_EQ(d->shape[0], 6);
  EXPECT_EQ(d->shape[1], 5);
  EXPECT_EQ(d->shape[2], 4);
  EXPECT_EQ(d->stride[0], 1);
  EXPECT_EQ(d->stride[1], 6);
  EXPECT_EQ(d->stride[2], 30);
  EXPECT_EQ(d->box[0], 3);
  EXPECT_EQ(d->box[1], 5);
  EXPECT_EQ(d->box[2], 2);
  EXPECT_EQ(d->oob, fj::oob_zeros);

  // Explicit strides are taken as given (here: a transposed view).
  int64_t strides[3] = {1, 4, 20};
  t.tensor.strides = strides;
  d = DescribeTensor(&t.arg, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->stride[0], 20);
  EXPECT_EQ(d->stride[1], 4);
  EXPECT_EQ(d->stride[2], 1);
}

TEST(DescribeTensor, FillsTheWholeParameter) {
  TestTensor t;
  t.Set(kBase, 2, 2, 16, {7, 9}, true);
  t.arg.oob = FJ_OOB_NAN;
  auto d = DescribeTensor(&t.arg, 0);
  ASSERT_TRUE(d.ok());
  alignas(64) fj::tensor_param p;
  std::memset(&p, 0xA5, sizeof(p));
  FillTensorParam(*d, &p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p.data), kBase);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.dtype, fj::dtype_f16);
  EXPECT_EQ(p.elem_bytes, 2);
  EXPECT_EQ(p.oob, fj::oob_nan);
  EXPECT_EQ(p.flags, 0u);
  EXPECT_EQ(p.shape[0], 9);
  EXPECT_EQ(p.shape[2], 0);
  for (int r : p.reserved) EXPECT_EQ(r, 0);
  for (unsigned char c : p.tmap) EXPECT_EQ(c, 0);
  // The tail padding of the 64-aligned struct is zeroed too.
  const auto* raw = reinterpret_cast<const unsigned char*>(&p);
  for (size_t i = offsetof(fj::tensor_param, reserved) + sizeof(p.reserved);
       i < sizeof(p); ++i) {
    EXPECT_EQ(raw[i], 0) << i;
  }
}

struct BadCase {
  const char* name;
  void (*mutate)(TestTensor&);
  const char* message;
};

TEST(DescribeTensor, RejectsBadTensorsWithTheArgumentIndex) {
  static int64_t negative_shape[2] = {-1, 4};
  const BadCase cases[] = {
      {"short struct_size", [](TestTensor& t) { t.arg.struct_size = 8; },
       "struct_size"},
      {"null tensor", [](TestTensor& t) { t.arg.tensor = nullptr; },
       "tensor is NULL"},
      {"ndim 0", [](TestTensor& t) { t.tensor.ndim = 0; }, "ndim is 0"},
      {"ndim 6", [](TestTensor& t) { t.tensor.ndim = 6; }, "ndim is 6"},
      {"cpu memory", [](TestTensor& t) { t.tensor.device.device_type = 1; },
       "device_type"},
      {"lanes", [](TestTensor& t) { t.tensor.dtype.lanes = 2; }, "lanes"},
      {"opaque dtype",
       [](TestTensor& t) {
         t.tensor.dtype = {3, 64, 1};
       },
       "dtype"},
      {"null shape", [](TestTensor& t) { t.tensor.shape = nullptr; },
       "shape is NULL"},
      {"null data", [](TestTensor& t) { t.tensor.data = nullptr; },
       "data is NULL"},
      {"misaligned", [](TestTensor& t) { t.tensor.byte_offset = 2; },
       "aligned"},
      {"negative shape", [](TestTensor& t) { t.tensor.shape = negative_shape; },
       "shape[0]"},
      {"oob value", [](TestTensor& t) { t.arg.oob = static_cast<fj_oob>(7); },
       "oob is 7"},
      {"nan on int",
       [](TestTensor& t) {
         t.tensor.dtype = {0, 32, 1};
         t.arg.oob = FJ_OOB_NAN;
       },
       "FJ_OOB_NAN"},
      {"huge box", [](TestTensor& t) { t.arg.box[0] = 0x80000000u; }, "box[0]"},
      {"overflowing offset",
       [](TestTensor& t) { t.tensor.byte_offset = ~uint64_t{0} - 8; },
       "overflows"},
  };
  for (const BadCase& c : cases) {
    TestTensor t;
    t.Set(kBase, 2, 2, 32, {8, 8}, true);
    c.mutate(t);
    auto d = DescribeTensor(&t.arg, 3);
    ASSERT_FALSE(d.ok()) << c.name;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_TRUE(absl::StrContains(d.status().message(), "argument 3"))
        << c.name << ": " << d.status();
    EXPECT_TRUE(absl::StrContains(d.status().message(), c.message))
        << c.name << ": " << d.status();
  }
  EXPECT_FALSE(DescribeTensor(nullptr, 0).ok());
}

// A box of more dimensions than the tensor (a 3-D box for a 2-D tensor)
// is refused with both ranks named, whatever the shape.
TEST(DescribeTensor, RefusesABoxOfAnotherRank) {
  std::mt19937_64 rng = testing::SeededRng("RefusesABoxOfAnotherRank");
  for (int round = 0; round < 50; ++round) {
    const int ndim = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims;
    for (int i = 0; i < ndim; ++i) dims.push_back(1 + rng() % 64);
    TestTensor t;
    t.Set(kBase, ndim, 2, 32, dims, rng() % 2 == 0);
    for (int i = 0; i < ndim; ++i) t.arg.box[i] = 1 + rng() % dims[i];
    ASSERT_TRUE(DescribeTensor(&t.arg, 2).ok());
    const int box_rank = ndim + 1 + static_cast<int>(rng() % (5 - ndim));
    t.arg.box[box_rank - 1] = 1 + rng() % 16;
    auto d = DescribeTensor(&t.arg, 2);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string m(d.status().message());
    EXPECT_TRUE(absl::StrContains(m, "argument 2")) << m;
    EXPECT_TRUE(absl::StrContains(m, absl::StrCat("rank-", box_rank, " box")))
        << m;
    EXPECT_TRUE(absl::StrContains(m, absl::StrCat("rank-", ndim, " tensor")))
        << m;
    // fj_tensor_arg_check's path (CheckTensorArg) and the launch path
    // (Encode) share this check.
    DriverApi api = FakeDriver();
    TensorEncoder e(&api, "k", nullptr, nullptr);
    alignas(64) fj::tensor_param p;
    EXPECT_FALSE(e.Encode(2, &t.arg, 0, -1, jit::CopyImpl::kTma, &p).ok());
  }
}

// Under FJ_OOB_PROMISE_IN_BOUNDS a box larger than the tensor in a
// dimension is refused, naming the order; with a fill it is accepted and
// the part outside reads as the fill.
TEST(DescribeTensor, RefusesABoxPastTheTensorUnlessItFills) {
  std::mt19937_64 rng = testing::SeededRng("RefusesABoxPastTheTensor");
  for (int round = 0; round < 50; ++round) {
    const int64_t rows = 2 + rng() % 30, cols = 64 + 16 * (rng() % 8);
    TestTensor t;
    t.Set(kBase, 2, 2, 32, {rows, cols}, true);
    t.arg.oob = FJ_OOB_PROMISE_IN_BOUNDS;
    // Given innermost-first by mistake: {cols-ish, rows-ish}.
    t.arg.box[0] = static_cast<uint32_t>(rows + 1 + rng() % 16);
    t.arg.box[1] = static_cast<uint32_t>(1 + rng() % rows);
    if (t.arg.box[0] > cols) t.arg.box[0] = static_cast<uint32_t>(cols);
    auto d = DescribeTensor(&t.arg, 1);
    ASSERT_FALSE(d.ok());
    const std::string m(d.status().message());
    EXPECT_TRUE(absl::StrContains(
        m,
        absl::StrCat("box[0] = ", t.arg.box[0], " exceeds shape[0] = ", rows)))
        << m;
    EXPECT_TRUE(absl::StrContains(m, "outermost-first")) << m;
    EXPECT_TRUE(absl::StrContains(m, "innermost-first?")) << m;
    for (fj_oob fill : {FJ_OOB_ZEROS, FJ_OOB_NAN}) {
      t.arg.oob = fill;
      d = DescribeTensor(&t.arg, 1);
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->box[1], static_cast<int32_t>(t.arg.box[0]));
    }
  }
  // A box over 256 that fits the tensor is no error: TMA splits it into
  // hardware boxes of at most 256 (HardwareBox), so nothing is rejected.
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {512, 512}, true);
  t.arg.oob = FJ_OOB_PROMISE_IN_BOUNDS;
  t.arg.box[0] = 300;
  t.arg.box[1] = 16;
  auto d = DescribeTensor(&t.arg, 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(TmaRejection(*d), "");
  int32_t hw[FJ_TP_MAX_RANK] = {};
  EXPECT_EQ(HardwareBox(*d, hw), "");
  EXPECT_LE(hw[1], 256);  // device order: dimension 1 is box[0] here
  EXPECT_GE(hw[1], 1);
}

TEST(TmaRejection, AcceptsWhatTmaCanDescribe) {
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {100, 64}, true);
  t.arg.box[0] = 16;
  t.arg.box[1] = 32;
  auto d = DescribeTensor(&t.arg, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(TmaRejection(*d), "");
  // Five dimensions, bf16, NaN fill, padded rows.
  TestTensor u;
  u.Set(kBase + 256, 5, 4, 16, {2, 3, 4, 5, 40}, true, /*pad=*/8);
  u.arg.oob = FJ_OOB_NAN;
  u.arg.box[4] = 8;
  d = DescribeTensor(&u.arg, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(TmaRejection(*d), "");
}

TEST(TmaRejection, NamesWhyTmaCannot) {
  struct Case {
    const char* name;
    void (*mutate)(TestTensor&);
    const char* reason;
  } cases[] = {
      {"address", [](TestTensor& t) { t.tensor.byte_offset = 4; },
       "16-byte aligned"},
      {"inner stride",
       [](TestTensor& t) {
         t.strides[1] = 2;
         t.strides[0] = 128;
       },
       "innermost stride"},
      {"row stride 20 bytes",
       [](TestTensor& t) {
         t.shape[1] = 5;
         t.strides[0] = 5;
       },
       "multiple of 16"},
      {"negative stride", [](TestTensor& t) { t.strides[0] = -64; },
       "positive"},
      {"stride over 2^40",
       [](TestTensor& t) { t.strides[0] = int64_t{1} << 38; }, "below 2^40"},
      // 301 rows: no divisor up to 256 but 7 and 43, whose pieces of
      // 7 x 64 / 43 x 64 bytes are not multiples of 128.
      {"box over 256 without a piece",
       [](TestTensor& t) {
         t.shape[0] = 400;
         t.arg.box[0] = 301;
       },
       "over TMA's 256"},
      {"whole extent over 256 without a piece",
       [](TestTensor& t) {
         t.shape[0] = 1001;
         t.arg.box[0] = 0;
       },
       "over TMA's 256"},
      {"inner box 12 bytes", [](TestTensor& t) { t.arg.box[1] = 3; },
       "16 bytes"},
      {"fp8 nan",
       [](TestTensor& t) {
         t.tensor.dtype = {FJ_DL_FLOAT8_E4M3, 8, 1};
         t.arg.oob = FJ_OOB_NAN;
       },
       "NaN"},
      {"f64 nan",
       [](TestTensor& t) {
         t.tensor.dtype = {2, 64, 1};  // kDLFloat
         t.arg.oob = FJ_OOB_NAN;
       },
       "NaN fill for f64"},
      {"zero extent", [](TestTensor& t) { t.shape[0] = 0; }, "is 0"},
      {"extent over 2^32",
       [](TestTensor& t) {
         t.shape[0] = (int64_t{1} << 32) + 1;
         t.arg.box[0] = 16;
       },
       "2^32"},
  };
  for (const auto& c : cases) {
    TestTensor t;
    t.Set(kBase, 2, 2, 32, {64, 64}, true);
    t.arg.box[0] = 16;
    t.arg.box[1] = 16;
    c.mutate(t);
    auto d = DescribeTensor(&t.arg, 0);
    ASSERT_TRUE(d.ok()) << c.name << ": " << d.status();
    std::string why = TmaRejection(*d);
    EXPECT_TRUE(absl::StrContains(why, c.reason))
        << c.name << ": '" << why << "'";
  }
}

// Boxes over 256 per dimension: the hardware box tiles the box in pieces
// contiguous in SMEM, each a multiple of 128 bytes.
TEST(HardwareBox, SplitsBoxesOverTheTmaLimit) {
  struct Case {
    int bits;
    std::vector<int64_t> shape;  // outermost-first
    std::vector<uint32_t> box;   // outermost-first
    std::vector<int32_t> hw;     // parameter order (dim 0 innermost)
  } cases[] = {
      {16, {8192, 4096}, {1, 4096}, {256, 1}},   // an RMSNorm row, bf16
      {16, {8192, 4096}, {4, 4096}, {256, 1}},   // four rows: 64 pieces
      {32, {5000, 4100}, {32, 32}, {32, 32}},    // no split
      {32, {5000, 512}, {1024, 64}, {64, 256}},  // outer dim split
      {16, {64, 8000}, {1, 4000}, {200, 1}},     // not: 400 B, see below
      // A middle dim split: 150 rows of 64 bytes are 75 x 128 bytes.
      {8, {2, 400, 1024}, {1, 300, 64}, {64, 150, 1}},
  };
  for (const Case& c : cases) {
    TestTensor t;
    const int rank = static_cast<int>(c.shape.size());
    t.Set(kBase, rank, 2, c.bits, c.shape, false);
    if (c.bits == 8) t.tensor.dtype = {1, 8, 1};
    if (c.bits == 16) t.tensor.dtype = {2, 16, 1};
    for (int i = 0; i < rank; ++i) t.arg.box[i] = c.box[i];
    auto d = DescribeTensor(&t.arg, 0);
    ASSERT_TRUE(d.ok()) << d.status();
    int32_t hw[FJ_TP_MAX_RANK] = {};
    const std::string why = HardwareBox(*d, hw);
    if (c.box.back() == 4000) {  // 4000 bf16 has no 128-byte piece
      EXPECT_TRUE(absl::StrContains(why, "a multiple of 64")) << why;
      continue;
    }
    ASSERT_EQ(why, "");
    for (int i = 0; i < rank; ++i) EXPECT_EQ(hw[i], c.hw[i]) << "dim " << i;
    EXPECT_EQ(TmaRejection(*d), "");
  }
}

TEST(TensorEncoder, EncodesTheHardwareBoxAndRecordsIt) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "test.cu:k", nullptr, nullptr);
  e.set_cache_enabled(false);
  TestTensor t;
  t.Set(kBase, 2, 2, 16, {8192, 4096}, false);
  t.tensor.dtype = {4, 16, 1};  // bf16
  t.arg.box[0] = 2;
  t.arg.box[1] = 4096;
  fj::tensor_param p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma);
  EXPECT_EQ(p.flags, FJ_TP_HAS_TMAP | FJ_TP_SPLIT_BOX);
  EXPECT_EQ(p.box[0], 4096);  // the tile is still the caller's box
  EXPECT_EQ(p.box[1], 2);
  EXPECT_EQ(p.hw_box_m1[0], 255);
  EXPECT_EQ(p.hw_box_m1[1], 0);
  EXPECT_EQ(testing::t_last_encode.box[0], 256u);
  EXPECT_EQ(testing::t_last_encode.box[1], 1u);
  EXPECT_EQ(testing::g_fake_encode_rule_violations.load(), 0u);
  // A box within the limit: hw == box, no split flag.
  t.arg.box[1] = 256;
  p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma);
  EXPECT_EQ(p.flags, FJ_TP_HAS_TMAP);
  EXPECT_EQ(p.hw_box_m1[0], 255);
  EXPECT_EQ(p.hw_box_m1[1], 1);
}

TEST(TensorEncoder, SwizzleReachesTheMapAndTheParameter) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "test.cu:k", nullptr, nullptr);
  e.set_cache_enabled(false);
  const CUtensorMapSwizzle want[] = {
      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
      CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B};
  for (int m = 0; m < 4; ++m) {
    TestTensor t;
    t.Set(kBase, 2, 2, 16, {512, 512}, false);
    t.arg.box[0] = 64;
    t.arg.box[1] = m == 0 ? 64 : (16u << m) / 2;  // rows of the width
    t.arg.swizzle = static_cast<fj_swizzle>(m);
    for (jit::CopyImpl impl : {jit::CopyImpl::kTma, jit::CopyImpl::kSync}) {
      fj::tensor_param p = EncodeOrDie(e, t.arg, impl);
      EXPECT_EQ(p.swizzle, m) << "every impl writes the swizzle";
      if (impl == jit::CopyImpl::kTma) {
        EXPECT_EQ(p.flags & FJ_TP_HAS_TMAP, FJ_TP_HAS_TMAP) << m;
        EXPECT_EQ(testing::t_last_encode.swizzle, want[m]);
      }
    }
  }
  EXPECT_EQ(testing::g_fake_encode_rule_violations.load(), 0u);
}

TEST(TensorEncoder, RefusesASwizzleTheBoxDoesNotFit) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "test.cu:k", nullptr, nullptr);
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {512, 512}, false);
  t.arg.box[0] = 8;
  t.arg.box[1] = 64;  // 256-byte rows
  t.arg.swizzle = FJ_SWIZZLE_128B;
  alignas(64) fj::tensor_param p;
  absl::Status s = e.Encode(3, &t.arg, 0, -1, jit::CopyImpl::kCpAsync, &p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "argument 3")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "128 bytes; it is 64 x 4 = 256"))
      << s;
  t.arg.swizzle = static_cast<fj_swizzle>(7);
  s = e.Encode(3, &t.arg, 0, -1, jit::CopyImpl::kTma, &p);
  EXPECT_TRUE(absl::StrContains(s.message(), "not an fj_swizzle value")) << s;
  // A 1.0 caller (struct_size without the field) reads as no swizzle.
  t.arg.box[1] = 32;
  t.arg.struct_size = kTensorArgV1Size;
  s = e.Encode(0, &t.arg, 0, -1, jit::CopyImpl::kTma, &p);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(p.swizzle, 0);
}

TEST(TensorEncoder, EncodesATensorMapOnTmaOnly) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "test.cu:k", nullptr, nullptr);
  e.set_cache_enabled(false);
  TestTensor t;
  t.Set(kBase, 3, 2, 16, {3, 50, 64}, false);
  t.arg.box[0] = 1;
  t.arg.box[1] = 16;
  t.arg.box[2] = 32;
  t.arg.oob = FJ_OOB_NAN;
  fj::tensor_param p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma);
  EXPECT_EQ(p.flags & FJ_TP_HAS_TMAP, FJ_TP_HAS_TMAP);
  const testing::FakeEncodeCall& c = testing::t_last_encode;
  EXPECT_EQ(c.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  EXPECT_EQ(c.rank, 3u);
  EXPECT_EQ(c.address, kBase);
  EXPECT_EQ(c.dims[0], 64u);
  EXPECT_EQ(c.dims[1], 50u);
  EXPECT_EQ(c.dims[2], 3u);
  EXPECT_EQ(c.strides[0], 64u * 2);
  EXPECT_EQ(c.strides[1], 64u * 50 * 2);
  EXPECT_EQ(c.box[0], 32u);
  EXPECT_EQ(c.box[1], 16u);
  EXPECT_EQ(c.box[2], 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.element_strides[i], 1u);
  EXPECT_EQ(c.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  EXPECT_EQ(c.swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
  EXPECT_EQ(c.l2, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  EXPECT_EQ(c.fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);

  t.arg.oob = FJ_OOB_ZEROS;
  p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma);
  EXPECT_EQ(testing::t_last_encode.fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);

  for (jit::CopyImpl impl : {jit::CopyImpl::kSync, jit::CopyImpl::kCpAsync}) {
    const uint64_t calls = testing::g_fake_encode_calls.load();
    p = EncodeOrDie(e, t.arg, impl);
    EXPECT_EQ(p.flags, 0u);
    for (unsigned char b : p.tmap) EXPECT_EQ(b, 0);
    EXPECT_EQ(testing::g_fake_encode_calls.load(), calls) << "no map off tma";
  }
}

TEST(TensorEncoder, FallsBackCountsAndReportsOnce) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<uint64_t> reported{0};
  std::vector<std::pair<LogLevel, std::string>> lines;
  Logger logger(LogLevel::kInfo, [&lines](LogLevel level, absl::string_view m) {
    lines.emplace_back(level, std::string(m));
  });
  TensorEncoder e(&api, "ragged.cu:k", &fallbacks, &reported, &logger);
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {33, 33},
        true);  // 132-byte rows: not a multiple of 16
  t.arg.box[0] = 8;
  t.arg.box[1] = 8;
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    fj::tensor_param p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma, 2);
    EXPECT_EQ(p.flags, 0u);
    EXPECT_EQ(p.stride[1], 33);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "")
      << "the library writes no stderr";
  EXPECT_EQ(fallbacks.load(), 5u);
  EXPECT_EQ(reported.load(), 1u << 2);
  ASSERT_EQ(lines.size(), 1u) << "reported once";
  EXPECT_EQ(lines[0].first, LogLevel::kInfo);
  EXPECT_TRUE(absl::StrContains(
      lines[0].second,
      "launch: ragged.cu:k: tensor arg 2: TMA cannot describe it ("))
      << lines[0].second;
  EXPECT_TRUE(absl::EndsWith(lines[0].second, "); using cp_async"))
      << lines[0].second;
}

TEST(TensorEncoder, FallbackBelowTheLoggersLevelIsCountedNotReported) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> fallbacks{0};
  std::atomic<uint64_t> reported{0};
  int calls = 0;
  Logger logger(LogLevel::kWarn,
                [&calls](LogLevel, absl::string_view) { ++calls; });
  TensorEncoder e(&api, "ragged.cu:k", &fallbacks, &reported, &logger);
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {33, 33}, true);
  t.arg.box[0] = 8;
  t.arg.box[1] = 8;
  EncodeOrDie(e, t.arg, jit::CopyImpl::kTma, 2);
  EXPECT_EQ(fallbacks.load(), 1u);
  EXPECT_EQ(calls, 0);
}

TEST(TensorEncoder, DriverRefusalOrNoDriverFallsBack) {
  DriverApi refusing;
  refusing.cuTensorMapEncodeTiled = &testing::RefusingEncodeTiled;
  std::atomic<uint64_t> fallbacks{0};
  TestTensor t;
  t.Set(kBase, 1, 2, 32, {64}, false);
  for (const DriverApi* api : {static_cast<const DriverApi*>(&refusing),
                               static_cast<const DriverApi*>(nullptr)}) {
    TensorEncoder e(api, "k", &fallbacks, nullptr);
    fj::tensor_param p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma);
    EXPECT_EQ(p.flags, 0u);
    for (unsigned char b : p.tmap) EXPECT_EQ(b, 0);
  }
  EXPECT_EQ(fallbacks.load(), 2u);
  DriverApi old_driver;  // no cuTensorMapEncodeTiled entry point
  TensorEncoder e(&old_driver, "k", &fallbacks, nullptr);
  EXPECT_EQ(EncodeOrDie(e, t.arg, jit::CopyImpl::kTma).flags, 0u);
  EXPECT_EQ(fallbacks.load(), 3u);
}

TEST(TensorEncoder, ChecksTheDeclaredRankAndDtype) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "k", nullptr, nullptr);
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {16, 16}, true);
  alignas(64) fj::tensor_param p;
  for (bool cached : {false, true}) {
    e.set_cache_enabled(cached);
    EXPECT_TRUE(
        e.Encode(4, &t.arg, 2, fj::dtype_f32, jit::CopyImpl::kTma, &p).ok());
    absl::Status s =
        e.Encode(4, &t.arg, 3, fj::dtype_f32, jit::CopyImpl::kTma, &p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.message(), "argument 4")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "rank-3")) << s;
    s = e.Encode(4, &t.arg, 2, fj::dtype_bf16, jit::CopyImpl::kTma, &p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.message(), "bf16")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "f32")) << s;
  }
}

// A kernel's FJ_TENSOR(float4, 2) declares 16-byte elements (tensor_dtype
// -17, jit/param_layout.cc): an f32 tensor is refused, a 16-byte dtype
// passes; the cached path checks the same.
TEST(TensorEncoder, ChecksTheDeclaredElementSize) {
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "k", nullptr, nullptr);
  TestTensor f32, f16;
  f32.Set(kBase, 2, 2, 32, {16, 16}, true);
  f16.Set(kBase, 2, 2, 16, {16, 32}, true);
  alignas(64) fj::tensor_param p;
  for (bool cached : {false, true}) {
    e.set_cache_enabled(cached);
    for (int pass = 0; pass < 2; ++pass) {  // the second may hit the cache
      absl::Status s =
          e.Encode(5, &f32.arg, 2, -1 - 16, jit::CopyImpl::kTma, &p);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "argument 5")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "16-byte elements")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "f32 (4 bytes)")) << s;
      // __half2 (4 bytes) over f32 has the tensor's element size.
      EXPECT_TRUE(
          e.Encode(5, &f32.arg, 2, -1 - 4, jit::CopyImpl::kTma, &p).ok());
      s = e.Encode(5, &f16.arg, 2, -1 - 4, jit::CopyImpl::kTma, &p);
      EXPECT_TRUE(absl::StrContains(s.message(), "f16 (2 bytes)")) << s;
    }
  }
}

TEST(TensorEncoder, ReusesMapsWhileTheTensorIsUnchanged) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> owner{0};
  TensorEncoder e(&api, "k", &owner, nullptr);
  TestTensor t;
  t.Set(kBase, 2, 2, 32, {64, 64}, true);
  t.arg.box[0] = 16;
  t.arg.box[1] = 16;
  auto encode = [&] {
    const uint64_t before = testing::g_fake_encode_calls.load();
    fj::tensor_param p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma, 1);
    EXPECT_EQ(p.flags, FJ_TP_HAS_TMAP);
    return testing::g_fake_encode_calls.load() - before;
  };
  EXPECT_EQ(encode(), 1u);
  EXPECT_EQ(encode(), 0u) << "reused";
  t.tensor.data = reinterpret_cast<void*>(kBase + 4096);
  EXPECT_EQ(encode(), 1u) << "new pointer";
  EXPECT_EQ(encode(), 0u);
  t.shape[0] = 32;
  EXPECT_EQ(encode(), 1u) << "new shape";
  t.strides[0] = 128;
  EXPECT_EQ(encode(), 1u) << "new stride";
  t.arg.box[0] = 8;
  EXPECT_EQ(encode(), 1u) << "new box";
  t.arg.oob = FJ_OOB_NAN;
  EXPECT_EQ(encode(), 1u) << "new oob";
  t.tensor.dtype = {1, 32, 1};
  t.arg.oob = FJ_OOB_ZEROS;
  EXPECT_EQ(encode(), 1u) << "new dtype";
  EXPECT_EQ(encode(), 0u);
  t.tensor.byte_offset = 256;
  EXPECT_EQ(encode(), 1u) << "new byte_offset";
  t.tensor.device.device_type = 13;  // kDLCUDAManaged
  EXPECT_EQ(encode(), 1u) << "new device type";
  t.tensor.strides = nullptr;  // the same layout, compact by default
  t.shape[0] = 64;
  t.tensor.data = reinterpret_cast<void*>(kBase + 8192);
  EXPECT_EQ(encode(), 1u) << "strides left out";
  t.tensor.strides = t.strides;
  t.strides[0] = 64;
  EXPECT_EQ(encode(), 1u) << "the same strides, given";
  EXPECT_EQ(encode(), 0u);
  t.arg.box[1] = 32;  // 32 f32 = 128 bytes: the 128B swizzle's width
  EXPECT_EQ(encode(), 1u);
  t.arg.swizzle = FJ_SWIZZLE_128B;
  EXPECT_EQ(encode(), 1u) << "new swizzle";
  EXPECT_EQ(encode(), 0u);
  e.set_cache_enabled(false);
  EXPECT_EQ(encode(), 1u) << "cache off";
}

// ForgetKeptTensors (a runtime made or destroyed) empties every thread's
// cache: the same tensor is encoded again, on this thread and on another
// that kept it before.
TEST(TensorEncoder, ForgettingKeptTensorsEncodesThemAfresh) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> owner{0};
  TensorEncoder e(&api, "k", &owner, nullptr);
  TestTensor t;
  t.Set(kBase + (uint64_t{1} << 24), 2, 2, 32, {64, 64}, true);
  fj::tensor_param first{};
  auto encodes = [&](fj::tensor_param* p) {
    const uint64_t before = testing::g_fake_encode_calls.load();
    *p = EncodeOrDie(e, t.arg, jit::CopyImpl::kTma, 0);
    return testing::g_fake_encode_calls.load() - before;
  };
  EXPECT_EQ(encodes(&first), 1u);
  fj::tensor_param p{};
  EXPECT_EQ(encodes(&p), 0u) << "kept";
  ForgetKeptTensors();
  EXPECT_EQ(encodes(&p), 1u) << "forgotten: encoded again";
  EXPECT_EQ(std::memcmp(&p, &first, sizeof(p)), 0);
  EXPECT_EQ(encodes(&p), 0u) << "kept again";

  // Another thread's cache empties at its next tensor.
  uint64_t other[3] = {};
  std::atomic<int> step{0};
  std::thread thread([&] {
    fj::tensor_param q{};
    other[0] = encodes(&q);
    other[1] = encodes(&q);
    step = 1;
    while (step.load() != 2) std::this_thread::yield();
    other[2] = encodes(&q);
  });
  while (step.load() != 1) std::this_thread::yield();
  ForgetKeptTensors();
  step = 2;
  thread.join();
  EXPECT_EQ(other[0], 1u) << "a new thread's cache starts empty";
  EXPECT_EQ(other[1], 0u);
  EXPECT_EQ(other[2], 1u) << "forgotten on the other thread too";
}

// The cache holds tensors, not kernels' slots: kernels that pass the same
// tensors, in any slot and in turn, encode each tensor once. (A cache filed
// by kernel and slot re-encoded whenever two kernels' slots collided: with
// the driver's encoder, a microsecond per tensor.)
TEST(TensorEncoder, SharesEncodedTensorsAcrossKernelsAndSlots) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> kernels[3];
  for (auto& k : kernels) k = 0;
  TestTensor tensors[4];
  for (int i = 0; i < 4; ++i) {
    tensors[i].Set(kBase + (uint64_t{1} << 20) * (i + 7), 2, 2, 32, {64, 64},
                   i % 2 == 0);
  }
  // What each tensor encodes to, with the cache off.
  TensorEncoder uncached(&api, "reference", nullptr, nullptr);
  uncached.set_cache_enabled(false);
  fj::tensor_param want[4];
  for (int i = 0; i < 4; ++i)
    want[i] = EncodeOrDie(uncached, tensors[i].arg, jit::CopyImpl::kTma, i);
  std::mt19937_64 rng = testing::SeededRng("SharesEncodedTensors");
  const uint64_t before = testing::g_fake_encode_calls.load();
  for (int round = 0; round < 50; ++round) {
    TensorEncoder e(&api, "k", &kernels[round % 3], nullptr);
    int order[4] = {0, 1, 2, 3};
    std::shuffle(order, order + 4, rng);
    for (size_t slot = 0; slot < 4; ++slot) {
      fj::tensor_param p =
          EncodeOrDie(e, tensors[order[slot]].arg, jit::CopyImpl::kTma, slot);
      ASSERT_EQ(p.flags, FJ_TP_HAS_TMAP);
      ASSERT_EQ(std::memcmp(&p, &want[order[slot]], sizeof(p)), 0)
          << "round " << round << ", slot " << slot
          << ": not its own tensor's parameter";
    }
  }
  EXPECT_EQ(testing::g_fake_encode_calls.load() - before, 4u)
      << "each tensor is encoded once, whichever kernel and slot pass it";
}

// A model's launches cycle through its layers' tensors. The cache holds a
// working set of 64 (weights and activations of a few dozen layers): the
// second and later passes encode nothing. (A cache that holds fewer,
// cycled through in order, misses on every launch.)
TEST(TensorEncoder, KeepsAWorkingSetOfSixtyFourTensors) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> kernels[2];
  for (auto& k : kernels) k = 0;
  constexpr int kTensors = 64;
  std::vector<std::unique_ptr<TestTensor>> tensors;
  for (int i = 0; i < kTensors; ++i) {
    tensors.push_back(std::make_unique<TestTensor>());
    // Allocator-like addresses: 2 MiB apart, a few sharing a block.
    tensors.back()->Set(
        kBase + (uint64_t{1} << 21) * (i / 2 + 100) + (i % 2) * 65536, 2, 2, 32,
        {128, 64}, false);
  }
  const uint64_t before = testing::g_fake_encode_calls.load();
  for (int pass = 0; pass < 4; ++pass) {
    for (int i = 0; i < kTensors; ++i) {
      TensorEncoder e(&api, "layer", &kernels[i % 2], nullptr);
      EncodeOrDie(e, tensors[i]->arg, jit::CopyImpl::kTma, i % 3);
    }
    EXPECT_EQ(testing::g_fake_encode_calls.load() - before, uint64_t{kTensors})
        << "pass " << pass << ": the first pass encodes each tensor once, "
        << "later passes find them all";
  }
}

// A cached encoder beside an uncached one, over the fake driver.
struct CachedAndUncached {
  enum Outcome { kAgree, kFailed, kDiffer };

  DriverApi api = FakeDriver();
  std::atomic<uint64_t> kernel{0};
  TensorEncoder cached{&api, "k", &kernel, nullptr};
  TensorEncoder uncached{&api, "k", nullptr, nullptr};
  uint64_t cached_calls = 0;  // driver encodes of the cached side

  CachedAndUncached() { uncached.set_cache_enabled(false); }

  // Encodes `t` through both, their outputs poisoned apart first.
  Outcome Compare(const TestTensor& t, jit::CopyImpl impl) {
    alignas(64) fj::tensor_param a, b;
    std::memset(&a, 0x11, sizeof(a));
    std::memset(&b, 0x22, sizeof(b));
    const uint64_t before = testing::g_fake_encode_calls.load();
    const absl::Status sa = cached.Encode(0, &t.arg, 2, -1, impl, &a);
    cached_calls += testing::g_fake_encode_calls.load() - before;
    const absl::Status sb = uncached.Encode(0, &t.arg, 2, -1, impl, &b);
    if (!sa.ok() || !sb.ok()) return kFailed;
    return std::memcmp(&a, &b, sizeof(a)) == 0 ? kAgree : kDiffer;
  }
};

// Tensors that differ in any field the parameter depends on never share an
// entry: 160 random tensors, each field drawn from two or three values (so
// that tags and sets collide often), drawn 4,000 times in random order,
// give through the cache exactly what they give uncached, hits included.
// (Pointers and offsets alone choose a set here, so sets overflow: a test of
// keeping apart, not of capacity.)
TEST(TensorEncoder, CachedEncodingMatchesUncachedForEveryField) {
  CachedAndUncached both;
  std::mt19937_64 rng = testing::SeededRng("CachedEncodingForEveryField");
  struct Draw {
    uint8_t code;
    int64_t rows, cols;
    int strides;  // 0 NULL, 1 given, 2 padded rows
    uint64_t data, byte_offset;
    int32_t device_type;
    uint32_t box0;
    fj_oob oob;
    fj_swizzle swizzle;
    jit::CopyImpl impl;
  };
  std::vector<Draw> pool(160);
  for (Draw& d : pool) {
    d.code = rng() % 2 ? 2 : 0;  // f32 or i32: 4 bytes either way
    d.rows = rng() % 2 ? 64 : 128;
    d.cols = rng() % 2 ? 64 : 96;
    d.strides = static_cast<int>(rng() % 3);
    d.data = kBase + (uint64_t{1} << 20) * (rng() % 4);
    d.byte_offset = 256 * (rng() % 3);
    d.device_type = rng() % 2 ? 2 : 13;
    d.box0 = rng() % 2 ? 16 : 32;
    d.oob = rng() % 2 ? FJ_OOB_ZEROS : FJ_OOB_PROMISE_IN_BOUNDS;
    d.swizzle = rng() % 2 ? FJ_SWIZZLE_NONE : FJ_SWIZZLE_128B;
    d.impl = rng() % 4 ? jit::CopyImpl::kTma : jit::CopyImpl::kCpAsync;
  }
  uint64_t tma_draws = 0;
  int mismatches = 0, failures = 0;
  for (int i = 0; i < 4000; ++i) {
    const Draw& d = pool[rng() % pool.size()];
    TestTensor t;
    t.Set(d.data, 2, d.code, 32, {d.rows, d.cols}, d.strides != 0,
          d.strides == 2 ? 4 : 0);
    t.tensor.byte_offset = d.byte_offset;
    t.tensor.device.device_type = d.device_type;
    t.arg.box[0] = d.box0;
    t.arg.box[1] = 32;  // 128 bytes: every swizzle's width fits
    t.arg.oob = d.oob;
    t.arg.swizzle = d.swizzle;
    tma_draws += d.impl == jit::CopyImpl::kTma;
    const CachedAndUncached::Outcome outcome = both.Compare(t, d.impl);
    failures += outcome == CachedAndUncached::kFailed;
    mismatches += outcome == CachedAndUncached::kDiffer;
  }
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
  // Most draws hit (the pool's tensors crowd a few sets on purpose, so some
  // miss again): the compares above covered hits, not only misses.
  EXPECT_LT(both.cached_calls * 2, tma_draws)
      << both.cached_calls << " encodes";
}

// The fields the cache's set comes from (byte_offset, the swizzle and
// strides flags, the copy implementation) still tell entries of one set
// apart: 64 byte offsets of one pointer, and 256 pointers each with and
// without a swizzle and under tma and cp_async, are more than 32 sets hold
// apart, and each encodes as it does uncached.
TEST(TensorEncoder, TensorsSharingASetStayApart) {
  CachedAndUncached both;
  int mismatches = 0;
  auto check = [&](const TestTensor& t, jit::CopyImpl impl) {
    const CachedAndUncached::Outcome outcome = both.Compare(t, impl);
    ASSERT_NE(outcome, CachedAndUncached::kFailed);
    mismatches += outcome == CachedAndUncached::kDiffer;
  };
  TestTensor t;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t k = 0; k < 64; ++k) {
      t.Set(kBase + (uint64_t{1} << 30), 2, 2, 32, {64, 64}, false);
      t.tensor.byte_offset = 256 * k;
      check(t, jit::CopyImpl::kTma);
    }
  }
  EXPECT_EQ(mismatches, 0) << "byte offsets";
  for (uint64_t k = 0; k < 256; ++k) {
    for (int variant = 0; variant < 4; ++variant) {
      t.Set(kBase + (uint64_t{1} << 31) + (uint64_t{1} << 20) * k, 2, 2, 32,
            {64, 64}, false);
      t.arg.box[1] = 32;  // 128 bytes: the 128B swizzle's width
      t.arg.swizzle = variant % 2 ? FJ_SWIZZLE_128B : FJ_SWIZZLE_NONE;
      check(t, variant < 2 ? jit::CopyImpl::kTma : jit::CopyImpl::kCpAsync);
    }
  }
  EXPECT_EQ(mismatches, 0) << "swizzles and implementations";
}

// Many threads encode random tensors through cached encoders of a few
// "kernels" and compare every result with an uncached encoding.
TEST(TensorEncoder, ConcurrentCachedEncodingMatchesUncached) {
  DriverApi api = FakeDriver();
  std::atomic<uint64_t> kernels[3];
  for (auto& k : kernels) k = 0;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::mt19937_64 seed_rng = testing::SeededRng("ConcurrentCachedEncoding");
  std::vector<std::thread> threads;
  for (int th = 0; th < 16; ++th) {
    const uint64_t seed = seed_rng();
    threads.emplace_back([&, seed] {
      std::mt19937_64 rng(seed);
      TensorEncoder uncached(&api, "k", nullptr, nullptr);
      uncached.set_cache_enabled(false);
      TestTensor pool[4];
      for (TestTensor& t : pool) {
        t.Set(kBase + 256 * (rng() % 64), 2, 2, 32,
              {int64_t(rng() % 64 + 1), 64}, true);
      }
      for (int i = 0; i < 2000; ++i) {
        TestTensor& t = pool[rng() % 4];
        if (rng() % 8 == 0)
          t.tensor.data = reinterpret_cast<void*>(kBase + 16 * (rng() % 1024));
        if (rng() % 8 == 0) t.arg.box[1] = static_cast<uint32_t>(rng() % 40);
        TensorEncoder cached(&api, "k", &kernels[rng() % 3], nullptr);
        const size_t slot = rng() % 4;
        alignas(64) fj::tensor_param a, b;
        std::memset(&a, 0x11, sizeof(a));
        std::memset(&b, 0x22, sizeof(b));
        if (!cached.Encode(slot, &t.arg, 2, -1, jit::CopyImpl::kTma, &a).ok() ||
            !uncached.Encode(slot, &t.arg, 2, -1, jit::CopyImpl::kTma, &b)
                 .ok()) {
          ++failures;
        } else if (std::memcmp(&a, &b, sizeof(a)) != 0) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TensorEncoder, NeverBreaksTheDriverRules) {
  // Random tensors, half of them not TMA-describable: whatever the encoder
  // sends to the driver must satisfy cuTensorMapEncodeTiled's rules.
  DriverApi api = FakeDriver();
  TensorEncoder e(&api, "k", nullptr, nullptr);
  e.set_cache_enabled(false);
  std::mt19937_64 rng = testing::SeededRng("NeverBreaksTheDriverRules");
  const uint64_t violations = testing::g_fake_encode_rule_violations.load();
  const uint8_t codes[][2] = {
      {2, 32}, {2, 16}, {4, 16}, {0, 8},  {1, 8},
      {0, 32}, {2, 64}, {0, 64}, {0, 16}, {FJ_DL_FLOAT8_E5M2, 8}};
  int encoded = 0;
  for (int i = 0; i < 5000; ++i) {
    TestTensor t;
    const int ndim = 1 + rng() % 5;
    std::vector<int64_t> dims;
    for (int d = 0; d < ndim; ++d) dims.push_back(1 + rng() % 300);
    const auto& c = codes[rng() % 10];
    t.Set(kBase + 4 * (rng() % 16) * (c[1] / 8), ndim, c[0], c[1], dims,
          rng() % 2, rng() % 3 == 0 ? rng() % 9 : 0);
    for (int d = 0; d < ndim; ++d)
      t.arg.box[d] = rng() % 3 == 0 ? 0 : rng() % 300;
    t.arg.oob = static_cast<fj_oob>(rng() % 3);
    if (t.arg.oob == FJ_OOB_NAN &&
        !DtypeIsFloat(*DtypeFromDlpack(DlTensorOf(t.tensor).dtype))) {
      t.arg.oob = FJ_OOB_ZEROS;
    }
    // A box past the tensor is refused under PROMISE_IN_BOUNDS
    // (RefusesABoxPastTheTensorUnlessItFills): keep those in bounds.
    for (int d = 0; t.arg.oob == FJ_OOB_PROMISE_IN_BOUNDS && d < ndim; ++d) {
      t.arg.box[d] = std::min<uint32_t>(t.arg.box[d], dims[d]);
    }
    alignas(64) fj::tensor_param p;
    absl::Status s = e.Encode(0, &t.arg, 0, -1, jit::CopyImpl::kTma, &p);
    ASSERT_TRUE(s.ok()) << s;
    encoded += (p.flags & FJ_TP_HAS_TMAP) != 0;
  }
  EXPECT_EQ(testing::g_fake_encode_rule_violations.load(), violations);
  EXPECT_GT(encoded, 0);
  std::printf("[ info     ] %d of 5000 random tensors were TMA-describable\n",
              encoded);
}

}  // namespace
}  // namespace fleetjit
