#include "jit/target.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace fleetjit::jit {

std::string Target::Name() const {
  std::string name = absl::StrCat(ptx ? "compute_" : "sm_", arch);
  if (suffix != '\0') name.push_back(suffix);
  return name;
}

std::string Target::NvrtcArchOption() const {
  return absl::StrCat("-arch=", Name());
}

absl::StatusOr<Target> ParseTarget(absl::string_view name) {
  Target t;
  absl::string_view rest = name;
  if (absl::StartsWith(rest, "sm_")) {
    rest.remove_prefix(3);
  } else if (absl::StartsWith(rest, "compute_")) {
    rest.remove_prefix(8);
    t.ptx = true;
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    t.suffix = rest.back();
    rest.remove_suffix(1);
  }
  int arch = 0;
  if (rest.empty() || rest.size() > 3 ||
      !std::all_of(rest.begin(), rest.end(),
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      rest.size() < 2 || rest.front() == '0' ||
      !absl::SimpleAtoi(rest, &arch)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown target '", name,
        "': expected sm_XX[a|f] or compute_XX[a|f], XX a compute capability "
        "such as 80, 90 or 100 (which ones build is the NVRTC's list: "
        "nvrtcGetSupportedArchs)"));
  }
  if (t.suffix == 'a' && arch < 90) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown target '", name, "': arch-specific 'a' targets start at 90"));
  }
  if (t.suffix == 'f' && arch < 100) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown target '", name, "': family 'f' targets start at 100"));
  }
  t.arch = arch;
  return t;
}

Target TargetForDevice(int cc_major, int cc_minor) {
  Target t;
  t.arch = cc_major * 10 + cc_minor;
  return t;
}

bool TargetRunsOn(const Target& target, int device_arch) {
  if (target.ptx) return target.arch <= device_arch;
  if (target.suffix == 'a') return target.arch == device_arch;
  if (target.arch / 10 != device_arch / 10) return false;
  return target.arch <= device_arch;
}

}  // namespace fleetjit::jit
