// fj_tune on the live GPU, through the C ABI: a tiled y = a*x + y over
// several tile sizes and block sizes, one candidate deliberately wrong (and
// faster) and one shape over the device's limit. The wrong one never wins,
// the caller's y is left as it was, the winner's build reproduces a host
// reference, and a second runtime over the same cache folder gets the
// result from disk without timing anything.
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/seed.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::Code;
using ::fleetjit::testing::S;

// Each block handles TILE consecutive elements; WRONG skips every odd one
// (less work: faster, and wrong).
constexpr char kSource[] = R"(
extern "C" __global__ void tiled_axpy(float a, const float* x, float* y,
                                      int n) {
  const int begin = blockIdx.x * TILE;
  const int end = min(n, begin + TILE);
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
#ifdef WRONG
    if (i & 1) continue;
#endif
    y[i] = a * x[i] + y[i];
  }
}
)";

#define EXPECT_OK(expr)                                                    \
  do {                                                                     \
    fj_status* st_ = (expr);                                               \
    EXPECT_EQ(fj_status_code(st_), FJ_OK) << fj_status_message(st_, NULL); \
    fj_status_free(st_);                                                   \
  } while (0)
#define ASSERT_OK(expr)                            \
  do {                                             \
    fj_status* st_ = (expr);                       \
    const fj_code c_ = fj_status_code(st_);        \
    std::string m_ = fj_status_message(st_, NULL); \
    fj_status_free(st_);                           \
    ASSERT_EQ(c_, FJ_OK) << m_;                    \
  } while (0)

class TuneGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fj_tune_gpu_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    rt_ = NewRuntime();
    ASSERT_NE(rt_, nullptr);
    int32_t n = 0;
    ASSERT_OK(fj_device_count(rt_, &n));
    if (n == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    rng_ = ::fleetjit::testing::SeededRng("TuneGpuTest");
    x_.resize(kN);
    y0_.resize(kN);
    std::uniform_real_distribution<float> u(-4, 4);
    for (int i = 0; i < kN; ++i) {
      x_[i] = u(rng_);
      y0_[i] = u(rng_);
    }
    a_ = u(rng_);
    ASSERT_OK(fj_mem_alloc(rt_, 0, kN * 4, &dx_));
    ASSERT_OK(fj_mem_alloc(rt_, 0, kN * 4, &dy_));
    ASSERT_OK(fj_memcpy_htod(rt_, dx_, x_.data(), kN * 4, nullptr));
    ASSERT_OK(fj_memcpy_htod(rt_, dy_, y0_.data(), kN * 4, nullptr));
    args_.resize(4);
    for (fj_arg& arg : args_) {
      std::memset(&arg, 0, sizeof(arg));
      arg.struct_size = sizeof(fj_arg);
    }
    args_[0].kind = FJ_ARG_F32;
    args_[0].v.f32 = a_;
    args_[1].kind = FJ_ARG_POINTER;
    args_[1].v.pointer = dx_;
    args_[2].kind = FJ_ARG_POINTER;
    args_[2].v.pointer = dy_;
    args_[3].kind = FJ_ARG_I32;
    args_[3].v.i32 = kN;
  }
  void TearDown() override {
    if (rt_ != nullptr) {
      EXPECT_OK(fj_mem_free(rt_, dx_));
      EXPECT_OK(fj_mem_free(rt_, dy_));
      EXPECT_OK(fj_runtime_destroy(rt_));
    }
    std::string rm = absl::StrCat("rm -rf '", dir_, "'");
    (void)system(rm.c_str());
  }

  fj_runtime* NewRuntime() {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.cache_dir = S(dir_);
    fj_runtime* rt = nullptr;
    fj_status* st = fj_runtime_create(&o, &rt);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    return rt;
  }

  // The space: macro sets (one wrong, not first), shapes (one too big).
  fj_tune_options Options(fj_runtime* rt, bool wrong_first = false) {
    build_ = fj_build_options{};
    build_.struct_size = sizeof(build_);
    build_.source = S(source_);
    build_.name = S(name_);
    macros_.clear();
    sets_ = {"-DTILE=1024", "-DTILE=4096", "-DTILE=2048 -DWRONG=1",
             "-DTILE=16384"};
    if (wrong_first) std::swap(sets_[0], sets_[2]);
    for (const std::string& s : sets_) macros_.push_back(S(s));
    shapes_.clear();
    for (uint32_t x : {128u, 256u, 512u, 2048u}) {
      fj_tune_shape s{};
      s.struct_size = sizeof(s);
      s.block[0] = x;
      shapes_.push_back(s);
    }
    fj_tune_options o{};
    o.struct_size = sizeof(o);
    o.build = &build_;
    o.kernel = S(kernel_);
    o.macro_sets = macros_.data();
    o.num_macro_sets = macros_.size();
    o.shapes = shapes_.data();
    o.num_shapes = shapes_.size();
    o.grid_extent[0] = kN;
    o.grid_divisor[0] = S(divisor_);
    o.args = args_.data();
    o.num_args = args_.size();
    o.output_addresses = &dy_;
    o.output_bytes = &bytes_;
    o.num_outputs = 1;
    o.samples = 9;
    (void)rt;
    return o;
  }

  std::vector<float> Reference() const {
    std::vector<float> want(kN);
    // NVRTC contracts a * x + y into one fused multiply-add (--fmad=true).
    for (int i = 0; i < kN; ++i) want[i] = std::fma(a_, x_[i], y0_[i]);
    return want;
  }

  std::vector<float> DeviceY() {
    std::vector<float> y(kN);
    fj_status* st = fj_memcpy_dtoh(rt_, y.data(), dy_, kN * 4, nullptr);
    EXPECT_EQ(fj_status_code(st), FJ_OK);
    fj_status_free(st);
    return y;
  }

  static constexpr int kN = (1 << 22) + 77;
  std::string dir_, source_ = kSource, name_ = "tiled_axpy.cu",
                    kernel_ = "tiled_axpy", divisor_ = "TILE";
  fj_runtime* rt_ = nullptr;
  std::mt19937_64 rng_;
  std::vector<float> x_, y0_;
  float a_ = 0;
  uint64_t dx_ = 0, dy_ = 0, bytes_ = uint64_t{kN} * 4;
  std::vector<fj_arg> args_;
  fj_build_options build_{};
  std::vector<std::string> sets_;
  std::vector<fj_str> macros_;
  std::vector<fj_tune_shape> shapes_;
};

fj_tune_summary Summary(fj_tune_result* r) {
  fj_tune_summary s{};
  s.struct_size = sizeof(s);
  fj_status* st = fj_tune_result_summary(r, &s);
  EXPECT_EQ(fj_status_code(st), FJ_OK);
  fj_status_free(st);
  return s;
}

fj_tune_row Row(fj_tune_result* r, size_t i) {
  fj_tune_row row{};
  row.struct_size = sizeof(row);
  fj_status* st = fj_tune_result_row(r, i, &row);
  EXPECT_EQ(fj_status_code(st), FJ_OK);
  fj_status_free(st);
  return row;
}

TEST_F(TuneGpuTest, WrongCandidateNeverWinsCallerDataIntactWinnerCorrect) {
  fj_tune_options o = Options(rt_);
  fj_tune_result* result = nullptr;
  ASSERT_OK(fj_tune(rt_, &o, &result));
  const fj_tune_summary s = Summary(result);
  EXPECT_EQ(s.num_rows, 16u);
  EXPECT_EQ(s.source, FJ_CACHE_COMPILED);
  ASSERT_LT(s.winner, s.num_rows);
  for (size_t i = 0; i < s.num_rows; ++i) {
    const fj_tune_row row = Row(result, i);
    const std::string macros(row.macros.data, row.macros.size);
    std::printf(
        "row %2zu %-24s block %4u grid %6u: %-14s %9.2f us (min "
        "%9.2f, spread %.3f%s) %s\n",
        i, macros.c_str(), row.block[0], row.grid[0],
        fj_tune_status_name(row.status), row.median_us, row.min_us, row.spread,
        row.noisy ? ", noisy" : "",
        std::string(row.message.data, row.message.size).c_str());
    if (row.block[0] == 2048) {
      EXPECT_EQ(row.status, FJ_TUNE_LAUNCH_REFUSED) << i;
    } else if (absl::StrContains(macros, "WRONG")) {
      EXPECT_EQ(row.status, FJ_TUNE_WRONG_OUTPUT) << i;
    } else {
      EXPECT_EQ(row.status, FJ_TUNE_OK) << i;
      EXPECT_GT(row.median_us, 0);
      EXPECT_LE(row.min_us, row.median_us);
    }
  }
  const fj_tune_row win = Row(result, s.winner);
  const std::string win_macros(win.macros.data, win.macros.size);
  EXPECT_FALSE(absl::StrContains(win_macros, "WRONG"));
  EXPECT_EQ(s.stored, s.noisy ? 0 : 1);
  std::printf("winner: %s block %u, %.2f us; tuning took %.1f ms\n",
              win_macros.c_str(), win.block[0], win.median_us, s.tune_ms);

  // The caller's y is as it was.
  std::vector<float> y = DeviceY();
  EXPECT_EQ(std::memcmp(y.data(), y0_.data(), y.size() * 4), 0);

  // The winner, built and launched as the table says, is right.
  std::vector<std::string> split;
  fj_build_options b = build_;
  std::vector<fj_str> options;
  size_t start = 0;
  while (start < win_macros.size()) {
    size_t end = win_macros.find(' ', start);
    if (end == std::string::npos) end = win_macros.size();
    if (end > start) split.push_back(win_macros.substr(start, end - start));
    start = end + 1;
  }
  for (const std::string& p : split) options.push_back(S(p));
  b.nvrtc_options = options.data();
  b.num_nvrtc_options = options.size();
  fj_module* m = nullptr;
  ASSERT_OK(fj_module_build(rt_, &b, &m));
  fj_kernel* k = nullptr;
  ASSERT_OK(fj_module_get_kernel(m, S(kernel_), 0, &k));
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  for (int d = 0; d < 3; ++d) {
    cfg.grid[d] = win.grid[d];
    cfg.block[d] = win.block[d];
  }
  ASSERT_OK(fj_launch(k, &cfg, args_.data(), args_.size()));
  y = DeviceY();
  const std::vector<float> want = Reference();
  size_t bad = 0;
  for (int i = 0; i < kN; ++i) bad += y[i] != want[i];
  EXPECT_EQ(bad, 0u);
  EXPECT_OK(fj_module_destroy(m));
  EXPECT_OK(fj_tune_result_free(result));

  // A second runtime over the same folder: a disk hit, no timing.
  if (s.noisy) GTEST_SKIP() << "the winner was noisy: nothing was stored";
  fj_runtime* second = NewRuntime();
  fj_tune_options o2 = Options(second);
  fj_tune_result* again = nullptr;
  ASSERT_OK(fj_tune(second, &o2, &again));
  const fj_tune_summary s2 = Summary(again);
  EXPECT_EQ(s2.source, FJ_CACHE_DISK_HIT);
  EXPECT_EQ(s2.winner, s.winner);
  EXPECT_STREQ(s2.key, s.key);
  std::printf("second runtime: %s in %.3f ms\n",
              s2.source == FJ_CACHE_DISK_HIT ? "disk hit" : "other",
              s2.lookup_ms);
  EXPECT_OK(fj_tune_result_free(again));
  EXPECT_OK(fj_runtime_destroy(second));
}

struct CheckCtx {
  std::vector<float> want;
  int calls = 0;
};

int32_t CheckAxpy(void* user, size_t, const void* const* outputs,
                  const uint64_t* bytes, size_t n) {
  auto* ctx = static_cast<CheckCtx*>(user);
  ++ctx->calls;
  if (n != 1 || bytes[0] != ctx->want.size() * 4) return 0;
  const float* y = static_cast<const float*>(outputs[0]);
  for (size_t i = 0; i < ctx->want.size(); ++i) {
    if (std::fabs(y[i] - ctx->want[i]) > 1e-5f * (1 + std::fabs(ctx->want[i])))
      return 0;
  }
  return 1;
}

TEST_F(TuneGpuTest, CheckCallbackRefusesAWrongFirstCandidate) {
  fj_tune_options o = Options(rt_, /*wrong_first=*/true);
  CheckCtx ctx{Reference()};
  o.check_fn = CheckAxpy;
  o.check_user = &ctx;
  o.flags = FJ_TUNE_NO_CACHE_WRITE;
  fj_tune_result* result = nullptr;
  ASSERT_OK(fj_tune(rt_, &o, &result));
  const fj_tune_summary s = Summary(result);
  EXPECT_EQ(s.stored, 0);
  EXPECT_EQ(ctx.calls, 12);  // every candidate that launched
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(Row(result, i).status,
              i == 3 ? FJ_TUNE_LAUNCH_REFUSED : FJ_TUNE_WRONG_OUTPUT);
  }
  const fj_tune_row win = Row(result, s.winner);
  EXPECT_FALSE(absl::StrContains(std::string(win.macros.data, win.macros.size),
                                 "WRONG"));
  EXPECT_OK(fj_tune_result_free(result));
  std::vector<float> y = DeviceY();
  EXPECT_EQ(std::memcmp(y.data(), y0_.data(), y.size() * 4), 0);
}

}  // namespace
}  // namespace fleetjit
