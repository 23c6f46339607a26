// FJ_RETURN_IF_ERROR / FJ_ASSIGN_OR_RETURN: the context is optional; given,
// it prefixes the message; absent or "", the status passes through as it
// is. Code and payloads are kept either way.
#include "base/status_macros.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace fleetjit {
namespace {

absl::Status Fails(absl::StatusCode code, const std::string& message) {
  absl::Status s(code, message);
  SetDetail(s, "what", message);
  return s;
}

absl::StatusOr<int> Value(absl::StatusOr<int> v) { return v; }

absl::Status ReturnNoContext(absl::Status s) {
  FJ_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}
absl::Status ReturnEmptyContext(absl::Status s) {
  FJ_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}
absl::Status ReturnContext(absl::Status s, const std::string& context) {
  FJ_RETURN_IF_ERROR(s, context);
  return absl::OkStatus();
}

absl::StatusOr<int> AssignNoContext(absl::StatusOr<int> v) {
  FJ_ASSIGN_OR_RETURN(int x, Value(std::move(v)));
  return x + 1;
}
absl::StatusOr<int> AssignEmptyContext(absl::StatusOr<int> v) {
  int x = -1;  // an lvalue, assigned
  FJ_ASSIGN_OR_RETURN(x, Value(std::move(v)));
  return x + 1;
}
absl::StatusOr<int> AssignContext(absl::StatusOr<int> v,
                                  const std::string& context) {
  FJ_ASSIGN_OR_RETURN(int x, Value(std::move(v)), absl::StrCat(context));
  return x + 1;
}

void ExpectSame(const absl::Status& got, const absl::Status& want) {
  EXPECT_EQ(got.code(), want.code());
  EXPECT_EQ(got.message(), want.message());
  EXPECT_EQ(got.GetPayload("fleetjit/what"), want.GetPayload("fleetjit/what"));
}

TEST(StatusMacrosTest, TheContextIsOptionalAndEmptyAddsNothing) {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 20; ++round) {
    const auto code = static_cast<absl::StatusCode>(1 + rng() % 16);
    const std::string message = "failure " + std::to_string(rng());
    const std::string context = "doing " + std::to_string(rng());
    const absl::Status err = Fails(code, message);

    ExpectSame(ReturnNoContext(err), err);
    ExpectSame(ReturnEmptyContext(err), err);
    absl::Status annotated = ReturnContext(err, context);
    EXPECT_EQ(annotated.code(), code);
    EXPECT_EQ(annotated.message(), context + ": " + message);
    EXPECT_EQ(annotated.GetPayload("fleetjit/what"),
              err.GetPayload("fleetjit/what"));
    EXPECT_TRUE(ReturnNoContext(absl::OkStatus()).ok());
    EXPECT_TRUE(ReturnContext(absl::OkStatus(), context).ok());

    ExpectSame(AssignNoContext(err).status(), err);
    ExpectSame(AssignEmptyContext(err).status(), err);
    absl::StatusOr<int> a = AssignContext(err, context);
    EXPECT_EQ(a.status().code(), code);
    EXPECT_EQ(a.status().message(), context + ": " + message);

    const int v = static_cast<int>(rng() % 100000);
    EXPECT_EQ(*AssignNoContext(v), v + 1);
    EXPECT_EQ(*AssignEmptyContext(v), v + 1);
    EXPECT_EQ(*AssignContext(v, context), v + 1);
  }
}

TEST(StatusMacrosTest, APublicCodeSurvivesAnnotation) {
  absl::Status s = absl::InvalidArgumentError("rejected");
  SetPublicCode(s, PublicCode::kBuildError);
  EXPECT_EQ(PublicCodeOf(ReturnContext(s, "building")),
            static_cast<int>(PublicCode::kBuildError));
  EXPECT_EQ(PublicCodeOf(ReturnNoContext(s)),
            static_cast<int>(PublicCode::kBuildError));
  EXPECT_EQ(PublicCodeOf(absl::InvalidArgumentError("x")), std::nullopt);
}

}  // namespace
}  // namespace fleetjit
