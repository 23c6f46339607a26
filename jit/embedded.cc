#include "jit/embedded.h"

namespace fleetjit::jit {

const EmbeddedFile* FindEmbeddedKernel(absl::string_view path) {
  for (size_t i = 0; i < kEmbeddedKernelsCount; ++i) {
    if (kEmbeddedKernels[i].path == path) return &kEmbeddedKernels[i];
  }
  return nullptr;
}

}  // namespace fleetjit::jit
