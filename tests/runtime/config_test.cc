// ApplyEnvironment: the one reader of the FLEETJIT_* overrides.
#include "runtime/config.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace fleetjit {
namespace {

TEST(ConfigTest, ThunksSwitchAndRecordedOverrides) {
  ::unsetenv("FLEETJIT_THUNKS");
  RuntimeOptions defaults;
  ASSERT_TRUE(ApplyEnvironment(defaults).ok());
  EXPECT_TRUE(defaults.thunks);
  ::setenv("FLEETJIT_THUNKS", "0", 1);
  RuntimeOptions off;
  ASSERT_TRUE(ApplyEnvironment(off).ok());
  EXPECT_FALSE(off.thunks);
  ASSERT_FALSE(off.env_overrides.empty());
  EXPECT_EQ(off.env_overrides.back(), "FLEETJIT_THUNKS");
  ::setenv("FLEETJIT_THUNKS", "1", 1);
  RuntimeOptions on;
  on.thunks = false;
  ASSERT_TRUE(ApplyEnvironment(on).ok());
  EXPECT_TRUE(on.thunks);
  ::unsetenv("FLEETJIT_THUNKS");
}

TEST(ConfigTest, AMalformedValueNamesTheVariable) {
  ::setenv("FLEETJIT_COPY_IMPL", "fastest", 1);
  RuntimeOptions options;
  absl::Status s = ApplyEnvironment(options);
  ::unsetenv("FLEETJIT_COPY_IMPL");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("FLEETJIT_COPY_IMPL"), absl::string_view::npos);
}

}  // namespace
}  // namespace fleetjit
