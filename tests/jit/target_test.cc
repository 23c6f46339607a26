#include "jit/target.h"

#include "gtest/gtest.h"

namespace fleetjit::jit {
namespace {

TEST(TargetTest, ParsesCubinAndPtxTargetsWithSuffixes) {
  auto t = ParseTarget("sm_90a");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->arch, 90);
  EXPECT_EQ(t->suffix, 'a');
  EXPECT_FALSE(t->ptx);
  EXPECT_EQ(t->Name(), "sm_90a");
  EXPECT_EQ(t->NvrtcArchOption(), "-arch=sm_90a");
  auto p = ParseTarget("compute_80");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->ptx);
  EXPECT_EQ(p->Name(), "compute_80");
  EXPECT_EQ(ParseTarget("sm_100f")->Name(), "sm_100f");
  EXPECT_EQ(ParseTarget("89")->Name(), "sm_89");
}

TEST(TargetTest, RejectsUnknownAndMalformedTargets) {
  for (const char* bad :
       {"", "sm_", "sm_9", "sm_1000", "sm_09", "compute_", "sm_80a", "sm_90f",
        "gfx90a", "sm_9x", "sm_-90", "sm_0090"}) {
    auto t = ParseTarget(bad);
    EXPECT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// Which architectures build is NVRTC's list (CheckTargetSupported, tested
// in nvrtc_build_test), not a table here: any well-formed name parses, so a
// host without NVRTC can still name what a cache entry was built for.
TEST(TargetTest, ParsesAnyWellFormedArchitecture) {
  for (const char* name : {"sm_70", "sm_91", "sm_999", "compute_50"}) {
    auto t = ParseTarget(name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_EQ(t->Name(), name);
  }
}

TEST(TargetTest, KnowsWhichImagesRunOnWhichDevice) {
  EXPECT_TRUE(TargetRunsOn(*ParseTarget("sm_90"), 90));
  EXPECT_FALSE(
      TargetRunsOn(*ParseTarget("sm_80"), 90));  // no SASS across majors
  EXPECT_TRUE(TargetRunsOn(*ParseTarget("sm_80"), 86));
  EXPECT_FALSE(TargetRunsOn(*ParseTarget("sm_86"), 80));
  EXPECT_TRUE(TargetRunsOn(*ParseTarget("compute_80"), 90));
  EXPECT_TRUE(TargetRunsOn(*ParseTarget("compute_75"), 90));
  EXPECT_FALSE(TargetRunsOn(*ParseTarget("compute_90"), 80));
  EXPECT_TRUE(TargetRunsOn(*ParseTarget("sm_90a"), 90));
  EXPECT_FALSE(TargetRunsOn(*ParseTarget("sm_100a"), 103));
}

}  // namespace
}  // namespace fleetjit::jit
