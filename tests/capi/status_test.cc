// The one conversion from absl::Status to fj_status: the public code comes
// from what the status carries explicitly, never from a stand-in absl code.
#include "capi/status.h"

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "platform/driver_api.h"

namespace fleetjit::capi {
namespace {

TEST(CapiStatusTest, ACudaErrorKeepsItsCodeThroughAnnotate) {
  DriverApi api;
  absl::Status s = Annotate(CheckCu(api, CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize"),
                            "synchronising");
  EXPECT_EQ(CodeOf(s), FJ_CUDA_ERROR);
  fj_status* out = ToFjStatus(s);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(fj_status_code(out), FJ_CUDA_ERROR);
  // The code travels as a private payload, not as a detail.
  EXPECT_EQ(fj_status_detail(out, fj_str{"fj_code", 7}, nullptr), nullptr);
  EXPECT_NE(fj_status_detail(out, fj_str{"cuda_call", 9}, nullptr), nullptr);
  fj_status_free(out);
  EXPECT_EQ(CodeOf(CheckCu(api, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc")), FJ_RESOURCE_EXHAUSTED);
}

TEST(CapiStatusTest, AbslCodesWithoutAPublicCode) {
  EXPECT_EQ(CodeOf(absl::OkStatus()), FJ_OK);
  EXPECT_EQ(CodeOf(absl::InvalidArgumentError("x")), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(absl::FailedPreconditionError("x")), FJ_FAILED_PRECONDITION);
  // kAborted no longer stands in for FJ_CUDA_ERROR.
  EXPECT_EQ(CodeOf(absl::AbortedError("x")), FJ_INTERNAL);
  absl::Status build = absl::InternalError("nvrtc failed");
  SetDetail(build, "build_log", "error: ...");
  EXPECT_EQ(CodeOf(build), FJ_BUILD_ERROR);
}

}  // namespace
}  // namespace fleetjit::capi
