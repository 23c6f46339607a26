#include "jit/param_layout.h"

#include "gtest/gtest.h"

namespace fleetjit::jit {
namespace {

constexpr const char* kPtx = R"(
.version 8.0
.target sm_90
.visible .entry _Z1kPfiN2fj6tensorIfLi2EEEdc(
	.param .u64 .ptr .global .align 4 _Z1kPfiN2fj6tensorIfLi2EEEdc_param_0,
	.param .u32 _Z1kPfiN2fj6tensorIfLi2EEEdc_param_1,
	.param .align 64 .b8 _Z1kPfiN2fj6tensorIfLi2EEEdc_param_2[320],
	.param .f64 _Z1kPfiN2fj6tensorIfLi2EEEdc_param_3,
	.param .u8 _Z1kPfiN2fj6tensorIfLi2EEEdc_param_4
)
{
  ret;
}
.visible .entry plain(
	.param .u16 plain_param_0,
	.param .align 4 .b8 plain_param_1[12],
	.param .f32 plain_param_2
)
{ ret; }
.visible .entry noargs()
{ ret; }
)";

TEST(ParamLayoutTest, FindsEveryEntry) {
  auto names = PtxEntryNames(kPtx);
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[1], "plain");
  EXPECT_EQ(names[2], "noargs");
}

TEST(ParamLayoutTest, ComputesOffsetsFromSizesAndAlignment) {
  auto params = ParsePtxParams(kPtx, "_Z1kPfiN2fj6tensorIfLi2EEEdc");
  ASSERT_TRUE(params.ok()) << params.status();
  ASSERT_EQ(params->size(), 5u);
  EXPECT_EQ((*params)[0].offset, 0u);
  EXPECT_EQ((*params)[0].size, 8u);
  EXPECT_EQ((*params)[1].offset, 8u);
  EXPECT_EQ((*params)[2].offset, 64u);  // aligned up to 64
  EXPECT_EQ((*params)[2].size, 320u);
  EXPECT_EQ((*params)[3].offset, 384u);
  EXPECT_EQ((*params)[4].offset, 392u);
  EXPECT_EQ(ParamBufferBytes(*params), 393u);

  auto plain = ParsePtxParams(kPtx, "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)[1].offset, 4u);
  EXPECT_EQ((*plain)[1].size, 12u);
  EXPECT_EQ((*plain)[2].offset, 16u);
  EXPECT_EQ((*plain)[2].kind, ParamKind::kFloat);
  EXPECT_TRUE(ParsePtxParams(kPtx, "noargs")->empty());
  EXPECT_EQ(ParsePtxParams(kPtx, "missing").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ParamLayoutTest, CxxSignatureGivesKindsAndTensorTypes) {
  auto params = ParsePtxParams(kPtx, "_Z1kPfiN2fj6tensorIfLi2EEEdc");
  ASSERT_TRUE(params.ok());
  ASSERT_TRUE(ApplyCxxSignature("_Z1kPfiN2fj6tensorIfLi2EEEdc", *params).ok());
  EXPECT_EQ((*params)[0].kind, ParamKind::kPointer);
  EXPECT_EQ((*params)[1].kind, ParamKind::kSigned);
  EXPECT_EQ((*params)[2].kind, ParamKind::kTensor);
  EXPECT_EQ((*params)[2].tensor_rank, 2);
  EXPECT_EQ((*params)[2].tensor_dtype, 0);  // f32
  EXPECT_EQ((*params)[3].kind, ParamKind::kFloat);
  EXPECT_EQ((*params)[4].kind, ParamKind::kSigned);  // char
}

// A tensor of a CUDA vector type declares no dtype but its element size
// (tensor_dtype -(1 + sizeof(T))), which a launch checks; so does a user's
// own struct, whose size fj::tensor<T, R, B>'s third argument carries (the
// two-argument form, before it, carried none).
TEST(ParamLayoutTest, VectorElementTypesCarryTheirSize) {
  struct Case {
    const char* mangled;
    int32_t want;
  } cases[] = {
      {"_Z1kPfiN2fj6tensorI6float4Li2EEEdc", -17},
      {"_Z1kPfiN2fj6tensorI7__half2Li2EEEdc", -5},
      {"_Z1kPfiN2fj6tensorI7double2Li2EEEdc", -17},
      {"_Z1kPfiN2fj6tensorI5uint3Li2EEEdc", -13},
      {"_Z1kPfiN2fj6tensorI5char2Li2EEEdc", -3},
      {"_Z1kPfiN2fj6tensorI4PairLi2EEEdc", -1},
      {"_Z1kPfiN2fj6tensorIiLi2EEEdc", 7},  // int: dtype i32
      {"_Z1kPfiN2fj6tensorI4PairLi2ELi8EEEdc", -9},
      {"_Z1kPfiN2fj6tensorI3RgbLi2ELi3EEEdc", -4},
      {"_Z1kPfiN2fj6tensorIfLi2ELi4EEEdc", 0},  // float: dtype f32
      {"_Z1kPfiN2fj6tensorI6float4Li2ELi16EEEdc", -17},
  };
  for (const Case& c : cases) {
    auto params = ParsePtxParams(kPtx, "_Z1kPfiN2fj6tensorIfLi2EEEdc");
    ASSERT_TRUE(params.ok());
    ASSERT_TRUE(ApplyCxxSignature(c.mangled, *params).ok()) << c.mangled;
    EXPECT_EQ((*params)[2].kind, ParamKind::kTensor) << c.mangled;
    EXPECT_EQ((*params)[2].tensor_rank, 2) << c.mangled;
    EXPECT_EQ((*params)[2].tensor_dtype, c.want) << c.mangled;
  }
}

TEST(ParamLayoutTest, MalformedListsAreDataLoss) {
  EXPECT_EQ(
      ParsePtxParams(".entry k(\n .param .zz k_0\n)\n{", "k").status().code(),
      absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParsePtxParams(".entry k(\n .param .u32", "k").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(
      ParsePtxParams(".entry k(.param .b8 k_0[0])\n{", "k").status().code(),
      absl::StatusCode::kDataLoss);
}

TEST(ParamLayoutTest, SignatureCountMismatchIsAnError) {
  std::vector<ParamSpec> one(1);
  EXPECT_FALSE(ApplyCxxSignature("_Z1kPfi", one).ok());
}

}  // namespace
}  // namespace fleetjit::jit
