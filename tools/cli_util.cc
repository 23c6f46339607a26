#include "tools/cli_util.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "jit/nvrtc_build.h"
#include "jit/target.h"
#include "platform/nvrtc_library.h"
#include "platform/nvrtc_locate.h"
#include "runtime/config.h"

namespace fleetjit::cli {

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }
fj_str Str(const char* s) { return fj_str{s, std::strlen(s)}; }

std::string FailureText(fj_status* status, const char* what) {
  absl::string_view message = fj_status_message(status, nullptr);
  // The library may already have said what failed ("creating the runtime:
  // ..."): once is enough.
  absl::ConsumePrefix(&message, absl::StrCat(what, ": "));
  return absl::StrCat("fleetjit: ", what, ": ",
                      fj_code_name(fj_status_code(status)), ": ", message,
                      "\n");
}

bool Failed(fj_status* status, const char* what) {
  if (status == nullptr) return false;
  std::fputs(FailureText(status, what).c_str(), stderr);
  fj_status_free(status);
  return true;
}

const char* CacheResultName(fj_cache_result result) {
  switch (result) {
    case FJ_CACHE_COMPILED:
      return "compiled";
    case FJ_CACHE_MEMORY_HIT:
      return "memory hit";
    case FJ_CACHE_DISK_HIT:
      return "disk hit";
    case FJ_CACHE_REMOTE_HIT:
      return "remote hit";
  }
  return "unknown";
}

fj_runtime* CreateRuntime(int* exit_code, const fj_runtime_options* options) {
  fj_runtime* rt = nullptr;
  fj_status* status = fj_runtime_create(options, &rt);
  if (status == nullptr) return rt;
  // fj_runtime_create reads the variables with this same parser before
  // anything else: if it refuses them, that is what failed.
  RuntimeOptions probe;
  *exit_code = absl::IsInvalidArgument(ApplyEnvironment(probe)) ? kExitUsage
                                                                : kExitFailure;
  Failed(status, "creating the runtime");
  return nullptr;
}

bool TargetsAreValid(const std::vector<std::string>& targets,
                     const char* command) {
  return TargetNamesAreValid(targets, command) &&
         TargetsBuildWithNvrtc(targets, command);
}

bool TargetNamesAreValid(const std::vector<std::string>& targets,
                         const char* command) {
  for (const std::string& t : targets) {
    fj_copy_plan plan{};
    plan.struct_size = sizeof(plan);
    fj_status* status =
        fj_copy_plan_for_target(Str(t), FJ_COPY_IMPL_AUTO, &plan);
    if (status == nullptr) continue;
    const bool bad = fj_status_code(status) == FJ_INVALID_ARGUMENT;
    if (bad) {
      std::fprintf(stderr, "%s: --target %s: %s\n", command, t.c_str(),
                   fj_status_message(status, nullptr));
    }
    fj_status_free(status);
    if (bad) return false;
  }
  return true;
}

bool TargetsBuildWithNvrtc(const std::vector<std::string>& targets,
                           const char* command) {
  if (targets.empty()) return true;
  // Which architectures build is the NVRTC's list: the one the runtime
  // would load (FLEETJIT_LIBNVRTC, else the search). Without one, a cache
  // may still serve any target, so nothing more is checked.
  RuntimeOptions options;
  if (!ApplyEnvironment(options).ok()) return true;  // the runtime says why
  absl::StatusOr<std::string> path = ResolveNvrtcLibrary(options.libnvrtc_path);
  if (!path.ok()) return true;
  NvrtcLibrary nvrtc({*path});
  absl::StatusOr<const NvrtcApi*> api = nvrtc.Get();
  if (!api.ok()) return true;
  for (const std::string& t : targets) {
    absl::StatusOr<jit::Target> target = jit::ParseTarget(t);
    if (!target.ok()) continue;
    absl::Status supported = jit::CheckTargetSupported(**api, *target);
    if (!supported.ok()) {
      std::fprintf(stderr, "%s: --target %s: %s\n", command, t.c_str(),
                   std::string(supported.message()).c_str());
      return false;
    }
  }
  return true;
}

std::optional<fj_copy_impl> CopyImplNamed(const std::string& name) {
  for (int i = FJ_COPY_IMPL_SYNC; i <= FJ_COPY_IMPL_LAST; ++i) {
    const auto impl = static_cast<fj_copy_impl>(i);
    if (name == fj_copy_impl_name(impl)) return impl;
  }
  return std::nullopt;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    errno = EISDIR;
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string VersionText() {
  const uint32_t v = fj_version();
  return absl::StrFormat(
      "fleetjit CLI %s\nlibfleetjit %u.%u (fj_version(); built against header "
      "%d.%d)\n",
      FJ_CLI_VERSION, v >> 16, v & 0xffff, FJ_VERSION_MAJOR, FJ_VERSION_MINOR);
}

}  // namespace fleetjit::cli
