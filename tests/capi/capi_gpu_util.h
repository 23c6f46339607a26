// What the GPU tests that drive the C ABI by hand share
// (tests/jit/checked_mode_gpu_test.cc, globals_and_attributes_gpu_test.cc;
// header-only, link fleetjit): the fj_arg builders (their one home is
// conformance/c_abi.h; U64Arg added here) and 1-D launch configurations,
// with tests/common/capi_fixture.h's S and Code.
#ifndef FLEETJIT_TESTS_CAPI_CAPI_GPU_UTIL_H_
#define FLEETJIT_TESTS_CAPI_CAPI_GPU_UTIL_H_

#include <cstdint>

#include "conformance/c_abi.h"
#include "fleetjit/fleetjit.h"
#include "tests/common/capi_fixture.h"

namespace fleetjit::testing {

using ::fleetjit::selftest::internal::Arg;
using ::fleetjit::selftest::internal::I32Arg;
using ::fleetjit::selftest::internal::PtrArg;
using ::fleetjit::selftest::internal::TensorArg;

inline fj_arg U64Arg(uint64_t v) {
  fj_arg a = Arg(FJ_ARG_U64);
  a.v.u64 = v;
  return a;
}

// A 1-D launch of `grid` blocks of `block` threads with `shared_bytes` of
// dynamic shared memory, on `stream` (nullptr: the default stream).
inline fj_launch_config LaunchOn(uint32_t grid, uint32_t block,
                                 fj_stream* stream = nullptr,
                                 uint32_t shared_bytes = 0) {
  fj_launch_config c =
      ::fleetjit::selftest::internal::LaunchConfig(grid, block, shared_bytes);
  c.stream = stream;
  return c;
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_CAPI_CAPI_GPU_UTIL_H_
