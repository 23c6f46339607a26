#include "runtime/launch_thunks.h"

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"

namespace fleetjit {

absl::Status LaunchThunks::AddThunkObject(jit::Artifact& artifact,
                                          jit::ThunkCodegenStats* stats) {
  if (!enabled_ || !artifact.thunk_object.empty()) return absl::OkStatus();
  jit::ThunkCodegenStats local;
  FJ_ASSIGN_OR_RETURN(artifact.thunk_object,
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
  FJ_ASSIGN_OR_RETURN(jit_, jit::ThunkJit::Create(), "starting the launch thunk JIT");
  return absl::OkStatus();
}

absl::Status LaunchThunks::Attach(const jit::Artifact& artifact, LoadedKernel& k) {
  if (!enabled_ || k.entry == nullptr) return absl::OkStatus();
  if (k.thunk.load(std::memory_order_acquire) != nullptr) return absl::OkStatus();
  const std::string context = absl::StrCat("attaching the launch thunk of '",
                                           k.display_name, "'");
  absl::MutexLock lock(&mu_);
  FJ_RETURN_IF_ERROR(EnsureJit(), context);
  const std::string* object = &artifact.thunk_object;
  if (object->empty()) {
    auto it = generated_.find(&artifact);
    if (it == generated_.end()) {
      jit::ThunkCodegenStats local;
      FJ_ASSIGN_OR_RETURN(std::string fresh,
                          jit::EmitThunkObject(artifact.kernels, artifact.copy_impl,
                                               &local),
                          context);
      ++stats_.objects_generated;
      stats_.codegen_ms_total += local.ir_ms + local.codegen_ms;
      it = generated_.emplace(&artifact, std::move(fresh)).first;
    }
    object = &it->second;
  }
  const jit::ThunkJitStats before = jit_->stats();
  FJ_ASSIGN_OR_RETURN(jit::ThunkLibrary * library, jit_->Load(*object), context);
  const jit::ThunkJitStats after = jit_->stats();
  stats_.objects_loaded += after.objects_loaded - before.objects_loaded;
  stats_.load_ms_total += after.load_ms_total - before.load_ms_total;
  FJ_ASSIGN_OR_RETURN(const LaunchThunk* thunk,
                      jit_->Find(library, *k.entry, k.copy_impl), context);
  k.thunk.store(thunk, std::memory_order_release);
  ++stats_.kernels_attached;
  return absl::OkStatus();
}

LaunchThunkStats LaunchThunks::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace fleetjit
