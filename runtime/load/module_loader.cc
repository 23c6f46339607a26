#include "runtime/load/module_loader.h"

#include <climits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fleetjit/copy/check_notes.h"
#include "jit/param_layout.h"
#include "runtime/load/module_image.h"
#include "runtime/load/param_relayout.h"

namespace fleetjit {

struct ModuleLoader::LoadedImage {
  CUmodule module = nullptr;
  Device* device = nullptr;
  CUcontext context = nullptr;  // the device's primary context
  // The artifact the kernels' entries point into, kept alive with them
  // (the cache may since have replaced its artifact for the key).
  std::shared_ptr<const jit::Artifact> artifact;
  absl::Mutex mu;
  // Stable addresses: LoadedKernel* are handed out to callers.
  std::map<std::string, std::unique_ptr<LoadedKernel>, std::less<>> kernels
      ABSL_GUARDED_BY(mu);
  // The checked mode's note table, when the image has one.
  std::unique_ptr<CheckNotes> check_notes;
};

ModuleLoader::ModuleLoader(const DriverApi* driver, const DeviceList& devices,
                           const Logger* logger)
    : driver_(driver), devices_(devices), logger_(logger) {}

ModuleLoader::~ModuleLoader() {
  absl::MutexLock lock(&images_mu_);
  if (driver_ != nullptr && !IsForkedChild(*driver_)) {
    for (auto& [key, image] : images_) {
      // A poisoned context is dead, and its modules with it. Otherwise the
      // module is unloaded even if the context could not be made current
      // (the handle names its context). Nothing can be returned from here:
      // a failure is logged.
      Device& device = *image->device;
      absl::Status status = device.MakeCurrent().status();
      if (device.CanRelease()) {
        absl::Status unloaded =
            FJ_CU_CALL(*driver_, cuModuleUnload, image->module);
        if (status.ok()) status = unloaded;
      }
      device.LogReleaseFailure(
          status, absl::StrCat("module ", key.first.substr(0, 16)));
    }
  }
  images_.clear();
}

std::vector<LoadedKernel*> ModuleLoader::ThunkableKernels(
    const std::string& record_key) {
  std::vector<LoadedImage*> images;
  {
    absl::MutexLock lock(&images_mu_);
    for (auto it = images_.lower_bound({record_key, INT_MIN});
         it != images_.end() && it->first.first == record_key; ++it) {
      images.push_back(it->second.get());
    }
  }
  std::vector<LoadedKernel*> kernels;
  for (LoadedImage* image : images) {
    absl::MutexLock lock(&image->mu);
    for (auto& [name, kernel] : image->kernels) {
      // A relaid kernel packs by another layout: it stays generic.
      if (kernel->relaid_entry == nullptr) kernels.push_back(kernel.get());
    }
  }
  return kernels;
}

absl::StatusOr<ModuleLoader::Loaded> ModuleLoader::LoadKernel(
    const ModuleRecord& module, absl::string_view name, int ordinal) {
  Shard& shard = *shards_[ThisThreadShard()];
  {
    ShardLock lock(&shard.mu);
    auto it = shard.known.find(KernelKey{module.key, ordinal, name});
    if (it != shard.known.end()) {
      return Loaded{it->second->kernel, false, it->second->image_artifact};
    }
  }
  // Relaxed: loading is no part of any stream's capture (module_image.h).
  FJ_ASSIGN_OR_RETURN(Loaded loaded, WithRelaxedCaptureMode(driver_, [&] {
                        return Load(module, name, ordinal);
                      }));
  auto known = std::make_unique<KnownKernel>();
  known->storage = absl::StrCat(module.key, name);
  known->kernel = loaded.kernel;
  known->image_artifact = loaded.image_artifact;
  const absl::string_view storage = known->storage;
  KernelKey key{storage.substr(0, module.key.size()), ordinal,
                storage.substr(module.key.size())};
  ShardLock lock(&shard.mu);
  shard.known.try_emplace(key, std::move(known));
  return loaded;
}

absl::StatusOr<ModuleLoader::Loaded> ModuleLoader::Load(
    const ModuleRecord& module, absl::string_view name, int ordinal) {
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
  FJ_ASSIGN_OR_RETURN(LoadedImage * image, ImageFor(module, ordinal));
  Device* dev = image->device;
  CUcontext ctx = image->context;
  // Entries point into the image's artifact, which the image keeps alive
  // (the same module as `module.artifact`, possibly another copy of it).
  entry = image->artifact->FindKernel(name);
  if (entry == nullptr) {
    return absl::InternalError(
        absl::StrCat("kernel '", name, "' of '", module.name,
                     "' is missing from its loaded image"));
  }
  return AddKernel(module, *image, *entry, name, dev, ctx);
}

absl::StatusOr<ModuleLoader::LoadedImage*> ModuleLoader::ImageFor(
    const ModuleRecord& module, int ordinal) {
  const jit::Artifact& artifact = *module.artifact;
  FJ_ASSIGN_OR_RETURN(Device * dev, devices_.at(ordinal),
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
    auto it = images_.find({module.key, ordinal});
    if (it == images_.end()) {
      // Loaded before it enters the map: a failed load leaves no empty slot.
      auto loaded = std::make_unique<LoadedImage>();
      loaded->device = dev;
      loaded->context = ctx;
      loaded->artifact = module.artifact;
      FJ_ASSIGN_OR_RETURN(
          loaded->module, LoadModuleImage(*driver_, artifact.image.data()),
          absl::StrCat("loading '", module.name, "' (", artifact.target.Name(),
                       ") on device ", ordinal));
      FindCheckNotes(module.name, *loaded);
      it = images_
               .emplace(std::make_pair(module.key, ordinal), std::move(loaded))
               .first;
    }
    image = it->second.get();
  }
  return image;
}

void ModuleLoader::FindCheckNotes(absl::string_view name, LoadedImage& image) {
  // Only an image that names the table can have it: no driver call for
  // the others.
  const jit::Artifact& artifact = *image.artifact;
  if (driver_ == nullptr || driver_->cuModuleGetGlobal == nullptr ||
      (!absl::StrContains(artifact.ptx, FJ_CHECK_NOTES_SYMBOL) &&
       !absl::StrContains(artifact.image, FJ_CHECK_NOTES_SYMBOL))) {
    return;
  }
  CUdeviceptr table = 0;
  size_t bytes = 0;
  if (driver_->cuModuleGetGlobal(&table, &bytes, image.module,
                                 FJ_CHECK_NOTES_SYMBOL) != CUDA_SUCCESS ||
      bytes != 2 * FJ_CHECK_NOTE_SLOTS * sizeof(uint64_t)) {
    return;  // not the layer's table: nothing to read
  }
  image.check_notes = std::make_unique<CheckNotes>();
  image.check_notes->table = table;
  image.check_notes->module_name = std::string(name);
}

absl::StatusOr<ModuleLoader::Global> ModuleLoader::LoadGlobal(
    const ModuleRecord& module, absl::string_view name, int ordinal) {
  if (driver_ != nullptr && driver_->cuModuleGetGlobal == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuModuleGetGlobal (module globals)");
  }
  return WithRelaxedCaptureMode(
      driver_, [&] { return FindGlobal(module, name, ordinal); });
}

absl::StatusOr<ModuleLoader::Global> ModuleLoader::FindGlobal(
    const ModuleRecord& module, absl::string_view name, int ordinal) {
  FJ_ASSIGN_OR_RETURN(LoadedImage * image, ImageFor(module, ordinal));
  Global g;
  g.symbol = image->artifact->GlobalSymbol(name);
  g.device = image->device;
  g.context = image->context;
  size_t bytes = 0;
  const CUresult r = driver_->cuModuleGetGlobal(
      &g.address, &bytes, image->module, g.symbol.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    std::string known;
    for (const jit::GlobalEntry& e : image->artifact->globals) {
      absl::StrAppend(&known, known.empty() ? "" : ", ", e.name);
    }
    return absl::NotFoundError(absl::StrCat(
        "no global '", name, "' in module '", module.name, "'",
        g.symbol != name ? absl::StrCat(" (symbol ", g.symbol, ")") : "",
        "; its name expressions naming globals: ",
        known.empty() ? "none" : known,
        ". A variable in a namespace or a template needs a name expression "
        "at build time"));
  }
  FJ_RETURN_IF_ERROR(
      CheckCu(*driver_, r, "cuModuleGetGlobal"),
      absl::StrCat("looking up global '", name, "' of '", module.name, "'"));
  g.bytes = bytes;
  return g;
}

absl::StatusOr<ModuleLoader::Loaded> ModuleLoader::AddKernel(
    const ModuleRecord& module, LoadedImage& loaded_image,
    const jit::KernelEntry& kernel_entry, absl::string_view name, Device* dev,
    CUcontext ctx) {
  const jit::Artifact& artifact = *module.artifact;
  LoadedImage* image = &loaded_image;
  const jit::KernelEntry* entry = &kernel_entry;
  LoadedKernel* out = nullptr;
  {
    absl::MutexLock lock(&image->mu);
    auto it = image->kernels.find(name);
    if (it != image->kernels.end()) {
      return Loaded{it->second.get(), false, image->artifact.get()};
    }
    auto kernel = std::make_unique<LoadedKernel>();
    kernel->api = driver_;
    kernel->device = dev;
    kernel->logger = logger_;
    kernel->check_notes = image->check_notes.get();
    kernel->context = ctx;
    kernel->entry = entry;
    kernel->copy_impl = artifact.copy_impl;
    kernel->display_name = absl::StrCat(module.name, ":", entry->name);
    FJ_RETURN_IF_ERROR(
        FJ_CU_CALL(*driver_, cuModuleGetFunction, &kernel->function,
                   image->module, entry->lowered_name.c_str()),
        absl::StrCat("looking up kernel '", name, "'"));
    // Lazy loading (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2)
    // may leave the function partly loaded, to be finished by whichever
    // call first needs it. Finished here, so no launch loads code: a
    // kernel's first launch inside a stream capture is like any other.
    if (driver_->cuFuncLoad != nullptr) {
      FJ_RETURN_IF_ERROR(FJ_CU_CALL(*driver_, cuFuncLoad, kernel->function),
                         absl::StrCat("loading kernel '", name, "'"));
    }
    struct {
      CUfunction_attribute attribute;
      int* out;
    } attributes[] = {
        {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
         &kernel->max_threads_per_block},
        {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &kernel->static_shared_bytes},
        {CU_FUNC_ATTRIBUTE_NUM_REGS, &kernel->num_regs},
    };
    for (auto& a : attributes) {
      FJ_RETURN_IF_ERROR(FJ_CU_CALL(*driver_, cuFuncGetAttribute, a.out,
                                    a.attribute, kernel->function),
                         absl::StrCat("reading attributes of '", name, "'"));
    }
    kernel->limits =
        ResolveLaunchLimits(dev->facts(), kernel->max_threads_per_block,
                            kernel->static_shared_bytes);
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
      kernel->relaid_entry->param_bytes =
          jit::ParamBufferBytes(kernel->relaid_entry->params);
      kernel->entry = kernel->relaid_entry.get();
    }
    out = kernel.get();
    image->kernels.emplace(std::string(name), std::move(kernel));
  }
  // The caller attaches its thunk after the insertion (see
  // ModuleBuilder::RunFollowUp), outside image->mu.
  return Loaded{out, true, image->artifact.get()};
}

}  // namespace fleetjit
