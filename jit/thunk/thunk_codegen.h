// Generating host launch thunks with LLVM.
//
// For each kernel signature (parameter kinds, offsets, sizes, declared
// tensor rank/dtype) and copy implementation, EmitThunkObject builds one
// LLVM IR function with the checks and stores unrolled: no table is
// interpreted at run time. The calling convention is in thunk_abi.h. The
// result is an ELF object for the host (generic CPU, so a cached object is
// portable between hosts of one architecture; PIC; no external symbols),
// stored in Artifact::thunk_object and loaded by ThunkJit. A cache hit
// therefore loads an object and never runs code generation.
//
//   ThunkCodegenStats stats;
//   FJ_ASSIGN_OR_RETURN(artifact.thunk_object,
//                       EmitThunkObject(artifact.kernels, artifact.copy_impl,
//                                       &stats),
//                       "generating launch thunks");
#ifndef FLEETJIT_JIT_THUNK_THUNK_CODEGEN_H_
#define FLEETJIT_JIT_THUNK_THUNK_CODEGEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"

namespace fleetjit::jit {

// Part of every thunk's name: bump it whenever the generated code changes,
// so an object from an older generator lacks the symbol and the runtime
// generates the kernel's thunk afresh instead of running stale code.
// 2: C64, C128. 3: one branch per argument, the first refusal returns.
inline constexpr uint32_t kThunkCodegenVersion = 3;

// "fj_thunk_<16 hex digits>": a stable hash of the signature, the copy
// implementation and kThunkCodegenVersion.
std::string ThunkSymbol(const KernelEntry& entry, CopyImpl impl);

struct ThunkCodegenStats {
  double ir_ms = 0;       // building and verifying the IR
  double codegen_ms = 0;  // instruction selection and ELF emission
  int thunks = 0;         // functions emitted (one per distinct signature)
  int skipped = 0;        // kernels whose layout failed validation
  size_t object_bytes = 0;
};

// The ELF object holding a thunk for every kernel of `kernels` whose layout
// passes ValidateKernelLayout (others launch through the generic path,
// which reports the layout error). Thread-safe; each call has its own
// LLVMContext.
absl::StatusOr<std::string> EmitThunkObject(
    absl::Span<const KernelEntry> kernels, CopyImpl impl,
    ThunkCodegenStats* stats = nullptr);

// The same module as textual LLVM IR, for tests and debugging.
absl::StatusOr<std::string> ThunkModuleIR(absl::Span<const KernelEntry> kernels,
                                          CopyImpl impl);

// Registers the host target with (fleetjit's private copy of) LLVM, once
// per process. LLVM's command-line options are never parsed.
void InitializeLlvmOnce();

// The triple thunk objects are built for (the process's).
std::string ThunkTargetTriple();

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_THUNK_THUNK_CODEGEN_H_
