// The tuning layer on the CPU: space expansion and its refusals, the record
// encoding, the tuning loop over a fake backend (a wrong candidate never
// wins, noise is retimed then flagged, faults and hangs stop the run), and
// tuning entries in the cache's memory, disk and remote tiers (signature and
// key checks).
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/hmac_sha256.h"
#include "gtest/gtest.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/module_cache.h"
#include "runtime/cache/redis_client.h"
#include "runtime/cache/remote_tier.h"
#include "runtime/launch/wire.h"
#include "runtime/tune/tune_record.h"
#include "runtime/tune/tune_space.h"
#include "runtime/tune/tuner.h"
#include "tests/common/redis_server.h"
#include "tests/common/seed.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::tune {
namespace {

using ::fleetjit::testing::RedisServer;
using ::fleetjit::testing::SeededRng;
using ::fleetjit::testing::TempDir;

TuneShape Block(uint32_t x, uint32_t smem = 0) {
  TuneShape s;
  s.block = {x, 1, 1};
  s.shared_bytes = smem;
  return s;
}

// ------------------------------------------------------------------ space

TEST(TuneSpaceTest, ExpandsMacroSetsTimesShapesWithGridsFromTheRule) {
  std::mt19937_64 rng = SeededRng("ExpandsMacroSets");
  const uint64_t extent = 1000 + rng() % 100000;
  const uint32_t bm[3] = {32u << (rng() % 3), 256, 1000};
  TuneSpace space;
  for (uint32_t b : bm) space.macro_sets.push_back(absl::StrCat("-DBM=", b));
  space.macro_sets.push_back("-DBM=0x40  -DSTAGES=3");
  space.shapes = {Block(128), Block(256, 4096)};
  space.grid.extent = {extent, 7, 0};
  space.grid.divisor = {"BM", "block.y", ""};
  auto all = ExpandSpace(space);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 8u);
  for (size_t i = 0; i < all->size(); ++i) {
    const TuneCandidate& c = (*all)[i];
    EXPECT_EQ(c.candidate_index, i);
    EXPECT_EQ(c.macro_index, i / 2);
    EXPECT_EQ(c.shape_index, i % 2);
    ASSERT_TRUE(c.grid_status.ok()) << c.grid_status;
    const uint64_t d = c.macro_index < 3 ? bm[c.macro_index] : 64;
    EXPECT_EQ(c.grid[0], (extent + d - 1) / d);
    EXPECT_EQ(c.grid[1], 7u);  // block.y = 1
    EXPECT_EQ(c.grid[2], 1u);
  }
  EXPECT_EQ((*all)[7].options,
            (std::vector<std::string>{"-DBM=0x40", "-DSTAGES=3"}));
}

// ceil(extent / divisor) for every extent, up to UINT64_MAX: no wrap to a
// grid of 0 blocks (which a launch of the winner would then refuse).
TEST(TuneSpaceTest, ExtentsUpToTheTopOfUint64NeverWrap) {
  std::mt19937_64 rng = SeededRng("ExtentsUpToTheTop");
  const uint64_t d = 1 + rng() % 1024;
  std::vector<uint64_t> extents = {UINT64_MAX, UINT64_MAX - d + 2,
                                   uint64_t{UINT32_MAX} * d,
                                   uint64_t{UINT32_MAX} * d + 1};
  for (int i = 0; i < 64; ++i) extents.push_back(rng() >> (rng() % 64));
  for (uint64_t extent : extents) {
    TuneSpace space;
    space.macro_sets = {absl::StrCat("-DBM=", d)};
    space.shapes = {Block(64)};
    space.grid.extent = {extent, 0, 0};
    space.grid.divisor = {"BM", "", ""};
    auto r = ExpandSpace(space);
    ASSERT_TRUE(r.ok()) << r.status();
    const unsigned __int128 want =
        (static_cast<unsigned __int128>(extent == 0 ? 1 : extent) + d - 1) / d;
    if (want > UINT32_MAX) {
      EXPECT_TRUE(absl::IsOutOfRange((*r)[0].grid_status))
          << extent << " / " << d << ": " << (*r)[0].grid_status;
      EXPECT_TRUE(absl::StrContains((*r)[0].grid_status.message(),
                                    "does not fit 32 bits"));
    } else {
      ASSERT_TRUE((*r)[0].grid_status.ok()) << (*r)[0].grid_status;
      EXPECT_EQ((*r)[0].grid[0], static_cast<uint32_t>(want))
          << extent << " / " << d;
    }
  }
}

TEST(TuneSpaceTest, RefusalsNameTheField) {
  TuneSpace empty;
  auto r = ExpandSpace(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "shapes")) << r.status();

  TuneSpace dup_macros;
  dup_macros.macro_sets = {"-DA=1 -DB=2", " -DA=1   -DB=2 "};
  dup_macros.shapes = {Block(64)};
  r = ExpandSpace(dup_macros);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "macro_sets[1]"))
      << r.status();

  TuneSpace dup_shapes;
  dup_shapes.shapes = {Block(64), Block(128), Block(64)};
  r = ExpandSpace(dup_shapes);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "shapes[2]"))
      << r.status();

  // A divisor naming a macro one set lacks refuses that candidate only.
  TuneSpace missing;
  missing.macro_sets = {"-DBM=64", "-DOTHER=1", "-DBM=x"};
  missing.shapes = {Block(64)};
  missing.grid.extent = {4096, 0, 0};
  missing.grid.divisor = {"BM", "", ""};
  r = ExpandSpace(missing);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)[0].grid_status.ok());
  EXPECT_EQ((*r)[0].grid[0], 64u);
  EXPECT_TRUE(absl::IsNotFound((*r)[1].grid_status)) << (*r)[1].grid_status;
  EXPECT_TRUE(absl::StrContains((*r)[2].grid_status.message(), "BM"));
}

TEST(TuneSpaceTest, CallbackGridsAreKeyedByWhatTheyReturn) {
  TuneSpace space;
  space.shapes = {Block(64), Block(128)};
  uint32_t scale = 3;
  space.grid.fn = [&](const TuneCandidate& c, uint32_t g[3]) -> absl::Status {
    if (c.shape.block[0] == 128) return absl::OutOfRangeError("no");
    g[0] = scale * c.shape.block[0];
    return absl::OkStatus();
  };
  auto a = ExpandSpace(space);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0].grid[0], 192u);
  EXPECT_FALSE((*a)[1].grid_status.ok());
  scale = 4;
  auto b = ExpandSpace(space);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(CanonicalSpace(*a), CanonicalSpace(*b));
  scale = 3;
  EXPECT_EQ(CanonicalSpace(*a), CanonicalSpace(*ExpandSpace(space)));
}

// ----------------------------------------------------------------- record

TuneRecord RandomRecord(std::mt19937_64& rng) {
  TuneRecord r;
  r.kernel = absl::StrCat("k", rng() % 1000, "\n=:odd");
  const size_t n = 1 + rng() % 6;
  for (size_t i = 0; i < n; ++i) {
    TuneRow row;
    row.macro_index = rng() % 5;
    row.shape_index = rng() % 5;
    row.macros = absl::StrCat("-DBM=", rng() % 512, " -DX=\"a=b\n\"");
    row.block = {static_cast<uint32_t>(rng() % 1024), 1, 2};
    row.shared_bytes = rng() % 100000;
    row.cluster = {static_cast<uint32_t>(rng() % 4), 0, 0};
    row.grid = {static_cast<uint32_t>(rng()), 3, 1};
    row.status = static_cast<RowStatus>(rng() % (kRowStatusLast + 1));
    row.message = absl::StrCat("msg ", rng());
    row.median_us = static_cast<double>(rng() % 100000) / 7.0;
    row.min_us = row.median_us / 2;
    row.spread = static_cast<double>(rng() % 100) / 1000.0;
    row.noisy = rng() % 2;
    row.samples = rng() % 50;
    row.batch = 1 + rng() % 64;
    r.rows.push_back(row);
  }
  r.rows[0].status = RowStatus::kOk;
  r.winner = 0;
  r.noisy = rng() % 2;
  r.tune_ms = static_cast<double>(rng() % 100000) / 3.0;
  return r;
}

TEST(TuneRecordTest, RoundTripsAndRefusesDamage) {
  std::mt19937_64 rng = SeededRng("TuneRecordRoundTrip");
  for (int t = 0; t < 20; ++t) {
    TuneRecord r = RandomRecord(rng);
    const std::string text = EncodeTuneRecord(r);
    auto back = DecodeTuneRecord(text);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(EncodeTuneRecord(*back), text);
    EXPECT_EQ(back->rows.size(), r.rows.size());
    EXPECT_EQ(back->rows.back().macros, r.rows.back().macros);
    EXPECT_DOUBLE_EQ(back->rows.back().median_us, r.rows.back().median_us);
    // Truncations and a changed character are refused, never misread.
    EXPECT_FALSE(DecodeTuneRecord(text.substr(0, text.size() / 2)).ok());
    EXPECT_FALSE(DecodeTuneRecord(text.substr(0, text.size() - 1)).ok());
    std::string flipped = text;
    const size_t at = text.find("status=");
    flipped[at + 9] = '9';  // "status=1:9": no such status
    EXPECT_FALSE(DecodeTuneRecord(flipped).ok());
  }
  // A winner that is not ok is refused.
  TuneRecord bad = RandomRecord(rng);
  bad.rows[0].status = RowStatus::kWrongOutput;
  EXPECT_FALSE(DecodeTuneRecord(EncodeTuneRecord(bad)).ok());
}

TEST(TuneRecordTest, RefusesARowCountOrDimsTheTextDoesNotHold) {
  std::mt19937_64 rng = SeededRng("TuneRecordRowCount");
  const TuneRecord r = RandomRecord(rng);
  const std::string text = EncodeTuneRecord(r);
  // The text with one field's value replaced, decoded.
  auto with = [&](absl::string_view field, absl::string_view old_value,
                  absl::string_view value) {
    const std::string from =
        absl::StrCat(field, "=", old_value.size(), ":", old_value, "\n");
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at == std::string::npos) return absl::OkStatus();
    t.replace(at, from.size(),
              absl::StrCat(field, "=", value.size(), ":", value, "\n"));
    return DecodeTuneRecord(t).status();
  };
  auto refused = [](const absl::Status& s, absl::string_view why) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), why)) << s;
  };
  const std::string rows = absl::StrCat(r.rows.size());
  // Far more rows than bytes: refused before anything is sized for them.
  refused(with("rows", rows, "999999999999"), "rows in");
  // One more row than written: the text ends inside it.
  refused(with("rows", rows, absl::StrCat(r.rows.size() + 1)),
          "truncated at row");
  // One fewer: the last row's fields are left over.
  refused(with("rows", rows, absl::StrCat(r.rows.size() - 1)),
          "fields after row");
  // Dims with a part missing, empty or one too many.
  const std::string block = absl::StrCat(
      r.rows[0].block[0], "x", r.rows[0].block[1], "x", r.rows[0].block[2]);
  for (absl::string_view dims : {"1x2", "1x2x3x4", "1xx3", "1x2x", "x1x2"}) {
    refused(with("block", block, dims), "bad dims");
  }
}

// ----------------------------------------------------------------- tuner

// A fake device: each candidate has a time per launch and an output it
// writes; Time() returns samples drawn around it (with optional noise).
class FakeBackend : public TuneBackend {
 public:
  struct Kernel {
    double us = 10;
    std::string output = "right";
    absl::Status build;
    absl::Status launch;  // returned by RunOnce
    bool sticky = false;
    double noise = 0;  // relative, uniform
  };
  std::vector<Kernel> kernels;
  std::optional<std::function<bool(size_t, const std::string&)>> check;
  std::mt19937_64 rng{1};
  int restores = 0;
  std::vector<size_t> built;
  size_t last = 0;
  bool poisoned = false;

  std::vector<absl::Status> BuildAll(const std::vector<TuneCandidate>& c,
                                     const std::vector<bool>& wanted) override {
    std::vector<absl::Status> out(c.size());
    for (size_t i = 0; i < c.size(); ++i) {
      if (!wanted[i]) continue;
      built.push_back(i);
      out[i] = kernels[i].build;
    }
    return out;
  }
  absl::Status RestoreOutputs() override {
    ++restores;
    current_ = "poison";
    return absl::OkStatus();
  }
  absl::Status RunOnce(size_t i, absl::Duration) override {
    EXPECT_FALSE(poisoned) << "ran after a sticky fault";
    EXPECT_EQ(current_, "poison") << "outputs not restored before the run";
    if (!kernels[i].launch.ok()) {
      poisoned = kernels[i].sticky;
      return kernels[i].launch;
    }
    current_ = kernels[i].output;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> ReadOutputs() override {
    return std::vector<std::string>{current_};
  }
  bool has_check() const override { return check.has_value(); }
  absl::StatusOr<bool> Check(size_t i,
                             const std::vector<std::string>& o) override {
    return (*check)(i, o[0]);
  }
  absl::StatusOr<double> Time(size_t i, uint32_t count,
                              absl::Duration) override {
    const Kernel& k = kernels[i];
    std::uniform_real_distribution<double> u(-k.noise, k.noise);
    return k.us * count * (1 + u(rng)) / 1000.0;
  }
  bool IsSticky(const absl::Status&) const override { return poisoned; }

 private:
  std::string current_ = "caller's";
};

std::vector<TuneCandidate> Candidates(size_t n) {
  TuneSpace space;
  for (size_t i = 0; i < n; ++i) {
    space.shapes.push_back(Block(static_cast<uint32_t>(32 * (i + 1))));
  }
  return *ExpandSpace(space);
}

TEST(TunerTest, FastestCorrectWinsAndAFastWrongOneNever) {
  std::mt19937_64 rng = SeededRng("FastestCorrectWins");
  for (int trial = 0; trial < 10; ++trial) {
    const size_t n = 3 + rng() % 5;
    FakeBackend b;
    b.kernels.resize(n);
    for (auto& k : b.kernels) k.us = 5 + static_cast<double>(rng() % 1000);
    // The fastest of all computes the wrong answer (never first: the first
    // one that runs is the reference).
    const size_t wrong = 1 + rng() % (n - 1);
    b.kernels[wrong].us = 1;
    b.kernels[wrong].output = "wrong";
    size_t best = n;
    for (size_t i = 0; i < n; ++i) {
      if (i != wrong && (best == n || b.kernels[i].us < b.kernels[best].us)) {
        best = i;
      }
    }
    auto r = RunTuning(Candidates(n), TuneSettings{}, "k", b);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->winner, best);
    EXPECT_EQ(r->rows[wrong].status, RowStatus::kWrongOutput);
    EXPECT_TRUE(absl::StrContains(r->rows[wrong].message, "byte 0"))
        << r->rows[wrong].message;
    EXPECT_NEAR(r->rows[best].median_us, b.kernels[best].us, 1e-6);
    EXPECT_FALSE(r->noisy);
    // Restored before each check run and once at the end.
    EXPECT_EQ(b.restores, static_cast<int>(n) + 1);
  }
}

TEST(TunerTest, TheCallersCheckDecidesEvenForTheFirstCandidate) {
  FakeBackend b;
  b.kernels.resize(3);
  b.kernels[0] = {1, "wrong"};
  b.kernels[1] = {9, "right"};
  b.kernels[2] = {5, "right"};
  b.check = [](size_t, const std::string& out) { return out == "right"; };
  auto r = RunTuning(Candidates(3), TuneSettings{}, "k", b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->winner, 2u);
  EXPECT_EQ(r->rows[0].status, RowStatus::kWrongOutput);
}

TEST(TunerTest, BuildFailuresRefusalsAndGridRefusalsAreSkipped) {
  TuneSpace space;
  space.macro_sets = {"-DBM=64", "-DNOBM=1"};
  space.shapes = {Block(32), Block(64)};
  space.grid.extent = {1 << 20, 0, 0};
  space.grid.divisor = {"BM", "", ""};
  auto cands = *ExpandSpace(space);
  FakeBackend b;
  b.kernels.resize(4);
  b.kernels[0].build = absl::InvalidArgumentError("error: BM undefined");
  b.kernels[1].launch = absl::OutOfRangeError("too many resources");
  auto r = RunTuning(cands, TuneSettings{}, "k", b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows[0].status, RowStatus::kBuildFailed);
  EXPECT_EQ(r->rows[1].status, RowStatus::kLaunchRefused);
  EXPECT_EQ(r->rows[2].status, RowStatus::kLaunchRefused);  // no BM: no grid
  EXPECT_EQ(r->rows[3].status, RowStatus::kLaunchRefused);
  EXPECT_FALSE(r->has_winner());
  // The candidates without a grid were never built.
  EXPECT_EQ(b.built, (std::vector<size_t>{0, 1}));
}

TEST(TunerTest, NoisyTimingsAreRetimedThenFlagged) {
  FakeBackend b;
  b.kernels.resize(2);
  b.kernels[0].us = 10;
  b.kernels[0].noise = 0.9;  // spread far above 0.10
  b.kernels[1].us = 20;
  TuneSettings s;
  s.samples = 15;
  auto r = RunTuning(Candidates(2), s, "k", b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->winner, 0u);
  EXPECT_TRUE(r->rows[0].noisy);
  EXPECT_EQ(r->rows[0].samples, 30u);  // timed twice
  EXPECT_GT(r->rows[0].spread, s.noise_threshold);
  EXPECT_FALSE(r->rows[1].noisy);
  EXPECT_EQ(r->rows[1].samples, 15u);
  EXPECT_TRUE(r->noisy);  // the winner is noisy: not to be cached
}

TEST(TunerTest, StickyFaultAndDeadlineStopTheRunNamingTheCandidate) {
  {
    FakeBackend b;
    b.kernels.resize(3);
    b.kernels[1].launch = absl::InternalError("CUDA_ERROR_ILLEGAL_ADDRESS");
    b.kernels[1].sticky = true;
    auto r = RunTuning(Candidates(3), TuneSettings{}, "k", b);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "candidate 0/1"))
        << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "unusable"));
  }
  {
    FakeBackend b;
    b.kernels.resize(3);
    b.kernels[2].launch = absl::DeadlineExceededError("did not finish");
    auto r = RunTuning(Candidates(3), TuneSettings{}, "k", b);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "candidate 0/2"));
  }
}

TEST(TunerTest, SummarizeMedianMinSpread) {
  std::mt19937_64 rng = SeededRng("Summarize");
  std::vector<double> v;
  for (int i = 0; i < 101; ++i) v.push_back(static_cast<double>(rng() % 1000));
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  SampleStats s = Summarize(v);
  EXPECT_EQ(s.median, sorted[50]);
  EXPECT_EQ(s.min, sorted[0]);
  EXPECT_DOUBLE_EQ(s.spread, (sorted[75] - sorted[25]) / sorted[50]);
}

// ----------------------------------------------------------- cache entries

TuneKeyInputs KeyInputs(std::mt19937_64& rng) {
  TuneKeyInputs in;
  in.source = absl::StrCat("__global__ void k() {} // ", rng());
  in.options = {"-DN=4"};
  in.kernel = "k";
  in.space = absl::StrCat("candidate ", rng());
  in.device_name = "NVIDIA H200";
  in.sm_count = 132;
  in.cc_major = 9;
  in.cc_minor = 0;
  in.driver_version = 13000;
  in.copy_impl = "tma";
  in.target = "sm_90a";
  return in;
}

TEST(TuneRecordTest, TheFirstRowStaysUnlessBeatenByTheMargin) {
  std::mt19937 rng(::testing::UnitTest::GetInstance()->random_seed());
  auto record_of = [&](double first_us, double best_us, size_t best_at) {
    TuneRecord r;
    r.rows.resize(6);
    for (size_t i = 0; i < r.rows.size(); ++i) {
      r.rows[i].status = RowStatus::kOk;
      r.rows[i].median_us =
          best_us * std::uniform_real_distribution<double>(1.2, 2.0)(rng);
    }
    r.rows[0].median_us = first_us;
    r.rows[best_at].median_us = best_us;
    r.winner = best_at;
    return r;
  };
  const double first = std::uniform_real_distribution<double>(50, 500)(rng);
  // 2 % faster: within a 3 % margin, the first row wins.
  TuneRecord close = record_of(first, first * 0.98, 3);
  EXPECT_TRUE(KeepFirstUnlessBeaten(close, 0.03));
  EXPECT_EQ(close.winner, 0u);
  // 5 % faster: the tuned row stays.
  TuneRecord clear = record_of(first, first * 0.95, 4);
  EXPECT_FALSE(KeepFirstUnlessBeaten(clear, 0.03));
  EXPECT_EQ(clear.winner, 4u);
  // Already the first; a first row that failed its check never wins.
  TuneRecord same = record_of(first, first, 0);
  EXPECT_FALSE(KeepFirstUnlessBeaten(same, 0.03));
  EXPECT_EQ(same.winner, 0u);
  TuneRecord wrong = record_of(first, first * 0.99, 2);
  wrong.rows[0].status = RowStatus::kWrongOutput;
  EXPECT_FALSE(KeepFirstUnlessBeaten(wrong, 0.03));
  EXPECT_EQ(wrong.winner, 2u);
  // A noisy first row makes the record noisy (not stored as truth).
  TuneRecord noisy = record_of(first, first * 0.99, 1);
  noisy.rows[0].noisy = true;
  EXPECT_TRUE(KeepFirstUnlessBeaten(noisy, 0.03));
  EXPECT_TRUE(noisy.noisy);
}

TEST(TuneEntryTest, KeyCoversDeviceDriverSpaceAndImpl) {
  std::mt19937_64 rng = SeededRng("TuneKey");
  const TuneKeyInputs base = KeyInputs(rng);
  const CacheKey k = MakeTuneKey(base);
  EXPECT_TRUE(IsTuneKey(k.canonical));
  EXPECT_TRUE(IsCacheDigest(k.digest));
  std::vector<std::function<void(TuneKeyInputs&)>> changes = {
      [](TuneKeyInputs& in) { in.source += " "; },
      [](TuneKeyInputs& in) { in.options.push_back("-DM=1"); },
      [](TuneKeyInputs& in) { in.kernel = "k2"; },
      [](TuneKeyInputs& in) { in.space += "x"; },
      [](TuneKeyInputs& in) { in.device_name = "NVIDIA H100"; },
      [](TuneKeyInputs& in) { in.sm_count = 114; },
      [](TuneKeyInputs& in) { in.cc_minor = 1; },
      [](TuneKeyInputs& in) { in.driver_version = 13010; },
      [](TuneKeyInputs& in) { in.copy_impl = "cp_async"; },
      [](TuneKeyInputs& in) { in.target = "sm_90"; },
      [](TuneKeyInputs& in) { in.name_expressions.push_back("k<int>"); },
      [](TuneKeyInputs& in) { in.workload += "; 3=1"; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    TuneKeyInputs in = base;
    changes[i](in);
    EXPECT_NE(MakeTuneKey(in).digest, k.digest) << "change " << i;
  }
  EXPECT_EQ(MakeTuneKey(base).canonical, k.canonical);
}

// The problem in fj_tune's key: integer scalars by value and each tensor's
// geometry, never addresses or floating-point scalars; unreadable
// arguments are named, not read.
TEST(TuneEntryTest, WorkloadNamesTheProblemNotItsBuffers) {
  std::mt19937_64 rng = SeededRng("TuneWorkload");
  std::uniform_int_distribution<int64_t> dim(1, 1 << 14);
  int64_t shape[2] = {dim(rng), dim(rng)};
  fj_tensor t{reinterpret_cast<void*>(0x7f0000000000ull),
              {2, 0},
              2,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  fj_tensor_arg ta{};
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  ta.box[0] = ta.box[1] = 64;
  ta.oob = FJ_OOB_ZEROS;
  const int32_t n = static_cast<int32_t>(dim(rng));
  auto args_of = [&](int32_t count, float alpha, uint64_t ptr) {
    std::vector<fj_arg> a(4);
    for (fj_arg& x : a) x.struct_size = sizeof(fj_arg);
    a[0].kind = FJ_ARG_TENSOR;
    a[0].v.tensor = &ta;
    a[1].kind = FJ_ARG_I32;
    a[1].v.i32 = count;
    a[2].kind = FJ_ARG_F32;
    a[2].v.f32 = alpha;
    a[3].kind = FJ_ARG_POINTER;
    a[3].v.pointer = ptr;
    return a;
  };
  auto workload = [](const std::vector<fj_arg>& a) {
    return CanonicalWorkload(a.data(), a.size(), sizeof(fj_arg));
  };
  const std::string base = workload(args_of(n, 2.0f, 0x1000));
  EXPECT_NE(base.find(absl::StrCat("=", n)), std::string::npos) << base;
  EXPECT_NE(base.find(absl::StrCat(" shape ", shape[0], " ", shape[1])),
            std::string::npos)
      << base;
  // Another buffer, another alpha, another tensor address: the same problem.
  EXPECT_EQ(workload(args_of(n, 3.5f, 0x2000)), base);
  t.data = reinterpret_cast<void*>(0x7f0000100000ull);
  EXPECT_EQ(workload(args_of(n, 2.0f, 0x1000)), base);
  // Another size, shape, box or fill: another problem.
  EXPECT_NE(workload(args_of(n + 1, 2.0f, 0x1000)), base);
  shape[1] += 1;
  EXPECT_NE(workload(args_of(n, 2.0f, 0x1000)), base);
  shape[1] -= 1;
  ta.box[1] = 32;
  EXPECT_NE(workload(args_of(n, 2.0f, 0x1000)), base);
  ta.box[1] = 64;
  ta.oob = FJ_OOB_NAN;
  EXPECT_NE(workload(args_of(n, 2.0f, 0x1000)), base);
  ta.oob = FJ_OOB_ZEROS;
  EXPECT_EQ(workload(args_of(n, 2.0f, 0x1000)), base);
  // Unreadable tensors are named, never dereferenced.
  ta.tensor = nullptr;
  EXPECT_NE(workload(args_of(n, 2.0f, 0x1000)).find("unreadable"),
            std::string::npos);
  ta.tensor = &t;
  t.ndim = 9;
  EXPECT_NE(workload(args_of(n, 2.0f, 0x1000)).find("unreadable"),
            std::string::npos);
  EXPECT_EQ(CanonicalWorkload(nullptr, 0, sizeof(fj_arg)), "");
}

CacheConfig DiskConfig(const std::string& dir) {
  CacheConfig c;
  c.dir = dir;
  return c;
}

TEST(TuneEntryTest, MemoryAndDiskTiersRoundTripAcrossCaches) {
  std::mt19937_64 rng = SeededRng("TuneEntryTiers");
  TempDir dir;
  const CacheKey key = MakeTuneKey(KeyInputs(rng));
  const TuneRecord record = RandomRecord(rng);
  jit::Target target;
  target.arch = 90;
  target.suffix = 'a';
  {
    ModuleCache cache(DiskConfig(dir.path()));
    EXPECT_TRUE(absl::IsNotFound(cache.Find(key).status()));
    ASSERT_TRUE(
        cache
            .Update(key, std::make_shared<const jit::Artifact>(
                             TuneArtifact(record, target, jit::CopyImpl::kTma)))
            .ok());
    auto hit = cache.Find(key);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_EQ(hit->source, CacheSource::kMemory);
    auto back = RecordOfArtifact(*hit->artifact);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(EncodeTuneRecord(*back), EncodeTuneRecord(record));
  }
  // A second "process": a fresh cache over the same folder.
  ModuleCache second(DiskConfig(dir.path()));
  auto hit = second.Find(key);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->source, CacheSource::kDisk);
  EXPECT_EQ(EncodeTuneRecord(*RecordOfArtifact(*hit->artifact)),
            EncodeTuneRecord(record));
  EXPECT_EQ(second.stats().misses, 0u);
  // Listed as a tuning entry.
  auto list = second.List(true);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].kind, "tune");  // what `fleetjit cache ls` marks
  EXPECT_TRUE((*list)[0].problem.empty()) << (*list)[0].problem;

  // An entry whose stored key is another's (a file under the wrong name)
  // is refused: the key must match exactly.
  TuneKeyInputs other_in = KeyInputs(rng);
  const CacheKey other = MakeTuneKey(other_in);
  const std::string from = absl::StrCat(
      dir.path(), "/", key.digest.substr(0, 2), "/", key.digest, ".fjc");
  const std::string to = absl::StrCat(
      dir.path(), "/", other.digest.substr(0, 2), "/", other.digest, ".fjc");
  const std::string bytes = ::fleetjit::testing::ReadFile(from);
  ASSERT_FALSE(bytes.empty()) << "no entry at " << from;
  ::mkdir(absl::StrCat(dir.path(), "/", other.digest.substr(0, 2)).c_str(),
          0700);
  ::fleetjit::testing::WriteFile(to, bytes);
  ModuleCache third(DiskConfig(dir.path()));
  EXPECT_TRUE(absl::IsNotFound(third.Find(other).status()));
  EXPECT_EQ(third.stats().rejected_entries, 1u);
  // A module entry is not a tuning record.
  EXPECT_FALSE(
      RecordOfArtifact(::fleetjit::testing::ArtifactFor(rng(), 0, 64)).ok());
}

#define START_REDIS_OR_SKIP(var)              \
  std::string var##_skip;                     \
  auto var = RedisServer::Start(&var##_skip); \
  if (var == nullptr) GTEST_SKIP() << var##_skip

constexpr char kFleetKey[] =
    "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

CacheConfig RemoteConfig(const std::string& dir, const std::string& url) {
  CacheConfig c;
  c.dir = dir;
  c.remote.url = url;
  c.remote.fleet_key = kFleetKey;
  return c;
}

TEST(TuneEntryTest, RemoteTierSharesSignedEntriesAndRefusesForgeries) {
  START_REDIS_OR_SKIP(server);
  std::mt19937_64 rng = SeededRng("TuneEntryRemote");
  const CacheKey key = MakeTuneKey(KeyInputs(rng));
  const TuneRecord record = RandomRecord(rng);
  jit::Target target;
  target.arch = 90;
  const auto artifact = std::make_shared<const jit::Artifact>(
      TuneArtifact(record, target, jit::CopyImpl::kSync));
  {
    TempDir host_a;
    ModuleCache a(RemoteConfig(host_a.path(), server->tcp_url()));
    ASSERT_TRUE(a.Update(key, artifact).ok());
    ASSERT_TRUE(a.FlushRemote(absl::Seconds(5)));
  }
  {
    // Host B: its own disk, the same Redis: a remote hit, then on disk.
    TempDir host_b;
    ModuleCache b(RemoteConfig(host_b.path(), server->tcp_url()));
    auto hit = b.Find(key);
    ASSERT_TRUE(hit.ok()) << hit.status();
    EXPECT_EQ(hit->source, CacheSource::kRemote);
    EXPECT_EQ(EncodeTuneRecord(*RecordOfArtifact(*hit->artifact)),
              EncodeTuneRecord(record));
    ModuleCache b2(DiskConfig(host_b.path()));
    EXPECT_EQ(b2.Find(key)->source, CacheSource::kDisk);
  }
  // Forgeries under the entry's name: signed with another key, and a validly
  // signed entry of another tuning key. Both refused.
  auto url = ParseRedisUrl(server->tcp_url());
  RedisClient redis(*url, RedisTimeouts{});
  CacheConfig base = RemoteConfig("", server->tcp_url());
  auto tier = RemoteTier::Create(base.remote, base.log);
  ASSERT_TRUE(tier.ok()) << tier.status();
  const std::string name = (*tier)->EntryName(key.digest);
  TuneRecord forged = record;
  forged.winner = 0;
  forged.rows[0].median_us = 0.001;
  const std::string forged_entry = EncodeCacheEntry(
      key.canonical, jit::SerializeArtifact(
                         TuneArtifact(forged, target, jit::CopyImpl::kSync)));
  const CacheKey other = MakeTuneKey(KeyInputs(rng));
  const std::string other_entry =
      EncodeCacheEntry(other.canonical, jit::SerializeArtifact(*artifact));
  const std::vector<std::string> forgeries = {
      RemoteTier::Sign(std::string(32, 'k'), name, forged_entry),
      RemoteTier::Sign(*ParseFleetKey(kFleetKey), name, other_entry)};
  for (const std::string& value : forgeries) {
    ASSERT_TRUE(redis.Set(name, value, 0).ok());
    TempDir host_c;
    ModuleCache c(RemoteConfig(host_c.path(), server->tcp_url()));
    EXPECT_TRUE(absl::IsNotFound(c.Find(key).status()));
    EXPECT_EQ(c.stats().remote_rejected, 1u);
  }
}

}  // namespace
}  // namespace fleetjit::tune
