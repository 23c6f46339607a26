// Launch and tuning checks take each device's own shared-memory limit from
// the driver (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), not a
// table: on a consumer Blackwell part (sm_120: 101,376 bytes per block,
// against 232,448 on an H100 or B200) a launch the H100 takes is refused
// naming the device's limit, and fj_kernel_set_attribute's range follows
// it. The fake driver plays the part (fjfake_set_part); NVRTC builds the
// kernel for sm_120.
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "conformance/c_abi.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::selftest::internal::PtrArg;
using fleetjit::testing::Code;
using fleetjit::testing::S;

constexpr int kConsumerBlackwellOptin = 101376;  // bytes per block
constexpr int kH100Optin = 227 << 10;            // 232448

struct Result {
  fj_code code;
  std::string message;
};
Result R(fj_status* st) {
  Result r{fj_status_code(st), fj_status_message(st, nullptr)};
  fj_status_free(st);
  return r;
}

class DeviceSharedLimitTest : public ::testing::TestWithParam<int> {
 protected:
  // The part under test: sm_120 with its 101,376 bytes, or the H100.
  int optin() const { return GetParam(); }
  void SetUp() override {
    if (optin() == kConsumerBlackwellOptin) {
      fjfake_set_part(12, 0, kConsumerBlackwellOptin, 100 << 10);
    }
    ASSERT_TRUE(fleetjit::testing::CreateFakeRuntime(&rt_));
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);  // for the live device: its own target
    fj_status* st = fj_module_build(rt_, &o, &module_);
    if (fj_status_code(st) == FJ_UNAVAILABLE) {
      const std::string why = fj_status_message(st, nullptr);
      fj_status_free(st);
      GTEST_SKIP() << "no NVRTC here: " << why;
    }
    ASSERT_EQ(Code(st), FJ_OK);
    ASSERT_EQ(Code(fj_module_get_kernel(module_, S(name_), 0, &kernel_)),
              FJ_OK);
    ASSERT_EQ(Code(fj_mem_alloc(rt_, 0, 4096, &out_)), FJ_OK);
  }
  void TearDown() override {
    if (out_ != 0) fj_status_free(fj_mem_free(rt_, out_));
    if (module_ != nullptr) fj_status_free(fj_module_destroy(module_));
    if (rt_ != nullptr) fj_status_free(fj_runtime_destroy(rt_));
    fjfake_set_part(9, 0, kH100Optin, 228 << 10);  // the fake's default
  }
  Result LaunchWith(uint32_t shared_bytes) {
    fj_launch_config c{};
    c.struct_size = sizeof(c);
    c.grid[0] = 1;
    c.block[0] = 32;
    c.shared_bytes = shared_bytes;
    const fj_arg arg = PtrArg(out_);
    return R(fj_launch(kernel_, &c, &arg, 1));
  }
  const std::string source_ =
      "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = 1; }\n";
  const std::string name_ = "k";
  fj_runtime* rt_ = nullptr;
  fj_module* module_ = nullptr;
  fj_kernel* kernel_ = nullptr;
  uint64_t out_ = 0;
};

TEST_P(DeviceSharedLimitTest, TheDeviceReportsItsOwnLimit) {
  fj_device_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(Code(fj_device_info_get(rt_, 0, &info)), FJ_OK);
  EXPECT_EQ(info.shared_memory_per_block_optin, optin());
  fj_module_info m{};
  m.struct_size = sizeof(m);
  ASSERT_EQ(Code(fj_module_info_get(module_, &m)), FJ_OK);
  EXPECT_EQ(std::string(m.target), optin() == kH100Optin ? "sm_90" : "sm_120");
}

TEST_P(DeviceSharedLimitTest, LaunchesAreCheckedAgainstTheDevicesLimit) {
  fj_kernel_info k{};
  k.struct_size = sizeof(k);
  ASSERT_EQ(Code(fj_kernel_info_get(kernel_, &k)), FJ_OK);
  const uint32_t most = static_cast<uint32_t>(optin() - k.static_shared_bytes);
  // 100 KiB + 1: above sm_120's 101,376, well within an H100's.
  const Result big = LaunchWith((100 << 10) + 1);
  if (optin() == kConsumerBlackwellOptin) {
    EXPECT_EQ(big.code, FJ_OUT_OF_RANGE) << big.message;
    EXPECT_TRUE(absl::StrContains(
        big.message, absl::StrCat("opt-in limit ", kConsumerBlackwellOptin)))
        << big.message;
  } else {
    EXPECT_EQ(big.code, FJ_OK) << big.message;
  }
  EXPECT_EQ(LaunchWith(most).code, FJ_OK);
  const Result over = LaunchWith(most + 1);
  EXPECT_EQ(over.code, FJ_OUT_OF_RANGE) << over.message;
  EXPECT_TRUE(absl::StrContains(over.message, std::to_string(optin())))
      << over.message;
}

TEST_P(DeviceSharedLimitTest, TheAttributeRangeFollowsTheDevice) {
  EXPECT_EQ(Code(fj_kernel_set_attribute(
                kernel_, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, optin())),
            FJ_OK);
  const Result over = R(fj_kernel_set_attribute(
      kernel_, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, optin() + 1));
  EXPECT_EQ(over.code, FJ_OUT_OF_RANGE) << over.message;
  EXPECT_TRUE(absl::StrContains(over.message, std::to_string(optin())))
      << over.message;
}

INSTANTIATE_TEST_SUITE_P(Parts, DeviceSharedLimitTest,
                         ::testing::Values(kConsumerBlackwellOptin, kH100Optin),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == kH100Optin
                                      ? std::string("H100")
                                      : std::string("ConsumerBlackwell");
                         });

}  // namespace
