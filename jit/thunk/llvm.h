// The LLVM headers the launch thunk files use (thunk_codegen.cc: IR and
// code generation; thunk_jit.cc: ORC), included here only.
//
// LLVM is linked statically and hidden (--exclude-libs): templates and
// inline functions instantiated from these headers must be hidden too, or
// a host process's own LLVM could interpose (or be interposed by) them.
// (GCC only: clang rejects the pragma around LLVM 14's headers, whose
// LLVM_EXTERNAL_VISIBILITY classes conflict with it; clang builds fleetjit
// only for the fuzz targets, -DFJ_FUZZ=ON, which ship nothing.)
#ifndef FLEETJIT_JIT_THUNK_LLVM_H_
#define FLEETJIT_JIT_THUNK_LLVM_H_

#if !defined(__clang__)
#pragma GCC visibility push(hidden)
#endif
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Triple.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Object/ObjectFile.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#if !defined(__clang__)
#pragma GCC visibility pop
#endif

#endif  // FLEETJIT_JIT_THUNK_LLVM_H_
