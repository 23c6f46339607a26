// Builds modules for a runtime: resolves target and copy implementation,
// fetches from the module cache or compiles with NVRTC (found on first
// use), and runs the thunk pipeline: after a cold build, the background
// worker generates the launch thunk object, attaches it to the kernels
// loaded meanwhile and publishes the artifact to the disk cache.
#ifndef FLEETJIT_RUNTIME_BUILDER_MODULE_BUILDER_H_
#define FLEETJIT_RUNTIME_BUILDER_MODULE_BUILDER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/include_scan.h"
#include "jit/nvrtc_build.h"
#include "jit/target.h"
#include "platform/nvjitlink_library.h"
#include "platform/nvrtc_library.h"
#include "runtime/builder/background_worker.h"
#include "runtime/cache/cache_key.h"
#include "runtime/cache/module_cache.h"
#include "runtime/config.h"
#include "runtime/device/device.h"
#include "runtime/launch/launch_thunks.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module.h"

namespace fleetjit {

class ModuleLoader;

class ModuleBuilder {
 public:
  // Everything passed in outlives the builder.
  ModuleBuilder(const RuntimeOptions& options, const DriverApi* driver,
                const DeviceList& devices, ModuleCache& cache,
                LaunchThunks& thunks, ModuleLoader& loader);
  // Finishes the queued background work first (its disk entries are
  // written whole) while everything it uses still exists.
  ~ModuleBuilder();

  // See Runtime::BuildRecord.
  absl::StatusOr<ModuleRecord> BuildRecord(const BuildSpec& spec);
  // See Runtime::LinkRecord (runtime/builder/module_link.cc).
  absl::StatusOr<ModuleRecord> LinkRecord(const LinkSpec& spec);

  // Gives `k` (a kernel just loaded from the image of `record_key`) its
  // thunk, unless the record's thunk is still being generated (the
  // generator attaches it then).
  void AttachThunk(const std::string& record_key,
                   const jit::Artifact& image_artifact, LoadedKernel& k);

  void WaitForBackgroundWork() { background_->WaitIdle(); }
  // Queues other background work of the runtime on the same worker (so
  // WaitForBackgroundWork and the runtime's destruction wait for it too).
  void PostBackground(std::function<void()> job) {
    background_->Post(std::move(job));
  }
  void HoldBackgroundWorkForTesting(bool hold) { background_->SetHold(hold); }

  // "nvrtc 13.0 ..." identity used in cache keys; finds NVRTC on first use.
  // Never changes afterwards: the reference stays valid for the builder's life.
  const absl::StatusOr<std::string>& compiler_identity();
  // The folders of CUDA's headers every build searches (after the caller's),
  // resolved once: RuntimeOptions::cuda_headers plus the NVRTC in use.
  // Never changes afterwards: the reference stays valid for the builder's life.
  const std::vector<jit::IncludeDir>& cuda_include_dirs();
  // Null when NVRTC was not found (looks for it on first use).
  NvrtcLibrary* nvrtc() {
    ResolveCompiler();
    return nvrtc_.get();
  }

 private:
  struct ThunkJob {
    bool done = false;
    // The artifact with its thunk object; null if generation failed.
    std::shared_ptr<const jit::Artifact> with_thunk;
  };
  // The target a build or link names, else the runtime's override, else the
  // live device `device`'s; `verb` ("building", "linking") for the error.
  absl::StatusOr<jit::Target> ResolveTarget(
      const std::optional<jit::Target>& named, int device, const char* verb);
  // BuildRecord's steps 1-2: the target, copy implementation and NVRTC
  // request of `spec`.
  absl::StatusOr<jit::BuildRequest> ResolveRequest(const BuildSpec& spec);
  // The cache key's inputs for `request` compiled by `compiler`.
  CacheKeyInputs BuildKeyInputs(const jit::BuildRequest& request,
                                const std::string& compiler);

  // The copy layer's slow paths built once (slow_paths.cc): the artifact of
  // `request` linked with the slow-path library when that applies and the
  // library is built; nullopt when the build compiles them itself (and
  // then the library is queued, once).
  absl::StatusOr<std::optional<jit::Artifact>> BuildWithSlowPathLibrary(
      const BuildSpec& spec, const jit::BuildRequest& request,
      const std::string& compiler);
  // The background job: compiles the library and stores it in the tiers.
  void BuildSlowPathLibrary(const std::string& name,
                            const jit::BuildRequest& request,
                            const CacheKey& key);
  bool SlowPathLibraryApplies(const BuildSpec& spec,
                              const jit::BuildRequest& request);
  // Appended to a build's key options where the slow-path library applies:
  // what that build stores (linked, or whole while the library is not
  // built yet) never serves a build with the option off.
  static constexpr char kSlowPathsLinkedKeyOption[] =
      "fleetjit: slow paths from their library (docs/slow-path-library.md)";
  BuildSpec SlowPathLibrarySpec(const BuildSpec& spec,
                                const jit::BuildRequest& request,
                                int register_cap);

  // Queues what a build leaves to the background: the thunk object of
  // `artifact` when it has none (thunks on, once per record key), and the
  // disk store when `disk_pending`. `key` is absent for uncached builds.
  // `build_lock` (ModuleCache::Result::build_lock) is held until the disk
  // store is done, so other processes wait for the entry.
  void ScheduleFollowUp(std::optional<CacheKey> key,
                        const std::string& record_key,
                        std::shared_ptr<const jit::Artifact> artifact,
                        bool disk_pending,
                        std::shared_ptr<DiskCache::KeyLock> build_lock = {});
  void RunFollowUp(const std::optional<CacheKey>& key,
                   const std::string& record_key,
                   const std::shared_ptr<const jit::Artifact>& artifact,
                   bool need_thunk, bool disk_pending);

  const RuntimeOptions& options_;
  const DriverApi* driver_;
  const DeviceList& devices_;
  ModuleCache& cache_;
  LaunchThunks& thunks_;
  ModuleLoader& loader_;
  std::string headers_digest_;  // SHA-256 of every embedded header

  // Finds NVRTC and CUDA's header folders, once; sets the three below.
  void ResolveCompiler();
  absl::once_flag identity_once_;
  absl::StatusOr<std::string> identity_;
  std::unique_ptr<NvrtcLibrary> nvrtc_;
  std::vector<jit::IncludeDir> cuda_dirs_;
  // The headers each build may read from disk, kept per (source, folders).
  jit::IncludeScanner scanner_;

  // nvJitLink, found on the first link (module_link.cc): its identity
  // ("nvjitlink libnvJitLink.so.13 size=N") or why it is missing, and the
  // library, loaded on the first link that compiles.
  void ResolveLinker();
  absl::once_flag linker_once_;
  absl::StatusOr<std::string> linker_identity_;
  std::unique_ptr<NvJitLinkLibrary> nvjitlink_;

  absl::Mutex uncached_mu_;
  uint64_t uncached_counter_ ABSL_GUARDED_BY(uncached_mu_) = 0;

  // Set by ~ModuleBuilder: slow-path libraries not yet started are skipped.
  std::atomic<bool> closing_{false};
  absl::Mutex slow_path_mu_;
  // Keys of the slow-path libraries queued for the background.
  absl::flat_hash_set<std::string> slow_path_jobs_
      ABSL_GUARDED_BY(slow_path_mu_);

  absl::Mutex thunk_jobs_mu_;
  // Record key -> its background thunk generation (absent: none needed or
  // none started).
  absl::flat_hash_map<std::string, ThunkJob> thunk_jobs_
      ABSL_GUARDED_BY(thunk_jobs_mu_);
  // Last: destroyed first (and ~ModuleBuilder resets it explicitly).
  std::unique_ptr<BackgroundWorker> background_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_BUILDER_MODULE_BUILDER_H_
