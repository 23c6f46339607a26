// Files compiled into the library: the device headers offered to every NVRTC
// build (<fleetjit/copy.cuh> and its parts) and the bundled kernels (the
// examples and the self-test). Generated from the source tree by
// cmake/embed.cmake, so they always match the commit that was built.
#ifndef FLEETJIT_JIT_EMBEDDED_H_
#define FLEETJIT_JIT_EMBEDDED_H_

#include <cstddef>
#include "absl/strings/string_view.h"

namespace fleetjit::jit {

struct EmbeddedFile {
  absl::string_view path;     // relative, e.g. "fleetjit/copy.cuh"
  absl::string_view content;
};

extern const EmbeddedFile kEmbeddedHeaders[];
extern const size_t kEmbeddedHeadersCount;
extern const EmbeddedFile kEmbeddedKernels[];
extern const size_t kEmbeddedKernelsCount;

// The embedded kernel at `path` ("examples/tiled_copy.cu"), or nullptr.
const EmbeddedFile* FindEmbeddedKernel(absl::string_view path);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_EMBEDDED_H_
