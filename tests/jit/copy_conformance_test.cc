// The copy-layer conformance matrix on the live GPU (conformance/runner.h),
// through the public C ABI: one test per feature, run under every copy
// implementation the device can run (plus the PTX rows that run the
// pre-Hopper paths through the driver JIT), on fresh random cases with
// poisoned outputs, compared with the host reference. Then one named test
// per refusal in docs/copy-matrix.md's "Refusals elsewhere" table that
// issue 3 covers, showing the effect working.
//
// A fresh seed per run is printed; FLEETJIT_SELFTEST_SEED=N reproduces it,
// FLEETJIT_SELFTEST_SCALE=N multiplies the cases. Without a GPU every GPU
// test skips and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "conformance/runner.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::selftest {
namespace {

struct Gpu {
  fj_runtime* rt = nullptr;
  std::string skip;  // why there is no GPU
  int cc = 0;        // compute capability * 10
  std::vector<std::string> impls;
  uint64_t seed = 0;
  int scale = 1;
};

Gpu& GetGpu() {
  static Gpu* gpu = [] {
    auto* g = new Gpu;
    if (const char* s = std::getenv("FLEETJIT_SELFTEST_SEED")) {
      if (!absl::SimpleAtoi(s, &g->seed)) g->seed = 0;
    }
    if (g->seed == 0) g->seed = FreshSeed();
    if (const char* s = std::getenv("FLEETJIT_SELFTEST_SCALE")) {
      if (!absl::SimpleAtoi(s, &g->scale) || g->scale < 1) g->scale = 1;
    }
    fj_status* st = fj_runtime_create(nullptr, &g->rt);
    if (st != nullptr) {
      g->skip = absl::StrCat("no runtime: ", fj_status_message(st, nullptr));
      fj_status_free(st);
      g->rt = nullptr;
      return g;
    }
    int32_t count = 0;
    st = fj_device_count(g->rt, &count);
    if (st != nullptr || count == 0) {
      fj_status_free(st);
      const char* why = fj_runtime_driver_error(g->rt);
      g->skip = absl::StrCat(
          "no CUDA GPU (",
          why != nullptr && *why != '\0' ? why : "the driver reports 0 devices",
          ")");
      return g;
    }
    fj_device_info info{};
    info.struct_size = sizeof(info);
    st = fj_device_info_get(g->rt, 0, &info);
    if (st != nullptr) {
      g->skip = absl::StrCat("cannot read device 0: ",
                             fj_status_message(st, nullptr));
      fj_status_free(st);
      return g;
    }
    g->cc = info.cc_major * 10 + info.cc_minor;
    auto impls = DeviceImpls(g->rt, 0);
    if (!impls.ok()) {
      g->skip = std::string(impls.status().message());
      return g;
    }
    g->impls = *impls;
    std::printf("[ selftest ] device 0: %s (sm_%d), rows: %s; seed %" PRIu64
                " (FLEETJIT_SELFTEST_SEED=%" PRIu64 " reproduces), scale %d\n",
                info.name, g->cc, absl::StrJoin(g->impls, ", ").c_str(),
                g->seed, g->seed, g->scale);
    return g;
  }();
  return *gpu;
}

#define REQUIRE_GPU()                                          \
  do {                                                         \
    if (!GetGpu().skip.empty()) GTEST_SKIP() << GetGpu().skip; \
  } while (0)

// The rows of `wanted` this device can run, in the device's order.
std::vector<std::string> Runnable(const std::vector<std::string>& wanted) {
  std::vector<std::string> out;
  for (const std::string& r : GetGpu().impls) {
    if (std::find(wanted.begin(), wanted.end(), r) != wanted.end())
      out.push_back(r);
  }
  return out;
}

struct Totals {
  long long cases = 0, launches = 0, maps = 0, fallbacks = 0;
};

// Runs the matrix restricted to `features` / `variants` on `impls`; every
// cell must pass and run cases. Prints each cell and the totals.
Totals RunMatrix(const std::vector<std::string>& impls,
                 const std::vector<std::string>& features,
                 const std::vector<std::string>& variants, int scale = 1) {
  Gpu& g = GetGpu();
  MatrixOptions o;
  o.seed = g.seed;
  o.scale = scale * g.scale;
  o.impls = impls;
  o.features = features;
  o.variants = variants;
  Totals t;
  auto results = RunConformanceMatrix(g.rt, o, [&](const CellResult& c) {
    std::printf("[ cell     ] %-12s %-22s %-4s %6d cases %5d launches %8.1f ms",
                c.feature.c_str(), c.impl.c_str(),
                c.failures == 0 ? "pass" : "FAIL", c.cases, c.launches, c.ms);
    if (c.tensor_maps + c.fallbacks > 0) {
      std::printf("  (%d TMA maps, %d fallbacks)", c.tensor_maps, c.fallbacks);
    }
    std::printf("\n");
    std::fflush(stdout);
  });
  EXPECT_TRUE(results.ok()) << results.status();
  if (!results.ok()) return t;
  EXPECT_FALSE(results->empty()) << "no cell ran";
  for (const CellResult& c : *results) {
    t.cases += c.cases;
    t.launches += c.launches;
    t.maps += c.tensor_maps;
    t.fallbacks += c.fallbacks;
    EXPECT_GT(c.cases, 0) << c.feature << " under " << c.impl << " ran no case";
    EXPECT_EQ(c.failures, 0)
        << c.feature << " under " << c.impl << ": " << c.failures
        << " failed case(s) of " << c.cases << "\n"
        << absl::StrJoin(c.failure_samples, "\n");
  }
  std::printf("[ cases    ] %lld cases in %lld launches, seed %" PRIu64 "\n",
              t.cases, t.launches, g.seed);
  ::testing::Test::RecordProperty("cases", static_cast<int>(t.cases));
  ::testing::Test::RecordProperty("seed", absl::StrCat(g.seed));
  return t;
}

// ---------------------------------------------------------------- CPU side
TEST(CopyConformanceMatrix, EveryFeatureHasVariants) {
  std::vector<std::string> all;
  for (const std::string& f : MatrixFeatures()) {
    const auto v = FeatureVariants(f);
    EXPECT_FALSE(v.empty()) << f;
    all.insert(all.end(), v.begin(), v.end());
  }
  EXPECT_EQ(all, AllVariants());
  EXPECT_EQ(MatrixFeatures().size(), 12u);  // "indexed" since issue 49
}

TEST(CopyConformanceMatrix, NoGpuIsUnavailable) {
  if (GetGpu().rt == nullptr) GTEST_SKIP() << GetGpu().skip;
  if (GetGpu().skip.empty()) GTEST_SKIP() << "a GPU is present";
  MatrixOptions o;
  auto r = RunConformanceMatrix(GetGpu().rt, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST(CopyConformanceMatrix, BadOptionsAreStatuses) {
  REQUIRE_GPU();
  MatrixOptions o;
  o.features = {"no_such_feature"};
  EXPECT_EQ(RunConformanceMatrix(GetGpu().rt, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.features = {};
  o.variants = {"no_such_variant"};
  EXPECT_EQ(RunConformanceMatrix(GetGpu().rt, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.variants = {};
  o.impls = {"warp_speed"};
  EXPECT_EQ(RunConformanceMatrix(GetGpu().rt, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.impls = {"tma@compute_80"};  // TMA needs sm_90
  EXPECT_EQ(RunConformanceMatrix(GetGpu().rt, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  o.impls = {"sync@compute_999"};  // newer than any device
  EXPECT_EQ(RunConformanceMatrix(GetGpu().rt, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ------------------------------------------------- one test per feature
#define FJ_FEATURE_TEST(Name, feature)                         \
  TEST(CopyConformance, Name) {                                \
    REQUIRE_GPU();                                             \
    const Totals t = RunMatrix(GetGpu().impls, {feature}, {}); \
    EXPECT_GT(t.cases, 0);                                     \
  }

FJ_FEATURE_TEST(Barrier, "barrier")
FJ_FEATURE_TEST(GroupWait, "group_wait")
FJ_FEATURE_TEST(CopyG2S, "copy_g2s")
FJ_FEATURE_TEST(CopyS2G, "copy_s2g")
FJ_FEATURE_TEST(Predicate, "predicate")
FJ_FEATURE_TEST(TileCopy, "tile_copy")
FJ_FEATURE_TEST(OobZeros, "oob_zeros")
FJ_FEATURE_TEST(OobNan, "oob_nan")
FJ_FEATURE_TEST(Multicast, "multicast")
FJ_FEATURE_TEST(L2Prefetch, "l2_prefetch")
FJ_FEATURE_TEST(Pipeline, "pipeline")
// fj::store_tiles / fj::scatter_tiles / fj::gather_tiles at index lists,
// indices outside the tensor included (never written; the fill).
FJ_FEATURE_TEST(Indexed, "indexed")

// Tensors TMA cannot describe (inner stride, row stride not a multiple of
// 16 bytes, unaligned base, odd inner box, box over 256) run under tma
// through the runtime's per-tensor fallback; the others through a map.
TEST(CopyConformance, TmaFallsBackPerTensor) {
  REQUIRE_GPU();
  if (GetGpu().cc < 90)
    GTEST_SKIP() << "tma needs sm_90; the device is sm_" << GetGpu().cc;
  const Totals t = RunMatrix({"tma"}, {}, {"tile_load", "tile_store"});
  EXPECT_GT(t.maps, 0) << "no tensor went through a TMA map";
  EXPECT_GT(t.fallbacks, 0) << "no tensor exercised the fallback";
}

// ------------------------------------------ the anchors' refusals, working
// docs/copy-matrix.md: `wait_gmem_to_smem` on Hopper+ is refused (seed 002).
// Under tma, loads in a group complete by a group wait.
TEST(CopyConformanceRefusals, WaitForCpAsyncGroupsOnHopper) {
  REQUIRE_GPU();
  if (GetGpu().cc < 90)
    GTEST_SKIP() << "needs Hopper (sm_90); the device is sm_" << GetGpu().cc;
  RunMatrix({"tma"}, {}, {"groups", "span_load.group", "tile_load.group"}, 2);
}

// `copy_gmem_to_smem` without a barrier on Hopper+ is refused: under tma,
// span and tile loads with no barrier at all (group-completed).
TEST(CopyConformanceRefusals, CopyWithoutBarrierOnHopper) {
  REQUIRE_GPU();
  if (GetGpu().cc < 90)
    GTEST_SKIP() << "needs Hopper (sm_90); the device is sm_" << GetGpu().cc;
  RunMatrix({"tma"}, {}, {"span_load.group", "tile_load.group", "span_store"},
            2);
}

// `copy_gmem_to_smem` with a barrier before Hopper is refused: copies
// completing on an fj::barrier under cp_async and sync (and their PTX rows).
TEST(CopyConformanceRefusals, CopyWithBarrierBeforeHopper) {
  REQUIRE_GPU();
  const auto rows =
      Runnable({"cp_async", "sync", "cp_async@compute_80", "sync@compute_75"});
  ASSERT_FALSE(rows.empty());
  RunMatrix(rows, {}, {"span_load.barrier", "tile_load.barrier", "pipeline"},
            2);
}

// A user predicate on cp.async is refused (seed 004): skip and zero modes
// (alternating by launch) on span and tile loads and stores under cp_async.
TEST(CopyConformanceRefusals, UserPredicateOnCpAsync) {
  REQUIRE_GPU();
  const auto rows = Runnable({"cp_async", "cp_async@compute_80"});
  if (rows.empty())
    GTEST_SKIP() << "cp_async needs sm_80; the device is sm_" << GetGpu().cc;
  RunMatrix(rows, {},
            {"span_load.pred", "tile_load.pred", "span_store.pred",
             "tile_store.pred"},
            2);
}

// oob_mode other than PROMISE_IN_BOUNDS on cp.async is refused: zero and
// NaN fill of ragged tiles under cp_async.
TEST(CopyConformanceRefusals, OutOfBoundsFillOnCpAsync) {
  REQUIRE_GPU();
  const auto rows = Runnable({"cp_async", "cp_async@compute_80"});
  if (rows.empty())
    GTEST_SKIP() << "cp_async needs sm_80; the device is sm_" << GetGpu().cc;
  RunMatrix(rows, {},
            {"tile_load.oob_zeros", "tile_load.oob_nan", "pipeline.oob_zeros",
             "pipeline.oob_nan"});
}

// Collective copies on cp.async are refused: multicast loads under cp_async
// and sync, in clusters of 2 and 4 where the device has clusters (each CTA
// loads its part) and without a cluster on the PTX rows.
TEST(CopyConformanceRefusals, CollectiveCopyWithoutTma) {
  REQUIRE_GPU();
  const auto rows =
      Runnable({"cp_async", "sync", "cp_async@compute_80", "sync@compute_75"});
  ASSERT_FALSE(rows.empty());
  RunMatrix(rows, {}, {"span_load.multicast", "tile_load.multicast"}, 2);
}

}  // namespace
}  // namespace fleetjit::selftest
