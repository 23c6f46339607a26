#include "runtime/config.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "runtime/cache/redis_client.h"

namespace fleetjit {
namespace {

// The only getenv of the library (tests/runtime/config_test checks it).
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
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &ordinal) ||
        ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text,
          "': expected all, none or device ordinals separated by commas "
          "(e.g. 0,1); '",
          item, "' is not an ordinal"));
    }
    ordinals.push_back(ordinal);
  }
  return ordinals;
}

// "FJ_NAME=INT" items separated by commas or spaces, each a copy-layer
// macro (FJ_ and an identifier) with an integer value, into "-DNAME=VALUE"
// options; a name given twice is an error.
absl::StatusOr<std::vector<std::string>> ParseCopyDefines(
    absl::string_view text) {
  std::vector<std::string> out;
  std::vector<std::string> names;
  for (absl::string_view item :
       absl::StrSplit(text, absl::ByAnyChar(", \t"), absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    const absl::string_view name = item.substr(0, eq);
    bool ident = absl::StartsWith(name, "FJ_") && name.size() > 3;
    for (char ch : name) {
      ident = ident && (absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
                        ch == '_');
    }
    int64_t value = 0;
    if (eq == absl::string_view::npos || !ident ||
        !absl::SimpleAtoi(item.substr(eq + 1), &value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", item,
          "': expected FJ_NAME=INTEGER items (a copy-layer macro of "
          "docs/copy-macros.md), separated by commas"));
    }
    for (const std::string& seen : names) {
      if (seen == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", name, "' is given twice"));
      }
    }
    names.emplace_back(name);
    out.push_back(absl::StrCat("-D", name, "=", value));
  }
  return out;
}

absl::Status SetSwitch(absl::string_view v, bool& field) {
  FJ_ASSIGN_OR_RETURN(field, ParseSwitch(v));
  return absl::OkStatus();
}

// The table. Constant-initialised (function pointers and literals only):
// nothing runs at library load.
constexpr EnvVariable kVariables[] = {
    {"FLEETJIT_TARGET", "sm_XX|compute_XX",
     "Builds for this target instead of the device's (see the README's "
     "forced-implementation rule).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       FJ_ASSIGN_OR_RETURN(o.target_override, jit::ParseTarget(v));
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_COPY_IMPL", "auto|sync|cp_async|tma",
     "Forces the copy implementation of builds whose target has it; a "
     "target that lacks it gets its own best one (logged at info).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       if (v == "auto") {
         o.copy_impl_override.reset();
       } else if (auto impl = jit::ParseCopyImpl(v)) {
         o.copy_impl_override = *impl;
       } else {
         return absl::InvalidArgumentError(
             absl::StrCat("'", v, "': expected auto, sync, cp_async or tma"));
       }
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_CACHE_DIR", "PATH",
     "The disk cache's folder (default $XDG_CACHE_HOME/fleetjit, else "
     "~/.cache/fleetjit).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.cache.dir = std::string(v);
       return absl::OkStatus();
     },
     true},
    {"FLEETJIT_CACHE_MAX_BYTES", "BYTES",
     "The disk cache's size bound, a positive byte count.",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       if (!absl::SimpleAtoi(v, &o.cache.max_bytes) || o.cache.max_bytes == 0) {
         return absl::InvalidArgumentError(
             absl::StrCat("'", v, "': expected a positive byte count"));
       }
       return absl::OkStatus();
     },
     true},
    {"FLEETJIT_CACHE", kSwitchSyntax, "Turns the disk cache on or off.",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.cache.disk);
     },
     true},
    {"FLEETJIT_REMOTE_CACHE", "redis://...|unix://...",
     "The fleet's shared Redis tier (docs/fleet-cache.md).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.cache.remote.url = std::string(v);
       return absl::OkStatus();
     },
     true, EnvVariable::Shown::kUrl},
    {"FLEETJIT_FLEET_KEY", "HEX",
     "The HMAC key that signs and checks remote entries (at least 16 "
     "bytes).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.cache.remote.fleet_key = std::string(v);
       return absl::OkStatus();
     },
     true, EnvVariable::Shown::kSecret},
    {"FLEETJIT_LIBHIREDIS", "PATH",
     "The hiredis 0.14 library the remote tier loads (default "
     "libhiredis.so.0.14).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.cache.remote.libhiredis_path = std::string(v);
       return absl::OkStatus();
     },
     true},
    {"FLEETJIT_CACHE_BUNDLE", "PATH",
     "A cache bundle (`fleetjit cache export`) served read-only before the "
     "disk cache; with FLEETJIT_FLEET_KEY set, only one signed with it "
     "(docs/fleet-cache.md).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.cache.bundle = std::string(v);
       return absl::OkStatus();
     },
     true},
    {"FLEETJIT_BUILD_WAIT", "SECONDS",
     "How long a build waits for another process building the same kernel "
     "into the same cache folder before compiling it too (default 120; 0: "
     "never waits).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       double seconds = 0;
       if (!absl::SimpleAtod(v, &seconds) || !(seconds >= 0) ||
           seconds > 86400) {
         return absl::InvalidArgumentError(absl::StrCat(
             "'", v, "': expected seconds, from 0 (never wait) to 86400"));
       }
       o.cache.lock_wait_ms = static_cast<int64_t>(seconds * 1000 + 0.5);
       return absl::OkStatus();
     },
     true},
    {"FLEETJIT_PCH", kSwitchSyntax,
     "Turns NVRTC precompiled headers of the copy layer on or off (default "
     "off: they slow a process's first build and pay off from about its "
     "fifth kernel on <fleetjit/copy.cuh>).",
     [](absl::string_view v, RuntimeOptions& o) { return SetSwitch(v, o.pch); },
     false},
    {"FLEETJIT_SLOW_PATH_LIBRARY", kSwitchSyntax,
     "Builds kernels that include <fleetjit/copy.cuh> without the layer's "
     "slow paths and links a library of them built once per target and "
     "implementation (default off).",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.slow_path_library);
     },
     false},
    {"FLEETJIT_CHECK", kSwitchSyntax,
     "Builds the caller's kernels in the copy layer's checked mode "
     "(-DFJ_CHECK=1): a tile load outside a promise-in-bounds tensor traps "
     "naming the call, and under FLEETJIT_LOG=debug the tiles that left "
     "TMA are logged once per call site (default off).",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.check);
     },
     false},
    {"FLEETJIT_COPY_DEFINES", "FJ_NAME=INT[,FJ_NAME=INT...]",
     "Copy-layer macros (docs/copy-macros.md) for every build of the "
     "caller's kernels, e.g. FJ_TMA_SMALL_TILES=0; a build whose own "
     "options define or undefine the macro keeps its own.",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       FJ_ASSIGN_OR_RETURN(o.copy_defines, ParseCopyDefines(v));
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_COPY_TUNE", kSwitchSyntax,
     "fj_copy's window kernel uses the launch shape tuned for the device "
     "model, tuned once in the background where none is stored (default "
     "on).",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.copy_tune);
     },
     false},
    {"FLEETJIT_THUNKS", kSwitchSyntax,
     "Turns the LLVM launch thunks on or off (off: the generic launch path).",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.thunks);
     },
     false},
    {"FLEETJIT_LIBCUDA", "PATH",
     "The CUDA driver library (default libcuda.so.1).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.libcuda_path = std::string(v);
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_LIBNVRTC", "PATH",
     "The NVRTC library (default: searched beside the toolkit and Python "
     "packages).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.libnvrtc_path = std::string(v);
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_NVJITLINK", "PATH",
     "The nvJitLink library for device links, or the one folder to search "
     "for it (default: searched where NVRTC is).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       o.libnvjitlink_path = std::string(v);
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_PREOPEN", "all|none|N[,N...]",
     "Device ordinals whose contexts fj_runtime_create opens (all: every "
     "device).",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       FJ_ASSIGN_OR_RETURN(o.preopen_devices, ParseDeviceList(v));
       return absl::OkStatus();
     },
     false},
    {"FLEETJIT_PRELOAD_NVRTC", kSwitchSyntax,
     "Loads NVRTC inside fj_runtime_create rather than at the first build.",
     [](absl::string_view v, RuntimeOptions& o) {
       return SetSwitch(v, o.preload_nvrtc);
     },
     false},
    {"FLEETJIT_LOG", "off|error|warn|info|debug",
     "The log level; without the caller's log_fn, lines are printed on the "
     "standard error stream.",
     [](absl::string_view v, RuntimeOptions& o) -> absl::Status {
       FJ_ASSIGN_OR_RETURN(o.log_level, ParseLogLevel(v));
       // The user asked for the lines: without the caller's sink, stderr.
       if (!o.log_sink) o.log_sink = StderrLogSink();
       return absl::OkStatus();
     },
     false},
};

// Applies the rows `cache_only` selects, naming the variable on error.
absl::Status ApplyRows(RuntimeOptions& options, bool cache_only,
                       std::vector<std::string>& overrides) {
  for (const EnvVariable& row : kVariables) {
    if (cache_only && !row.cache) continue;
    const char* v = Env(row.name);
    if (v == nullptr) continue;
    absl::Status applied = row.apply(v, options);
    if (!applied.ok()) return Annotate(applied, row.name);
    overrides.push_back(row.name);
  }
  return absl::OkStatus();
}

void ApplyCacheHome(CacheConfig& cache) {
  // Where the default directory lies; the caller's own variables, not
  // overrides.
  const char* xdg = Env("XDG_CACHE_HOME");
  const char* home = Env("HOME");
  cache.xdg_cache_home = xdg != nullptr ? xdg : "";
  cache.home = home != nullptr ? home : "";
}

}  // namespace

absl::Span<const EnvVariable> EnvVariables() { return kVariables; }

std::optional<std::string> ShownEnvValue(const EnvVariable& row) {
  std::optional<std::string> v = EnvValue(row.name);
  if (!v.has_value()) return v;
  switch (row.shown) {
    case EnvVariable::Shown::kPlain:
      return v;
    case EnvVariable::Shown::kUrl:
      return RedactUrl(*v);
    case EnvVariable::Shown::kSecret:
      return absl::StrCat("(set, ", v->size(), " characters, not shown)");
  }
  return v;
}

absl::StatusOr<bool> ParseSwitch(absl::string_view text) {
  const std::string word = absl::AsciiStrToLower(text);
  if (word == "1" || word == "true" || word == "on" || word == "yes") {
    return true;
  }
  if (word == "0" || word == "false" || word == "off" || word == "no") {
    return false;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", text,
      "': expected 1, 0, true, false, on, off, yes or no (any case)"));
}

std::string EnvVariablesMarkdown() {
  std::string out =
      "| Variable | Values | What it sets |\n"
      "|---|---|---|\n";
  for (const EnvVariable& row : kVariables) {
    absl::StrAppend(&out, "| `", row.name, "` | `",
                    absl::StrReplaceAll(row.syntax, {{"|", "\\|"}}), "` | ",
                    row.help, " |\n");
  }
  return out;
}

std::optional<std::string> EnvValue(absl::string_view name) {
  for (const EnvVariable& row : kVariables) {
    if (row.name != name) continue;
    if (const char* v = Env(row.name)) return std::string(v);
    return std::nullopt;
  }
  return std::nullopt;
}

absl::Status ApplyCacheEnvironment(CacheConfig& cache,
                                   std::vector<std::string>& overrides) {
  RuntimeOptions options;
  options.cache = cache;
  FJ_RETURN_IF_ERROR(ApplyRows(options, /*cache_only=*/true, overrides));
  cache = std::move(options.cache);
  ApplyCacheHome(cache);
  return absl::OkStatus();
}

absl::Status ApplyEnvironment(RuntimeOptions& options) {
  FJ_RETURN_IF_ERROR(
      ApplyRows(options, /*cache_only=*/false, options.env_overrides));
  ApplyCacheHome(options.cache);
  ApplyCudaHeaderEnvironment(options.cuda_headers);
  return absl::OkStatus();
}

Logger LoggerFor(const RuntimeOptions& options) {
  if (!options.log_sink) return Logger();
  return Logger(options.log_level.value_or(LogLevel::kWarn), options.log_sink);
}

void ApplyCudaHeaderEnvironment(CudaHeaderSearch& search) {
  auto value = [](const char* name) {
    return std::string(Env(name) ? Env(name) : "");
  };
  search.cuda_home = value("CUDA_HOME");
  search.cuda_path = value("CUDA_PATH");
  search.python_package_dirs =
      DefaultPythonPackageDirs(value("VIRTUAL_ENV"), value("CONDA_PREFIX"));
}

}  // namespace fleetjit
