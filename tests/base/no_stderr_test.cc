// The library writes nothing to stderr or stdout on its own (base/log.h):
// outside comments, the library's sources name stderr only in
// StderrLogSink (base/log.cc), and stdout nowhere. Reads the source tree
// the build recorded (FJ_SOURCE_DIR).
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;

TEST(NoStderrTest, OnlyStderrLogSinkWritesToStderr) {
  const fs::path root = FJ_SOURCE_DIR;
  if (!fs::exists(root / "base" / "log.cc"))
    GTEST_SKIP() << "no source tree at " << root;
  const std::regex banned(
      R"(\bstderr\b|\bstdout\b|std::cerr|std::cout|std::clog|\bperror\s*\(|)"
      R"((^|[^a-z_])(printf|puts|putchar)\s*\(|\bwrite\s*\(\s*[12]\s*,)");
  std::vector<std::string> found;
  int files = 0;
  for (const char* layer : {"base", "platform", "jit", "runtime", "capi"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".inc") continue;
      ++files;
      std::ifstream in(e.path());
      std::string line;
      bool in_block_comment = false;
      for (int n = 1; std::getline(in, line); ++n) {
        // Drop comments: a block comment's lines, and `//` or `/* */` tails.
        std::string code;
        for (size_t i = 0; i < line.size(); ++i) {
          if (in_block_comment) {
            if (line.compare(i, 2, "*/") == 0) in_block_comment = false, ++i;
            continue;
          }
          if (line.compare(i, 2, "/*") == 0) {
            in_block_comment = true, ++i;
            continue;
          }
          if (line.compare(i, 2, "//") == 0) break;
          code.push_back(line[i]);
        }
        if (!std::regex_search(code, banned)) continue;
        const std::string where = fs::relative(e.path(), root).string();
        if (where == "base/log.cc" &&
            code.find("std::fputs(line.c_str(), stderr)") !=
                std::string::npos) {
          continue;  // StderrLogSink
        }
        found.push_back(where + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  EXPECT_GT(files, 50);
  for (const std::string& f : found)
    ADD_FAILURE() << "writes to stderr/stdout: " << f;
}

}  // namespace
