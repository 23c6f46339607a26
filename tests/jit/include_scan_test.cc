// ScanIncludes: which headers a build may read, through quote and angle
// includes, nested folders, embedded names, absent names, and edits.
#include "jit/include_scan.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace fleetjit::jit {
namespace {

class IncludeScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fj_include_scan_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ::mkdir((root_ + "/user").c_str(), 0755);
    ::mkdir((root_ + "/user/sub").c_str(), 0755);
    ::mkdir((root_ + "/tk").c_str(), 0755);
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }
  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ + "/" + rel) << text;
  }
  IncludeScan Scan(const std::string& source) {
    IncludeScanRequest r;
    r.source = source;
    r.dirs = {root_ + "/user", root_ + "/tk"};
    r.is_embedded = [](absl::string_view n) { return n.rfind("fleetjit/", 0) == 0; };
    return ScanIncludes(r);
  }
  std::string root_;
};

TEST(IncludeDirectivesTest, FindsQuoteAndAngleNamesAndCountsComputedOnes) {
  int computed = 0;
  auto d = IncludeDirectives(
      "#include <a.h>\n  #  include \"b/c.h\"\n#define X\n#include X_HEADER\n"
      "int x; // #include <not_a_directive.h>\n#include<d.h>",
      &computed);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], std::make_pair(true, std::string("a.h")));
  EXPECT_EQ(d[1], std::make_pair(false, std::string("b/c.h")));
  EXPECT_EQ(d[2], std::make_pair(true, std::string("d.h")));
  EXPECT_EQ(computed, 1);
}

TEST_F(IncludeScanTest, FollowsNestedIncludesThroughTheSearchFolders) {
  Write("user/top.h", "#include \"sub/inner.h\"\n#include <tk_only.h>\n");
  Write("user/sub/inner.h", "#include \"sibling.h\"\n");  // relative to sub/
  Write("user/sub/sibling.h", "#define S 1\n");
  Write("tk/tk_only.h", "#include <fleetjit/copy.cuh>\n");
  IncludeScan s = Scan("#include \"top.h\"\n#include <fleetjit/copy.cuh>\n");
  ASSERT_EQ(s.headers.size(), 4u);
  EXPECT_EQ(s.headers[0].path, root_ + "/user/top.h");
  EXPECT_EQ(s.headers[1].path, root_ + "/user/sub/inner.h");
  EXPECT_EQ(s.headers[2].path, root_ + "/tk/tk_only.h");
  EXPECT_EQ(s.headers[3].path, root_ + "/user/sub/sibling.h");
  for (const auto& h : s.headers) EXPECT_EQ(h.sha256.size(), 64u) << h.path;
}

TEST_F(IncludeScanTest, AnEditedHeaderChangesItsDigest) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string v1 = "#define V " + std::to_string(rng()) + "\n";
  Write("user/cfg.h", v1);
  std::string before = Scan("#include \"cfg.h\"\n").headers.at(0).sha256;
  std::string again = Scan("#include \"cfg.h\"\n").headers.at(0).sha256;
  EXPECT_EQ(before, again);
  // Same size, new content: the inode times change, so the memo re-reads.
  std::string v2 = v1;
  v2[v2.size() - 2] = v2[v2.size() - 2] == '1' ? '2' : '1';
  ::usleep(10000);
  Write("user/cfg.h", v2);
  std::string after = Scan("#include \"cfg.h\"\n").headers.at(0).sha256;
  EXPECT_NE(before, after);
}

TEST_F(IncludeScanTest, AnAbsentHeaderIsRecordedAndCyclesEnd) {
  Write("user/a.h", "#include \"b.h\"\n#include <missing.h>\n");
  Write("user/b.h", "#include \"a.h\"\n");
  IncludeScan s = Scan("#include \"a.h\"\n");
  ASSERT_EQ(s.headers.size(), 3u);
  EXPECT_EQ(s.headers[2].name, "missing.h");
  EXPECT_TRUE(s.headers[2].path.empty());
  EXPECT_TRUE(s.headers[2].sha256.empty());
}

TEST_F(IncludeScanTest, UserFoldersComeBeforeToolkitFolders) {
  Write("user/both.h", "user\n");
  Write("tk/both.h", "toolkit\n");
  IncludeScan s = Scan("#include <both.h>\n");
  ASSERT_EQ(s.headers.size(), 1u);
  EXPECT_EQ(s.headers[0].path, root_ + "/user/both.h");
}

}  // namespace
}  // namespace fleetjit::jit
