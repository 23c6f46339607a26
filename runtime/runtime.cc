#include "runtime/runtime.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jit/embedded.h"
#include "jit/nvrtc_build.h"
#include "jit/param_layout.h"
#include "base/sha256.h"
#include "runtime/cache/cache_key.h"
#include "runtime/cache/published_compiler.h"
#include "platform/nvrtc_locate.h"
#include "base/status_macros.h"

namespace fleetjit {

struct Runtime::LoadedImage {
  CUmodule module = nullptr;
  Device* device = nullptr;
  // The artifact the kernels' entries point into, kept alive with them
  // (the cache may since have replaced its artifact for the key).
  std::shared_ptr<const jit::Artifact> artifact;
  absl::Mutex mu;
  // Stable addresses: LoadedKernel* are handed out to callers.
  std::map<std::string, std::unique_ptr<LoadedKernel>, std::less<>> kernels
      ABSL_GUARDED_BY(mu);
};

// The runtime's background worker: one thread, started on the first job,
// running jobs in order. Never detached: ~BackgroundWorker finishes the
// queue and joins, and ~Runtime destroys it before anything its jobs use.
//
// Process exit with a runtime never destroyed: an atexit handler
// (registered once, when the first worker is created, i.e. after LLVM's
// static objects exist, so it runs before their destructors) drops every
// worker's queued jobs and waits for the one running, so no thread is
// inside LLVM while the process tears LLVM down. What was dropped is only
// lost work (see Runtime::Build). A forked child never sees the parent's
// thread: it runs its own jobs inline and drops inherited ones.
class Runtime::BackgroundWorker {
 public:
  BackgroundWorker() {
    static std::once_flag registered;
    std::call_once(registered, [] { std::atexit(&StopAllAtExit); });
    absl::MutexLock lock(&Registry().mu);
    Registry().workers.insert(this);
  }

  ~BackgroundWorker() {
    {
      absl::MutexLock lock(&Registry().mu);
      Registry().workers.erase(this);
    }
    if (!thread_.joinable()) return;
    if (getpid() != pid_) {
      // A forked child: the thread is the parent's. Do not join or detach
      // a thread this process does not have; forget it.
      new std::thread(std::move(thread_));  // NOLINT: deliberately leaked
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  void Post(std::function<void()> job) {
    {
      absl::MutexLock lock(&mu_);
      if (exiting_) return;
      if (!thread_.joinable() || getpid() == pid_) {
        queue_.push_back(std::move(job));
        if (!thread_.joinable()) {
          pid_ = getpid();
          thread_ = std::thread([this] { Loop(); });
        }
        return;
      }
    }
    job();  // forked child: no worker thread here
  }

  void WaitIdle() {
    absl::MutexLock lock(&mu_);
    if (thread_.joinable() && getpid() != pid_) return;
    hold_ = false;
    mu_.Await(absl::Condition(
        +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return w->exiting_ || (w->queue_.empty() && !w->running_);
        },
        this));
  }

  void SetHold(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_ = hold;
  }

 private:
  struct WorkerRegistry {
    absl::Mutex mu;
    std::set<BackgroundWorker*> workers ABSL_GUARDED_BY(mu);
  };
  static WorkerRegistry& Registry() {
    static WorkerRegistry* registry = new WorkerRegistry();  // never freed
    return *registry;
  }
  static void StopAllAtExit() {
    absl::MutexLock lock(&Registry().mu);
    for (BackgroundWorker* w : Registry().workers) w->StopAtExit();
  }
  void StopAtExit() {
    absl::MutexLock lock(&mu_);
    exiting_ = true;
    queue_.clear();
    if (getpid() != pid_) return;
    mu_.Await(absl::Condition(
        +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
          return !w->running_;
        },
        this));
  }

  void Loop() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      mu_.Await(absl::Condition(
          +[](BackgroundWorker* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->exiting_ || w->stop_ ||
                   (!w->hold_ && !w->queue_.empty());
          },
          this));
      if (exiting_ || queue_.empty()) return;  // empty: stop_ and drained
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      mu_.Unlock();
      job();
      job = nullptr;
      mu_.Lock();
      running_ = false;
    }
  }

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;     // ~: drain, then end
  bool exiting_ ABSL_GUARDED_BY(mu_) = false;  // exit(): drop, end
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  pid_t pid_ = 0;
};

namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

// The parameter layout the driver uses for `function`, when it differs
// from `entry`'s (nullopt when equal, or when the driver cannot say:
// cuFuncGetParamInfo arrived in CUDA 12.4). Sizes must agree.
absl::StatusOr<std::optional<std::vector<jit::ParamSpec>>> DriverParamLayout(
    const DriverApi& api, CUfunction function, const jit::KernelEntry& entry) {
  if (api.cuFuncGetParamInfo == nullptr) return std::nullopt;
  std::vector<jit::ParamSpec> params = entry.params;
  bool differs = false;
  for (size_t i = 0; i < params.size(); ++i) {
    size_t offset = 0, size = 0;
    FJ_RETURN_IF_ERROR(
        CheckCu(api, api.cuFuncGetParamInfo(function, i, &offset, &size),
                "cuFuncGetParamInfo"),
        absl::StrCat("parameter ", i));
    if (size != params[i].size) {
      return absl::InternalError(absl::StrCat(
          "parameter ", i, " of ", entry.name, ": the PTX says ", params[i].size,
          " bytes, the driver ", size));
    }
    differs = differs || offset != params[i].offset;
    params[i].offset = static_cast<uint32_t>(offset);
  }
  if (!differs) return std::nullopt;
  return params;
}

}  // namespace

absl::Status Runtime::AdoptDeviceParamLayouts(jit::Artifact& artifact, int ordinal) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal), "");
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
  CUmodule module = nullptr;
  FJ_RETURN_IF_ERROR(
      CheckCu(*driver_, driver_->cuModuleLoadData(&module, artifact.image.data()),
              "cuModuleLoadData"),
      "loading the image to read its parameter layouts");
  absl::Status status;
  for (jit::KernelEntry& entry : artifact.kernels) {
    CUfunction function = nullptr;
    status = CheckCu(*driver_,
                     driver_->cuModuleGetFunction(&function, module, entry.lowered_name.c_str()),
                     "cuModuleGetFunction");
    if (!status.ok()) break;
    auto relaid = DriverParamLayout(*driver_, function, entry);
    if (!relaid.ok()) {
      status = relaid.status();
      break;
    }
    if (relaid->has_value()) {
      entry.params = std::move(**relaid);
      entry.param_bytes = jit::ParamBufferBytes(entry.params);
    }
  }
  driver_->cuModuleUnload(module);
  return status;
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
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(RuntimeOptions options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = std::move(options);
  auto driver = LoadDriverApi(rt->options_.libcuda_path);
  if (driver.ok()) {
    rt->driver_ = std::move(driver).value();
    int count = 0;
    absl::Status counted =
        CheckCu(*rt->driver_, rt->driver_->cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (!counted.ok()) {
      rt->driver_status_ = counted;
      count = 0;
    }
    for (int i = 0; i < count; ++i) {
      FJ_ASSIGN_OR_RETURN(std::unique_ptr<Device> d, Device::Open(*rt->driver_, i),
                          "creating the runtime");
      rt->devices_.push_back(std::move(d));
    }
    if (count == 0 && rt->driver_status_.ok()) {
      rt->driver_status_ = absl::UnavailableError("the CUDA driver reports no GPU");
    }
  } else {
    rt->driver_status_ = driver.status();
  }
  // The embedded headers never change within a build of the library: hash
  // them once so a cache key costs one hash of the user's source.
  Sha256 headers;
  for (size_t i = 0; i < jit::kEmbeddedHeadersCount; ++i) {
    const jit::EmbeddedFile& f = jit::kEmbeddedHeaders[i];
    headers.Update(f.path.data(), f.path.size() + 1);  // with the NUL
    headers.Update(f.content.data(), f.content.size() + 1);
  }
  rt->headers_digest_ = Sha256::Hex(headers.Finish());
  rt->cache_ = std::make_unique<ModuleCache>(rt->options_.cache);
  rt->thunks_ = std::make_unique<LaunchThunks>(rt->options_.thunks);
  rt->background_ = std::make_unique<BackgroundWorker>();
  return rt;
}

Runtime::~Runtime() {
  // First: queued follow-ups finish (their disk entries are written whole)
  // while everything they use still exists.
  background_.reset();
  absl::MutexLock lock(&images_mu_);
  if (driver_ != nullptr && !IsForkedChild(*driver_)) {
    for (auto& [key, image] : images_) {
      if (image->module != nullptr && image->device->MakeCurrent().ok()) {
        driver_->cuModuleUnload(image->module);
      }
    }
    absl::MutexLock alloc_lock(&alloc_mu_);
    for (auto& [address, alloc] : allocations_) {
      if (devices_[alloc.ordinal]->MakeCurrent().ok()) {
        driver_->cuMemFree(static_cast<CUdeviceptr>(address));
      }
    }
  }
  images_.clear();
}

absl::StatusOr<Device*> Runtime::device(int ordinal) const {
  if (driver_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device: ", driver_status_.message()));
  }
  if (ordinal < 0 || ordinal >= device_count()) {
    if (device_count() == 0) {
      return absl::UnavailableError(absl::StrCat("no CUDA device: ",
                                                 driver_status_.message()));
    }
    return absl::NotFoundError(absl::StrCat("device ", ordinal,
                                            " does not exist; there are ",
                                            device_count()));
  }
  return devices_[ordinal].get();
}

absl::StatusOr<jit::CopyPlan> Runtime::PlanForDevice(int ordinal) const {
  FJ_ASSIGN_OR_RETURN(Device * d, device(ordinal), "planning copies");
  jit::Target target = options_.target_override.value_or(
      jit::TargetForDevice(d->facts().cc_major, d->facts().cc_minor));
  return jit::MakeCopyPlan(target, options_.copy_impl_override);
}

absl::StatusOr<std::string> Runtime::compiler_identity() {
  absl::MutexLock lock(&identity_mu_);
  if (!identity_.has_value()) {
    auto path = ResolveNvrtcLibrary(options_.libnvrtc_path);
    if (path.ok()) {
      nvrtc_path_ = *path;
      identity_ = CompilerIdentity(*path);
      nvrtc_ = std::make_unique<NvrtcLibrary>(std::vector<std::string>{*path});
    } else {
      identity_ = path.status();
    }
  }
  return *identity_;
}

CacheStats Runtime::cache_stats() const { return cache_->stats(); }

absl::StatusOr<ModuleRecord> Runtime::Build(const BuildSpec& spec) {
  auto start = std::chrono::steady_clock::now();
  // 1. The target: explicit, else the runtime's override, else the device.
  jit::Target target;
  if (spec.target.has_value()) {
    target = *spec.target;
  } else if (options_.target_override.has_value()) {
    target = *options_.target_override;
  } else {
    FJ_ASSIGN_OR_RETURN(Device * d, device(spec.device),
                        "building for the live device (name a target to build "
                        "without a GPU)");
    target = jit::TargetForDevice(d->facts().cc_major, d->facts().cc_minor);
  }
  // 2. The copy implementation, checked against the target's hardware.
  std::optional<jit::CopyImpl> forced =
      spec.copy_impl.has_value() ? spec.copy_impl : options_.copy_impl_override;
  FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, jit::MakeCopyPlan(target, forced),
                      absl::StrCat("building '", spec.name, "'"));

  jit::BuildRequest request;
  request.source = spec.source;
  request.name = spec.name;
  request.target = target;
  request.copy_impl = plan.impl;
  request.emit_ptx = spec.output == BuildSpec::Output::kPtx;
  request.options = spec.options;
  request.name_expressions = spec.name_expressions;
  if (spec.output == BuildSpec::Output::kCubin && target.ptx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a cubin needs an sm_XX target, not ", target.Name()));
  }

  // 3. Fetch or compile. Without NVRTC only a published entry can serve.
  absl::StatusOr<std::string> compiler = compiler_identity();
  if (!compiler.ok() && !spec.use_cache) {
    return Annotate(compiler.status(), absl::StrCat("building '", spec.name, "'"));
  }
  ModuleRecord record;
  record.name = spec.name;
  int layout_device = -1;
  for (int d : {spec.device, 0}) {
    if (d >= 0 && d < device_count() &&
        jit::TargetRunsOn(target, devices_[d]->facts().arch())) {
      layout_device = d;
      break;
    }
  }
  auto compile = [&]() -> absl::StatusOr<jit::Artifact> {
    FJ_ASSIGN_OR_RETURN(jit::Artifact artifact, jit::BuildModule(*nvrtc_, request), "");
    // Parameter offsets are the driver's to choose (64-byte-aligned tensor
    // parameters move with the architecture's parameter bank). When the
    // image runs on a device here, take its layout now, so the thunks and
    // the cached artifact match what a load will find.
    if (layout_device >= 0) {
      FJ_RETURN_IF_ERROR(AdoptDeviceParamLayouts(artifact, layout_device),
                         absl::StrCat("building '", spec.name, "'"));
    }
    // The launch thunks travel in the artifact, so the cache stores them and
    // a hit runs no LLVM; they are generated after Build returns (see
    // ScheduleFollowUp), not here.
    return artifact;
  };
  if (spec.use_cache) {
    CacheKeyInputs inputs;
    inputs.source = spec.source;
    inputs.headers = {{"fleetjit embedded headers (sha256)", headers_digest_}};
    inputs.options = jit::BuildOptions(request);
    inputs.target = target.Name();
    inputs.copy_impl = std::string(jit::CopyImplName(plan.impl));
    inputs.compiler = compiler.ok() ? *compiler : "";
    inputs.name_expressions = spec.name_expressions;
    inputs.emit_ptx = request.emit_ptx;
    if (!compiler.ok()) {
      // No NVRTC here: the rule of runtime/cache/cache_key.h ("Hosts
      // without a compiler") picks what another host published.
      int driver_version = 0;
      if (driver_ != nullptr) (void)driver_->cuDriverGetVersion(&driver_version);
      CacheKey agnostic = CompilerAgnosticKey(inputs);
      absl::StatusOr<ModuleCache::Result> published = cache_->GetPublished(
          agnostic, [&](absl::string_view recorded) {
            return CheckPublishedCompiler(recorded, inputs.target,
                                          driver_version);
          });
      if (!published.ok()) {
        return Annotate(compiler.status(),
                        absl::StrCat("building '", spec.name,
                                     "' (and without a compiler: ",
                                     published.status().message(), ")"));
      }
      record.artifact = std::move(published->artifact);
      record.source = published->source;
      record.key = agnostic.digest;
      ScheduleFollowUp(std::nullopt, record.key, record.artifact, false);
      record.build_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
      return record;
    }
    CacheKey key = MakeCacheKey(inputs);
    // The disk store waits for the thunk object: one write, off the path.
    // Only with a memory tier, which serves the key meanwhile; without one
    // the entry is written now, or the next Build of the key could compile
    // again before the background write.
    FJ_ASSIGN_OR_RETURN(
        ModuleCache::Result result,
        cache_->GetOrBuild(key, compile,
                           options_.cache.memory ? ModuleCache::DiskStore::kDeferred
                                                 : ModuleCache::DiskStore::kNow),
        "");
    record.artifact = std::move(result.artifact);
    record.source = result.source;
    record.key = key.digest;
    ScheduleFollowUp(std::move(key), record.key, record.artifact,
                     result.disk_store_pending);
  } else {
    FJ_ASSIGN_OR_RETURN(jit::Artifact artifact, compile(), "");
    record.artifact = std::make_shared<const jit::Artifact>(std::move(artifact));
    {
      absl::MutexLock lock(&uncached_mu_);
      record.key = absl::StrCat("uncached-", ++uncached_counter_);
    }
    ScheduleFollowUp(std::nullopt, record.key, record.artifact, false);
  }
  record.build_ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  return record;
}

void Runtime::WaitForBackgroundWork() { background_->WaitIdle(); }

void Runtime::HoldBackgroundWorkForTesting(bool hold) {
  background_->SetHold(hold);
}

void Runtime::ScheduleFollowUp(std::optional<CacheKey> key,
                               const std::string& record_key,
                               std::shared_ptr<const jit::Artifact> artifact,
                               bool disk_pending) {
  bool need_thunk = false;
  if (thunks_->enabled() && artifact->thunk_object.empty()) {
    // Once per record key: memory hits of a module whose thunk is being
    // generated (or failed) queue nothing more.
    absl::MutexLock lock(&thunk_jobs_mu_);
    need_thunk = thunk_jobs_.try_emplace(record_key).second;
  }
  if (!need_thunk && !disk_pending) return;
  background_->Post([this, key = std::move(key), record_key,
                     artifact = std::move(artifact), need_thunk, disk_pending] {
    RunFollowUp(key, record_key, artifact, need_thunk, disk_pending);
  });
}

void Runtime::RunFollowUp(const std::optional<CacheKey>& key,
                          const std::string& record_key,
                          const std::shared_ptr<const jit::Artifact>& artifact,
                          bool need_thunk, bool disk_pending) {
  std::shared_ptr<const jit::Artifact> published = artifact;
  if (need_thunk) {
    // 1. The thunk object, on a copy: callers may be reading `artifact`.
    // A failure leaves launches on the generic path (as ever).
    auto with_thunk = std::make_shared<jit::Artifact>(*artifact);
    if (thunks_->AddThunkObject(*with_thunk).ok() &&
        !with_thunk->thunk_object.empty()) {
      published = std::move(with_thunk);
    }
    // 2. Attach it to the kernels loaded meanwhile. GetKernel inserts a
    // kernel before it reads the job's state, and we mark the job done
    // before we list the kernels: each kernel is seen by one side or both
    // (Attach is idempotent).
    {
      absl::MutexLock lock(&thunk_jobs_mu_);
      ThunkJob& job = thunk_jobs_[record_key];
      job.done = true;
      if (published != artifact) job.with_thunk = published;
    }
    std::vector<LoadedImage*> images;
    {
      absl::MutexLock lock(&images_mu_);
      for (auto it = images_.lower_bound({record_key, INT_MIN});
           it != images_.end() && it->first.first == record_key; ++it) {
        images.push_back(it->second.get());
      }
    }
    for (LoadedImage* image : images) {
      std::vector<LoadedKernel*> kernels;
      {
        absl::MutexLock lock(&image->mu);
        for (auto& [name, kernel] : image->kernels) {
          // A relaid kernel packs by another layout: it stays generic.
          if (kernel->relaid_entry == nullptr) kernels.push_back(kernel.get());
        }
      }
      // Without a thunk object (generation failed) Attach generates per
      // signature, as it always has for artifacts that carry none.
      for (LoadedKernel* k : kernels) (void)thunks_->Attach(*published, *k);
    }
  }
  // 3. Publish: memory tier (later hits get the thunk) and disk, atomically
  // (temp + fsync + rename). A failed write was logged by the cache.
  if (key.has_value() && (published != artifact || disk_pending)) {
    (void)cache_->Update(*key, published);
  }
}

void Runtime::AttachThunk(const std::string& record_key,
                          const std::shared_ptr<const jit::Artifact>& image_artifact,
                          LoadedKernel& k) {
  if (!thunks_->enabled()) return;
  std::shared_ptr<const jit::Artifact> source = image_artifact;
  {
    absl::MutexLock lock(&thunk_jobs_mu_);
    auto it = thunk_jobs_.find(record_key);
    if (it != thunk_jobs_.end()) {
      // Being generated: the generator attaches it when ready; launches
      // take the generic path until then.
      if (!it->second.done) return;
      if (it->second.with_thunk != nullptr) source = it->second.with_thunk;
    }
  }
  // Without a thunk (disabled, or it failed) launches take the generic path.
  (void)thunks_->Attach(*source, k);
}

absl::StatusOr<LoadedKernel*> Runtime::GetKernel(const ModuleRecord& module,
                                                 absl::string_view name,
                                                 int ordinal) {
  const jit::Artifact& artifact = *module.artifact;
  const jit::KernelEntry* entry = artifact.FindKernel(name);
  if (entry == nullptr) {
    std::string known;
    for (const jit::KernelEntry& k : artifact.kernels) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", k.name);
    }
    return absl::NotFoundError(absl::StrCat(
        "no kernel '", name, "' in module '", module.name,
        "' (it has: ", known.empty() ? "none" : known,
        "; templated kernels need a name expression at build time)"));
  }
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal),
                      absl::StrCat("loading '", module.name, "'"));
  if (!jit::TargetRunsOn(artifact.target, dev->facts().arch())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "module '", module.name, "' was built for ", artifact.target.Name(),
        ", which cannot run on device ", ordinal, " (sm_", dev->facts().arch(),
        "); build for compute_XX PTX or for the live device"));
  }
  FJ_ASSIGN_OR_RETURN(CUcontext ctx, dev->MakeCurrent(),
                      absl::StrCat("loading '", module.name, "'"));
  LoadedImage* image = nullptr;
  {
    absl::MutexLock lock(&images_mu_);
    auto& slot = images_[{module.key, ordinal}];
    if (slot == nullptr) {
      auto loaded = std::make_unique<LoadedImage>();
      loaded->device = dev;
      loaded->artifact = module.artifact;
      FJ_RETURN_IF_ERROR(
          CheckCu(*driver_, driver_->cuModuleLoadData(&loaded->module, artifact.image.data()),
                  "cuModuleLoadData"),
          absl::StrCat("loading '", module.name, "' (", artifact.target.Name(),
                       ") on device ", ordinal));
      slot = std::move(loaded);
    }
    image = slot.get();
  }
  // Entries point into the image's artifact, which the image keeps alive
  // (the same module as `module.artifact`, possibly another copy of it).
  entry = image->artifact->FindKernel(name);
  if (entry == nullptr) {
    return absl::InternalError(absl::StrCat("kernel '", name, "' of '", module.name,
                                            "' is missing from its loaded image"));
  }
  LoadedKernel* out = nullptr;
  {
    absl::MutexLock lock(&image->mu);
    auto it = image->kernels.find(name);
    if (it != image->kernels.end()) return it->second.get();
    auto kernel = std::make_unique<LoadedKernel>();
    kernel->api = driver_.get();
    kernel->device = dev;
    kernel->context = ctx;
    kernel->entry = entry;
    kernel->copy_impl = artifact.copy_impl;
    kernel->display_name = absl::StrCat(module.name, ":", entry->name);
    FJ_RETURN_IF_ERROR(
        CheckCu(*driver_,
                driver_->cuModuleGetFunction(&kernel->function, image->module,
                                             entry->lowered_name.c_str()),
                "cuModuleGetFunction"),
        absl::StrCat("looking up kernel '", name, "'"));
    struct {
      CUfunction_attribute attribute;
      int* out;
    } attributes[] = {
        {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &kernel->max_threads_per_block},
        {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &kernel->static_shared_bytes},
        {CU_FUNC_ATTRIBUTE_NUM_REGS, &kernel->num_regs},
    };
    for (auto& a : attributes) {
      FJ_RETURN_IF_ERROR(
          CheckCu(*driver_, driver_->cuFuncGetAttribute(a.out, a.attribute, kernel->function),
                  "cuFuncGetAttribute"),
          absl::StrCat("reading attributes of '", name, "'"));
    }
    // Pack at the offsets this driver uses. A layout that differs from the
    // artifact's (an artifact built without this device, e.g. PTX for a fleet)
    // gets a corrected copy; its thunk was generated for the other layout, so
    // it launches through the generic path.
    FJ_ASSIGN_OR_RETURN(std::optional<std::vector<jit::ParamSpec>> relaid,
                        DriverParamLayout(*driver_, kernel->function, *entry),
                        absl::StrCat("reading the parameters of '", name, "'"));
    if (relaid.has_value()) {
      kernel->relaid_entry = std::make_unique<jit::KernelEntry>(*entry);
      kernel->relaid_entry->params = std::move(*relaid);
      kernel->relaid_entry->param_bytes = jit::ParamBufferBytes(kernel->relaid_entry->params);
      kernel->entry = kernel->relaid_entry.get();
    }
    out = kernel.get();
    image->kernels.emplace(std::string(name), std::move(kernel));
  }
  // After the insertion (see RunFollowUp), and outside image->mu: the
  // thunk is an atomic, and a kernel without one launches generically.
  if (out->relaid_entry == nullptr) AttachThunk(module.key, image->artifact, *out);
  return out;
}

absl::StatusOr<uint64_t> Runtime::Allocate(int ordinal, uint64_t bytes) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal), "allocating device memory");
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "allocating device memory");
  CUdeviceptr ptr = 0;
  FJ_RETURN_IF_ERROR(CheckCu(*driver_, driver_->cuMemAlloc(&ptr, bytes), "cuMemAlloc"),
                     absl::StrCat("allocating ", bytes, " bytes on device ", ordinal));
  absl::MutexLock lock(&alloc_mu_);
  allocations_[ptr] = Allocation{bytes, ordinal};
  return static_cast<uint64_t>(ptr);
}

absl::Status Runtime::Free(uint64_t address) {
  if (address == 0) return absl::OkStatus();
  int ordinal = 0;
  {
    absl::MutexLock lock(&alloc_mu_);
    auto it = allocations_.find(address);
    if (it == allocations_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "0x%x was not allocated by this runtime (or was freed already)", address));
    }
    ordinal = it->second.ordinal;
    allocations_.erase(it);
  }
  Device* dev = devices_[ordinal].get();
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "freeing device memory");
  return CheckCu(*driver_, driver_->cuMemFree(static_cast<CUdeviceptr>(address)),
                 "cuMemFree");
}

absl::StatusOr<Device*> Runtime::DeviceOfRange(uint64_t address,
                                               uint64_t bytes) const {
  absl::MutexLock lock(&alloc_mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device address 0x%x is not inside an allocation of this runtime", address));
  }
  --it;
  uint64_t offset = address - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device range [0x%x, +%u) runs outside its allocation (0x%x, %u bytes)",
        address, bytes, it->first, it->second.bytes));
  }
  return devices_[it->second.ordinal].get();
}

}  // namespace fleetjit
