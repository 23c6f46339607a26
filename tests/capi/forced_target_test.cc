// The forced-target rule (fj_runtime_options.target_override and
// FLEETJIT_TARGET), the counterpart of the forced-implementation rule
// (forced_impl_test.cc): a forced target applies to the builds that name no
// target; one that names a copy implementation (fj_build_options.copy_impl)
// the forced target lacks is built for the device's own target instead,
// named by fj_module_info and a line at info, so rehearsing an older fleet
// (`fleetjit matrix`, cp_async@compute_80) does not fail a suite's explicit
// tma build. On the fake driver's sm_90 device; NVRTC compiles.
#include <random>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/capi/forced_env_util.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::testing::BuildAndDescribe;
using fleetjit::testing::Code;
using fleetjit::testing::FreshCopySource;
using fleetjit::testing::S;
using Result = fleetjit::testing::ForcedBuild;

class ForcedTargetTest : public fleetjit::testing::ForcedEnvTest {
 protected:
  ForcedTargetTest()
      : ForcedEnvTest({"FLEETJIT_TARGET", "FLEETJIT_COPY_IMPL"}) {}
  // A runtime forcing `target`, on the fake sm_90 device or (`driver`
  // empty) on none.
  fj_runtime* Create(const std::string& target, const std::string& driver) {
    fjfake_reset(1);
    fj_runtime_options o{};
    o.target_override = S(target);
    o.libcuda_path = S(driver);
    return CreateLogged(o);
  }
};

TEST_F(ForcedTargetTest, YieldsToAnExplicitImplementationItLacks) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string driver = fleetjit::testing::FakeDriverPath();
  fj_runtime* rt = Create("compute_80", driver);
  ASSERT_NE(rt, nullptr);
  // No implementation named: the forced target, with its best.
  Result plain =
      BuildAndDescribe(rt, FreshCopySource(rng), "", FJ_COPY_IMPL_AUTO);
  if (plain.code == FJ_UNAVAILABLE) {
    fj_status_free(fj_runtime_destroy(rt));
    GTEST_SKIP() << "no NVRTC here: " << plain.message;
  }
  ASSERT_EQ(plain.code, FJ_OK) << plain.message;
  EXPECT_EQ(plain.target, "compute_80");
  EXPECT_EQ(plain.impl, FJ_COPY_IMPL_CP_ASYNC);
  // An implementation the forced target has: the forced target.
  Result has =
      BuildAndDescribe(rt, FreshCopySource(rng), "", FJ_COPY_IMPL_SYNC);
  ASSERT_EQ(has.code, FJ_OK) << has.message;
  EXPECT_EQ(has.target, "compute_80");
  EXPECT_EQ(has.impl, FJ_COPY_IMPL_SYNC);
  EXPECT_FALSE(lines_.Has(FJ_LOG_INFO, {"the forced target"}));
  // One it lacks: the device's target (sm_90), the implementation as asked,
  // said at info.
  Result tma = BuildAndDescribe(rt, FreshCopySource(rng), "", FJ_COPY_IMPL_TMA);
  ASSERT_EQ(tma.code, FJ_OK) << tma.message;
  EXPECT_EQ(tma.target, "sm_90");
  EXPECT_EQ(tma.impl, FJ_COPY_IMPL_TMA);
  EXPECT_TRUE(lines_.Has(FJ_LOG_INFO, {"for sm_90", "compute_80", "tma"}));
  // A target named by the build is not the override's: refused as before.
  Result named =
      BuildAndDescribe(rt, FreshCopySource(rng), "sm_80", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(named.code, FJ_FAILED_PRECONDITION) << named.message;
  EXPECT_FALSE(named.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

TEST_F(ForcedTargetTest, WithoutADeviceTheLackingImplementationIsRefused) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create("compute_80", "/nonexistent/libcuda.so.1");
  ASSERT_NE(rt, nullptr);
  Result tma = BuildAndDescribe(rt, FreshCopySource(rng), "", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(tma.code, FJ_FAILED_PRECONDITION) << tma.message;
  EXPECT_NE(tma.message.find("compute_80"), std::string::npos) << tma.message;
  EXPECT_FALSE(tma.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

}  // namespace
