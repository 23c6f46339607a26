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
#include "runtime/builder/build_pool.h"
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
  absl::Mutex mu;
  // Set by TakeModule: the module is being destroyed and names no kernel.
  bool dying ABSL_GUARDED_BY(mu) = false;
  std::vector<std::unique_ptr<KernelRef>> kernels ABSL_GUARDED_BY(mu);
};

// An asynchronous build handed to a caller (fj_build): its job runs on the
// runtime's BuildPool. Destroying it abandons the job (build_pool.h).
struct PendingBuild {
  Runtime* runtime;
  std::shared_ptr<BuildJob> job;
  uint64_t tag = 0;
};

// Gives the caller's name (a handle) to an object: its tag, or 0 when no
// name can be made (the handle table is full).
using PublishFn = absl::FunctionRef<uint64_t()>;

// What a destroy took out of reach. Freed by Bury once no call can still be
// using it (capi/call_gate.h).
struct Graveyard {
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<std::unique_ptr<Module>> modules;
  std::vector<std::unique_ptr<PendingBuild>> builds;
  // Closes the streams (returns the first error), abandons the builds,
  // frees everything.
  absl::Status Bury();
};

// Destroying an object is two steps, so that no thread frees what another
// still uses: Take* makes it unreachable (its name and its kernels' names
// given up, removed from here), then the caller waits for the calls in
// flight and buries it. An object is published (named) under the same
// lock its Take* takes, so a destroy never misses a name that is being
// given, and the runtime's TakeAll closes the registry to new names.
class Registry {
 public:
  Registry() = default;
  ~Registry();  // frees what is left; closes streams (statuses lost)

  // Each adds an unnamed object, which Publish names.
  Module* AddModule(Runtime* runtime, ModuleRecord record);
  KernelRef* AddKernel(Module& module, LoadedKernel* kernel);
  Stream* AddStream(std::unique_ptr<Stream> stream);
  PendingBuild* AddBuild(Runtime* runtime, std::shared_ptr<BuildJob> job);

  // Sets the object's tag to publish()'s. FAILED_PRECONDITION when the
  // runtime (for a kernel: its module) is being destroyed; the object is
  // then that destroy's. RESOURCE_EXHAUSTED when publish() gives 0; the
  // object is then freed (a kernel stays with its module).
  absl::Status Publish(Module* module, PublishFn publish);
  absl::Status Publish(Module& module, KernelRef* kernel, PublishFn publish);
  absl::Status Publish(Stream* stream, PublishFn publish);
  absl::Status Publish(PendingBuild* build, PublishFn publish);

  // Take `object` (whose name the caller gave up) out; null when it is not
  // here. A module's kernels give up their names (`release`) and the module
  // refuses new ones.
  std::unique_ptr<Module> TakeModule(Module* module, ReleaseTagFn release);
  std::unique_ptr<Stream> TakeStream(Stream* stream);
  std::unique_ptr<PendingBuild> TakeBuild(PendingBuild* build);
  // The runtime's cascade: closes the registry to new names and takes out
  // every object whose name `release` gives up (and every unnamed one). An
  // object whose name another destroy already gave up stays, for that
  // destroy's Take*.
  Graveyard TakeAll(ReleaseTagFn release);

 private:
  // Modules come and go per request, from many threads at once: each thread
  // adds to its own shard (base/thread_shards.h), and a module is removed
  // from the shard that holds it.
  struct ModuleShard {
    ShardMutex mu;
    bool closed ABSL_GUARDED_BY(mu) = false;
    absl::flat_hash_map<Module*, std::unique_ptr<Module>> modules
        ABSL_GUARDED_BY(mu);
  };
  // Calls fn(shard) with the lock of the shard holding `module` held, the
  // calling thread's shard first; false when no shard holds it. Never reads
  // through `module`, which may be gone.
  template <typename Fn>
  bool WithShardOf(Module* module, Fn&& fn);

  std::unique_ptr<CacheLinePadded<ModuleShard>[]> module_shards_ {
    new CacheLinePadded<ModuleShard>[ kThreadShards ]
  };

  absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<PendingBuild>> builds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_REGISTRY_H_
