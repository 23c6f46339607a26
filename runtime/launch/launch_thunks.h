// Giving loaded kernels their JIT-built launch thunks.
//
// The runtime owns one LaunchThunks. Two hooks connect it to the module
// path:
//   1. After NVRTC compiles a module, the runtime's background worker runs
//      AddThunkObject on a copy of the artifact and republishes it to the
//      module cache under the same key, so the cache stores the object and
//      a later cache hit never runs LLVM code generation
//      (Runtime::BuildRecord).
//   2. When a kernel is loaded on a device (or, for kernels loaded before
//      their object was ready, when the background generation finishes),
//      Attach links the artifact's
//      object (once per distinct object) and publishes the kernel's thunk in
//      LoadedKernel::thunk. A kernel the object has no thunk for (built with
//      thunks off, an older generator, or a parameter layout the driver
//      changed at load: k.entry relaid) gets one generated on the spot, once
//      per signature.
// Until Attach succeeds, and always when thunks are disabled
// (FLEETJIT_THUNKS=0 or FJ_RUNTIME_DISABLE_THUNKS), launches take the
// generic path, which behaves identically. A failure here is never fatal:
// the kernel keeps the generic path and the status says why.
#ifndef FLEETJIT_RUNTIME_LAUNCH_LAUNCH_THUNKS_H_
#define FLEETJIT_RUNTIME_LAUNCH_LAUNCH_THUNKS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "jit/artifact.h"
#include "jit/thunk/thunk_codegen.h"
#include "jit/thunk/thunk_jit.h"
#include "runtime/load/kernel.h"

namespace fleetjit {

struct LaunchThunkStats {
  uint64_t objects_generated = 0;  // EmitThunkObject runs
  double codegen_ms_total = 0;     // IR + object emission
  uint64_t objects_loaded = 0;
  double load_ms_total = 0;
  uint64_t kernels_attached = 0;
  uint64_t attach_failures = 0;  // kernels left on the generic path
  std::string last_failure;      // the last such status, as text
};

class LaunchThunks {
 public:
  // `enabled` false: Attach does nothing and every launch is generic.
  explicit LaunchThunks(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  // Hook 1: fills artifact.thunk_object if it is empty. `stats` may be null.
  absl::Status AddThunkObject(jit::Artifact& artifact,
                              jit::ThunkCodegenStats* stats = nullptr);

  // Hook 2: sets k.thunk for `k`, a kernel of `artifact` that packs by
  // k.entry (the artifact's entry, or a relaid copy). Uses the artifact's
  // object when it has the thunk, else generates one (see above).
  absl::Status Attach(const jit::Artifact& artifact, LoadedKernel& k);

  LaunchThunkStats stats() const;

 private:
  absl::Status EnsureJit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AttachLocked(const jit::Artifact& artifact, LoadedKernel& k)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A thunk generated here for `entry`'s signature (cached by symbol).
  absl::StatusOr<const LaunchThunk*> OwnThunk(const jit::KernelEntry& entry,
                                              jit::CopyImpl impl)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool enabled_;
  mutable absl::Mutex mu_;
  std::unique_ptr<jit::ThunkJit> jit_ ABSL_GUARDED_BY(mu_);
  // Thunks generated at attach time, by ThunkSymbol.
  std::map<std::string, jit::ThunkLibrary*> own_ ABSL_GUARDED_BY(mu_);
  LaunchThunkStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_LAUNCH_THUNKS_H_
