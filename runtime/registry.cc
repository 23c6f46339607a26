#include "runtime/registry.h"

#include <algorithm>
#include <utility>

namespace fleetjit {
namespace {

// Takes the element holding `object` out of `v`; null if it is not there.
template <typename T>
std::unique_ptr<T> TakeOut(std::vector<std::unique_ptr<T>>& v, T* object) {
  auto it = std::find_if(
      v.begin(), v.end(),
      [object](const std::unique_ptr<T>& p) { return p.get() == object; });
  if (it == v.end()) return nullptr;
  std::unique_ptr<T> out = std::move(*it);
  v.erase(it);
  return out;
}

// Asks the caller to give up `tag`; an untagged object has no name to give.
bool Release(ReleaseTagFn release, ObjectKind kind, uint64_t tag) {
  return tag == 0 || release(kind, tag);
}

void ReleaseKernels(Module& module, ReleaseTagFn release) {
  absl::MutexLock lock(&module.mu);
  for (const std::unique_ptr<KernelRef>& k : module.kernels) {
    (void)Release(release, ObjectKind::kKernel, k->tag);
  }
  module.kernels.clear();
}

}  // namespace

Registry::~Registry() {
  absl::MutexLock lock(&mu_);
  streams_.clear();  // ~Stream closes
  for (int i = 0; i < kThreadShards; ++i) {
    ShardLock shard_lock(&module_shards_[i]->mu);
    module_shards_[i]->modules.clear();
  }
  builds_.clear();
}

Module* Registry::AddModule(Runtime* runtime, ModuleRecord record) {
  auto module = std::make_unique<Module>();
  Module* out = module.get();
  module->runtime = runtime;
  module->record = std::move(record);
  module->shard = ThisThreadShard();
  ModuleShard& shard = *module_shards_[module->shard];
  ShardLock lock(&shard.mu);
  shard.modules.emplace(out, std::move(module));
  return out;
}

KernelRef* Registry::AddKernel(Module& module, LoadedKernel* kernel) {
  absl::MutexLock lock(&module.mu);
  module.kernels.push_back(
      std::make_unique<KernelRef>(KernelRef{&module, kernel}));
  return module.kernels.back().get();
}

Stream* Registry::AddStream(std::unique_ptr<Stream> stream) {
  absl::MutexLock lock(&mu_);
  streams_.push_back(std::move(stream));
  return streams_.back().get();
}

PendingBuild* Registry::AddBuild(Runtime* runtime,
                                 std::shared_ptr<BuildJob> job) {
  auto build =
      std::make_unique<PendingBuild>(PendingBuild{runtime, std::move(job)});
  absl::MutexLock lock(&mu_);
  builds_.push_back(std::move(build));
  return builds_.back().get();
}

void Registry::DestroyBuild(PendingBuild* build) {
  std::unique_ptr<PendingBuild> owned;
  {
    absl::MutexLock lock(&mu_);
    owned = TakeOut(builds_, build);
  }
  if (owned != nullptr) owned->job->Abandon();
}

void Registry::DestroyModule(Module* module, ReleaseTagFn release) {
  // `module` is live (the caller named it), so its shard can be read.
  std::unique_ptr<Module> owned;
  {
    ModuleShard& shard = *module_shards_[module->shard];
    ShardLock lock(&shard.mu);
    auto it = shard.modules.find(module);
    if (it != shard.modules.end()) {
      owned = std::move(it->second);
      shard.modules.erase(it);
    }
  }
  if (owned != nullptr) ReleaseKernels(*owned, release);
}

absl::Status Registry::DestroyStream(Stream* stream) {
  std::unique_ptr<Stream> owned;
  {
    absl::MutexLock lock(&mu_);
    owned = TakeOut(streams_, stream);
  }
  return owned == nullptr ? absl::OkStatus() : owned->Close();
}

absl::Status Registry::DestroyAll(ReleaseTagFn release) {
  absl::MutexLock lock(&mu_);
  absl::Status status;
  for (std::unique_ptr<Stream>& stream : streams_) {
    if (!Release(release, ObjectKind::kStream, stream->tag)) {
      (void)stream.release();  // another destroy frees it
      continue;
    }
    absl::Status closed = stream->Close();
    if (status.ok()) status = closed;
  }
  streams_.clear();
  for (int i = 0; i < kThreadShards; ++i) {
    ModuleShard& shard = *module_shards_[i];
    ShardLock shard_lock(&shard.mu);
    for (auto& [address, module] : shard.modules) {
      if (!Release(release, ObjectKind::kModule, module->tag)) {
        (void)module.release();
        continue;
      }
      ReleaseKernels(*module, release);
    }
    shard.modules.clear();
  }
  for (std::unique_ptr<PendingBuild>& build : builds_) {
    if (!Release(release, ObjectKind::kBuild, build->tag)) {
      (void)build.release();
      continue;
    }
    build->job->Abandon();
  }
  builds_.clear();
  return status;
}

}  // namespace fleetjit
