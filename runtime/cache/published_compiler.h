// Which compiler's output a host without NVRTC accepts (rule 3b of
// cache_key.h): the image was built for exactly the target the host asked
// for (the agnostic key holds the target), so what is left to check is
// that the entry names a real NVRTC and that the local driver can load
// what that NVRTC emits.
//
//  - The identity must read "nvrtc MAJOR.MINOR[...] ..." (CompilerIdentity
//    in platform/nvrtc_locate.h). An empty or foreign identity is refused:
//    a pointer must never lead to an entry of unknown origin.
//  - A cubin (sm_XX target) loads on a driver of the same or a later CUDA
//    major version (minor version compatibility): driver major >= MAJOR.
//  - PTX (compute_XX target) is compiled by the driver, which must know
//    that toolkit's PTX ISA: driver version >= MAJOR.MINOR.
//  - driver_version 0 (no driver here, e.g. a CPU box fetching to
//    redistribute) checks the identity only; loading checks the rest.
#ifndef FLEETJIT_RUNTIME_CACHE_PUBLISHED_COMPILER_H_
#define FLEETJIT_RUNTIME_CACHE_PUBLISHED_COMPILER_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

// OK, or FAILED_PRECONDITION saying why the entry cannot be used here.
// `driver_version` as cuDriverGetVersion gives it (13000 = CUDA 13.0).
absl::Status CheckPublishedCompiler(absl::string_view compiler,
                                    absl::string_view target,
                                    int driver_version);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_PUBLISHED_COMPILER_H_
