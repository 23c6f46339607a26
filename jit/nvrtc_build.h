// Builds CUDA C++ source with NVRTC for one target and copy implementation.
//
// Every build sees the embedded device headers (<fleetjit/copy.cuh> and its
// parts) and gets -DFJ_COPY_IMPL=<n>. A compile error is INVALID_ARGUMENT
// carrying the details "build_log", "options", "target" and "copy_impl".
#ifndef FLEETJIT_JIT_NVRTC_BUILD_H_
#define FLEETJIT_JIT_NVRTC_BUILD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/target.h"

namespace fleetjit {
class NvrtcLibrary;
}

namespace fleetjit::jit {

struct BuildRequest {
  std::string source;
  std::string name = "kernel.cu";          // for logs
  Target target;
  CopyImpl copy_impl = CopyImpl::kSync;
  bool emit_ptx = false;                   // PTX even for an sm_XX target
  std::vector<std::string> options;        // extra NVRTC options
  std::vector<std::string> name_expressions;  // e.g. "scale<float>"
  // Reuse the parsed #include prefix of earlier builds in this process
  // (NVRTC 12.8+ precompiled headers, jit/nvrtc_pch.h). Never changes the
  // artifact, so it is not part of BuildOptions() or the cache key. Off by
  // default: on the machines measured so far mapping the ~10 MB PCH cost
  // more than parsing <fleetjit/copy.cuh> (bench/build_bench.cc).
  bool use_pch = false;
};

// The exact option list a request compiles with (part of the cache key).
std::vector<std::string> BuildOptions(const BuildRequest& request);

// Compiles with `nvrtc` (loaded on first use by the caller).
absl::StatusOr<Artifact> BuildModule(NvrtcLibrary& nvrtc,
                                     const BuildRequest& request);

// Convenience for tests and tools: uses the process's default NVRTC
// library (libnvrtc.so.13, then .12, then /usr/local/cuda).
absl::StatusOr<Artifact> BuildModule(const BuildRequest& request);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_NVRTC_BUILD_H_
