// How a runtime is configured: RuntimeOptions (the one options struct, with
// its defaults) and ApplyEnvironment, the one reader of the FLEETJIT_*
// variables that override it. The variables are one table (EnvVariables:
// name, syntax, help and the parser that sets a field), which also drives
// `fleetjit info` and docs/configuration.md. Lower layers never read the
// environment themselves; they take these resolved values (the cache
// directory, the thunk switch, the hiredis file) from the options.
//
//   RuntimeOptions options;            // defaults
//   options.cache.disk = false;        // the caller's choices
//   FJ_RETURN_IF_ERROR(ApplyEnvironment(options), "reading FLEETJIT_*");
//   auto runtime = Runtime::Create(std::move(options));
#ifndef FLEETJIT_RUNTIME_CONFIG_H_
#define FLEETJIT_RUNTIME_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/log.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "platform/cuda_headers.h"
#include "runtime/cache/module_cache.h"

namespace fleetjit {

struct RuntimeOptions {
  std::string libcuda_path;   // "" = libcuda.so.1
  std::string libnvrtc_path;  // "" = search (platform/nvrtc_locate.h)
  // nvJitLink: a file, or the one folder to search; "" = search
  // (platform/nvjitlink_library.h). Since 1.3.
  std::string libnvjitlink_path;
  std::optional<jit::Target> target_override;
  std::optional<jit::CopyImpl> copy_impl_override;
  bool thunks = true;
  // NVRTC precompiled headers for the embedded layer (jit/nvrtc_pch.h):
  // same outputs. Off by default since 2026-12-04: a process's first build
  // of a kernel on <fleetjit/copy.cuh> (a server's first build, a `fleetjit
  // build` warm-up job) was faster without them, or level, on both machines
  // measured (build_bench --fresh, examples/pipelined_tiles.cu: H200 host,
  // two runs, 165 / 198 ms off against 207 / 198 ms with the PCH file warm
  // and 277 / 248 ms making it; 2-core build machine 490 against 559 and
  // 695 ms; docs/measurements.md). Inside one process a
  // PCH then saves ~13 ms per later build (H200 host), so a process that
  // builds more than about four such kernels gains: FLEETJIT_PCH=1.
  bool pch = false;
  // Kernels that include <fleetjit/copy.cuh> compile without the layer's
  // slow paths and link a library of them built once per target and
  // implementation (runtime/builder/slow_paths.cc, docs/slow-path-library.md).
  // Off until it is measured on a GPU; FLEETJIT_SLOW_PATH_LIBRARY=1.
  bool slow_path_library = false;
  // fj_copy's window kernel takes each device's own launch shape: looked
  // up in the cache tiers, else tuned once in the background on the first
  // copy that needs it (runtime/tuning/copy_window_tune.cc, docs/tuning.md).
  bool copy_tune = true;
  // The copy layer's checked mode (docs/copy-guide.md, 6.): every
  // build made for a caller gets -DFJ_CHECK=1 (unless its options define
  // FJ_CHECK themselves), so a tile load outside a promise-in-bounds tensor
  // traps naming the call; with the log level at debug, the tiles that left
  // TMA are logged once per call site after each launch (which then waits
  // for the kernel). The runtime's own kernels are never checked.
  // FLEETJIT_CHECK=1; `fleetjit matrix` sets it for every variant.
  bool check = false;
  // Copy-layer macros (docs/copy-macros.md) for every build made for a
  // caller, as "-DNAME=VALUE" options: a fleet-wide knob or an A/B run of
  // a layer default without touching the kernels. A build whose own options
  // define or undefine NAME keeps its own. The runtime's kernels and the
  // slow-path library are built without them.
  // FLEETJIT_COPY_DEFINES="FJ_TMA_SMALL_TILES=0,FJ_FLAT_LISTS=0".
  std::vector<std::string> copy_defines;
  CacheConfig cache;
  // Where CUDA's headers are searched (platform/cuda_headers.h); the NVRTC
  // in use is added by the runtime. ApplyEnvironment fills it from CUDA_HOME,
  // CUDA_PATH, VIRTUAL_ENV and CONDA_PREFIX.
  CudaHeaderSearch cuda_headers;
  // Log lines (base/log.h): the caller's sink (null = none) and level
  // (unset = warn). FLEETJIT_LOG sets the level and, without a sink,
  // installs StderrLogSink. See LoggerFor.
  LogSink log_sink;
  std::optional<LogLevel> log_level;
  // Start-up work done inside Runtime::Create: device ordinals whose
  // primary contexts are opened (-1 = every device), and NVRTC loaded.
  // FLEETJIT_PREOPEN=all|none|N[,N...] replaces the list ("all" = {-1},
  // "none" = {}); FLEETJIT_PRELOAD_NVRTC=1|0 sets the flag.
  std::vector<int> preopen_devices;
  bool preload_nvrtc = false;
  // Names of the environment variables that changed the options above.
  std::vector<std::string> env_overrides;
};

// One FLEETJIT_* variable: a row of the table ApplyEnvironment reads.
struct EnvVariable {
  const char* name;    // "FLEETJIT_CACHE"
  const char* syntax;  // the accepted values, e.g. kSwitchSyntax
  const char* help;    // what it sets, one sentence
  // Sets the field from `value` (not empty). A malformed value is
  // INVALID_ARGUMENT saying what is accepted (the caller names the variable).
  absl::Status (*apply)(absl::string_view value, RuntimeOptions& options);
  bool cache;  // read by ApplyCacheEnvironment too
  // How its value may be shown (fleetjit info): as it is, as a URL with its
  // password starred, or only as its length (a key).
  enum class Shown { kPlain, kUrl, kSecret } shown = Shown::kPlain;
};

// The value of `row`'s variable as fleetjit info shows it (secrets
// redacted), or nullopt when it is not set.
std::optional<std::string> ShownEnvValue(const EnvVariable& row);

// Every FLEETJIT_* variable the runtime reads, in the order it reads them.
absl::Span<const EnvVariable> EnvVariables();

// The syntax of every on/off variable: 1|0, true|false, on|off or yes|no,
// in any case. Anything else is INVALID_ARGUMENT naming these words.
inline constexpr char kSwitchSyntax[] = "1|0|true|false|on|off|yes|no";
absl::StatusOr<bool> ParseSwitch(absl::string_view text);

// The Markdown table of EnvVariables() that docs/configuration.md holds
// between its "generated" markers (tests/runtime/config_test checks it).
std::string EnvVariablesMarkdown();

// The value of a FLEETJIT_* variable of the table (nullopt when unset or
// empty), for callers that report the configuration (`fleetjit info`).
std::optional<std::string> EnvValue(absl::string_view name);

// Applies the FLEETJIT_* overrides (see fleetjit.h) to `options`, recording
// each variable that changed something in env_overrides. An empty variable
// counts as unset. A malformed value is INVALID_ARGUMENT naming the
// variable. Reads the environment on each call; callers call it once.
// It also reads where CUDA's headers are (ApplyCudaHeaderEnvironment).
absl::Status ApplyEnvironment(RuntimeOptions& options);

// The cache's part of ApplyEnvironment, for callers that want only that
// (test fixtures): the table's cache rows (FLEETJIT_CACHE_DIR,
// FLEETJIT_CACHE_MAX_BYTES, FLEETJIT_CACHE, FLEETJIT_REMOTE_CACHE,
// FLEETJIT_FLEET_KEY, FLEETJIT_LIBHIREDIS, FLEETJIT_CACHE_BUNDLE,
// FLEETJIT_BUILD_WAIT; recorded in `overrides`), and
// where the default directory lies, XDG_CACHE_HOME and HOME (not
// overrides: not recorded).
absl::Status ApplyCacheEnvironment(CacheConfig& cache,
                                   std::vector<std::string>& overrides);

// Fills `search` from CUDA_HOME, CUDA_PATH and the Python prefixes
// (DefaultPythonPackageDirs of VIRTUAL_ENV and CONDA_PREFIX). These are the
// toolkit's own variables, not overrides: env_overrides does not list them.
void ApplyCudaHeaderEnvironment(CudaHeaderSearch& search);
// The logger the options describe: their sink at their level (warn when
// unset); logs nothing without a sink.
Logger LoggerFor(const RuntimeOptions& options);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CONFIG_H_
