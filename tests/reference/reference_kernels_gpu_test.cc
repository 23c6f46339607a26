// Each reference kernel (reference/reference_kernels.h) on the GPU under each
// copy implementation the device runs (tma, cp_async, sync, and cp_async
// as compute_80 PTX), against its CPU reference: fresh random inputs
// (seed printed; FLEETJIT_TEST_SEED replays), outputs poisoned with 0xFF
// bytes (NaN) before every launch, tolerances stated by each problem
// (transpose exact; RMSNorm and softmax |d| <= |ref| / 256 + tiny, the
// bf16 output's rounding plus f32 math). Every launch shape the benchmark
// tries is run, so every pipeline depth and block size is covered. Skips,
// saying why, without a GPU or on a GPU too old for an implementation.
#include <stdlib.h>

#include <cctype>
#include <cstdio>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "reference/reference_kernels.h"
#include "tests/common/seed.h"

namespace fleetjit::refk {
namespace {

class ReferenceKernelsGpu : public ::testing::TestWithParam<size_t> {
 protected:
  void SetUp() override {
    ASSERT_EQ(fj_runtime_create(nullptr, &rt_), nullptr);
    int32_t count = 0;
    ASSERT_EQ(fj_device_count(rt_, &count), nullptr);
    if (count == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    info_.struct_size = sizeof(info_);
    ASSERT_EQ(fj_device_info_get(rt_, 0, &info_), nullptr);
    ASSERT_EQ(fj_stream_create(rt_, 0, &stream_), nullptr);
  }
  void TearDown() override {
    fj_status_free(fj_stream_destroy(stream_));
    fj_status_free(fj_runtime_destroy(rt_));
  }
  fj_runtime* rt_ = nullptr;
  fj_stream* stream_ = nullptr;
  fj_device_info info_{};
};

TEST_P(ReferenceKernelsGpu, MatchesTheCpuReferenceUnderEveryImplementation) {
  const KernelCase& c = Cases()[GetParam()];
  std::mt19937_64 rng = testing::SeededRng(c.name.c_str());
  absl::StatusOr<std::unique_ptr<Problem>> p =
      c.make(rt_, 0, static_cast<uint32_t>(rng()));
  ASSERT_TRUE(p.ok()) << p.status();
  const int cc = info_.cc_major * 10 + info_.cc_minor;
  int ran = 0;
  for (const Variant& v : Variants()) {
    if ((v.impl == FJ_COPY_IMPL_TMA && cc < 90) ||
        (v.impl == FJ_COPY_IMPL_CP_ASYNC && cc < 80)) {
      std::printf("[ skipped  ] %s under %s: needs a newer GPU than sm_%d\n",
                  c.name.c_str(), v.name, cc);
      continue;
    }
    std::set<std::string> seen;  // threads, stages, define: grids differ only
    for (const Shape& s : c.shapes) {
      if (!seen.insert(absl::StrCat(s.threads, "/", s.stages, ",",
                                    s.define ? s.define : ""))
               .second) {
        continue;
      }
      SCOPED_TRACE(c.name + " under " + v.name + ", " + ShapeName(s) +
                   " (threads/CTAs/stages); tolerance " + (*p)->Tolerance());
      absl::StatusOr<fj_module*> m =
          Build(rt_, c, v, s.stages, "", FJ_OUTPUT_AUTO, s.define);
      ASSERT_TRUE(m.ok()) << m.status();
      fj_kernel* k = nullptr;
      ASSERT_EQ(fj_module_get_kernel(*m, fj_str{c.entry.data(), c.entry.size()},
                                     0, &k),
                nullptr);
      fj_launch_config cfg{};
      cfg.struct_size = sizeof(cfg);
      cfg.stream = stream_;
      (*p)->Configure(s, info_.sm_count, v.impl, &cfg);
      ASSERT_TRUE((*p)->Poison().ok());
      const std::vector<fj_arg>& args = (*p)->Args();
      fj_status* st = fj_launch(k, &cfg, args.data(), args.size());
      if (st != nullptr && fj_status_code(st) == FJ_INVALID_ARGUMENT &&
          std::string(fj_status_message(st, nullptr)).find("shared") !=
              std::string::npos) {
        // A shape whose SMEM this GPU lacks (the table is sized for 227 KiB).
        std::printf("[ skipped  ] shape: %s\n", fj_status_message(st, nullptr));
        fj_status_free(st);
        fj_status_free(fj_module_destroy(*m));
        continue;
      }
      ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
      ASSERT_EQ(fj_stream_synchronize(stream_), nullptr);
      absl::Status ok = (*p)->Verify(rt_);
      EXPECT_TRUE(ok.ok()) << ok;
      fj_status_free(fj_module_destroy(*m));
      ++ran;
    }
  }
  EXPECT_GT(ran, 0);
}

// kernels_bench --tune: the shapes of a case go through fj_tune, which
// stores the result; a second run (a new runtime on the same cache folder,
// as a second process would be) finds it without timing anything, and
// both runs pick the same shape, whose output matches the CPU reference.
// fj_tune's options for kernels_bench's sweep of `filter` under `variant`,
// few samples (a test, not a benchmark), on a fresh cache folder that
// FLEETJIT_CACHE_DIR names until ~TuneRun.
struct TuneRun {
  TuneRun(const char* filter, const char* variant) {
    EXPECT_NE(mkdtemp(dir), nullptr);
    setenv("FLEETJIT_CACHE_DIR", dir, 1);
    options.tune = true;
    options.filter = filter;
    options.variant = variant;
    options.samples = 3;
    options.batch = 2;
  }
  ~TuneRun() { unsetenv("FLEETJIT_CACHE_DIR"); }
  char dir[32] = "/tmp/fj_refk_tune_XXXXXX";
  RunOptions options;
};

// Under a native and a PTX target (the PTX variant names its target in the
// build options fj_tune reads).
TEST(ReferenceKernelsTune, TunesOnceThenLooksTheShapeUp) {
  for (const char* variant : {"cp_async", "cp_async@compute_80"}) {
    SCOPED_TRACE(variant);
    TuneRun run("paged_decode", variant);
    absl::StatusOr<std::vector<Result>> first = refk::Run(run.options);
    if (absl::IsUnavailable(first.status())) {
      GTEST_SKIP() << "no GPU: " << first.status();
    }
    ASSERT_TRUE(first.ok()) << first.status();
    absl::StatusOr<std::vector<Result>> second = refk::Run(run.options);
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(first->size(), 1u);
    ASSERT_EQ(second->size(), 1u);
    const Result& a = (*first)[0];
    const Result& b = (*second)[0];
    ASSERT_TRUE(a.skipped.empty()) << a.skipped;
    EXPECT_EQ(a.verified, "ok");
    EXPECT_EQ(b.verified, "ok");
    EXPECT_NE(a.tuning.find("tuned in"), std::string::npos) << a.tuning;
    if (a.tuning.find("not stored") != std::string::npos) {
      // fj_tune keeps no noisy winner (a busy GPU): nothing to look up.
      std::printf("[ busy     ] %s: not stored: %s\n", variant,
                  a.tuning.c_str());
      continue;
    }
    EXPECT_NE(b.tuning.find("stored (disk)"), std::string::npos) << b.tuning;
    EXPECT_EQ(ShapeName(a.shape), ShapeName(b.shape));
    EXPECT_GE(a.tried.size(), 2u);  // the sweep timed several shapes
    std::printf("[ tuned    ] %s %s: %s, then %s\n", variant,
                ShapeName(a.shape).c_str(), a.tuning.c_str(), b.tuning.c_str());
  }
}

// The aligned and the ragged transpose run the same source, macro sets and
// grids (a persistent grid of CTAs per SM x SMs): only their tensors
// differ. Each tunes for itself; the ragged one never takes the aligned
// one's stored shape.
TEST(ReferenceKernelsTune, EachProblemTunesForItself) {
  TuneRun tr("transpose", "tma");
  absl::StatusOr<std::vector<Result>> run = refk::Run(tr.options);
  if (absl::IsUnavailable(run.status()))
    GTEST_SKIP() << "no GPU: " << run.status();
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->size(), 2u);
  for (const Result& r : *run) {
    ASSERT_TRUE(r.skipped.empty()) << r.kernel << ": " << r.skipped;
    EXPECT_EQ(r.verified, "ok") << r.kernel;
    EXPECT_NE(r.tuning.find("tuned in"), std::string::npos)
        << r.kernel << ": " << r.tuning;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceKernelsGpu,
                         ::testing::Range<size_t>(0, Cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string n;
                           for (char ch : Cases()[info.param].name) {
                             n += (std::isalnum(static_cast<unsigned char>(ch))
                                       ? ch
                                       : '_');
                           }
                           return n;
                         });

}  // namespace
}  // namespace fleetjit::refk
