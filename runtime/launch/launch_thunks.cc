#include "runtime/launch/launch_thunks.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit {

absl::Status LaunchThunks::AddThunkObject(jit::Artifact& artifact,
                                          jit::ThunkCodegenStats* stats) {
  if (!enabled_ || !artifact.thunk_object.empty()) return absl::OkStatus();
  jit::ThunkCodegenStats local;
  FJ_ASSIGN_OR_RETURN(
      artifact.thunk_object,
      jit::EmitThunkObject(artifact.kernels, artifact.copy_impl, &local),
      "generating launch thunks");
  if (stats != nullptr) *stats = local;
  absl::MutexLock lock(&mu_);
  ++stats_.objects_generated;
  stats_.codegen_ms_total += local.ir_ms + local.codegen_ms;
  return absl::OkStatus();
}

absl::Status LaunchThunks::EnsureJit() {
  if (jit_ != nullptr) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(jit_, jit::ThunkJit::Create(),
                      "starting the launch thunk JIT");
  return absl::OkStatus();
}

absl::StatusOr<const LaunchThunk*> LaunchThunks::OwnThunk(
    const jit::KernelEntry& entry, jit::CopyImpl impl) {
  const std::string symbol = jit::ThunkSymbol(entry, impl);
  auto it = own_.find(symbol);
  if (it == own_.end()) {
    jit::ThunkCodegenStats local;
    FJ_ASSIGN_OR_RETURN(std::string object,
                        jit::EmitThunkObject({entry}, impl, &local),
                        "generating a launch thunk");
    ++stats_.objects_generated;
    stats_.codegen_ms_total += local.ir_ms + local.codegen_ms;
    FJ_ASSIGN_OR_RETURN(jit::ThunkLibrary * library, jit_->Load(object));
    it = own_.emplace(symbol, library).first;
  }
  return jit_->Find(it->second, entry, impl);
}

absl::Status LaunchThunks::AttachLocked(const jit::Artifact& artifact,
                                        LoadedKernel& k) {
  FJ_RETURN_IF_ERROR(EnsureJit());
  const jit::ThunkJitStats before = jit_->stats();
  absl::StatusOr<const LaunchThunk*> thunk =
      absl::NotFoundError("the artifact carries no thunk object");
  if (!artifact.thunk_object.empty()) {
    absl::StatusOr<jit::ThunkLibrary*> library =
        jit_->Load(artifact.thunk_object);
    thunk = library.ok() ? jit_->Find(*library, *k.entry, k.copy_impl)
                         : absl::StatusOr<const LaunchThunk*>(library.status());
  }
  if (!thunk.ok()) {
    // No stored object (built with thunks off), one from another generator
    // version, or a layout the driver changed at load (k.entry relaid):
    // generate this kernel's own, shared by every kernel of its signature.
    thunk = OwnThunk(*k.entry, k.copy_impl);
  }
  const jit::ThunkJitStats after = jit_->stats();
  stats_.objects_loaded += after.objects_loaded - before.objects_loaded;
  stats_.load_ms_total += after.load_ms_total - before.load_ms_total;
  if (!thunk.ok()) return thunk.status();
  k.thunk.store(*thunk, std::memory_order_release);
  ++stats_.kernels_attached;
  return absl::OkStatus();
}

absl::Status LaunchThunks::Attach(const jit::Artifact& artifact,
                                  LoadedKernel& k) {
  if (!enabled_ || k.entry == nullptr) return absl::OkStatus();
  if (k.thunk.load(std::memory_order_acquire) != nullptr)
    return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  // Two attachers may race (LoadKernel and the background generator).
  if (k.thunk.load(std::memory_order_acquire) != nullptr)
    return absl::OkStatus();
  absl::Status status = AttachLocked(artifact, k);
  if (!status.ok()) {
    status = Annotate(status, absl::StrCat("attaching the launch thunk of '",
                                           k.display_name, "'"));
    ++stats_.attach_failures;
    stats_.last_failure = status.ToString();
  }
  return status;
}

LaunchThunkStats LaunchThunks::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace fleetjit
