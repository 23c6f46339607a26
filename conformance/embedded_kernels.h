// The conformance kernels (conformance_kernels.cu), compiled into the
// runner by cmake/embed.cmake; the library itself carries none of them.
#ifndef FLEETJIT_CONFORMANCE_EMBEDDED_KERNELS_H_
#define FLEETJIT_CONFORMANCE_EMBEDDED_KERNELS_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace fleetjit::selftest {

struct EmbeddedKernel {
  absl::string_view path;  // relative to the source root
  absl::string_view content;
};

extern const EmbeddedKernel kConformanceKernels[];
extern const size_t kConformanceKernelsCount;

}  // namespace fleetjit::selftest

#endif  // FLEETJIT_CONFORMANCE_EMBEDDED_KERNELS_H_
