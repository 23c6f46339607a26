// The harness of the GPU launch tests
// (tests/runtime/launch/launch_*_test.cc): one runtime and thunk JIT per
// process (GetGpu), the test kernels (kLaunchSource) built uncached and
// loaded on either launch path (LoadKernel), device buffers the test owns,
// launch helpers and DLPack tensors. Without a GPU, REQUIRE_GPU() skips the
// test and says why.
//
//   TEST(LaunchGpu, Example) {
//     REQUIRE_GPU();
//     ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel({"axpy"}));
//     DeviceBuffer out(4096);
//     out.Poison(0xCD);
//     ASSERT_TRUE(LaunchArgs(k, Config(1, 32), nullptr, {...}).ok());
//     ASSERT_TRUE(Sync(nullptr, "axpy").ok());
//   }
#ifndef FLEETJIT_TESTS_COMMON_GPU_FIXTURE_H_
#define FLEETJIT_TESTS_COMMON_GPU_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "conformance/c_abi.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/launch_thunks.h"
#include "runtime/runtime.h"
#include "tests/common/seed.h"

namespace fleetjit::testing {

// The kernels of the launch tests (CUDA C++ over <fleetjit/copy.cuh>), and
// the file name they are built under.
extern const char kLaunchSource[];
inline constexpr char kLaunchSourceName[] = "launch_gpu_test.cu";

// The shared GPU environment: one runtime, one thunk JIT.
struct Gpu {
  std::unique_ptr<Runtime> runtime;
  const DriverApi* api = nullptr;
  Device* device = nullptr;
  LaunchThunks thunks{true};
  std::string skip;  // why there is no GPU
  std::mutex mu;
  std::vector<ModuleRecord> modules;  // kept alive: kernels point into them
};

// The process's Gpu, created on first use (never destroyed).
Gpu& GetGpu();

#define REQUIRE_GPU()                                          \
  do {                                                         \
    if (!GetGpu().skip.empty()) GTEST_SKIP() << GetGpu().skip; \
    ASSERT_TRUE(GetGpu().device->MakeCurrent().ok());          \
  } while (0)

#define ASSIGN_OR_FAIL(lhs, expr)                        \
  auto FJ_STATUS_CONCAT_(result_, __LINE__) = (expr);    \
  ASSERT_TRUE(FJ_STATUS_CONCAT_(result_, __LINE__).ok()) \
      << FJ_STATUS_CONCAT_(result_, __LINE__).status();  \
  lhs = *FJ_STATUS_CONCAT_(result_, __LINE__)

struct KernelSpec {
  std::string name;
  std::vector<std::string> name_expressions = {};
  std::optional<jit::CopyImpl> impl = std::nullopt;
  bool thunk = true;
};

// Builds kLaunchSource (uncached: each call gets its own image and
// LoadedKernel) and loads `spec.name`; with spec.thunk the kernel gets its
// launch thunk, without it the kernel stays on the generic path.
absl::StatusOr<LoadedKernel*> LoadKernel(const KernelSpec& spec);

// Device memory owned by the test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  uint64_t address() const { return address_; }
  template <typename T>
  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(GetGpu().api->cuMemcpyHtoD(address_, host.data(),
                                         host.size() * sizeof(T)),
              CUDA_SUCCESS);
    // From pageable memory cuMemcpyHtoD may return before its DMA lands,
    // and a kernel on a non-blocking stream does not wait for it.
    ASSERT_EQ(GetGpu().api->cuCtxSynchronize(), CUDA_SUCCESS);
  }
  template <typename T>
  std::vector<T> Download(size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(
        GetGpu().api->cuMemcpyDtoH(host.data(), address_, count * sizeof(T)),
        CUDA_SUCCESS);
    return host;
  }
  void Poison(uint8_t byte);

 private:
  size_t bytes_;
  uint64_t address_ = 0;
};

// Launch arguments and configurations: one home (conformance/c_abi.h),
// shared with the selftest and the benchmarks.
using ::fleetjit::selftest::internal::Arg;
using ::fleetjit::selftest::internal::F32Arg;
using ::fleetjit::selftest::internal::I32Arg;
using ::fleetjit::selftest::internal::PtrArg;
using ::fleetjit::selftest::internal::TensorArg;
inline fj_launch_config Config(uint32_t grid, uint32_t block,
                               uint32_t shared = 0) {
  return ::fleetjit::selftest::internal::LaunchConfig(grid, block, shared);
}

absl::Status LaunchArgs(LoadedKernel* k, const fj_launch_config& cfg,
                        CUstream stream, const std::vector<fj_arg>& args);

// Synchronises `stream`, turning a sticky error into the device's poison.
absl::Status Sync(CUstream stream, absl::string_view what);

// Small integers as floats: sums stay exact.
std::vector<float> RandomInts(std::mt19937_64& rng, size_t n, int range = 8);

// A DLPack tensor description the test owns.
struct HostTensor {
  std::vector<int64_t> shape, strides;
  fj_tensor tensor{};
  fj_tensor_arg arg{};
  void Set(uint64_t data, std::vector<int64_t> dims,
           std::vector<int64_t> elem_strides, std::vector<uint32_t> box,
           fj_oob oob = FJ_OOB_ZEROS, fj_dl_dtype dtype = {2, 32, 1});
};

// tile_add's operands: `in` ([rows, cols] f32) uploaded, the output
// poisoned with 0x7F, both described with {16, 32} boxes.
struct TileOperands {
  TileOperands(const std::vector<float>& in, int rows, int cols);
  DeviceBuffer din, dout;
  HostTensor tin, tout;
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_GPU_FIXTURE_H_
