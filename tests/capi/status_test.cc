// The one conversion from absl::Status to fj_status: the public code comes
// from what the status carries explicitly, never from a stand-in absl code.
#include "capi/status.h"

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "platform/cu_errors.h"
#include "platform/driver_api.h"

namespace fleetjit::capi {
namespace {

TEST(CapiStatusTest, ACudaErrorKeepsItsCodeThroughAnnotate) {
  DriverApi api;
  absl::Status s =
      Annotate(CheckCu(api, CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize"),
               "synchronising");
  EXPECT_EQ(CodeOf(s), FJ_CUDA_ERROR);
  fj_status* out = ToFjStatus(s);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(fj_status_code(out), FJ_CUDA_ERROR);
  // The code travels as a private payload, not as a detail.
  EXPECT_EQ(fj_status_detail(out, fj_str{"fj_code", 7}, nullptr), nullptr);
  EXPECT_NE(fj_status_detail(out, fj_str{"cuda_call", 9}, nullptr), nullptr);
  fj_status_free(out);
  EXPECT_EQ(CodeOf(CheckCu(api, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc")),
            FJ_RESOURCE_EXHAUSTED);
}

// A NUL echoed from the caller's input reads "\0", so the C string is the
// whole message.
TEST(CapiStatusTest, AnEchoedNulDoesNotCutTheMessageShort) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string tail = std::to_string(rng());
  const std::string target = std::string("sm_9\0 ", 6) + tail;
  fj_status* out = ToFjStatus(absl::InvalidArgumentError(
      "unknown target '" + target + "'; the rest of the message"));
  size_t n = 0;
  const char* text = fj_status_message(out, &n);
  EXPECT_EQ(std::strlen(text), n);
  EXPECT_EQ(std::string(text),
            "unknown target 'sm_9\\0 " + tail + "'; the rest of the message");
  fj_status_free(out);
}

TEST(CapiStatusTest, AbslCodesWithoutAPublicCode) {
  EXPECT_EQ(CodeOf(absl::OkStatus()), FJ_OK);
  EXPECT_EQ(CodeOf(absl::InvalidArgumentError("x")), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(absl::FailedPreconditionError("x")), FJ_FAILED_PRECONDITION);
  // kAborted no longer stands in for FJ_CUDA_ERROR.
  EXPECT_EQ(CodeOf(absl::AbortedError("x")), FJ_INTERNAL);
  // A build error is decided where NVRTC rejected the source (SetPublicCode
  // in jit/nvrtc_build.cc), not guessed from a payload.
  absl::Status build = absl::InternalError("nvrtc failed");
  SetPublicCode(build, PublicCode::kBuildError);
  SetDetail(build, "build_log", "error: ...");
  EXPECT_EQ(CodeOf(Annotate(build, "building 'k'")), FJ_BUILD_ERROR);
  absl::Status log_only = absl::InternalError("nvrtc failed");
  SetDetail(log_only, "build_log", "error: ...");
  EXPECT_EQ(CodeOf(log_only), FJ_INTERNAL);
  EXPECT_EQ(CodeOf(absl::DeadlineExceededError("x")), FJ_DEADLINE_EXCEEDED);
}

// Every absl code (the reserved one too) maps, through the one mapping, to
// a documented fj_code with a name; only kOk is FJ_OK; the C status keeps
// code and message.
TEST(CapiStatusTest, EveryAbslCodeMapsToADocumentedCode) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<int> absl_codes;
  for (int c = 0; c <= 16; ++c) absl_codes.push_back(c);
  absl_codes.push_back(static_cast<int>(
      absl::StatusCode::
          kDoNotUseReservedForFutureExpansionUseDefaultInSwitchInstead_));
  for (int raw : absl_codes) {
    const auto code = static_cast<absl::StatusCode>(raw);
    SCOPED_TRACE(absl::StatusCodeToString(code));
    const fj_code mapped = CodeOfAbsl(code);
    EXPECT_GE(mapped, FJ_OK);
    EXPECT_LE(mapped, FJ_CODE_LAST);
    EXPECT_STRNE(fj_code_name(mapped), "UNKNOWN");
    EXPECT_EQ(mapped == FJ_OK, code == absl::StatusCode::kOk);
    if (code == absl::StatusCode::kOk) continue;
    const std::string message = "m" + std::to_string(rng());
    absl::Status s(code, message);
    EXPECT_EQ(CodeOf(s), mapped);
    fj_status* out = ToFjStatus(s);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(fj_status_code(out), mapped);
    EXPECT_EQ(std::string(fj_status_message(out, nullptr)), message);
    fj_status_free(out);
  }
}

// Each fj_code has its own name; the absl code a lower layer gives a public
// code (AbslCodeFor) maps back to it wherever that code has an absl twin.
TEST(CapiStatusTest, EveryPublicCodeHasANameAndRoundTrips) {
  std::set<std::string> names;
  for (int c = FJ_OK; c <= FJ_CODE_LAST; ++c) {
    const fj_code code = static_cast<fj_code>(c);
    const std::string name = fj_code_name(code);
    EXPECT_NE(name, "UNKNOWN") << c;
    EXPECT_TRUE(names.insert(name).second) << name;
    const absl::StatusCode twin = AbslCodeFor(code);
    if (twin != absl::StatusCode::kInternal) {
      EXPECT_EQ(CodeOfAbsl(twin), code) << name;
    }
  }
  EXPECT_STREQ(fj_code_name(FJ_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_EQ(AbslCodeFor(FJ_DEADLINE_EXCEEDED),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_STREQ(fj_code_name(static_cast<fj_code>(FJ_CODE_LAST + 1)), "UNKNOWN");
  // A public code set out of range is ignored, not trusted.
  absl::Status forged = absl::NotFoundError("x");
  SetPublicCode(forged, FJ_CODE_LAST + 1);
  EXPECT_EQ(CodeOf(forged), FJ_NOT_FOUND);
}

}  // namespace
}  // namespace fleetjit::capi
