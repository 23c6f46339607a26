// The fleetjit runtime: one per fj_runtime handle, and the facade over the
// rooms that do the work. It constructs every part, hands each the narrow
// pieces it needs, and forwards to them; it keeps its configuration
// (config.h) and the registry of the objects handed to callers
// (registry.h). The rooms, each its own layer (cmake/layers.cmake;
// runtime/CMakeLists.txt), bottom up:
//   cache/     the module cache: keys, entries, memory, disk, remote tiers
//   device/    devices, their poisoning and their plain settings (the
//              persisting L2) (device.h), device memory, copies and fills
//              (memory.h), streams and their priorities (stream.h)
//   config.h   RuntimeOptions and the FLEETJIT_* environment
//   load/      module records (module.h: BuildSpec, ModuleRecord), per-context
//              loading of images and kernels (module_loader.h, kernel.h),
//              kernel attributes and occupancy (kernel_attributes.h),
//              parameter relayout
//   launch/    the launch wire format (wire.h), launches (launch.h), launch
//              thunks, the tensor encoder
//   builder/   builds: cache, NVRTC and the background thunk pipeline
//              (module_builder.h), builds that do not block (build_pool.h,
//              fj_module_build_async), modules built elsewhere
//              (image_import.h, fj_module_load)
//   copy/      fj_copy, fj_prefetch, fj_peer_* (copy_engine.h), which sees
//              the runtime only through a kernel source, the devices and the
//              launcher
//   tune/      the tuning loop, its spaces and records (no device)
//   tuning/    tuning on the live device (fj_tune, fj_copy's launch shapes):
//              the single flight of each key and its locks (tuning.h)
//   registry.h the objects handed to callers and their destroy cascade
//
// It owns the driver (loaded at creation; absent is not an error), the
// devices, the NVRTC library (loaded on the first compile), the module
// cache and the modules loaded per device context. Everything here is
// thread-safe.
#ifndef FLEETJIT_RUNTIME_RUNTIME_H_
#define FLEETJIT_RUNTIME_RUNTIME_H_

#include <cuda.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "jit/copy_plan.h"
#include "platform/driver_api.h"
#include "platform/nvrtc_library.h"
#include "runtime/builder/build_pool.h"
#include "runtime/builder/image_import.h"
#include "runtime/builder/module_builder.h"
#include "runtime/cache/module_cache.h"
#include "runtime/config.h"
#include "runtime/device/device.h"
#include "runtime/device/memory.h"
#include "runtime/device/stream.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/launch_thunks.h"
#include "runtime/launch/wire.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module_loader.h"
#include "runtime/registry.h"
#include "runtime/tune/tune_record.h"
#include "runtime/tuning/tuning.h"

namespace fleetjit {

class CopyEngine;  // runtime/copy/copy_engine.h
namespace copy {
class KernelSource;  // runtime/copy/copy_kernels.h
}  // namespace copy

class Runtime {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(
      RuntimeOptions options);
  ~Runtime();

  // Lifetime under the C ABI: the caller's handle holds one pin, and so
  // does each call that uses the runtime outside the call gate (a destroy
  // burying what it took, a call that blocks; capi/call_gate.h). The last
  // Unpin deletes it, on whichever thread that is.
  void Pin() { pins_.fetch_add(1, std::memory_order_relaxed); }
  static void Unpin(Runtime* runtime) {
    if (runtime->pins_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete runtime;
    }
  }
  // Whether this process is a fork() child of the one that created it.
  bool forked() const;

  // fj_runtime_destroy's first step: the registry's cascade (registry.h),
  // asking `release` to give up each object's tag.
  Graveyard TakeAll(ReleaseTagFn release) { return registry_.TakeAll(release); }
  // The objects handed to callers, for naming (Registry::Publish) and
  // destroying (Registry::Take*).
  Registry& registry() { return registry_; }

  const RuntimeOptions& options() const { return options_; }
  // Where the library's log lines go (the caller's sink, FLEETJIT_LOG).
  const Logger& logger() const { return logger_; }
  // nullptr when the driver is unavailable; driver_status() says why.
  const DriverApi* driver() const { return driver_.get(); }
  const absl::Status& driver_status() const { return devices_.driver_status(); }

  int device_count() const { return devices_.count(); }
  absl::StatusOr<Device*> device(int ordinal) const {
    return devices_.at(ordinal);
  }
  // The copy plan used for builds on `ordinal` (honours the overrides).
  absl::StatusOr<jit::CopyPlan> PlanForDevice(int ordinal) const;
  absl::StatusOr<DeviceReport> DescribeDevice(int ordinal) const;

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
  absl::StatusOr<ModuleRecord> BuildRecord(const BuildSpec& spec) {
    return builder_->BuildRecord(spec);
  }

  // Blocks until the background work queued so far (thunk generation,
  // disk publication) is done. For tests, benchmarks and callers that want
  // the disk entry written now (e.g. before forking workers).
  void WaitForBackgroundWork() { builder_->WaitForBackgroundWork(); }
  // Tests: while held, background work is queued but not started (so a
  // test can observe the state before it). ~Runtime and
  // WaitForBackgroundWork release the hold.
  void HoldBackgroundWorkForTesting(bool hold) {
    builder_->HoldBackgroundWorkForTesting(hold);
  }

  // The kernel `name` of `module` loaded on `ordinal`; loads the image into
  // that device's context once, however many modules share it.
  absl::StatusOr<LoadedKernel*> LoadKernel(const ModuleRecord& module,
                                           absl::string_view name, int ordinal);

  ModuleCache& cache() { return *cache_; }
  CacheStats cache_stats() const { return cache_->stats(); }
  NvrtcLibrary& nvrtc() { return *builder_->nvrtc(); }
  // Launch thunks: generated after each cold build (in the background),
  // attached at kernel load or when generated.
  LaunchThunks& thunks() { return *thunks_; }
  // "nvrtc 13.0 ..." identity used in cache keys; loads nothing.
  absl::StatusOr<std::string> compiler_identity() {
    return builder_->compiler_identity();
  }
  // CUDA's header folders every build searches (ModuleBuilder).
  const std::vector<jit::IncludeDir>& cuda_include_dirs() {
    return builder_->cuda_include_dirs();
  }

  // Device memory, tracked so a foreign address is refused (memory.h).
  absl::StatusOr<uint64_t> Allocate(int ordinal, uint64_t bytes) {
    return memory_->Allocate(ordinal, bytes);
  }
  absl::Status Free(uint64_t address) { return memory_->Free(address); }
  // A copy or fill on `stream` (one of this runtime's), or synchronous
  // when null; see DeviceMemory::Copy.
  absl::Status CopyMemory(const CopyRequest& request, Stream* stream) {
    return memory_->Copy(request,
                         stream == nullptr ? nullptr : stream->handle());
  }

  // The objects handed to callers, owned by this runtime (registry.h).
  // BuildRecord, kept until DestroyModule or the runtime's destruction.
  absl::StatusOr<Module*> BuildModule(const BuildSpec& spec);
  // LoadKernel, kept until its module is destroyed.
  absl::StatusOr<KernelRef*> OpenKernel(Module& module, absl::string_view name,
                                        int ordinal);
  absl::StatusOr<Stream*> CreateStream(int ordinal);
  // fj_stream_wrap: borrows the caller's `cu_stream` on `ordinal` (see
  // Stream::Wrap); destroying it only forgets it.
  absl::StatusOr<Stream*> WrapStream(int ordinal, uint64_t cu_stream);
  // Launches `k` on `stream` (one of this runtime's, or null for the legacy
  // default stream) and notes it as its device's last kernel. See Launch
  // in launch.h for `cfg` and `arg_stride`.
  absl::Status LaunchKernel(KernelRef& k, const LaunchConfig& cfg,
                            Stream* stream, const fj_arg* args, size_t num_args,
                            size_t arg_stride);

  // Since ABI 1.3: module globals, stream priorities (Stream), the
  // persisting L2 (Device::SetPersistingL2); kernel attributes and
  // occupancy are the loaded kernel's (runtime/load/kernel_attributes.h).
  //
  // The global `name` of `module` on `ordinal` (ModuleLoader::LoadGlobal).
  absl::StatusOr<ModuleLoader::Global> FindGlobal(const Module& module,
                                                  absl::string_view name,
                                                  int ordinal);
  // Copies `bytes` between host `host` and the global, `offset` bytes into
  // it (OUT_OF_RANGE past its end): host -> global when `to_global`.
  // Ordered on `stream` (of `ordinal`), or complete on return when null.
  absl::Status CopyGlobal(const Module& module, absl::string_view name,
                          int ordinal, uint64_t offset, void* host,
                          uint64_t bytes, bool to_global, Stream* stream);
  absl::StatusOr<std::pair<int, int>> StreamPriorityRange(int ordinal);
  absl::StatusOr<Stream*> CreateStreamWithPriority(int ordinal, int priority);
  // cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE); returns what is set.
  absl::StatusOr<uint64_t> SetPersistingL2(int ordinal, uint64_t bytes);

  // Asynchronous builds and imported images.
  // Queues BuildRecord(spec) on this runtime's build pool (at most
  // BuildPool::DefaultThreads() at once); kept until DestroyBuild or the
  // runtime's destruction, which cancels queued builds and waits for the
  // running ones.
  PendingBuild* SubmitBuild(BuildSpec spec);
  // Waits for `job` (a PendingBuild's), then its module (kept like
  // BuildModule's) or its error; FAILED_PRECONDITION once taken.
  absl::StatusOr<Module*> TakeBuild(BuildJob& job);
  // An image built elsewhere (image_import.h), kept like BuildModule's.
  absl::StatusOr<Module*> LoadModule(const ImageSpec& spec);
  // A device link of several inputs (runtime/builder/module_link.cc), kept
  // like BuildModule's. Since 1.3.
  absl::StatusOr<ModuleRecord> LinkRecord(const LinkSpec& spec) {
    return builder_->LinkRecord(spec);
  }
  absl::StatusOr<Module*> LinkModule(const LinkSpec& spec);

  // Tensor copies, L2 prefetches and peer access (fj_copy, fj_prefetch,
  // fj_peer_*): created on first use, with this runtime's devices, a kernel
  // source over its builder and loader, and the launcher.
  CopyEngine& copy();

  // fj_tune: the stored result of `request`'s key, else a tuning run on the
  // live device (tune/tuner.h), stored unless noisy. NOT_FOUND when no
  // candidate ran correctly (the message lists each row). Calls of one key
  // tune one at a time: a call that finds the key being tuned waits for
  // that run, then looks again (a hit, or its own run when none was
  // stored), so concurrent callers neither tune twice nor time each other.
  absl::StatusOr<TuneOutcome> Tune(const TuneRequest& request) {
    return tuning_->Tune(request);
  }
  // The key fj_tune would use, and its inputs (fleetjit tune --key).
  absl::StatusOr<CacheKey> TuneKey(const TuneRequest& request,
                                   std::vector<tune::TuneCandidate>* out) {
    return tuning_->TuneKey(request, out);
  }

  // fj_copy's window kernel on `device` under `impl`
  // (runtime/tuning/copy_window_tune.cc): the stored launch shape of the
  // device model, else a tuning run of the shapes on a scratch window
  // (about 0.5 GiB of device memory, well under a second on an H200),
  // stored unless noisy. The winner is set on the copy kernels
  // (CopyKernels::SetShape). With options().copy_tune, the first copy on a
  // (device, impl) queues this on the background worker; benchmarks and
  // tests call it directly.
  absl::StatusOr<TuneOutcome> TuneCopyWindow(int device, jit::CopyImpl impl) {
    return tuning_->TuneCopyWindow(device, impl);
  }
  // The launch shape a row of such a record names (DATA_LOSS if none).
  static absl::StatusOr<copy::CopyLaunchShape> CopyWindowShapeOf(
      const tune::TuneRow& row);
  // Queues TuneCopyWindow(device, impl) on the background worker, once per
  // pair and only with options().copy_tune; its outcome is logged (info),
  // never an error of the copy that asked.
  void ScheduleCopyTune(int device, jit::CopyImpl impl) {
    tuning_->ScheduleCopyTune(device, impl);
  }

 private:
  Runtime();
  // Start-up work the options ask for: preopen_devices, preload_nvrtc.
  absl::Status StartUp();

  RuntimeOptions options_;
  Logger logger_;
  DriverApiPtr driver_;
  DeviceList devices_;
  std::unique_ptr<ModuleCache> cache_;
  std::unique_ptr<LaunchThunks> thunks_;
  std::unique_ptr<DeviceMemory> memory_;
  std::unique_ptr<ModuleLoader> loader_;
  std::unique_ptr<ModuleBuilder> builder_;  // uses loader_, cache_, thunks_
  Registry registry_;
  std::atomic<int> pins_{1};
  const int creator_pid_;
  // Threads start on demand; ~Runtime ends it before the builder it uses.
  std::unique_ptr<BuildPool> build_pool_ =
      std::make_unique<BuildPool>(BuildPool::DefaultThreads());
  // The tuning's state and locks (runtime/tuning/); its runs use the
  // parts above, and ~Runtime ends its background work before them.
  std::unique_ptr<Tuning> tuning_;
  // Last: destroyed first, before the devices and the driver it uses (its
  // streams and peer contexts).
  absl::Mutex copy_mu_;
  // What the copy engine builds its kernels through (outlives it).
  std::unique_ptr<copy::KernelSource> copy_kernels_ ABSL_GUARDED_BY(copy_mu_);
  std::shared_ptr<CopyEngine> copy_ ABSL_GUARDED_BY(copy_mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_RUNTIME_H_
