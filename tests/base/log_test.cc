// Logger: levels filter, the sink gets each line once, a throwing sink is
// contained, and level names parse both ways.
#include "base/log.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fleetjit {
namespace {

TEST(LogTest, OnlyLinesAtOrAboveTheLevelReachTheSink) {
  std::vector<std::pair<LogLevel, std::string>> got;
  Logger log(LogLevel::kWarn, [&](LogLevel l, absl::string_view m) {
    got.emplace_back(l, std::string(m));
  });
  log.Log(LogLevel::kDebug, "d");
  log.Log(LogLevel::kInfo, "i");
  log.Log(LogLevel::kWarn, "w");
  log.Log(LogLevel::kError, "e");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], std::make_pair(LogLevel::kWarn, std::string("w")));
  EXPECT_EQ(got[1], std::make_pair(LogLevel::kError, std::string("e")));
  EXPECT_TRUE(log.Enabled(LogLevel::kError));
  EXPECT_FALSE(log.Enabled(LogLevel::kInfo));
}

TEST(LogTest, OffAndNoSinkLogNothing) {
  int calls = 0;
  Logger off(LogLevel::kOff, [&](LogLevel, absl::string_view) { ++calls; });
  off.Log(LogLevel::kError, "x");
  Logger none;
  none.Log(LogLevel::kError, "x");
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(none.Enabled(LogLevel::kError));
}

TEST(LogTest, AThrowingSinkIsContained) {
  Logger log(LogLevel::kDebug, [](LogLevel, absl::string_view) { throw 42; });
  EXPECT_NO_THROW(log.Log(LogLevel::kError, "boom"));
}

TEST(LogTest, LevelNamesRoundTripAndBadNamesAreRefused) {
  for (LogLevel l : {LogLevel::kOff, LogLevel::kError, LogLevel::kWarn,
                     LogLevel::kInfo, LogLevel::kDebug}) {
    auto parsed = ParseLogLevel(LogLevelName(l));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, l);
  }
  EXPECT_EQ(*ParseLogLevel("WARN"), LogLevel::kWarn);
  auto bad = ParseLogLevel("verbose");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected off, error"),
            std::string::npos);
}

}  // namespace
}  // namespace fleetjit
