// How a runtime is configured: RuntimeOptions (the one options struct, with
// its defaults) and ApplyEnvironment, the one reader of the FLEETJIT_*
// variables that override it. Lower layers never read the environment
// themselves; they take these resolved values (the cache directory, the
// thunk switch) from the options.
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
#include "base/log.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/cache/module_cache.h"

namespace fleetjit {

struct RuntimeOptions {
  std::string libcuda_path;   // "" = libcuda.so.1
  std::string libnvrtc_path;  // "" = search (platform/nvrtc_locate.h)
  std::optional<jit::Target> target_override;
  std::optional<jit::CopyImpl> copy_impl_override;
  bool thunks = true;
  CacheConfig cache;
  // Log lines (base/log.h): the caller's sink (null = none) and level
  // (unset = warn). FLEETJIT_LOG sets the level and, without a sink,
  // installs StderrLogSink. See LoggerFor.
  LogSink log_sink;
  std::optional<LogLevel> log_level;
  // Start-up work done inside Runtime::Create: device ordinals whose
  // primary contexts are opened (-1 = every device), and NVRTC loaded.
  std::vector<int> preopen_devices;
  bool preload_nvrtc = false;
  // Names of the environment variables that changed the options above.
  std::vector<std::string> env_overrides;
};

// Applies the FLEETJIT_* overrides (see fleetjit.h) to `options`, recording
// each variable that changed something in env_overrides. An empty variable
// counts as unset. A malformed value is INVALID_ARGUMENT naming the
// variable. Reads the environment on each call; callers call it once.
absl::Status ApplyEnvironment(RuntimeOptions& options);

// The logger the options describe: their sink at their level (warn when
// unset); logs nothing without a sink.
Logger LoggerFor(const RuntimeOptions& options);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CONFIG_H_
