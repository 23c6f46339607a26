#include "jit/copy_plan.h"

#include "gtest/gtest.h"

namespace fleetjit::jit {
namespace {

CopyPlan Plan(const char* target,
              std::optional<CopyImpl> forced = std::nullopt) {
  auto plan = MakeCopyPlan(*ParseTarget(target), forced);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(CopyPlanTest, ChoosesTheBestImplementationPerGeneration) {
  EXPECT_EQ(Plan("sm_75").impl, CopyImpl::kSync);
  EXPECT_EQ(Plan("sm_80").impl, CopyImpl::kCpAsync);
  EXPECT_EQ(Plan("sm_86").impl, CopyImpl::kCpAsync);
  EXPECT_EQ(Plan("sm_89").impl, CopyImpl::kCpAsync);
  EXPECT_EQ(Plan("sm_90").impl, CopyImpl::kTma);
  EXPECT_EQ(Plan("sm_90a").impl, CopyImpl::kTma);
  EXPECT_EQ(Plan("sm_100").impl, CopyImpl::kTma);
  EXPECT_EQ(Plan("sm_120").impl, CopyImpl::kTma);
  EXPECT_EQ(Plan("compute_80").impl, CopyImpl::kCpAsync);
}

TEST(CopyPlanTest, ForcingAnOlderImplementationWorksEverywhere) {
  EXPECT_EQ(Plan("sm_90", CopyImpl::kSync).impl, CopyImpl::kSync);
  EXPECT_EQ(Plan("sm_90", CopyImpl::kCpAsync).impl, CopyImpl::kCpAsync);
  EXPECT_EQ(Plan("sm_75", CopyImpl::kSync).impl, CopyImpl::kSync);
}

TEST(CopyPlanTest, ForcingWhatTheHardwareLacksIsAClearStatus) {
  auto plan = MakeCopyPlan(*ParseTarget("sm_80"), CopyImpl::kTma);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("tma"), absl::string_view::npos);
  EXPECT_NE(plan.status().message().find("sm_80"), absl::string_view::npos);
  EXPECT_FALSE(MakeCopyPlan(*ParseTarget("sm_75"), CopyImpl::kCpAsync).ok());
}

TEST(CopyPlanTest, EveryFeatureIsOfferedUnderEveryImplementation) {
  for (const char* t : {"sm_75", "sm_80", "sm_90"}) {
    CopyPlan plan = Plan(t);
    for (Support s : plan.support) {
      EXPECT_TRUE(s == Support::kNative || s == Support::kEmulated) << t;
    }
  }
  // Hopper has no cp.async-style group wait for TMA loads: emulated.
  EXPECT_EQ(Plan("sm_90").support[static_cast<int>(Feature::kGroupWait)],
            Support::kEmulated);
  EXPECT_EQ(Plan("sm_80").support[static_cast<int>(Feature::kGroupWait)],
            Support::kNative);
  EXPECT_EQ(Plan("sm_90").support[static_cast<int>(Feature::kMulticast)],
            Support::kNative);
  EXPECT_EQ(Plan("sm_80").support[static_cast<int>(Feature::kMulticast)],
            Support::kEmulated);
  EXPECT_EQ(Plan("sm_100a").support[static_cast<int>(Feature::kMulticast)],
            Support::kNative);
  EXPECT_EQ(Plan("sm_120").support[static_cast<int>(Feature::kMulticast)],
            Support::kEmulated);
  EXPECT_EQ(Plan("sm_75").support[static_cast<int>(Feature::kBarrier)],
            Support::kEmulated);
}

TEST(CopyPlanTest, NamesRoundTrip) {
  for (CopyImpl impl : {CopyImpl::kSync, CopyImpl::kCpAsync, CopyImpl::kTma}) {
    EXPECT_EQ(ParseCopyImpl(CopyImplName(impl)), impl);
  }
  EXPECT_FALSE(ParseCopyImpl("dma").has_value());
  EXPECT_EQ(FeatureName(Feature::kGroupWait), "group_wait");
}

}  // namespace
}  // namespace fleetjit::jit
