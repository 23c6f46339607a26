#include "jit/artifact.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::jit {
namespace {

using ::fleetjit::testing::FreshSeed;
using ::fleetjit::testing::RandomArtifact;
using ::fleetjit::testing::Rng;
using ::fleetjit::testing::SameArtifact;

TEST(ArtifactTest, RoundTripsRandomArtifacts) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed);
  for (size_t image_bytes :
       {size_t{0}, size_t{1}, size_t{777}, size_t{65536}, size_t{1} << 20}) {
    Artifact a = RandomArtifact(rng, image_bytes);
    std::string bytes = SerializeArtifact(a);
    absl::StatusOr<Artifact> b = DeserializeArtifact(bytes);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(SameArtifact(a, *b));
    EXPECT_EQ(b->image, a.image);
    EXPECT_EQ(b->target, a.target);
    EXPECT_EQ(b->copy_impl, a.copy_impl);
    EXPECT_EQ(b->compile_ms, a.compile_ms);
    ASSERT_EQ(b->kernels.size(), a.kernels.size());
    for (size_t k = 0; k < a.kernels.size(); ++k) {
      EXPECT_EQ(b->kernels[k].lowered_name, a.kernels[k].lowered_name);
      ASSERT_EQ(b->kernels[k].params.size(), a.kernels[k].params.size());
      for (size_t p = 0; p < a.kernels[k].params.size(); ++p) {
        EXPECT_EQ(b->kernels[k].params[p].kind, a.kernels[k].params[p].kind);
        EXPECT_EQ(b->kernels[k].params[p].tensor_dtype,
                  a.kernels[k].params[p].tensor_dtype);
      }
    }
    EXPECT_EQ(b->thunk_object, a.thunk_object);
  }
}

TEST(ArtifactTest, DefaultArtifactRoundTrips) {
  Artifact a;
  absl::StatusOr<Artifact> b = DeserializeArtifact(SerializeArtifact(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(SameArtifact(a, *b));
}

TEST(ArtifactTest, NonFiniteCompileTimeIsWrittenAsZero) {
  Artifact a;
  a.compile_ms = std::nan("");
  absl::StatusOr<Artifact> b = DeserializeArtifact(SerializeArtifact(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->compile_ms, 0.0);
}

TEST(ArtifactTest, EveryTruncationIsRejected) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed);
  std::string bytes = SerializeArtifact(RandomArtifact(rng, 3000));
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<Artifact> a =
        DeserializeArtifact(absl::string_view(bytes.data(), n));
    ASSERT_FALSE(a.ok()) << "prefix of " << n << " bytes accepted";
    ASSERT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
  }
}

TEST(ArtifactTest, TrailingBytesAreRejected) {
  Rng rng(FreshSeed());
  std::string bytes = SerializeArtifact(RandomArtifact(rng, 100));
  bytes.push_back(static_cast<char>(1 + rng() % 255));
  absl::StatusOr<Artifact> a = DeserializeArtifact(bytes);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(a.status().message().find("trailing"), absl::string_view::npos);
}

// Random damage must either be rejected as DATA_LOSS or (when it only
// changed string content) parse; never crash or read out of bounds (run
// with -DFJ_SANITIZE=ON to have ASan check the latter).
TEST(ArtifactTest, RandomDamageNeverCrashes) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed);
  std::string good = SerializeArtifact(RandomArtifact(rng, 500));
  int rejected = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string bad = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bad[rng() % bad.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    absl::StatusOr<Artifact> a = DeserializeArtifact(bad);
    if (!a.ok()) {
      ASSERT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  for (int trial = 0; trial < 2000; ++trial) {
    absl::StatusOr<Artifact> a =
        DeserializeArtifact(::fleetjit::testing::RandomBytes(rng, rng() % 200));
    ASSERT_FALSE(a.ok());
  }
}

// Offsets of fields in the fixed prefix of the encoding.
constexpr size_t kVersionOffset = 8;
constexpr size_t kArchOffset = 12;
constexpr size_t kSuffixOffset = 16;
constexpr size_t kPtxFlagOffset = 17;
constexpr size_t kCopyImplOffset = 18;
constexpr size_t kImageLengthOffset = 20;

TEST(ArtifactTest, RejectsBadHeaderFieldsWithReasons) {
  Rng rng(FreshSeed());
  Artifact artifact = RandomArtifact(rng, 64);
  const std::string good = SerializeArtifact(artifact);
  struct Case {
    size_t offset;
    uint8_t value;
    const char* reason;
  } cases[] = {
      {0, 'X', "magic"},
      {kVersionOffset, 99, "version"},
      {kSuffixOffset, 'z', "target suffix"},
      {kPtxFlagOffset, 2, "ptx flag"},
      {kCopyImplOffset, 3, "copy implementation"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    bad[c.offset] = static_cast<char>(c.value);
    absl::StatusOr<Artifact> a = DeserializeArtifact(bad);
    ASSERT_FALSE(a.ok()) << c.reason;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(a.status().message().find(c.reason), absl::string_view::npos)
        << a.status();
  }
  std::string bad = good;
  bad[kArchOffset + 3] = static_cast<char>(0x80);
  EXPECT_FALSE(DeserializeArtifact(bad).ok());
}

TEST(ArtifactTest, HugeLengthsAreRejectedWithoutAllocating) {
  Rng rng(FreshSeed());
  std::string bytes = SerializeArtifact(RandomArtifact(rng, 16));
  for (uint64_t length : {~uint64_t{0}, uint64_t{1} << 62, uint64_t{1} << 40}) {
    std::string bad = bytes;
    std::memcpy(bad.data() + kImageLengthOffset, &length, sizeof(length));
    absl::StatusOr<Artifact> a = DeserializeArtifact(bad);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  }
}

TEST(ArtifactTest, HugeKernelCountIsRejected) {
  Artifact a;
  a.image = "x";
  std::string bytes = SerializeArtifact(a);
  // The kernel count sits right before the (empty) thunk string and the
  // globals' count (version 2).
  const size_t count_offset = bytes.size() - 4 - 8 - 4;
  uint32_t count = 0xfffffff0u;
  std::memcpy(bytes.data() + count_offset, &count, sizeof(count));
  absl::StatusOr<Artifact> b = DeserializeArtifact(bytes);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("kernel count"), absl::string_view::npos)
      << b.status();
}

TEST(ArtifactTest, FindKernelByNameOrSymbol) {
  Artifact a;
  a.kernels.push_back({"scale<float>", "_Z5scaleIfEvPT_", {}, 0});
  a.kernels.push_back({"saxpy", "saxpy", {}, 0});
  ASSERT_NE(a.FindKernel("scale<float>"), nullptr);
  EXPECT_EQ(a.FindKernel("scale<float>")->lowered_name, "_Z5scaleIfEvPT_");
  EXPECT_EQ(a.FindKernel("_Z5scaleIfEvPT_"), &a.kernels[0]);
  EXPECT_EQ(a.FindKernel("saxpy"), &a.kernels[1]);
  EXPECT_EQ(a.FindKernel("scale<double>"), nullptr);
  EXPECT_EQ(a.FindKernel(""), nullptr);
}

// Since ABI 1.3 the encoding is version 2: the globals' name expressions
// follow the thunk object. A version-1 entry (written before) still loads,
// with no globals, and keeps its log.
TEST(ArtifactTest, GlobalsRoundTripAndVersionOneEntriesStillLoad) {
  const uint64_t seed = FreshSeed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  Rng rng(seed);
  Artifact a = RandomArtifact(rng, 333);
  a.log = absl::StrCat("warning #177-D: variable ", rng(), " unused");
  a.globals = {{"&ns::table", "_ZN2ns5tableE"},
               {absl::StrCat("&tvar<", rng() % 1000, ">"), "_Z4tvarIiE"}};
  absl::StatusOr<Artifact> b = DeserializeArtifact(SerializeArtifact(a));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->globals.size(), 2u);
  EXPECT_EQ(b->globals[1].name, a.globals[1].name);
  EXPECT_EQ(b->globals[1].lowered_name, "_Z4tvarIiE");
  EXPECT_EQ(b->log, a.log);

  // Version 1: the same bytes without the globals' count, version field 1.
  a.globals.clear();
  std::string v1 = SerializeArtifact(a);
  ASSERT_EQ(v1.substr(v1.size() - 4), std::string(4, '\0'));
  v1.resize(v1.size() - 4);
  v1[8] = 1;
  absl::StatusOr<Artifact> old = DeserializeArtifact(v1);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_TRUE(old->globals.empty());
  EXPECT_EQ(old->log, a.log);
  EXPECT_EQ(old->image, a.image);
  // A version-1 entry with version 2's tail is malformed (trailing bytes).
  std::string v1_with_tail = SerializeArtifact(a);
  v1_with_tail[8] = 1;
  EXPECT_FALSE(DeserializeArtifact(v1_with_tail).ok());
  // A version from the future is refused.
  std::string v3 = SerializeArtifact(a);
  v3[8] = 3;
  EXPECT_FALSE(DeserializeArtifact(v3).ok());
}

TEST(ArtifactTest, GlobalSymbolTakesEitherSpellingOfANameExpression) {
  Artifact a;
  a.globals = {{"&ns::table", "_ZN2ns5tableE"}, {"tvar<int>", "_Z4tvarIiE"}};
  EXPECT_EQ(a.GlobalSymbol("&ns::table"), "_ZN2ns5tableE");
  EXPECT_EQ(a.GlobalSymbol("ns::table"), "_ZN2ns5tableE");
  EXPECT_EQ(a.GlobalSymbol("&tvar<int>"), "_Z4tvarIiE");
  EXPECT_EQ(a.GlobalSymbol("counter"), "counter");
  EXPECT_EQ(a.GlobalSymbol("&counter"), "counter");
}

}  // namespace
}  // namespace fleetjit::jit
