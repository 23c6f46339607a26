// fj_tune and fj_tune_result_* refuse bad input before anything reaches a
// device: NULLs, struct_size, empty spaces, duplicate candidates, outputs
// that cannot be checked, unknown flags, forged and stale result handles.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::CapiRuntimeTest;
using ::fleetjit::testing::Code;
using ::fleetjit::testing::S;

// The status's code and whether its message names `field`.
::testing::AssertionResult Refused(fj_status* st, fj_code code,
                                   const char* field) {
  const fj_code got = fj_status_code(st);
  const std::string message = fj_status_message(st, nullptr);
  fj_status_free(st);
  if (got != code) {
    return ::testing::AssertionFailure()
           << "code " << fj_code_name(got) << " (" << message << "), expected "
           << fj_code_name(code);
  }
  if (!absl::StrContains(message, field)) {
    return ::testing::AssertionFailure()
           << "message '" << message << "' does not name " << field;
  }
  return ::testing::AssertionSuccess();
}

class TuneCapiTest : public CapiRuntimeTest<> {
 protected:
  void SetUp() override {
    CapiRuntimeTest<>::SetUp();
    build_ = BuildOptions(::fleetjit::testing::SaxpySource(), "");
    for (uint32_t x : {64u, 128u, 256u}) {
      fj_tune_shape s{};
      s.struct_size = sizeof(s);
      s.block[0] = x;
      shapes_.push_back(s);
    }
    macros_ = {S(m1_), S(m2_)};
    args_.resize(4);
    for (fj_arg& a : args_) a.struct_size = sizeof(fj_arg);
    // examples/saxpy.cu: saxpy(float* y, const float* x, float a, int n).
    args_[0].kind = FJ_ARG_POINTER;
    args_[0].v.pointer = 0x2000;
    args_[1].kind = FJ_ARG_POINTER;
    args_[1].v.pointer = 0x1000;
    args_[2].kind = FJ_ARG_F32;
    args_[3].kind = FJ_ARG_I32;
    o_.struct_size = sizeof(o_);
    o_.build = &build_;
    o_.kernel = S(kernel_);
    o_.macro_sets = macros_.data();
    o_.num_macro_sets = macros_.size();
    o_.shapes = shapes_.data();
    o_.num_shapes = shapes_.size();
    o_.grid_extent[0] = 1 << 20;
    o_.grid_divisor[0] = S(block_x_);
    o_.args = args_.data();
    o_.num_args = args_.size();
    o_.output_addresses = &out_address_;
    o_.output_bytes = &out_bytes_;
    o_.num_outputs = 1;
  }

  fj_status* Tune(const fj_tune_options* o) {
    return fj_tune(rt_, o, &result_);
  }

  std::string kernel_ = "saxpy", m1_ = "-DA=1", m2_ = "-DA=2",
              block_x_ = "block.x";
  fj_build_options build_{};
  std::vector<fj_tune_shape> shapes_;
  std::vector<fj_str> macros_;
  std::vector<fj_arg> args_;
  uint64_t out_address_ = 0x2000, out_bytes_ = 4096;
  fj_tune_options o_{};
  fj_tune_result* result_ = nullptr;
};

TEST_F(TuneCapiTest, NullsAndStructSizes) {
  EXPECT_TRUE(
      Refused(fj_tune(nullptr, &o_, &result_), FJ_INVALID_ARGUMENT, "runtime"));
  EXPECT_TRUE(
      Refused(fj_tune(rt_, nullptr, &result_), FJ_INVALID_ARGUMENT, "options"));
  EXPECT_TRUE(
      Refused(fj_tune(rt_, &o_, nullptr), FJ_INVALID_ARGUMENT, "out_result"));
  fj_tune_options small = o_;
  small.struct_size = sizeof(o_) - 1;
  EXPECT_TRUE(Refused(Tune(&small), FJ_INVALID_ARGUMENT, "struct_size"));
  fj_tune_options no_build = o_;
  no_build.build = nullptr;
  EXPECT_TRUE(Refused(Tune(&no_build), FJ_INVALID_ARGUMENT, "options->build"));
  fj_build_options bad_build = build_;
  bad_build.struct_size = 4;
  fj_tune_options with_bad_build = o_;
  with_bad_build.build = &bad_build;
  EXPECT_TRUE(
      Refused(Tune(&with_bad_build), FJ_INVALID_ARGUMENT, "struct_size"));
  fj_tune_options no_kernel = o_;
  no_kernel.kernel = fj_str{nullptr, 0};
  EXPECT_TRUE(Refused(Tune(&no_kernel), FJ_INVALID_ARGUMENT, "kernel"));
  EXPECT_EQ(result_, nullptr);  // outputs untouched on error
}

TEST_F(TuneCapiTest, EmptyAndDuplicateSpaces) {
  fj_tune_options o = o_;
  o.num_shapes = 0;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "num_shapes"));
  o = o_;
  o.shapes = nullptr;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "shapes"));
  o = o_;
  shapes_[0].struct_size = 8;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "shapes[0].struct_size"));
  shapes_[0].struct_size = sizeof(fj_tune_shape);
  shapes_[2].struct_size = sizeof(fj_tune_shape) + 8;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "shapes[2].struct_size"));
  shapes_[2].struct_size = sizeof(fj_tune_shape);
  shapes_[2].block[0] = shapes_[0].block[0];
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "shapes[2]"));
  shapes_[2].block[0] = 512;
  m2_ = " -DA=1 ";
  macros_[1] = S(m2_);
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "macro_sets[1]"));
  o.macro_sets = nullptr;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "macro_sets"));
}

TEST_F(TuneCapiTest, OutputsChecksAndSettings) {
  fj_tune_options o = o_;
  o.num_outputs = 0;  // and no check_fn
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "check_fn"));
  o = o_;
  o.output_addresses = nullptr;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "output_addresses"));
  o = o_;
  o.output_bytes = nullptr;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "output_bytes"));
  o = o_;
  uint64_t zero = 0;
  o.output_bytes = &zero;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "output_bytes[0]"));
  o = o_;
  o.output_addresses = &zero;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "output_addresses[0]"));
  o = o_;
  o.flags = 1u << 7;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "flags"));
  o = o_;
  o.noise_threshold = -1;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "noise_threshold"));
  o.noise_threshold = std::nan("");
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "noise_threshold"));
  // Counts past FJ_TUNE_MAX_COUNT (timeout_ms bounds each wait, so an
  // unbounded count is an unbounded call).
  for (uint32_t count : {FJ_TUNE_MAX_COUNT + 1, UINT32_MAX}) {
    o = o_;
    o.warmup = count;
    EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "options->warmup"));
    o = o_;
    o.samples = count;
    EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "options->samples"));
  }
  o = o_;
  o.args = nullptr;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "args"));
  o = o_;
  args_[0].struct_size = 4;
  EXPECT_TRUE(Refused(Tune(&o), FJ_INVALID_ARGUMENT, "struct_size"));
}

TEST_F(TuneCapiTest, ValidOptionsWithoutAGpuSayWhy) {
  if (gpus_ > 0)
    GTEST_SKIP() << "a GPU is present: tests/runtime/tuning/tune_gpu_test";
  fj_status* st = Tune(&o_);
  EXPECT_NE(fj_status_code(st), FJ_OK);
  EXPECT_NE(fj_status_code(st), FJ_INTERNAL) << fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_EQ(result_, nullptr);
}

TEST_F(TuneCapiTest, ResultHandlesAreChecked) {
  fj_tune_summary s{};
  s.struct_size = sizeof(s);
  fj_tune_row row{};
  row.struct_size = sizeof(row);
  EXPECT_TRUE(Refused(fj_tune_result_summary(nullptr, &s), FJ_INVALID_ARGUMENT,
                      "result"));
  EXPECT_TRUE(Refused(fj_tune_result_row(nullptr, 0, &row), FJ_INVALID_ARGUMENT,
                      "result"));
  // A forged handle, and a runtime's handle passed as a result.
  auto* forged = reinterpret_cast<fj_tune_result*>(uintptr_t{0x12345678});
  EXPECT_TRUE(Refused(fj_tune_result_summary(forged, &s), FJ_INVALID_ARGUMENT,
                      "result"));
  EXPECT_TRUE(
      Refused(fj_tune_result_free(forged), FJ_INVALID_ARGUMENT, "result"));
  auto* foreign = reinterpret_cast<fj_tune_result*>(rt_);
  EXPECT_TRUE(Refused(fj_tune_result_row(foreign, 0, &row), FJ_INVALID_ARGUMENT,
                      "result"));
  EXPECT_EQ(Code(fj_tune_result_free(nullptr)), FJ_OK);
}

TEST(TuneStatusNameTest, NamesAndRange) {
  EXPECT_STREQ(fj_tune_status_name(FJ_TUNE_OK), "ok");
  EXPECT_STREQ(fj_tune_status_name(FJ_TUNE_WRONG_OUTPUT), "wrong_output");
  EXPECT_STREQ(fj_tune_status_name(FJ_TUNE_NOT_RUN), "not_run");
  EXPECT_STREQ(fj_tune_status_name(static_cast<fj_tune_status>(-1)), "unknown");
  EXPECT_STREQ(
      fj_tune_status_name(static_cast<fj_tune_status>(FJ_TUNE_STATUS_LAST + 1)),
      "unknown");
}

}  // namespace
}  // namespace fleetjit
