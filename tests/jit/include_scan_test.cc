// ScanIncludes: which headers a build may read, through quote and angle
// includes, nested folders, embedded names, absent names, and edits.
#include "jit/include_scan.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/sha256.h"
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
    r.is_embedded = [](absl::string_view n) {
      return n.rfind("fleetjit/", 0) == 0;
    };
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

TEST_F(IncludeScanTest, KeyRecordsAreSortedNamesWithDigestsOrAbsent) {
  Write("user/b.h", "#include <zz_missing.h>\n");
  Write("tk/a.h", "#define A 1\n");
  IncludeScan s = Scan("#include \"b.h\"\n#include <a.h>\n");
  ASSERT_EQ(s.key_records.size(), 3u);
  EXPECT_EQ(s.key_records[0].first, "a.h");
  EXPECT_EQ(s.key_records[0].second, s.headers[1].sha256);
  EXPECT_EQ(s.key_records[1].first, "b.h");
  EXPECT_EQ(s.key_records[2],
            std::make_pair(std::string("zz_missing.h"), std::string("absent")));
}

// IncludeScanner: whole scans reused while every path they looked at finds
// the same, and never once something changed.
class IncludeScannerTest : public IncludeScanTest {
 protected:
  static bool Embedded(absl::string_view n) {
    return n.rfind("fleetjit/", 0) == 0;
  }
  std::vector<std::string> Dirs() const {
    return {root_ + "/user", root_ + "/tk"};
  }
  // A random line of `bytes` bytes (ending in a newline).
  std::string Line(size_t bytes) {
    std::string line = "#define V ";
    while (line.size() + 1 < bytes)
      line += static_cast<char>('a' + rng_() % 26);
    return line + "\n";
  }
  // Stamps `rel` with mtime `seconds` past the epoch, as a clock tick would.
  void SetMtime(const std::string& rel, time_t seconds) {
    struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, (root_ + "/" + rel).c_str(), times, 0), 0);
  }
  std::mt19937_64 rng_{std::random_device{}()};
};

TEST_F(IncludeScannerTest, AnUnchangedScanIsReusedAndEqualsAFreshOne) {
  Write("user/top.h",
        "#include \"sub/inner.h\"\n#include <tk_only.h>\n#include <gone.h>\n");
  Write("user/sub/inner.h", Line(40));
  Write("tk/tk_only.h", Line(50));
  // Window 0: a file is trusted as soon as it was read after its last change.
  IncludeScanner scanner(Embedded, /*racy_window_ns=*/0);
  const std::string source = "#include \"top.h\"\n";
  auto first = scanner.Scan(source, Dirs());
  auto second = scanner.Scan(source, Dirs());
  EXPECT_EQ(scanner.scanned(), 1u);
  EXPECT_EQ(scanner.reused(), 1u);
  EXPECT_EQ(second->key_records, first->key_records);
  EXPECT_EQ(second->key_records, Scan(source).key_records);
  ASSERT_EQ(first->key_records.size(), 4u);
}

TEST_F(IncludeScannerTest, ASameSizeEditRightAfterAScanIsSeen) {
  // No sleep between the writes: on a file system whose clock ticks once
  // per jiffy the two versions can carry the same mtime, ctime, size and
  // inode. The racy window makes the scanner read them anyway.
  IncludeScanner scanner(Embedded);
  const std::string source = "#include \"cfg.h\"\n";
  std::string previous;
  for (int version = 0; version < 5; ++version) {
    const std::string text = Line(64);
    Write("user/cfg.h", text);
    auto scan = scanner.Scan(source, Dirs());
    ASSERT_EQ(scan->headers.size(), 1u);
    EXPECT_EQ(scan->headers[0].sha256, Sha256::Hex(Sha256::Hash(text)))
        << "version " << version;
    EXPECT_NE(scan->headers[0].sha256, previous);
    previous = scan->headers[0].sha256;
  }
}

TEST_F(IncludeScannerTest, AChangedMtimeIsSeenWithoutTheRacyWindow) {
  IncludeScanner scanner(Embedded, /*racy_window_ns=*/0);
  const std::string source = "#include <cfg.h>\n";
  const std::string v1 = Line(64), v2 = Line(64);
  Write("tk/cfg.h", v1);
  SetMtime("tk/cfg.h", 1000000000);
  EXPECT_EQ(scanner.Scan(source, Dirs())->headers.at(0).sha256,
            Sha256::Hex(Sha256::Hash(v1)));
  EXPECT_EQ(scanner.Scan(source, Dirs())->headers.at(0).sha256,
            Sha256::Hex(Sha256::Hash(v1)));
  EXPECT_EQ(scanner.reused(), 1u);
  Write("tk/cfg.h", v2);  // same size, same inode
  SetMtime("tk/cfg.h", 1000000001);
  EXPECT_EQ(scanner.Scan(source, Dirs())->headers.at(0).sha256,
            Sha256::Hex(Sha256::Hash(v2)));
  EXPECT_EQ(scanner.scanned(), 2u);
}

TEST_F(IncludeScannerTest, AHeaderCreatedEarlierInTheSearchOrShadowingIsSeen) {
  IncludeScanner scanner(Embedded, /*racy_window_ns=*/0);
  const std::string source = "#include <shadowed.h>\n#include <later.h>\n";
  Write("tk/shadowed.h", Line(30));
  auto before = scanner.Scan(source, Dirs());
  ASSERT_EQ(before->headers.size(), 2u);
  EXPECT_EQ(before->headers[0].path, root_ + "/tk/shadowed.h");
  EXPECT_TRUE(before->headers[1].path.empty());  // later.h: absent
  // A user header now shadows the toolkit's, and the absent one appears.
  // (Without the racy window, a change must land on a later tick of the
  // file system's clock than the scan saw: a jiffy is at most 10 ms.)
  ::usleep(20000);
  const std::string user = Line(30);
  Write("user/shadowed.h", user);
  Write("tk/later.h", Line(20));
  auto after = scanner.Scan(source, Dirs());
  ASSERT_EQ(after->headers.size(), 2u);
  EXPECT_EQ(after->headers[0].path, root_ + "/user/shadowed.h");
  EXPECT_EQ(after->headers[0].sha256, Sha256::Hex(Sha256::Hash(user)));
  EXPECT_EQ(after->headers[1].path, root_ + "/tk/later.h");
  // A header deleted is seen too.
  ::usleep(20000);
  ASSERT_EQ(::unlink((root_ + "/tk/later.h").c_str()), 0);
  EXPECT_TRUE(scanner.Scan(source, Dirs())->headers[1].path.empty());
  EXPECT_EQ(scanner.reused(), 0u);
}

TEST_F(IncludeScannerTest, SourcesAndFoldersAreKeptApart) {
  IncludeScanner scanner(Embedded, /*racy_window_ns=*/0);
  const std::string in_user = Line(30), in_tk = Line(30);
  Write("user/x.h", in_user);
  Write("tk/x.h", in_tk);
  Write("tk/y.h", Line(30));
  auto user_first = scanner.Scan("#include <x.h>\n", Dirs());
  auto tk_first =
      scanner.Scan("#include <x.h>\n", {root_ + "/tk", root_ + "/user"});
  auto other = scanner.Scan("#include <y.h>\n", Dirs());
  EXPECT_EQ(user_first->headers.at(0).sha256,
            Sha256::Hex(Sha256::Hash(in_user)));
  EXPECT_EQ(tk_first->headers.at(0).sha256, Sha256::Hex(Sha256::Hash(in_tk)));
  EXPECT_EQ(other->headers.at(0).name, "y.h");
  EXPECT_EQ(scanner.scanned(), 3u);
}

TEST_F(IncludeScannerTest, OnlyEmbeddedIncludesNeedNoLookup) {
  IncludeScanner scanner(Embedded);
  auto scan =
      scanner.Scan("#include <fleetjit/copy.cuh>\n#include LAYER\n", Dirs());
  EXPECT_TRUE(scan->headers.empty());
  EXPECT_EQ(scan->computed_includes, 1);
  EXPECT_EQ(scanner.scanned() + scanner.reused(), 0u);
}

TEST_F(IncludeScannerTest, ThreadsScanningTogetherAgree) {
  Write("user/a.h", "#include <b.h>\n" + Line(40));
  Write("tk/b.h", Line(70));
  IncludeScanner scanner(Embedded, /*racy_window_ns=*/0);
  const std::string source = "#include <a.h>\n";
  const auto expected = Scan(source).key_records;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        if (scanner.Scan(source, Dirs())->key_records != expected)
          wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(scanner.scanned() + scanner.reused(), 400u);
  EXPECT_LE(scanner.scanned(), 8u);  // at most one per thread's shard
}

}  // namespace
}  // namespace fleetjit::jit
