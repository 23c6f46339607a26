#include "runtime/runtime.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/exit_gate.h"
#include "base/process_id.h"
#include "base/status_macros.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/copy/copy_kernels.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/tensor_encoder.h"

namespace fleetjit {

namespace {

// The copy engine's kernel source: builds and loads through the runtime
// like any module (BuildRecord, LoadKernel).
class RuntimeKernelSource final : public copy::KernelSource {
 public:
  explicit RuntimeKernelSource(Runtime& runtime) : runtime_(runtime) {}

  absl::StatusOr<LoadedKernel*> KernelFor(const BuildSpec& spec,
                                          absl::string_view kernel) override {
    FJ_ASSIGN_OR_RETURN(ModuleRecord record, runtime_.BuildRecord(spec),
                        "building the copy kernel");
    FJ_ASSIGN_OR_RETURN(LoadedKernel * k,
                        runtime_.LoadKernel(record, kernel, spec.device),
                        "loading the copy kernel");
    return k;
  }

  absl::StatusOr<jit::CopyImpl> DefaultImpl(int device) const override {
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, runtime_.PlanForDevice(device));
    return plan.impl;
  }

  void ShapeWanted(int device, jit::CopyImpl impl) override {
    runtime_.ScheduleCopyTune(device, impl);
  }

 private:
  Runtime& runtime_;
};

}  // namespace

Runtime::Runtime() : creator_pid_(ProcessId()) {}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(
    RuntimeOptions options) {
  // exit() on this thread, when it is the main one, waits for builds in
  // flight before any library's exit handlers run (base/exit_gate.h).
  ExitGate::WatchCallingThread();
  // Tensors kept by launches of an earlier runtime are not this one's.
  ForgetKeptTensors();
  std::unique_ptr<Runtime> rt(new Runtime());
  rt->options_ = std::move(options);
  rt->logger_ = LoggerFor(rt->options_);
  // Cache and remote-tier lines ("cache: ...") at their own levels,
  // unless the caller gave the cache a logger of its own.
  if (!rt->options_.cache.log.Enabled(LogLevel::kError)) {
    rt->options_.cache.log = rt->logger_;
  }
  absl::Status driver_status;
  auto driver = LoadDriverApi(rt->options_.libcuda_path);
  if (driver.ok()) {
    rt->driver_ = std::move(driver).value();
  } else {
    driver_status = driver.status();
  }
  FJ_ASSIGN_OR_RETURN(
      rt->devices_,
      DeviceList::Open(rt->driver_.get(), driver_status, &rt->logger_));
  rt->cache_ = std::make_unique<ModuleCache>(rt->options_.cache);
  rt->thunks_ = std::make_unique<LaunchThunks>(rt->options_.thunks);
  rt->memory_ = std::make_unique<DeviceMemory>(rt->driver_.get(), rt->devices_);
  rt->loader_ = std::make_unique<ModuleLoader>(rt->driver_.get(), rt->devices_,
                                               &rt->logger_);
  rt->builder_ = std::make_unique<ModuleBuilder>(
      rt->options_, rt->driver_.get(), rt->devices_, *rt->cache_, *rt->thunks_,
      *rt->loader_);
  Runtime* self = rt.get();
  TuningParts parts;
  parts.owner = self;
  parts.driver = rt->driver_.get();
  parts.devices = &rt->devices_;
  parts.cache = rt->cache_.get();
  parts.builder = rt->builder_.get();
  parts.build_pool = rt->build_pool_.get();
  parts.logger = &rt->logger_;
  parts.copy_tune = rt->options_.copy_tune;
  parts.describe = [self](int ordinal) {
    return self->DescribeDevice(ordinal);
  };
  parts.load_kernel = [self](const ModuleRecord& module, absl::string_view name,
                             int ordinal) {
    return self->LoadKernel(module, name, ordinal);
  };
  parts.copy = [self]() -> CopyEngine& { return self->copy(); };
  rt->tuning_ = std::make_unique<Tuning>(std::move(parts));
  FJ_RETURN_IF_ERROR(rt->StartUp(), "starting up (fj_runtime_options)");
  return rt;
}

absl::Status Runtime::StartUp() {
  for (int ordinal : options_.preopen_devices) {
    if (ordinal == -1) {
      for (int i = 0; i < devices_.count(); ++i) {
        FJ_RETURN_IF_ERROR(devices_.get(i).MakeCurrent().status(),
                           absl::StrCat("opening device ", i));
      }
      continue;
    }
    FJ_ASSIGN_OR_RETURN(Device * d, devices_.at(ordinal),
                        absl::StrCat("preopen_devices names device ", ordinal));
    FJ_RETURN_IF_ERROR(d->MakeCurrent().status(),
                       absl::StrCat("opening device ", ordinal));
  }
  if (options_.preload_nvrtc) {
    FJ_RETURN_IF_ERROR(builder_->compiler_identity().status(),
                       "preloading NVRTC");
    FJ_RETURN_IF_ERROR(builder_->nvrtc()->Get().status(), "preloading NVRTC");
  }
  return absl::OkStatus();
}

bool Runtime::forked() const { return ProcessId() != creator_pid_; }

Runtime::~Runtime() {
  // The order matters: what callers hold (streams first) goes before the
  // background work finishes (its disk entries are written whole while
  // everything it uses still exists), then the loaded images, then memory.
  // The copy engine goes first: its streams and kernels use all of these.
  // A copy-shape tuning queued or running (it uses the engine) stops at its
  // next candidate and stores nothing.
  const bool copy_tune_asked =
      tuning_ != nullptr && tuning_->CancelCopyTuning();
  if (copy_tune_asked && builder_ != nullptr) builder_->WaitForBackgroundWork();
  {
    absl::MutexLock lock(&copy_mu_);
    copy_.reset();
    copy_kernels_.reset();
  }
  build_pool_.reset();  // cancels queued builds, joins running ones
  registry_.TakeAll([](ObjectKind, uint64_t) { return true; })
      .Bury()
      .IgnoreError();
  builder_.reset();
  loader_.reset();
  memory_.reset();
  ForgetKeptTensors();  // their memory is gone with the runtime
}

absl::StatusOr<jit::CopyPlan> Runtime::PlanForDevice(int ordinal) const {
  FJ_ASSIGN_OR_RETURN(Device * d, device(ordinal), "planning copies");
  jit::Target target = options_.target_override.value_or(
      jit::TargetForDevice(d->facts().cc_major, d->facts().cc_minor));
  return jit::MakeCopyPlan(
      target, jit::RuntimeOverrideFor(target, options_.copy_impl_override));
}

absl::StatusOr<DeviceReport> Runtime::DescribeDevice(int ordinal) const {
  FJ_ASSIGN_OR_RETURN(Device * d, device(ordinal));
  FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, PlanForDevice(ordinal));
  return DeviceReport{&d->facts(), std::move(plan), driver_->driver_version};
}

absl::StatusOr<LoadedKernel*> Runtime::LoadKernel(const ModuleRecord& module,
                                                  absl::string_view name,
                                                  int ordinal) {
  FJ_ASSIGN_OR_RETURN(ModuleLoader::Loaded loaded,
                      loader_->LoadKernel(module, name, ordinal));
  // After the insertion (see ModuleBuilder::RunFollowUp): the thunk is an
  // atomic, and a kernel without one launches generically.
  if (loaded.is_new && loaded.kernel->relaid_entry == nullptr) {
    builder_->AttachThunk(module.key, *loaded.image_artifact, *loaded.kernel);
  }
  return loaded.kernel;
}

absl::StatusOr<Module*> Runtime::BuildModule(const BuildSpec& spec) {
  FJ_ASSIGN_OR_RETURN(ModuleRecord record, BuildRecord(spec));
  return registry_.AddModule(this, std::move(record));
}

absl::StatusOr<KernelRef*> Runtime::OpenKernel(Module& module,
                                               absl::string_view name,
                                               int ordinal) {
  FJ_ASSIGN_OR_RETURN(LoadedKernel * k,
                      LoadKernel(module.record, name, ordinal));
  return registry_.AddKernel(module, k);
}

absl::StatusOr<Stream*> Runtime::CreateStream(int ordinal) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  FJ_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream,
                      Stream::Create(this, *driver_, *dev));
  return registry_.AddStream(std::move(stream));
}

absl::StatusOr<Stream*> Runtime::WrapStream(int ordinal, uint64_t cu_stream) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  FJ_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream,
                      Stream::Wrap(this, *driver_, *dev, cu_stream));
  return registry_.AddStream(std::move(stream));
}

__attribute__((hot)) absl::Status Runtime::LaunchKernel(
    KernelRef& k, const LaunchConfig& cfg, Stream* stream, const fj_arg* args,
    size_t num_args, size_t arg_stride) {
  return LaunchAndNote(*k.kernel, cfg,
                       stream == nullptr ? nullptr : stream->handle(), args,
                       num_args, arg_stride);
}

PendingBuild* Runtime::SubmitBuild(BuildSpec spec) {
  // The spec is owned here: the caller's strings may die once this returns.
  std::shared_ptr<BuildJob> job = build_pool_->Submit(
      [this, spec = std::move(spec)] { return BuildRecord(spec); });
  return registry_.AddBuild(this, std::move(job));
}

absl::StatusOr<Module*> Runtime::TakeBuild(BuildJob& job) {
  FJ_ASSIGN_OR_RETURN(ModuleRecord record, job.Take());
  return registry_.AddModule(this, std::move(record));
}

absl::StatusOr<Module*> Runtime::LoadModule(const ImageSpec& spec) {
  FJ_ASSIGN_OR_RETURN(ModuleRecord record,
                      ImportImage(driver_.get(), devices_, spec));
  return registry_.AddModule(this, std::move(record));
}

absl::StatusOr<Module*> Runtime::LinkModule(const LinkSpec& spec) {
  FJ_ASSIGN_OR_RETURN(ModuleRecord record, builder_->LinkRecord(spec));
  return registry_.AddModule(this, std::move(record));
}

absl::StatusOr<ModuleLoader::Global> Runtime::FindGlobal(const Module& module,
                                                         absl::string_view name,
                                                         int ordinal) {
  if (name.empty()) return absl::InvalidArgumentError("name is empty");
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  if (dev->is_poisoned()) return dev->poisoned();
  return loader_->LoadGlobal(module.record, name, ordinal);
}

absl::Status Runtime::CopyGlobal(const Module& module, absl::string_view name,
                                 int ordinal, uint64_t offset, void* host,
                                 uint64_t bytes, bool to_global,
                                 Stream* stream) {
  if (host == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        to_global ? "src" : "dst", " is NULL but bytes is ", bytes));
  }
  if (stream != nullptr && stream->device().facts().ordinal != ordinal) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream is of device ", stream->device().facts().ordinal,
                     ", the global was asked for on device ", ordinal));
  }
  FJ_ASSIGN_OR_RETURN(ModuleLoader::Global g,
                      FindGlobal(module, name, ordinal));
  if (offset > g.bytes || bytes > g.bytes - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("bytes [", offset, ", ", offset + bytes,
                     ") run past the end of global '", name, "', which has ",
                     g.bytes, " bytes"));
  }
  if (bytes == 0) return absl::OkStatus();
  const DriverApi& api = *driver_;
  const CUdeviceptr at = g.address + offset;
  CUresult r;
  const char* call;
  if (stream == nullptr) {
    r = to_global ? api.cuMemcpyHtoD(at, host, bytes)
                  : api.cuMemcpyDtoH(host, at, bytes);
    call = to_global ? "cuMemcpyHtoD" : "cuMemcpyDtoH";
  } else {
    r = to_global ? api.cuMemcpyHtoDAsync(at, host, bytes, stream->handle())
                  : api.cuMemcpyDtoHAsync(host, at, bytes, stream->handle());
    call = to_global ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
  }
  return CheckStickyError(*g.device, api, r,
                          absl::StrCat(to_global ? "writing" : "reading",
                                       " global '", name, "': ", call));
}

absl::StatusOr<std::pair<int, int>> Runtime::StreamPriorityRange(int ordinal) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  return Stream::PriorityRange(*driver_, *dev);
}

absl::StatusOr<Stream*> Runtime::CreateStreamWithPriority(int ordinal,
                                                          int priority) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  FJ_ASSIGN_OR_RETURN(
      std::unique_ptr<Stream> stream,
      Stream::CreateWithPriority(this, *driver_, *dev, priority));
  return registry_.AddStream(std::move(stream));
}

absl::StatusOr<uint64_t> Runtime::SetPersistingL2(int ordinal, uint64_t bytes) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  return dev->SetPersistingL2(bytes);
}

absl::StatusOr<copy::CopyLaunchShape> Runtime::CopyWindowShapeOf(
    const tune::TuneRow& row) {
  return Tuning::CopyWindowShapeOf(row);
}

CopyEngine& Runtime::copy() {
  absl::MutexLock lock(&copy_mu_);
  if (copy_ == nullptr) {
    copy_kernels_ = std::make_unique<RuntimeKernelSource>(*this);
    copy_ = std::make_shared<CopyEngine>(driver_.get(), devices_,
                                         *copy_kernels_, logger_);
  }
  return *copy_;
}

}  // namespace fleetjit
