// fj_tune end to end on the fake CUDA driver (tests/common/fake_cuda: an
// sm_90 device whose launches check their parameter buffer and do
// nothing, whose copies are real and whose events complete at once), with
// candidates built by the real NVRTC: what one call does, and the single
// flight of calls that tune one key at the same time.
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"
#include "tests/common/seed.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

// What one fj_tune call returned.
struct TuneRun {
  fj_code code = FJ_INTERNAL;
  std::string message;
  fj_tune_summary summary{};
};

class TuneFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fleetjit::testing::CreateFakeRuntime(&rt_));
    // saxpy(float* y, const float* x, float a, int n) over random data.
    std::mt19937_64 rng = fleetjit::testing::SeededRng(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<float> host(kN);
    for (uint64_t* p : {&y_, &x_}) {
      FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, kN * sizeof(float), p));
      for (float& v : host) v = dist(rng);
      FJ_ASSERT_OK(
          fj_memcpy_htod(rt_, *p, host.data(), kN * sizeof(float), nullptr));
    }
    build_.struct_size = sizeof(build_);
    build_.source = S(source_);
    build_.target = S(target_);
    for (uint32_t x : {64u, 128u, 256u}) {
      fj_tune_shape s{};
      s.struct_size = sizeof(s);
      s.block[0] = x;
      shapes_.push_back(s);
    }
    args_.resize(4);
    for (fj_arg& a : args_) a.struct_size = sizeof(fj_arg);
    args_[0].kind = FJ_ARG_POINTER;
    args_[0].v.pointer = y_;
    args_[1].kind = FJ_ARG_POINTER;
    args_[1].v.pointer = x_;
    args_[2].kind = FJ_ARG_F32;
    args_[2].v.f32 = 1.5f;
    args_[3].kind = FJ_ARG_I32;
    args_[3].v.i32 = static_cast<int32_t>(kN);
    out_bytes_ = kN * sizeof(float);
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    fjfake_reset(1);
  }

  // Options tuning saxpy over `macros` (each a candidate macro set) and
  // the three block shapes. `macros` must outlive the call.
  fj_tune_options Options(const std::vector<fj_str>& macros) {
    fj_tune_options o{};
    o.struct_size = sizeof(o);
    o.build = &build_;
    o.kernel = S(kernel_);
    o.macro_sets = macros.data();
    o.num_macro_sets = macros.size();
    o.shapes = shapes_.data();
    o.num_shapes = shapes_.size();
    o.grid_extent[0] = kN;
    o.grid_divisor[0] = S(block_x_);
    o.args = args_.data();
    o.num_args = args_.size();
    o.output_addresses = &y_;
    o.output_bytes = &out_bytes_;
    o.num_outputs = 1;
    return o;
  }

  TuneRun Tune(const fj_tune_options& o) {
    TuneRun run;
    fj_tune_result* result = nullptr;
    fj_status* st = fj_tune(rt_, &o, &result);
    run.code = fj_status_code(st);
    run.message = fj_status_message(st, nullptr);
    fj_status_free(st);
    if (result != nullptr) {
      run.summary.struct_size = sizeof(run.summary);
      EXPECT_EQ(Code(fj_tune_result_summary(result, &run.summary)), FJ_OK);
      EXPECT_EQ(Code(fj_tune_result_free(result)), FJ_OK);
    }
    return run;
  }

  static constexpr uint64_t kN = 4096;
  std::string source_ = ::fleetjit::testing::SaxpySource();
  std::string target_ = "compute_90";  // PTX: the fake reads its layouts
  std::string kernel_ = "saxpy", block_x_ = "block.x";
  fj_runtime* rt_ = nullptr;
  uint64_t y_ = 0, x_ = 0, out_bytes_ = 0;
  fj_build_options build_{};
  std::vector<fj_tune_shape> shapes_;
  std::vector<fj_arg> args_;
};

TEST_F(TuneFakeTest, OneCallTunesStoresAndASecondHitsMemory) {
  std::string m1 = "-DFJ_TUNE_FAKE=1", m2 = "-DFJ_TUNE_FAKE=2";
  std::vector<fj_str> macros = {S(m1), S(m2)};
  const fj_tune_options o = Options(macros);
  const uint64_t launches = fjfake_calls("cuLaunchKernelEx");
  TuneRun first = Tune(o);
  ASSERT_EQ(first.code, FJ_OK) << first.message;
  EXPECT_EQ(first.summary.num_rows, 6u);
  EXPECT_EQ(first.summary.source, FJ_CACHE_COMPILED);
  EXPECT_EQ(first.summary.stored, 1);
  EXPECT_GT(fjfake_calls("cuLaunchKernelEx"), launches);
  const uint64_t after_first = fjfake_calls("cuLaunchKernelEx");
  TuneRun second = Tune(o);
  ASSERT_EQ(second.code, FJ_OK) << second.message;
  EXPECT_EQ(second.summary.source, FJ_CACHE_MEMORY_HIT);
  EXPECT_EQ(second.summary.winner, first.summary.winner);
  EXPECT_STREQ(second.summary.key, first.summary.key);
  EXPECT_EQ(fjfake_calls("cuLaunchKernelEx"), after_first)
      << "a stored result launched candidates again";
}

// Two calls of one key at once: one tunes, the other waits for it and
// takes the stored result, so the key's candidates are launched as often
// as one call launches them (the same run of another key, alone, counts
// that). Without the single flight both calls tune and launch twice as
// often.
// An output buffer is saved, restored and read whole, so it must be CUDA
// memory inside one allocation: anything else is refused before a byte is
// copied, naming the output, and a good call works after.
TEST_F(TuneFakeTest, OutputsOutsideTheirAllocationAreRefused) {
  const std::string unused = "-DFJ_TUNE_FAKE_UNUSED=1";
  std::vector<fj_str> macros = {S(unused)};
  fj_tune_options o = Options(macros);
  o.flags = FJ_TUNE_NO_CACHE_READ | FJ_TUNE_NO_CACHE_WRITE;
  uint64_t host_word = 0;
  const struct {
    uint64_t address, bytes;
    const char* says;
  } bad[] = {
      {y_, UINT64_MAX, "past the end of the address space"},
      {y_, out_bytes_ + 4, "outside its allocation"},
      {y_ + 8, out_bytes_, "outside its allocation"},
      {reinterpret_cast<uint64_t>(&host_word), 8, "not CUDA memory"},
  };
  for (const auto& b : bad) {
    uint64_t address = b.address, bytes = b.bytes;
    o.output_addresses = &address;
    o.output_bytes = &bytes;
    TuneRun run = Tune(o);
    EXPECT_EQ(run.code, FJ_INVALID_ARGUMENT) << b.says << ": " << run.message;
    EXPECT_NE(run.message.find("outputs[0]"), std::string::npos) << run.message;
    EXPECT_NE(run.message.find(b.says), std::string::npos) << run.message;
  }
  o.output_addresses = &y_;
  o.output_bytes = &out_bytes_;
  TuneRun good = Tune(o);
  EXPECT_EQ(good.code, FJ_OK) << good.message;
}

TEST_F(TuneFakeTest, ConcurrentCallsOfOneKeyTuneOnce) {
  std::string alone = "-DFJ_TUNE_FAKE_ALONE=1";
  std::vector<fj_str> alone_macros = {S(alone)};
  uint64_t before = fjfake_calls("cuLaunchKernelEx");
  TuneRun single = Tune(Options(alone_macros));
  ASSERT_EQ(single.code, FJ_OK) << single.message;
  const uint64_t one_run = fjfake_calls("cuLaunchKernelEx") - before;
  ASSERT_GT(one_run, 0u);

  std::string together = "-DFJ_TUNE_FAKE_TOGETHER=1";
  std::vector<fj_str> macros = {S(together)};
  const fj_tune_options o = Options(macros);
  constexpr int kCallers = 3;
  std::vector<TuneRun> runs(kCallers);
  std::atomic<int> ready{0};
  before = fjfake_calls("cuLaunchKernelEx");
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kCallers) std::this_thread::yield();
      runs[t] = Tune(o);
    });
  }
  for (std::thread& t : threads) t.join();
  int tuned = 0, hits = 0;
  for (const TuneRun& r : runs) {
    ASSERT_EQ(r.code, FJ_OK) << r.message;
    if (r.summary.source == FJ_CACHE_COMPILED) ++tuned;
    if (r.summary.source == FJ_CACHE_MEMORY_HIT) ++hits;
    EXPECT_STREQ(r.summary.key, runs[0].summary.key);
    EXPECT_EQ(r.summary.winner, runs[0].summary.winner);
  }
  EXPECT_EQ(tuned, 1);
  EXPECT_EQ(hits, kCallers - 1);
  EXPECT_EQ(fjfake_calls("cuLaunchKernelEx") - before, one_run)
      << "the key was tuned more than once";
}

// With FJ_TUNE_NO_CACHE_READ every call tunes for itself: a call that
// waited for another's run of the key does not take that run's result.
TEST_F(TuneFakeTest, ConcurrentCallsThatSkipTheCacheEachTuneThemselves) {
  std::string m = "-DFJ_TUNE_FAKE_NO_READ=1";
  std::vector<fj_str> macros = {S(m)};
  fj_tune_options o = Options(macros);
  o.flags = FJ_TUNE_NO_CACHE_READ;
  uint64_t before = fjfake_calls("cuLaunchKernelEx");
  ASSERT_EQ(Tune(o).code, FJ_OK);
  const uint64_t one_run = fjfake_calls("cuLaunchKernelEx") - before;
  constexpr int kCallers = 2;
  std::vector<TuneRun> runs(kCallers);
  before = fjfake_calls("cuLaunchKernelEx");
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] { runs[t] = Tune(o); });
  }
  for (std::thread& t : threads) t.join();
  for (const TuneRun& r : runs) {
    ASSERT_EQ(r.code, FJ_OK) << r.message;
    EXPECT_EQ(r.summary.source, FJ_CACHE_COMPILED);
  }
  EXPECT_EQ(fjfake_calls("cuLaunchKernelEx") - before, kCallers * one_run);
}

}  // namespace
