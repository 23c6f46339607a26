#include "base/status_macros.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fleetjit {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok() || context.empty()) return status;
  absl::Status out(status.code(),
                   absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) {
        out.SetPayload(url, payload);
      });
  return out;
}

void SetDetail(absl::Status& status, absl::string_view key,
               absl::string_view value) {
  status.SetPayload(absl::StrCat(kPayloadPrefix, key), absl::Cord(value));
}

namespace {
constexpr absl::string_view kPublicCodeUrl = "fleetjit.internal/fj_code";
}  // namespace

void SetPublicCode(absl::Status& status, int code) {
  status.SetPayload(kPublicCodeUrl, absl::Cord(absl::StrCat(code)));
}

std::optional<int> PublicCodeOf(const absl::Status& status) {
  auto payload = status.GetPayload(kPublicCodeUrl);
  int code = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &code)) {
    return std::nullopt;
  }
  return code;
}

}  // namespace fleetjit
