// Loading launch thunk objects into an LLVM ORC JIT (LLJIT).
//
// Each fleetjit runtime owns one ThunkJit, so two runtimes in a process have
// two independent JITs. Objects come from EmitThunkObject (fresh or from the
// module cache); loading one links it in memory and never runs code
// generation. Every object gets its own JITDylib: two modules whose kernels
// share a signature define the same thunk name without a clash. Loading the
// same bytes twice returns the first library.
//
// LLVM is linked statically into libfleetjit_core with hidden symbols, its
// native target is initialised once per process (std::call_once), its
// command-line options are never parsed, and the JIT resolves no symbol
// from the process (thunk objects are self-contained), so a host process
// with its own LLVM is unaffected.
//
//   FJ_ASSIGN_OR_RETURN(std::unique_ptr<ThunkJit> jit, ThunkJit::Create(),
//                       "starting the thunk JIT");
//   FJ_ASSIGN_OR_RETURN(ThunkLibrary* lib, jit->Load(artifact.thunk_object),
//                       "loading launch thunks");
//   FJ_ASSIGN_OR_RETURN(const LaunchThunk* thunk,
//                       jit->Find(lib, entry, artifact.copy_impl), "...");
//   kernel.thunk.store(thunk, std::memory_order_release);
#ifndef FLEETJIT_JIT_THUNK_THUNK_JIT_H_
#define FLEETJIT_JIT_THUNK_THUNK_JIT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/thunk/thunk_abi.h"

namespace fleetjit::jit {

// One loaded object. Owned by its ThunkJit; valid until Unload or the JIT's
// destruction.
class ThunkLibrary;

struct ThunkJitStats {
  uint64_t objects_loaded = 0;  // distinct objects linked
  uint64_t load_hits = 0;       // Load calls answered by an earlier load
  double load_ms_total = 0;     // time linking objects
  double last_load_ms = 0;
};

class ThunkJit {
 public:
  // Creates an LLJIT for the host. UNAVAILABLE if LLVM cannot target it.
  static absl::StatusOr<std::unique_ptr<ThunkJit>> Create();
  ~ThunkJit();
  ThunkJit(const ThunkJit&) = delete;
  ThunkJit& operator=(const ThunkJit&) = delete;

  // Links an ELF object from EmitThunkObject. A malformed object, or one for
  // another architecture, is DATA_LOSS / FAILED_PRECONDITION, never a crash
  // from inside LLVM's linker for inputs that parse. Thread-safe.
  absl::StatusOr<ThunkLibrary*> Load(absl::string_view object);

  // The thunk for `entry` under `impl` in `library` (by ThunkSymbol).
  // NOT_FOUND when the object has none (a layout the generator skipped, or
  // an object from an older generator). The result lives as long as the
  // library. Thread-safe.
  absl::StatusOr<const LaunchThunk*> Find(ThunkLibrary* library,
                                          const KernelEntry& entry,
                                          CopyImpl impl);

  // Frees a library's code. Its thunks must no longer be in use.
  absl::Status Unload(ThunkLibrary* library);

  ThunkJitStats stats() const;

 private:
  struct Impl;
  explicit ThunkJit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_THUNK_THUNK_JIT_H_
