// The fleetjit runtime: one per fj_runtime handle.
//
// It owns the driver (loaded at creation; absent is not an error), the
// devices, the NVRTC library (loaded on the first compile), the module cache
// and the modules loaded per device context. Everything here is
// thread-safe.
#ifndef FLEETJIT_RUNTIME_RUNTIME_H_
#define FLEETJIT_RUNTIME_RUNTIME_H_

#include <cuda.h>

#include <functional>
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
#include "platform/driver_api.h"
#include "runtime/cache/cache_key.h"
#include "runtime/kernel.h"
#include "runtime/launch_thunks.h"
#include "runtime/cache/module_cache.h"
#include "platform/nvrtc_library.h"

namespace fleetjit {

class CopyEngine;  // runtime/copy/copy_engine.h

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
  //
  // A cold build returns as soon as NVRTC (and, with a GPU, the parameter
  // layout adoption) is done. Two follow-ups then run on this runtime's
  // background worker, off the caller's path:
  //   - the launch thunk object is generated (LLVM) and attached to the
  //     module's kernels already loaded; until then they launch through the
  //     generic path, which behaves identically;
  //   - the artifact, now carrying its thunk object, is published to the
  //     disk cache under the same key (temp file + fsync + rename), so later
  //     processes get the thunk from the cache and run no LLVM on a hit.
  // The memory tier serves this process meanwhile, so concurrent builds of
  // the key still compile once. ~Runtime finishes the queued work. If the
  // process exits without destroying the runtime (or dies), queued work is
  // dropped: a later process then compiles the module again (it was never
  // on disk) or, if only the thunk was missing, regenerates it once in its
  // background. Nothing partial is ever published.
  absl::StatusOr<ModuleRecord> Build(const BuildSpec& spec);

  // Blocks until the background work queued so far (thunk generation,
  // disk publication) is done. For tests, benchmarks and callers that want
  // the disk entry written now (e.g. before forking workers).
  void WaitForBackgroundWork();
  // Tests: while held, background work is queued but not started (so a
  // test can observe the state before it). ~Runtime and
  // WaitForBackgroundWork release the hold.
  void HoldBackgroundWorkForTesting(bool hold);

  // The kernel `name` of `module` loaded on `ordinal`; loads the image into
  // that device's context once, however many modules share it.
  absl::StatusOr<LoadedKernel*> GetKernel(const ModuleRecord& module,
                                          absl::string_view name, int ordinal);

  ModuleCache& cache() { return *cache_; }
  CacheStats cache_stats() const;
  NvrtcLibrary& nvrtc() { return *nvrtc_; }
  // Launch thunks: generated after each cold build (in the background),
  // attached at kernel load or when generated.
  LaunchThunks& thunks() { return *thunks_; }
  // "nvrtc 13.0 ..." identity used in cache keys; loads nothing.
  absl::StatusOr<std::string> compiler_identity();

  // Device memory, tracked so a foreign address is refused.
  absl::StatusOr<uint64_t> Allocate(int ordinal, uint64_t bytes);
  absl::Status Free(uint64_t address);
  // Checks [address, address+bytes) lies in one allocation; returns its device.
  absl::StatusOr<Device*> DeviceOfRange(uint64_t address, uint64_t bytes) const;

  // Tensor copies, L2 prefetches and peer access (fj_copy, fj_prefetch,
  // fj_peer_*): created on first use. Defined in runtime/copy/copy_engine.cc.
  CopyEngine& copy();

 private:
  Runtime() = default;
  // Loads `artifact` on device `ordinal` and rewrites its kernels' parameter
  // offsets to the driver's (see DriverParamLayout in runtime.cc).
  absl::Status AdoptDeviceParamLayouts(jit::Artifact& artifact, int ordinal);
  struct LoadedImage;
  class BackgroundWorker;
  // Queues what a build leaves to the background: the thunk object of
  // `artifact` when it has none (thunks on, once per record key), and the
  // disk store when `disk_pending`. `key` is absent for uncached builds.
  void ScheduleFollowUp(std::optional<CacheKey> key, const std::string& record_key,
                        std::shared_ptr<const jit::Artifact> artifact,
                        bool disk_pending);
  void RunFollowUp(const std::optional<CacheKey>& key,
                   const std::string& record_key,
                   const std::shared_ptr<const jit::Artifact>& artifact,
                   bool need_thunk, bool disk_pending);
  // Gives `k` (a kernel of the image of `record_key`) its thunk, unless the
  // record's thunk is still being generated (the generator attaches it).
  void AttachThunk(const std::string& record_key,
                   const std::shared_ptr<const jit::Artifact>& image_artifact,
                   LoadedKernel& k);
  struct ThunkJob {
    bool done = false;
    // The artifact with its thunk object; null if generation failed.
    std::shared_ptr<const jit::Artifact> with_thunk;
  };
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

  absl::Mutex thunk_jobs_mu_;
  // Record key -> its background thunk generation (absent: none needed or
  // none started).
  absl::flat_hash_map<std::string, ThunkJob> thunk_jobs_
      ABSL_GUARDED_BY(thunk_jobs_mu_);
  // Declared last, destroyed first... but ~Runtime resets it explicitly
  // before anything else, since its jobs use the members above.
  std::unique_ptr<BackgroundWorker> background_;
  // After the devices and the driver: destroyed before them (its streams).
  absl::Mutex copy_mu_;
  std::shared_ptr<CopyEngine> copy_ ABSL_GUARDED_BY(copy_mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_RUNTIME_H_
