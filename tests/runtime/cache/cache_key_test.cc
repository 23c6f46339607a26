#include "runtime/cache/cache_key.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <set>

#include "absl/strings/match.h"
#include "base/sha256.h"
#include "gtest/gtest.h"
#include "platform/nvrtc_locate.h"
#include "tests/common/env.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ScopedEnv;

using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::KeyInputsFor;
using ::fleetjit::testing::RandomBytes;
using ::fleetjit::testing::Rng;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::WriteFile;

// --- SHA-256 --------------------------------------------------------------

// FIPS 180-4 examples and the NIST "million a" vector.
TEST(Sha256Test, KnownAnswersWithEveryImplementation) {
  struct Vector {
    std::string input;
    const char* digest;
  } vectors[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (bool hardware : {false, true}) {
    bool previous = internal::UseSha256Hardware(hardware);
    for (const Vector& v : vectors) {
      EXPECT_EQ(Sha256::Hex(Sha256::Hash(v.input)), v.digest)
          << "hardware=" << hardware << " length=" << v.input.size();
    }
    internal::UseSha256Hardware(previous);
  }
}

TEST(Sha256Test, HardwareMatchesPortableOnRandomChunkedInput) {
  if (!internal::Sha256HardwareAvailable()) {
    GTEST_SKIP() << "this CPU has no SHA extensions";
  }
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    std::string data = RandomBytes(rng, rng() % 3000);
    internal::UseSha256Hardware(false);
    Sha256::Digest portable = Sha256::Hash(data);
    internal::UseSha256Hardware(true);
    Sha256 chunked;
    for (size_t pos = 0; pos < data.size();) {
      size_t n = std::min<size_t>(rng() % 130, data.size() - pos);
      chunked.Update(data.data() + pos, n);
      pos += n;
    }
    ASSERT_EQ(chunked.Finish(), portable) << "length " << data.size();
  }
}

// --- Keys -----------------------------------------------------------------

TEST(CacheKeyTest, UnchangedInputsGiveTheSameKey) {
  const uint64_t seed = FreshSeed();
  CacheKeyInputs in = KeyInputsFor(seed, 0);
  CacheKey a = MakeCacheKey(in);
  CacheKey b = MakeCacheKey(KeyInputsFor(seed, 0));
  EXPECT_EQ(a.digest, b.digest);
  EXPECT_EQ(a.canonical, b.canonical);
  EXPECT_TRUE(IsCacheDigest(a.digest));
  EXPECT_EQ(a.digest, Sha256::Hex(Sha256::Hash(a.canonical)));
}

constexpr char kPinnedDigest[] =
    "4cf012184ac43a6f879410291572329ab42d3f10c3db84a86151ebd1afbb9421";

// Pins the encoding: if this changes, bump kCacheFormatVersion so that old
// entries stop matching instead of being misread.
TEST(CacheKeyTest, EncodingIsPinned) {
  CacheKeyInputs in;
  in.source = "extern \"C\" __global__ void k(float* x) { x[0] = 1; }";
  in.headers = {{"b.cuh", "// b"}, {"a.cuh", "// a"}};
  in.options = {"-std=c++17", "-DFJ_COPY_IMPL=2"};
  in.target = "sm_90a";
  in.copy_impl = "tma";
  in.compiler = "nvrtc 13.0 libnvrtc.so.13 size=109338064";
  in.driver_version = 0;
  in.name_expressions = {"k"};
  CacheKey key = MakeCacheKey(in);
  EXPECT_EQ(key.canonical.substr(0, 34),
            "format=1:1\ntarget=6:sm_90a\ncopy_im");
  EXPECT_EQ(CanonicalKeyField(key.canonical, "target"), "sm_90a");
  EXPECT_EQ(CanonicalKeyField(key.canonical, "compiler"), in.compiler);
  EXPECT_EQ(CanonicalKeyField(key.canonical, "source_sha256"),
            Sha256::Hex(Sha256::Hash(in.source)));
  EXPECT_EQ(key.digest, kPinnedDigest);
}

TEST(CacheKeyTest, EveryFieldChangesTheKey) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  const CacheKeyInputs base = KeyInputsFor(seed, 1);
  Rng rng(seed);
  std::vector<std::pair<std::string, std::function<void(CacheKeyInputs&)>>>
      mutations = {
          {"source", [&](auto& in) { in.source += " "; }},
          {"source byte",
           [&](auto& in) { in.source[rng() % in.source.size()] ^= 1; }},
          {"one header's content",
           [&](auto& in) { in.headers[1].second += "x"; }},
          {"one header's name", [&](auto& in) { in.headers[2].first += "x"; }},
          {"an added header",
           [&](auto& in) { in.headers.emplace_back("n.h", ""); }},
          {"a removed header", [&](auto& in) { in.headers.pop_back(); }},
          {"an option", [&](auto& in) { in.options[1] += "1"; }},
          {"an added option", [&](auto& in) { in.options.push_back("-G"); }},
          {"option order",
           [&](auto& in) { std::swap(in.options[0], in.options[1]); }},
          {"target", [&](auto& in) { in.target = "sm_90"; }},
          {"target kind", [&](auto& in) { in.target = "compute_90a"; }},
          {"copy_impl", [&](auto& in) { in.copy_impl = "cp_async"; }},
          {"compiler",
           [&](auto& in) { in.compiler = "nvrtc 13.1 libnvrtc.so.13 size=1"; }},
          {"driver_version", [&](auto& in) { in.driver_version = 13010; }},
          {"name_expressions",
           [&](auto& in) { in.name_expressions.push_back("k<int>"); }},
          {"emit_ptx", [&](auto& in) { in.emit_ptx = !in.emit_ptx; }},
      };
  std::set<std::string> digests = {MakeCacheKey(base).digest};
  for (auto& [what, mutate] : mutations) {
    CacheKeyInputs in = base;
    mutate(in);
    CacheKey key = MakeCacheKey(in);
    EXPECT_TRUE(digests.insert(key.digest).second)
        << what << " did not change the key";
  }
}

TEST(CacheKeyTest, HeaderOrderDoesNotMatter) {
  CacheKeyInputs in = KeyInputsFor(FreshSeed(), 2);
  CacheKey a = MakeCacheKey(in);
  std::reverse(in.headers.begin(), in.headers.end());
  EXPECT_EQ(MakeCacheKey(in).digest, a.digest);
}

TEST(CacheKeyTest, FieldBoundariesAreUnambiguous) {
  CacheKeyInputs a, b;
  a.options = {"-DA -DB"};
  b.options = {"-DA", "-DB"};
  EXPECT_NE(MakeCacheKey(a).digest, MakeCacheKey(b).digest);
  a = b = CacheKeyInputs();
  a.target = "sm_90";
  a.copy_impl = "a";
  b.target = "sm_90a";
  EXPECT_NE(MakeCacheKey(a).digest, MakeCacheKey(b).digest);
  a = b = CacheKeyInputs();
  a.headers = {{"x", "yz"}};
  b.headers = {{"xy", "z"}};
  EXPECT_NE(MakeCacheKey(a).digest, MakeCacheKey(b).digest);
}

TEST(CacheKeyTest, CanonicalKeyParses) {
  CacheKeyInputs in = KeyInputsFor(FreshSeed(), 3);
  in.options.push_back("-DWEIRD=\"a\nb=3:c\"");
  CacheKey key = MakeCacheKey(in);
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> records =
      ParseCanonicalKey(key.canonical);
  ASSERT_TRUE(records.ok()) << records.status();
  int options = 0;
  for (auto& [field, value] : *records) {
    if (field == "option") ++options;
    if (field == "option" && options == 3) EXPECT_EQ(value, in.options[2]);
  }
  EXPECT_EQ(options, 3);
  for (absl::string_view bad : {"x", "a=1:", "a=5:abc\n", "=0:\n", "a=1:xy",
                                "a=-1:\n", "a=99999999999999999999999:x\n"}) {
    EXPECT_FALSE(ParseCanonicalKey(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseCanonicalKey("").ok());
}

TEST(CacheKeyTest, CanonicalReaderYieldsTheParsedRecordsAndStopsAtDamage) {
  CacheKeyInputs in = KeyInputsFor(FreshSeed(), 4);
  in.options.push_back("-DWEIRD=\"a\nb=3:c\"");
  const CacheKey key = MakeCacheKey(in);
  auto records = ParseCanonicalKey(key.canonical);
  ASSERT_TRUE(records.ok()) << records.status();
  CanonicalReader reader(key.canonical);
  absl::string_view field, value;
  for (const auto& [want_field, want_value] : *records) {
    ASSERT_FALSE(reader.done());
    ASSERT_TRUE(reader.Next(field, value).ok());
    EXPECT_EQ(field, want_field);
    EXPECT_EQ(value, want_value);
  }
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(reader.Next(field, value).code(), absl::StatusCode::kDataLoss);
  // A record cut short: the records before it read, then DATA_LOSS.
  CanonicalReader cut("a=1:x\nb=5:ab\n");
  ASSERT_TRUE(cut.Next(field, value).ok());
  EXPECT_EQ(value, "x");
  EXPECT_EQ(cut.Next(field, value).code(), absl::StatusCode::kDataLoss);
}

TEST(CacheKeyTest, IsCacheDigestAcceptsOnlyLowercaseHex) {
  EXPECT_TRUE(IsCacheDigest(std::string(64, 'a')));
  EXPECT_FALSE(IsCacheDigest(std::string(64, 'A')));
  EXPECT_FALSE(IsCacheDigest(std::string(63, 'a')));
  EXPECT_FALSE(IsCacheDigest("../" + std::string(61, 'a')));
}

// --- The NVRTC identity ---------------------------------------------------

TEST(NvrtcLocateTest, IdentityFromTheVersionedRealFile) {
  TempDir dir;
  Rng rng(FreshSeed());
  std::string content = RandomBytes(rng, 1000 + rng() % 1000);
  WriteFile(dir.Sub("libnvrtc.so.13.0.88"), content);
  ASSERT_EQ(::symlink("libnvrtc.so.13.0.88", dir.Sub("libnvrtc.so.13").c_str()),
            0);
  absl::StatusOr<std::string> id = CompilerIdentity(dir.Sub("libnvrtc.so.13"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id,
            absl::StrCat("nvrtc 13.0.88 libnvrtc.so.13 size=", content.size()));
  // An explicit path to the versioned file names the same compiler.
  EXPECT_EQ(*CompilerIdentity(dir.Sub("libnvrtc.so.13.0.88")), *id);
}

TEST(NvrtcLocateTest, IdentityFromTheBuiltinsBesideIt) {
  TempDir dir;
  Rng rng(FreshSeed());
  std::string content = RandomBytes(rng, 1000 + rng() % 1000);
  WriteFile(dir.Sub("libnvrtc.so.13"), content);
  WriteFile(dir.Sub("libnvrtc-builtins.so.13.0"), "b");
  WriteFile(dir.Sub("libnvrtc-builtins.so.12.9"), "b");  // other major: ignored
  absl::StatusOr<std::string> id = CompilerIdentity(dir.Sub("libnvrtc.so.13"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id,
            absl::StrCat("nvrtc 13.0 libnvrtc.so.13 size=", content.size()));
  // A rebuilt library of another size is another compiler.
  WriteFile(dir.Sub("libnvrtc.so.13"), content + "x");
  EXPECT_NE(*CompilerIdentity(dir.Sub("libnvrtc.so.13")), *id);
}

// A missing NVRTC is a missing dependency: UNAVAILABLE (fleetjit.h), which
// FJ_RUNTIME_PRELOAD_NVRTC and builds report. CompilerIdentity takes a path
// already resolved: one gone since is NOT_FOUND.
TEST(NvrtcLocateTest, MissingLibraryIsUnavailable) {
  EXPECT_EQ(CompilerIdentity("/nonexistent/libnvrtc.so.13").status().code(),
            absl::StatusCode::kNotFound);
  absl::Status missing =
      ResolveNvrtcLibrary("/nonexistent/libnvrtc.so.13").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnavailable) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), "FLEETJIT_LIBNVRTC"))
      << missing;
}

TEST(NvrtcLocateTest, ResolvesExplicitPathThenLdLibraryPath) {
  TempDir dir;
  WriteFile(dir.Sub("libnvrtc.so.13"), "not really a library");
  EXPECT_EQ(*ResolveNvrtcLibrary(dir.Sub("libnvrtc.so.13")),
            dir.Sub("libnvrtc.so.13"));
  ScopedEnv env("LD_LIBRARY_PATH",
                absl::StrCat("/nonexistent::", dir.path(), "/"));
  EXPECT_EQ(*ResolveNvrtcLibrary(""), dir.Sub("libnvrtc.so.13"));
}

TEST(NvrtcLocateTest, PrefersMajor13Over12) {
  TempDir a, b;
  WriteFile(a.Sub("libnvrtc.so.12"), "12");
  WriteFile(b.Sub("libnvrtc.so.13"), "13");
  ScopedEnv env("LD_LIBRARY_PATH", absl::StrCat(a.path(), ":", b.path()));
  EXPECT_EQ(*ResolveNvrtcLibrary(""), b.Sub("libnvrtc.so.13"));
}

TEST(NvrtcLocateTest, InstalledNvrtcHasAnIdentity) {
  absl::StatusOr<std::string> path = ResolveNvrtcLibrary("");
  if (!path.ok()) GTEST_SKIP() << path.status();
  absl::StatusOr<std::string> id = CompilerIdentity(*path);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rfind("nvrtc 1", 0), 0u) << *id;
  std::cout << *path << " -> " << *id << "\n";
}

}  // namespace
}  // namespace fleetjit
