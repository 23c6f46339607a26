// The example kernels (examples/*.cu), compiled in by cmake/embed.cmake
// (reference/CMakeLists.txt, target fj_bundled_kernels) so `fleetjit demo`
// and `fleetjit build examples/...` work from any directory, and the
// benchmarks, the reference kernels and the tests build the same corpus.
#ifndef FLEETJIT_REFERENCE_BUNDLED_KERNELS_H_
#define FLEETJIT_REFERENCE_BUNDLED_KERNELS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace fleetjit::bundled {

struct BundledKernel {
  absl::string_view path;  // "examples/tiled_copy.cu"
  absl::string_view content;
};

extern const BundledKernel kBundledKernels[];
extern const size_t kBundledKernelsCount;

// The bundled kernel at `path`, or nullptr.
inline const BundledKernel* FindBundledKernel(absl::string_view path) {
  for (size_t i = 0; i < kBundledKernelsCount; ++i) {
    if (kBundledKernels[i].path == path) return &kBundledKernels[i];
  }
  return nullptr;
}

}  // namespace fleetjit::bundled

#endif  // FLEETJIT_REFERENCE_BUNDLED_KERNELS_H_
