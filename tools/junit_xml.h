// JUnit XML, the report format CI systems (Jenkins, GitLab, GitHub
// actions) read: one <testsuite> with a <testcase> per test, a <failure>
// inside those that failed.
//
// Text is escaped for XML 1.0: markup characters become entities, and what
// XML cannot carry at all (invalid UTF-8, control characters other than
// tab and newline, U+FFFE/U+FFFF) becomes U+FFFD, so a test's raw output
// never makes the file unreadable.
#ifndef FLEETJIT_TOOLS_JUNIT_XML_H_
#define FLEETJIT_TOOLS_JUNIT_XML_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleetjit::cli {

struct JUnitCase {
  std::string name;       // e.g. "cp_async@compute_80"
  std::string classname;  // e.g. "fleetjit.matrix"
  double seconds = 0;
  bool failed = false;
  std::string failure_message;  // the <failure message=...> attribute
  std::string failure_text;     // its body, e.g. the output's tail
};

// `text` escaped for XML element content (`attribute` false) or a
// double-quoted attribute value (true: newlines and tabs as references).
std::string XmlEscape(absl::string_view text, bool attribute);

// A whole document: <testsuite name=... tests=N failures=M ...>.
std::string JUnitXml(absl::string_view suite_name,
                     const std::vector<JUnitCase>& cases);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_JUNIT_XML_H_
