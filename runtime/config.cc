#include "runtime/config.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace fleetjit {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// "all" = {-1} (every device), "none" = {}, else device ordinals
// separated by commas.
absl::StatusOr<std::vector<int>> ParseDeviceList(absl::string_view text) {
  if (text == "all") return std::vector<int>{-1};
  if (text == "none") return std::vector<int>();
  std::vector<int> ordinals;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int ordinal = -1;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "': expected all, none or device ordinals separated by commas (e.g. 0,1); '",
          item, "' is not an ordinal"));
    }
    ordinals.push_back(ordinal);
  }
  return ordinals;
}

absl::StatusOr<bool> ParseSwitch(absl::string_view text) {
  if (text == "1") return true;
  if (text == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected 1 or 0"));
}

}  // namespace

absl::Status ApplyCacheEnvironment(CacheConfig& cache, std::vector<std::string>& overrides) {
  if (const char* v = Env("FLEETJIT_CACHE_DIR")) {
    cache.dir = v;
    overrides.push_back("FLEETJIT_CACHE_DIR");
  }
  if (const char* v = Env("FLEETJIT_CACHE_MAX_BYTES")) {
    if (!absl::SimpleAtoi(v, &cache.max_bytes) || cache.max_bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FLEETJIT_CACHE_MAX_BYTES='", v, "': expected a positive byte count"));
    }
    overrides.push_back("FLEETJIT_CACHE_MAX_BYTES");
  }
  if (const char* v = Env("FLEETJIT_CACHE")) {
    cache.disk = absl::string_view(v) != "0";
    overrides.push_back("FLEETJIT_CACHE");
  }
  if (const char* v = Env("FLEETJIT_REMOTE_CACHE")) {
    cache.remote.url = v;
    overrides.push_back("FLEETJIT_REMOTE_CACHE");
  }
  if (const char* v = Env("FLEETJIT_FLEET_KEY")) {
    cache.remote.fleet_key = v;
    overrides.push_back("FLEETJIT_FLEET_KEY");
  }
  // Where the default directory lies; the caller's own variables, not
  // overrides.
  const char* xdg = Env("XDG_CACHE_HOME");
  const char* home = Env("HOME");
  cache.xdg_cache_home = xdg != nullptr ? xdg : "";
  cache.home = home != nullptr ? home : "";
  return absl::OkStatus();
}

absl::Status ApplyEnvironment(RuntimeOptions& options) {
  if (const char* v = Env("FLEETJIT_TARGET")) {
    FJ_ASSIGN_OR_RETURN(options.target_override, jit::ParseTarget(v),
                        "FLEETJIT_TARGET");
    options.env_overrides.push_back("FLEETJIT_TARGET");
  }
  if (const char* v = Env("FLEETJIT_COPY_IMPL")) {
    if (absl::string_view(v) == "auto") {
      options.copy_impl_override.reset();
    } else if (auto impl = jit::ParseCopyImpl(v)) {
      options.copy_impl_override = *impl;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "FLEETJIT_COPY_IMPL='", v, "': expected auto, sync, cp_async or tma"));
    }
    options.env_overrides.push_back("FLEETJIT_COPY_IMPL");
  }
  FJ_RETURN_IF_ERROR(ApplyCacheEnvironment(options.cache, options.env_overrides), "");
  if (const char* v = Env("FLEETJIT_PCH")) {
    options.pch = absl::string_view(v) != "0";
    options.env_overrides.push_back("FLEETJIT_PCH");
  }
  if (const char* v = Env("FLEETJIT_THUNKS")) {
    options.thunks = absl::string_view(v) != "0";
    options.env_overrides.push_back("FLEETJIT_THUNKS");
  }
  if (const char* v = Env("FLEETJIT_LIBCUDA")) {
    options.libcuda_path = v;
    options.env_overrides.push_back("FLEETJIT_LIBCUDA");
  }
  if (const char* v = Env("FLEETJIT_LIBNVRTC")) {
    options.libnvrtc_path = v;
    options.env_overrides.push_back("FLEETJIT_LIBNVRTC");
  }
  ApplyCudaHeaderEnvironment(options.cuda_headers);
  if (const char* v = Env("FLEETJIT_PREOPEN")) {
    FJ_ASSIGN_OR_RETURN(options.preopen_devices, ParseDeviceList(v), "FLEETJIT_PREOPEN");
    options.env_overrides.push_back("FLEETJIT_PREOPEN");
  }
  if (const char* v = Env("FLEETJIT_PRELOAD_NVRTC")) {
    FJ_ASSIGN_OR_RETURN(options.preload_nvrtc, ParseSwitch(v), "FLEETJIT_PRELOAD_NVRTC");
    options.env_overrides.push_back("FLEETJIT_PRELOAD_NVRTC");
  }
  if (const char* v = Env("FLEETJIT_LOG")) {
    FJ_ASSIGN_OR_RETURN(options.log_level, ParseLogLevel(v), "FLEETJIT_LOG");
    // The user asked for the lines: without the caller's sink, stderr.
    if (!options.log_sink) options.log_sink = StderrLogSink();
    options.env_overrides.push_back("FLEETJIT_LOG");
  }
  return absl::OkStatus();
}

Logger LoggerFor(const RuntimeOptions& options) {
  if (!options.log_sink) return Logger();
  return Logger(options.log_level.value_or(LogLevel::kWarn), options.log_sink);
}

void ApplyCudaHeaderEnvironment(CudaHeaderSearch& search) {
  auto value = [](const char* name) { return std::string(Env(name) ? Env(name) : ""); };
  search.cuda_home = value("CUDA_HOME");
  search.cuda_path = value("CUDA_PATH");
  search.python_package_dirs =
      DefaultPythonPackageDirs(value("VIRTUAL_ENV"), value("CONDA_PREFIX"));
}

}  // namespace fleetjit
