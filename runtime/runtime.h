// The fleetjit runtime: one per fj_runtime handle.
//
// It owns the driver (loaded at creation; absent is not an error), the
// devices, the NVRTC library (loaded on the first compile), the module cache
// and the modules loaded per device context. Everything here is
// thread-safe.
#ifndef FLEETJIT_RUNTIME_RUNTIME_H_
#define FLEETJIT_RUNTIME_RUNTIME_H_

#include <cuda.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/device.h"
#include "runtime/driver_api.h"
#include "runtime/kernel.h"
#include "runtime/launch_thunks.h"
#include "runtime/module_cache.h"
#include "runtime/nvrtc_library.h"

namespace fleetjit {

struct RuntimeOptions {
  std::string libcuda_path;
  std::string libnvrtc_path;
  std::optional<jit::Target> target_override;
  std::optional<jit::CopyImpl> copy_impl_override;
  bool thunks = true;
  CacheConfig cache;
  // Names of the environment variables that changed the options above.
  std::vector<std::string> env_overrides;
};

// Applies FLEETJIT_* environment overrides (see fleetjit.h). A malformed
// value is INVALID_ARGUMENT naming the variable.
absl::Status ApplyEnvironment(RuntimeOptions& options);

// A built module: its artifact and where it came from. Loading on a device
// goes through the runtime, which loads each image once per context.
struct ModuleRecord {
  std::shared_ptr<const jit::Artifact> artifact;
  std::string key;             // cache digest, or a unique id when uncached
  CacheSource source = CacheSource::kCompiled;
  double build_ms = 0;
  std::string name;
};

struct BuildSpec {
  std::string source;
  std::string name = "kernel.cu";
  std::vector<std::string> options;
  std::vector<std::string> name_expressions;
  std::optional<jit::Target> target;      // else override, else device
  int device = 0;
  std::optional<jit::CopyImpl> copy_impl; // else override, else chosen
  enum class Output { kAuto, kCubin, kPtx } output = Output::kAuto;
  bool use_cache = true;
};

class Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(RuntimeOptions options);
  ~Runtime();

  const RuntimeOptions& options() const { return options_; }
  // nullptr when the driver is unavailable; driver_status() says why.
  const DriverApi* driver() const { return driver_.get(); }
  const absl::Status& driver_status() const { return driver_status_; }

  int device_count() const { return static_cast<int>(devices_.size()); }
  absl::StatusOr<Device*> device(int ordinal) const;
  // The copy plan used for builds on `ordinal` (honours the overrides).
  absl::StatusOr<jit::CopyPlan> PlanForDevice(int ordinal) const;

  // Resolves target and copy implementation, then fetches or compiles.
  absl::StatusOr<ModuleRecord> Build(const BuildSpec& spec);

  // The kernel `name` of `module` loaded on `ordinal`; loads the image into
  // that device's context once, however many modules share it.
  absl::StatusOr<LoadedKernel*> GetKernel(const ModuleRecord& module,
                                          absl::string_view name, int ordinal);

  ModuleCache& cache() { return *cache_; }
  CacheStats cache_stats() const;
  NvrtcLibrary& nvrtc() { return *nvrtc_; }
  // Launch thunks: generated with each build, attached at kernel load.
  LaunchThunks& thunks() { return *thunks_; }
  // "nvrtc 13.0 ..." identity used in cache keys; loads nothing.
  absl::StatusOr<std::string> compiler_identity();

  // Device memory, tracked so a foreign address is refused.
  absl::StatusOr<uint64_t> Allocate(int ordinal, uint64_t bytes);
  absl::Status Free(uint64_t address);
  // Checks [address, address+bytes) lies in one allocation; returns its device.
  absl::StatusOr<Device*> DeviceOfRange(uint64_t address, uint64_t bytes) const;

 private:
  Runtime() = default;
  // Loads `artifact` on device `ordinal` and rewrites its kernels' parameter
  // offsets to the driver's (see DriverParamLayout in runtime.cc).
  absl::Status AdoptDeviceParamLayouts(jit::Artifact& artifact, int ordinal);
  struct LoadedImage;
  struct Allocation {
    uint64_t bytes;
    int ordinal;
  };

  RuntimeOptions options_;
  DriverApiPtr driver_;
  absl::Status driver_status_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::unique_ptr<NvrtcLibrary> nvrtc_;
  std::unique_ptr<ModuleCache> cache_;
  std::unique_ptr<LaunchThunks> thunks_;
  std::string headers_digest_;  // SHA-256 of every embedded header

  absl::Mutex identity_mu_;
  std::optional<absl::StatusOr<std::string>> identity_ ABSL_GUARDED_BY(identity_mu_);
  std::string nvrtc_path_ ABSL_GUARDED_BY(identity_mu_);

  absl::Mutex images_mu_;
  // (cache key, device ordinal) -> the loaded image and its kernels.
  std::map<std::pair<std::string, int>, std::unique_ptr<LoadedImage>> images_
      ABSL_GUARDED_BY(images_mu_);

  mutable absl::Mutex alloc_mu_;
  std::map<uint64_t, Allocation> allocations_ ABSL_GUARDED_BY(alloc_mu_);

  absl::Mutex uncached_mu_;
  uint64_t uncached_counter_ ABSL_GUARDED_BY(uncached_mu_) = 0;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_RUNTIME_H_
