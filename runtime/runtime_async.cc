// Runtime: asynchronous builds and imported images (see runtime.h).
#include "base/status_macros.h"
#include "runtime/runtime.h"

namespace fleetjit {

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

}  // namespace fleetjit
