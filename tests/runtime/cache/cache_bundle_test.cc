// The bundle tier (runtime/cache/cache_bundle.h): what `fleetjit cache
// export` writes and a server serves from. Entries round-trip by full and by
// compiler-agnostic key; the seal (HMAC under the fleet key, or a checksum)
// and each entry's own checks refuse damage; the owner rule holds without a
// key; a write never replaces a file that is not a bundle.
#include "runtime/cache/cache_bundle.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/hmac_sha256.h"
#include "gtest/gtest.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/module_cache.h"
#include "runtime/cache/published_compiler.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ArtifactFor;
using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyFor;
using ::fleetjit::testing::KeyInputsFor;
using ::fleetjit::testing::ReadFile;
using ::fleetjit::testing::SameArtifact;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::WriteFile;

constexpr char kFleetKey[] =
    "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
constexpr char kOtherKey[] =
    "aa1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

std::string RawKey(absl::string_view text) { return *ParseFleetKey(text); }

// The whole cache entry of item `index`, as the disk tier stores it.
std::string EntryFor(uint64_t seed, int index, size_t image = 2048) {
  return EncodeCacheEntry(
      KeyFor(seed, index).canonical,
      jit::SerializeArtifact(ArtifactFor(seed, index, image)));
}

class CacheBundleTest : public ::testing::Test {
 protected:
  CacheBundleTest() : seed_(FreshSeed()), path_(dir_.Sub("kernels.fjb")) {}

  // Writes items [0, n) into the bundle, sealed with `key` (text, "" none).
  void Write(int n, absl::string_view key = "") {
    std::vector<std::string> entries;
    for (int i = 0; i < n; ++i) entries.push_back(EntryFor(seed_, i));
    ASSERT_TRUE(
        WriteCacheBundle(path_, entries, key.empty() ? "" : RawKey(key)).ok());
  }
  absl::StatusOr<std::unique_ptr<CacheBundle>> Open(absl::string_view key) {
    return CacheBundle::Open(path_, key, log_);
  }
  // Flips one byte of the bundle file.
  void Flip(uint64_t offset) {
    std::string bytes = ReadFile(path_);
    ASSERT_LT(offset, bytes.size());
    bytes[offset] ^= 0x40;
    WriteFile(path_, bytes);
  }

  const uint64_t seed_;
  TempDir dir_;
  const std::string path_;
  std::vector<std::string> lines_;
  Logger log_{LogLevel::kDebug, [this](LogLevel, absl::string_view line) {
                lines_.emplace_back(line);
              }};
};

TEST_F(CacheBundleTest, EveryEntryRoundTripsByItsKey) {
  SCOPED_TRACE(::testing::Message() << "seed " << seed_);
  Write(5);
  auto bundle = Open("");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->entries(), 5u);
  EXPECT_FALSE((*bundle)->sealed_with_key());
  for (int i = 0; i < 5; ++i) {
    std::optional<jit::Artifact> a = (*bundle)->Load(KeyFor(seed_, i));
    ASSERT_TRUE(a.has_value()) << i;
    EXPECT_TRUE(SameArtifact(*a, ArtifactFor(seed_, i, 2048))) << i;
  }
  EXPECT_FALSE((*bundle)->Load(KeyFor(seed_, 5)).has_value());
  for (const CacheEntryInfo& e : (*bundle)->List()) {
    EXPECT_EQ(e.problem, "") << e.digest;
    EXPECT_EQ(e.target, "sm_90a");
  }
  EXPECT_EQ((*bundle)->rejected(), 0u);
}

TEST_F(CacheBundleTest, DuplicateEntriesAreWrittenOnce) {
  std::vector<std::string> entries = {EntryFor(seed_, 0), EntryFor(seed_, 1),
                                      EntryFor(seed_, 0)};
  ASSERT_TRUE(WriteCacheBundle(path_, entries, "").ok());
  auto bundle = Open("");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_EQ((*bundle)->entries(), 2u);
}

// A host without NVRTC looks up the key with no compiler: the bundle
// stands in for the remote tier's pointer, under the same rule.
TEST_F(CacheBundleTest, AHostWithoutACompilerFindsTheEntryByItsAgnosticKey) {
  Write(3);
  auto bundle = Open("");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  const CacheKey agnostic = CompilerAgnosticKey(KeyInputsFor(seed_, 1));
  std::string seen;
  auto published =
      (*bundle)->LoadPublished(agnostic, [&](absl::string_view compiler) {
        seen = std::string(compiler);
        return CheckPublishedCompiler(compiler, "sm_90a", 13000);
      });
  ASSERT_TRUE(published.has_value());
  EXPECT_EQ(seen, KeyInputsFor(seed_, 1).compiler);
  EXPECT_EQ(published->key.digest, KeyFor(seed_, 1).digest);
  EXPECT_TRUE(SameArtifact(published->artifact, ArtifactFor(seed_, 1, 2048)));
  // A recorded compiler this driver cannot use is not taken.
  EXPECT_FALSE((*bundle)
                   ->LoadPublished(agnostic,
                                   [](absl::string_view compiler) {
                                     return CheckPublishedCompiler(
                                         compiler, "sm_90a", 12080);
                                   })
                   .has_value());
  // Any other input differing is a miss.
  CacheKeyInputs other = KeyInputsFor(seed_, 1);
  other.target = "sm_80";
  EXPECT_FALSE(
      (*bundle)
          ->LoadPublished(CompilerAgnosticKey(other),
                          [](absl::string_view) { return absl::OkStatus(); })
          .has_value());
  // And a full key never matches an agnostic record.
  EXPECT_FALSE((*bundle)->Load(agnostic).has_value());
}

TEST_F(CacheBundleTest, WithAFleetKeyOnlyABundleSignedWithItOpens) {
  Write(2, kFleetKey);
  auto bundle = Open(kFleetKey);
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_TRUE((*bundle)->sealed_with_key());
  EXPECT_TRUE((*bundle)->Load(KeyFor(seed_, 0)).has_value());

  auto other = Open(kOtherKey);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "signature"))
      << other.status();

  // Unsigned, while the reader has a key: refused whole.
  Write(2);
  auto unsigned_bundle = Open(kFleetKey);
  ASSERT_FALSE(unsigned_bundle.ok());
  EXPECT_TRUE(
      absl::StrContains(unsigned_bundle.status().message(), "not signed"))
      << unsigned_bundle.status();

  // A malformed key is the configuration's error.
  EXPECT_EQ(Open("short").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CacheBundleTest, ASignedBundleWithoutAKeyHereIsTrustedAsItsOwnersFile) {
  Write(1, kFleetKey);
  auto bundle = Open("");
  ASSERT_TRUE(bundle.ok()) << bundle.status();
  EXPECT_TRUE((*bundle)->Load(KeyFor(seed_, 0)).has_value());
  bool said = false;
  for (const std::string& l : lines_) {
    said = said || absl::StrContains(l, "not checked");
  }
  EXPECT_TRUE(said) << "the signature left unchecked is logged";
}

TEST_F(CacheBundleTest, AnyChangedIndexOrHeaderByteRefusesTheBundle) {
  Write(3, kFleetKey);
  const std::string good = ReadFile(path_);
  const uint64_t index_offset = good.size() - 3 * kBundleIndexRecordBytes;
  for (uint64_t offset :
       {uint64_t{16}, uint64_t{40}, index_offset, index_offset + 70,
        index_offset + 2 * kBundleIndexRecordBytes + 100}) {
    WriteFile(path_, good);
    Flip(offset);
    EXPECT_FALSE(Open(kFleetKey).ok()) << "byte " << offset;
  }
  // Unsigned: the checksum catches the same.
  Write(3);
  const std::string plain = ReadFile(path_);
  WriteFile(path_, plain.substr(0, plain.size() - 1));
  EXPECT_FALSE(Open("").ok()) << "truncated";
  WriteFile(path_, plain);
  Flip(plain.size() - 5);
  EXPECT_FALSE(Open("").ok()) << "index damaged";
}

// Entries are not hashed when the bundle opens: each is checked when read.
TEST_F(CacheBundleTest, ADamagedEntryIsRefusedAndCountedOthersServe) {
  Write(3, kFleetKey);
  auto probe = Open(kFleetKey);
  ASSERT_TRUE(probe.ok());
  // The entry at the lowest offset is the first in digest order.
  std::vector<CacheEntryInfo> list = (*probe)->List();
  probe->reset();
  int damaged = -1;
  for (int i = 0; i < 3; ++i) {
    if (KeyFor(seed_, i).digest == list[0].digest) damaged = i;
  }
  ASSERT_GE(damaged, 0);
  // A payload byte near the entry's end (its image), then a key byte.
  const size_t entry_bytes = EntryFor(seed_, damaged).size();
  for (uint64_t offset : {uint64_t{kBundleHeaderBytes + entry_bytes - 10},
                          uint64_t{kBundleHeaderBytes + 64 + 20}}) {
    Write(3, kFleetKey);
    Flip(offset);
    auto bundle = Open(kFleetKey);
    ASSERT_TRUE(bundle.ok()) << bundle.status();
    EXPECT_FALSE((*bundle)->Load(KeyFor(seed_, damaged)).has_value());
    EXPECT_EQ((*bundle)->rejected(), 1u);
    for (int i = 0; i < 3; ++i) {
      if (i != damaged) EXPECT_TRUE((*bundle)->Load(KeyFor(seed_, i))) << i;
    }
    int bad = 0;
    for (const CacheEntryInfo& e : (*bundle)->List()) bad += !e.problem.empty();
    EXPECT_EQ(bad, 1);
  }
}

TEST_F(CacheBundleTest, WithoutAKeyTheFileMustBeOwnedAndNotWritableByOthers) {
  Write(1);
  ASSERT_EQ(::chmod(path_.c_str(), 0664), 0);
  auto loose = Open("");
  ASSERT_FALSE(loose.ok());
  EXPECT_TRUE(absl::StrContains(loose.status().message(), "writable"))
      << loose.status();
  // Signed and checked with the key, the mode does not matter.
  Write(1, kFleetKey);
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  EXPECT_TRUE(Open(kFleetKey).ok());
  // A folder is not a bundle.
  EXPECT_FALSE(CacheBundle::Open(dir_.path(), "", log_).ok());
  EXPECT_EQ(CacheBundle::Open(dir_.Sub("none.fjb"), "", log_).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(CacheBundleTest, AWriteReplacesABundleButNoOtherFile) {
  Write(1);
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  Write(2);  // replaces the earlier bundle
  EXPECT_EQ((*Open(""))->entries(), 2u);

  const std::string notes = dir_.Sub("notes.txt");
  WriteFile(notes, "my notes");
  absl::Status status =
      WriteCacheBundle(notes, {EntryFor(seed_, 0)}, /*fleet_key=*/"");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_EQ(ReadFile(notes), "my notes");
  // Nothing is left beside it.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2);
  // A link is not followed or replaced.
  const std::string link = dir_.Sub("link.fjb");
  ASSERT_EQ(::symlink(path_.c_str(), link.c_str()), 0);
  EXPECT_FALSE(WriteCacheBundle(link, {EntryFor(seed_, 0)}, "").ok());
  // A damaged entry is refused before anything is written.
  std::string bad = EntryFor(seed_, 0);
  bad[bad.size() - 1] ^= 1;
  EXPECT_EQ(WriteCacheBundle(dir_.Sub("bad.fjb"), {bad}, "").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("bad.fjb")));
}

// The module cache serves the bundle before the disk and never builds
// what it holds; a remote URL file:///PATH names a bundle too.
TEST_F(CacheBundleTest, TheModuleCacheServesItAndNeverBuildsWhatItHolds) {
  Write(2, kFleetKey);
  for (bool by_url : {false, true}) {
    CacheConfig config;
    config.dir = dir_.Sub(by_url ? "cache-url" : "cache");
    config.remote.fleet_key = kFleetKey;
    if (by_url) {
      config.remote.url = "file://" + path_;
    } else {
      config.bundle = path_;
    }
    ModuleCache cache(config);
    ASSERT_NE(cache.bundle(), nullptr) << cache.bundle_status();
    auto r = cache.GetOrBuild(KeyFor(seed_, 1),
                              []() -> absl::StatusOr<jit::Artifact> {
                                ADD_FAILURE() << "built a bundled entry";
                                return jit::Artifact();
                              });
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheSource::kBundle);
    EXPECT_TRUE(SameArtifact(*r->artifact, ArtifactFor(seed_, 1, 2048)));
    // Not copied to disk: the bundle is already local.
    EXPECT_EQ(cache.stats().disk_entries, 0u);
    EXPECT_EQ(cache.stats().bundle_hits, 1u);
    auto published =
        cache.GetPublished(CompilerAgnosticKey(KeyInputsFor(seed_, 0)),
                           [](absl::string_view) { return absl::OkStatus(); });
    ASSERT_TRUE(published.ok()) << published.status();
    EXPECT_EQ(published->source, CacheSource::kBundle);
    bool on = false;
    for (const ModuleCache::TierState& t : cache.Tiers()) {
      if (t.tier == "bundle") on = t.on;
    }
    EXPECT_TRUE(on);
  }
  // Refused (another fleet's key): the tier is off, says why, and builds go
  // on.
  CacheConfig config;
  config.dir = dir_.Sub("cache-other");
  config.bundle = path_;
  config.remote.fleet_key = kOtherKey;
  ModuleCache cache(config);
  EXPECT_EQ(cache.bundle(), nullptr);
  EXPECT_TRUE(absl::StrContains(cache.bundle_status().message(), "signature"));
  auto r = cache.GetOrBuild(KeyFor(seed_, 1), [&] {
    return absl::StatusOr<jit::Artifact>(ArtifactFor(seed_, 1, 2048));
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, CacheSource::kCompiled);
}

}  // namespace
}  // namespace fleetjit
