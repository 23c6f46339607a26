// A C-ABI runtime on the fake CUDA driver (fake_cuda.h): one device, no
// disk cache. For tests whose target defines FJ_FAKE_CUDA_PATH (the built
// libfj_fake_cuda.so) and links fj_fake_cuda.
//
//   fj_runtime* rt = nullptr;
//   ASSERT_TRUE(CreateFakeRuntime(&rt));
#ifndef FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_RUNTIME_H_
#define FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_RUNTIME_H_

#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/test_paths.h"

namespace fleetjit::testing {

// The fake driver beside the test binary (a staged tree), else where the
// build put it.
inline std::string FakeDriverPath() {
  return BesideExecutable("../lib/libfj_fake_cuda.so", FJ_FAKE_CUDA_PATH);
}

// Resets the fake to one device and creates a runtime on it in *out (the
// caller destroys it), with the disk cache off.
inline ::testing::AssertionResult CreateFakeRuntime(fj_runtime** out) {
  fjfake_reset(1);
  const std::string driver = FakeDriverPath();
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = fj_str{driver.data(), driver.size()};
  ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
  fj_status* st = fj_runtime_create(&ro, out);
  if (fj_status_code(st) != FJ_OK) {
    ::testing::AssertionResult failed = ::testing::AssertionFailure()
                                        << fj_status_message(st, nullptr);
    fj_status_free(st);
    return failed;
  }
  int32_t n = 0;
  st = fj_device_count(*out, &n);
  fj_status_free(st);
  if (n != 1) {
    return ::testing::AssertionFailure()
           << "the fake driver did not load (" << n << " devices)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_RUNTIME_H_
