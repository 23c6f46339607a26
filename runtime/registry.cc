#include "runtime/registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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
  module.dying = true;
  for (const std::unique_ptr<KernelRef>& k : module.kernels) {
    (void)Release(release, ObjectKind::kKernel, k->tag);
  }
  // The kernels themselves go with the module, once no call uses them.
}

}  // namespace

absl::Status Graveyard::Bury() {
  absl::Status status;
  for (std::unique_ptr<Stream>& stream : streams) {
    absl::Status closed = stream->Close();
    if (status.ok()) status = closed;
  }
  for (std::unique_ptr<PendingBuild>& build : builds) build->job->Abandon();
  streams.clear();
  modules.clear();
  builds.clear();
  return status;
}

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
  ModuleShard& shard = *module_shards_[ThisThreadShard()];
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

namespace {

absl::Status Destroyed(absl::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(what, " was destroyed while this call ran"));
}

absl::Status TableFull() {
  return absl::ResourceExhaustedError("too many live handles");
}

template <typename T>
bool Holds(const std::vector<std::unique_ptr<T>>& v, const T* object) {
  return std::any_of(v.begin(), v.end(), [object](const std::unique_ptr<T>& p) {
    return p.get() == object;
  });
}

// Names `object` (held in `v` under the caller's lock) or frees it when no
// name can be made.
template <typename T>
absl::Status NameOrDrop(std::vector<std::unique_ptr<T>>& v, T* object,
                        PublishFn publish) {
  const uint64_t tag = publish();
  if (tag == 0) {
    TakeOut(v, object);
    return TableFull();
  }
  object->tag = tag;
  return absl::OkStatus();
}

}  // namespace

template <typename Fn>
bool Registry::WithShardOf(Module* module, Fn&& fn) {
  const int first = ThisThreadShard();
  for (int i = 0; i < kThreadShards; ++i) {
    ModuleShard& shard = *module_shards_[(first + i) % kThreadShards];
    ShardLock lock(&shard.mu);
    if (shard.modules.contains(module)) {
      fn(shard);
      return true;
    }
  }
  return false;
}

absl::Status Registry::Publish(Module* module, PublishFn publish) {
  absl::Status status = Destroyed("the runtime");
  WithShardOf(module, [&](ModuleShard& shard) {
    if (shard.closed) return;
    const uint64_t tag = publish();
    if (tag == 0) {
      shard.modules.erase(module);
      status = TableFull();
      return;
    }
    module->tag = tag;
    status = absl::OkStatus();
  });
  return status;
}

absl::Status Registry::Publish(Module& module, KernelRef* kernel,
                               PublishFn publish) {
  absl::MutexLock lock(&module.mu);
  // `kernel` was added by this call's thread and leaves only with the
  // module: dying says all.
  if (module.dying) return Destroyed("the module");
  const uint64_t tag = publish();
  if (tag == 0) return TableFull();  // the kernel stays with its module
  kernel->tag = tag;
  return absl::OkStatus();
}

absl::Status Registry::Publish(Stream* stream, PublishFn publish) {
  absl::MutexLock lock(&mu_);
  if (closed_ || !Holds(streams_, stream)) return Destroyed("the runtime");
  return NameOrDrop(streams_, stream, publish);
}

absl::Status Registry::Publish(PendingBuild* build, PublishFn publish) {
  absl::MutexLock lock(&mu_);
  if (closed_ || !Holds(builds_, build)) return Destroyed("the runtime");
  return NameOrDrop(builds_, build, publish);
}

std::unique_ptr<Module> Registry::TakeModule(Module* module,
                                             ReleaseTagFn release) {
  std::unique_ptr<Module> owned;
  WithShardOf(module, [&](ModuleShard& shard) {
    auto it = shard.modules.find(module);
    owned = std::move(it->second);
    shard.modules.erase(it);
  });
  if (owned != nullptr) ReleaseKernels(*owned, release);
  return owned;
}

std::unique_ptr<Stream> Registry::TakeStream(Stream* stream) {
  absl::MutexLock lock(&mu_);
  return TakeOut(streams_, stream);
}

std::unique_ptr<PendingBuild> Registry::TakeBuild(PendingBuild* build) {
  absl::MutexLock lock(&mu_);
  return TakeOut(builds_, build);
}

namespace {

// Moves the elements of `from` whose name `release` gives up (or that have
// none) to `to`; the others stay for the destroy that gave theirs up.
template <typename T>
void TakeReleased(std::vector<std::unique_ptr<T>>& from,
                  std::vector<std::unique_ptr<T>>& to, ObjectKind kind,
                  ReleaseTagFn release) {
  std::vector<std::unique_ptr<T>> kept;
  for (std::unique_ptr<T>& object : from) {
    if (Release(release, kind, object->tag)) {
      to.push_back(std::move(object));
    } else {
      kept.push_back(std::move(object));
    }
  }
  from = std::move(kept);
}

}  // namespace

Graveyard Registry::TakeAll(ReleaseTagFn release) {
  Graveyard taken;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    TakeReleased(streams_, taken.streams, ObjectKind::kStream, release);
    TakeReleased(builds_, taken.builds, ObjectKind::kBuild, release);
  }
  for (int i = 0; i < kThreadShards; ++i) {
    ModuleShard& shard = *module_shards_[i];
    ShardLock shard_lock(&shard.mu);
    shard.closed = true;
    for (auto it = shard.modules.begin(); it != shard.modules.end();) {
      if (!Release(release, ObjectKind::kModule, it->second->tag)) {
        ++it;  // another destroy's
        continue;
      }
      ReleaseKernels(*it->second, release);
      taken.modules.push_back(std::move(it->second));
      shard.modules.erase(it++);
    }
  }
  return taken;
}

}  // namespace fleetjit
