// The forced-implementation rule (fj_runtime_options.copy_impl_override and
// FLEETJIT_COPY_IMPL): a runtime-wide forced implementation applies to the
// builds whose target has it; a build for a target that lacks it gets that
// target's best implementation, named by fj_module_info and a line at info;
// an implementation forced for one build (fj_build_options.copy_impl) that
// its target lacks is refused. Named targets: no GPU needed, NVRTC is.
#include <optional>
#include <random>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/capi/forced_env_util.h"
#include "tests/common/capi_fixture.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::FreshCopySource;
using Built = fleetjit::testing::ForcedBuild;

// A PTX build (the implementation is read back from the module's info).
Built Build(fj_runtime* rt, const std::string& source,
            const std::string& target, fj_copy_impl impl) {
  return fleetjit::testing::BuildAndDescribe(rt, source, target, impl,
                                             FJ_OUTPUT_PTX);
}

class ForcedImplTest : public fleetjit::testing::ForcedEnvTest {
 protected:
  // The rule is the same whether the option or the variable forces it;
  // the test uses the option and keeps the variable out.
  ForcedImplTest() : ForcedEnvTest({"FLEETJIT_COPY_IMPL"}) {}
  fj_runtime* Create(fj_copy_impl forced) {
    fj_runtime_options o{};
    o.copy_impl_override = forced;
    return CreateLogged(o);
  }
};

TEST_F(ForcedImplTest, ARuntimeWideForcedImplYieldsToATargetThatLacksIt) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create(FJ_COPY_IMPL_TMA);
  ASSERT_NE(rt, nullptr);
  // The target that has it: forced.
  Built sm90 = Build(rt, FreshCopySource(rng), "sm_90", FJ_COPY_IMPL_AUTO);
  if (sm90.code == FJ_UNAVAILABLE) {
    fj_runtime_destroy(rt);
    GTEST_SKIP() << "no NVRTC here: " << sm90.message;
  }
  ASSERT_EQ(sm90.code, FJ_OK) << sm90.message;
  EXPECT_EQ(sm90.impl, FJ_COPY_IMPL_TMA);
  // Targets that lack it: their best, said at info.
  const struct {
    const char* target;
    fj_copy_impl best;
  } older[] = {{"sm_80", FJ_COPY_IMPL_CP_ASYNC},
               {"compute_75", FJ_COPY_IMPL_SYNC}};
  for (const auto& o : older) {
    SCOPED_TRACE(o.target);
    Built b = Build(rt, FreshCopySource(rng), o.target, FJ_COPY_IMPL_AUTO);
    ASSERT_EQ(b.code, FJ_OK) << b.message;
    EXPECT_EQ(b.impl, o.best);
    EXPECT_TRUE(lines_.Has(FJ_LOG_INFO,
                           {std::string("for ") + o.target,
                            std::string("with ") + fj_copy_impl_name(o.best)}))
        << "no info line for " << o.target;
  }
  // An implementation forced for the one build is not softened.
  Built explicit_tma =
      Build(rt, FreshCopySource(rng), "sm_80", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(explicit_tma.code, FJ_FAILED_PRECONDITION) << explicit_tma.message;
  EXPECT_NE(explicit_tma.message.find("tma"), std::string::npos)
      << explicit_tma.message;
  EXPECT_FALSE(explicit_tma.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

TEST_F(ForcedImplTest, AForcedImplTheTargetHasIsUsedAsBefore) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create(FJ_COPY_IMPL_SYNC);
  ASSERT_NE(rt, nullptr);
  for (const char* target : {"sm_90", "sm_80", "compute_75"}) {
    SCOPED_TRACE(target);
    Built b = Build(rt, FreshCopySource(rng), target, FJ_COPY_IMPL_AUTO);
    if (b.code == FJ_UNAVAILABLE) {
      fj_runtime_destroy(rt);
      GTEST_SKIP() << "no NVRTC here: " << b.message;
    }
    ASSERT_EQ(b.code, FJ_OK) << b.message;
    EXPECT_EQ(b.impl, FJ_COPY_IMPL_SYNC);
  }
  // No yielding happened, so nothing was said about it.
  EXPECT_FALSE(lines_.Has(FJ_LOG_INFO, {"forced copy implementation", ""}));
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

}  // namespace
