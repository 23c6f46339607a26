// The objects a runtime hands to a caller (the C shim) and owns for it:
// modules, the kernels taken from them, streams and asynchronous builds; and
// the destroy cascade between them. Destroying a module destroys the kernels
// taken from it; destroying the runtime destroys its streams (synchronised
// first) and its modules.
//
// Each object carries a `tag`, the caller's name for it (a C handle value).
// When a cascade takes an object down it first asks the caller to give up
// that name (ReleaseTagFn), so no name outlives its object. A name the
// caller had already given up belongs to a destroy running elsewhere: the
// cascade then leaves that object alone. Untagged objects (tag 0) are
// simply freed.
#ifndef FLEETJIT_RUNTIME_REGISTRY_H_
#define FLEETJIT_RUNTIME_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "base/thread_shards.h"
#include "runtime/build/build_pool.h"
#include "runtime/device/stream.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module.h"

namespace fleetjit {

class Runtime;
struct Module;

enum class ObjectKind { kModule, kKernel, kStream, kBuild };

// Gives up the caller's name `tag` of an object of `kind`; false if it was
// already given up (another destroy owns the object).
using ReleaseTagFn = absl::FunctionRef<bool(ObjectKind kind, uint64_t tag)>;

// A kernel taken from a module (fj_kernel). The LoadedKernel itself belongs
// to the runtime's loader and outlives this.
struct KernelRef {
  Module* module;
  LoadedKernel* kernel;
  uint64_t tag = 0;
};

// A built module (fj_module) and the kernels taken from it.
struct Module {
  Runtime* runtime;
  ModuleRecord record;
  uint64_t tag = 0;
  int shard = 0;  // the Registry shard that owns it
  absl::Mutex mu;
  std::vector<std::unique_ptr<KernelRef>> kernels ABSL_GUARDED_BY(mu);
};

// An asynchronous build handed to a caller (fj_build): its job runs on the
// runtime's BuildPool. Destroying it abandons the job (build_pool.h).
struct PendingBuild {
  Runtime* runtime;
  std::shared_ptr<BuildJob> job;
  uint64_t tag = 0;
};

class Registry {
 public:
  Registry() = default;
  ~Registry();  // frees what is left; closes streams (statuses lost)

  Module* AddModule(Runtime* runtime, ModuleRecord record);
  KernelRef* AddKernel(Module& module, LoadedKernel* kernel);
  Stream* AddStream(std::unique_ptr<Stream> stream);
  PendingBuild* AddBuild(Runtime* runtime, std::shared_ptr<BuildJob> job);

  // Removes `module` (which the caller no longer names), releases the tags
  // of its kernels and frees them and it.
  void DestroyModule(Module* module, ReleaseTagFn release);
  // Removes `stream` (which the caller no longer names) and closes it.
  absl::Status DestroyStream(Stream* stream);
  // Removes `build` (which the caller no longer names) and abandons its job.
  void DestroyBuild(PendingBuild* build);
  // The runtime's cascade: every stream whose tag `release` gives up is
  // closed, then every such module destroyed, then every such build
  // abandoned. The first close error.
  absl::Status DestroyAll(ReleaseTagFn release);

 private:
  // Modules come and go per request, from many threads at once: each thread
  // adds to its own shard (base/thread_shards.h), and a module is removed
  // from the shard that holds it.
  struct ModuleShard {
    ShardMutex mu;
    absl::flat_hash_map<Module*, std::unique_ptr<Module>> modules
        ABSL_GUARDED_BY(mu);
  };
  std::unique_ptr<CacheLinePadded<ModuleShard>[]> module_shards_ {
    new CacheLinePadded<ModuleShard>[ kThreadShards ]
  };

  absl::Mutex mu_;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PendingBuild>> builds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_REGISTRY_H_
