// The device headers compiled into the library and offered to every NVRTC
// build (<fleetjit/copy.cuh> and its parts). Generated from jit/include/ by
// cmake/embed.cmake, so they always match the commit that was built.
#ifndef FLEETJIT_JIT_EMBEDDED_H_
#define FLEETJIT_JIT_EMBEDDED_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace fleetjit::jit {

struct EmbeddedFile {
  absl::string_view path;  // relative, e.g. "fleetjit/copy.cuh"
  absl::string_view content;
};

extern const EmbeddedFile kEmbeddedHeaders[];
extern const size_t kEmbeddedHeadersCount;

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_EMBEDDED_H_
