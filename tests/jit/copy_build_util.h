// What the CPU-side tests of <fleetjit/copy.cuh> share (copy_ptx_test,
// copy_checks_test): a target with an implementation, the combinations
// that cover each implementation once, and an NVRTC build of a source with
// CUDA's headers as the runtime offers them.
#ifndef FLEETJIT_TESTS_JIT_COPY_BUILD_UTIL_H_
#define FLEETJIT_TESTS_JIT_COPY_BUILD_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/nvrtc_build.h"
#include "platform/cuda_headers.h"

namespace fleetjit::jit {

struct Combo {
  const char* target;
  CopyImpl impl;
};

// Each implementation on the oldest target that has it, and all three on
// sm_90.
inline std::vector<Combo> EveryImplOnce() {
  return {{"sm_75", CopyImpl::kSync},
          {"sm_80", CopyImpl::kCpAsync},
          {"sm_90", CopyImpl::kSync},
          {"sm_90", CopyImpl::kCpAsync},
          {"sm_90", CopyImpl::kTma}};
}

inline bool Has(const std::string& ptx, const std::string& needle) {
  return ptx.find(needle) != std::string::npos;
}

inline absl::StatusOr<Artifact> Build(const std::string& source,
                                      const char* target, CopyImpl impl,
                                      std::vector<std::string> options = {}) {
  BuildRequest r;
  r.source = source;
  r.name = "copy_test.cu";
  r.target = *ParseTarget(target);
  r.copy_impl = impl;
  r.options = std::move(options);
  // CUDA's headers, as the runtime offers them (the examples include
  // <cuda_fp16.h> and <cuda_bf16.h>).
  for (const CudaIncludeDir& d : FindCudaIncludeDirs(CudaHeaderSearch{}))
    r.include_dirs.push_back({d.path, d.origin});
  return BuildModule(r);
}

}  // namespace fleetjit::jit

#endif  // FLEETJIT_TESTS_JIT_COPY_BUILD_UTIL_H_
