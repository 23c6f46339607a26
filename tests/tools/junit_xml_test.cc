// XML escaping for JUnit reports, and the child-process helper behind
// `fleetjit matrix`.
#include "tools/junit_xml.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tools/child_process.h"

namespace fleetjit::cli {
namespace {

constexpr char kFffd[] = "\xEF\xBF\xBD";

TEST(XmlEscapeTest, MarkupBecomesEntities) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'", false), "a&lt;b&gt;&amp;\"c'");
  EXPECT_EQ(XmlEscape("a<b>&\"c'", true), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(XmlEscape("l1\nl2\tx", true), "l1&#10;l2&#9;x");
  EXPECT_EQ(XmlEscape("l1\nl2\tx", false), "l1\nl2\tx");
}

TEST(XmlEscapeTest, WhatXmlCannotCarryBecomesReplacementCharacters) {
  EXPECT_EQ(XmlEscape("a\x01"
                      "b\x1b[0m",
                      false),
            std::string("a") + kFffd + "b" + kFffd + "[0m");
  EXPECT_EQ(XmlEscape("\xff\xfe", false), std::string(kFffd) + kFffd);
  EXPECT_EQ(XmlEscape("\xc3", false), kFffd);  // truncated
  EXPECT_EQ(XmlEscape("\xc0\xaf", false),      // overlong '/'
            std::string(kFffd) + kFffd);
  EXPECT_EQ(XmlEscape("\xed\xa0\x80", false),  // a surrogate
            std::string(kFffd) + kFffd + kFffd);
  EXPECT_EQ(XmlEscape("\xef\xbf\xbf", false), kFffd);  // U+FFFF
}

TEST(XmlEscapeTest, ValidUtf8PassesThrough) {
  const std::string text = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80";
  EXPECT_EQ(XmlEscape(text, false), text);
}

TEST(JUnitXmlTest, CountsAndFailures) {
  std::vector<JUnitCase> cases(2);
  cases[0].name = "tma@sm_90a";
  cases[0].classname = "fleetjit.matrix";
  cases[1].name = "sync@compute_75";
  cases[1].failed = true;
  cases[1].failure_message = "exit status 1";
  cases[1].failure_text = "x < y";
  const std::string xml = JUnitXml("suite \"s\"", cases);
  EXPECT_TRUE(
      absl::StartsWith(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
  EXPECT_TRUE(absl::StrContains(xml, "<testsuite tests=\"2\" failures=\"1\""));
  EXPECT_TRUE(absl::StrContains(xml, "name=\"suite &quot;s&quot;\""));
  EXPECT_TRUE(absl::StrContains(
      xml,
      "<testcase classname=\"fleetjit.matrix\" name=\"tma@sm_90a\" "
      "time=\"0.000\"/>"));
  EXPECT_TRUE(absl::StrContains(
      xml, "<failure message=\"exit status 1\">x &lt; y</failure>"));
}

TEST(ChildProcessTest, EnvironmentChangesAndExitStatus) {
  ::setenv("FJ_CHILD_TEST_REMOVED", "still here", 1);
  auto r =
      RunChild({"sh", "-c",
                "echo \"a=$FJ_CHILD_A b=${FJ_CHILD_TEST_REMOVED-gone}\"; "
                "echo err >&2; exit 3"},
               {{"FJ_CHILD_A", "1"}, {"FJ_CHILD_TEST_REMOVED", std::nullopt}},
               nullptr, 1024);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->StatusText(), "3");
  EXPECT_EQ(r->output_tail, "a=1 b=gone\nerr\n");
}

TEST(ChildProcessTest, KeepsOnlyTheTailAndReportsSignals) {
  auto r = RunChild({"sh", "-c", "seq 1 10000; kill -9 $$"}, {}, nullptr, 100);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->signal, 9);
  EXPECT_EQ(r->StatusText(), "signal 9");
  EXPECT_EQ(r->output_tail.size(), 100u);
  EXPECT_TRUE(absl::EndsWith(r->output_tail, "9999\n10000\n"));
  EXPECT_EQ(LastLines(r->output_tail, 2), "9999\n10000\n");
}

TEST(ChildProcessTest, LastLines) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(LastLines("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(LastLines("a\nb\nc\n", 5), "a\nb\nc\n");
  EXPECT_EQ(LastLines("", 3), "");
}

}  // namespace
}  // namespace fleetjit::cli
