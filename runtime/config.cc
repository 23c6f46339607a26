#include "runtime/config.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

}  // namespace

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
  if (const char* v = Env("FLEETJIT_CACHE_DIR")) {
    options.cache.dir = v;
    options.env_overrides.push_back("FLEETJIT_CACHE_DIR");
  }
  if (const char* v = Env("FLEETJIT_CACHE_MAX_BYTES")) {
    if (!absl::SimpleAtoi(v, &options.cache.max_bytes) ||
        options.cache.max_bytes == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "FLEETJIT_CACHE_MAX_BYTES='", v, "': expected a positive byte count"));
    }
    options.env_overrides.push_back("FLEETJIT_CACHE_MAX_BYTES");
  }
  if (const char* v = Env("FLEETJIT_CACHE")) {
    options.cache.disk = absl::string_view(v) != "0";
    options.env_overrides.push_back("FLEETJIT_CACHE");
  }
  ApplyRemoteCacheEnvironment(options.cache.remote, options.env_overrides);
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
