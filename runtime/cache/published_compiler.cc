#include "runtime/cache/published_compiler.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fleetjit {

absl::Status CheckPublishedCompiler(absl::string_view compiler,
                                    absl::string_view target,
                                    int driver_version) {
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("the published entry's compiler '", compiler, "' ", why));
  };
  std::vector<absl::string_view> words =
      absl::StrSplit(compiler, ' ', absl::SkipEmpty());
  if (words.size() < 2 || words[0] != "nvrtc") {
    return refuse("is not an NVRTC identity");
  }
  std::vector<absl::string_view> version = absl::StrSplit(words[1], '.');
  int major = 0, minor = 0;
  if (version.size() < 2 || !absl::SimpleAtoi(version[0], &major) ||
      !absl::SimpleAtoi(version[1], &minor) || major <= 0 || minor < 0) {
    return refuse("has no MAJOR.MINOR version");
  }
  if (driver_version <= 0) return absl::OkStatus();
  const int driver_major = driver_version / 1000;
  const int driver_minor = (driver_version % 1000) / 10;
  if (absl::StartsWith(target, "compute_")) {
    if (driver_major < major ||
        (driver_major == major && driver_minor < minor)) {
      return refuse(absl::StrCat("emits PTX that this driver (CUDA ",
                                 driver_major, ".", driver_minor,
                                 ") cannot compile"));
    }
  } else if (driver_major < major) {
    return refuse(absl::StrCat("emits cubins that this driver (CUDA ",
                               driver_major, ".", driver_minor,
                               ") cannot load"));
  }
  return absl::OkStatus();
}

}  // namespace fleetjit
