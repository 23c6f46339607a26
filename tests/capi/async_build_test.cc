// Builds that do not block (fj_module_build_async, fj_build_*), on the CPU:
// named target sm_90, no GPU. Each test compiles its own source (a fresh
// token in a comment), so no cache tier answers for it.
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;
using fleetjit::testing::SaxpySource;

// A kernel source no earlier run has built.
std::string FreshSource(const char* tag) {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  return "// " + std::string(tag) + " " + std::to_string(rd()) + "-" +
         std::to_string(counter++) + "\n" + SaxpySource();
}

struct Options {
  std::string source, target = "sm_90", name = "async.cu";
  fj_build_options Get() const {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source);
    o.name = S(name);
    o.target = S(target);
    return o;
  }
};

class AsyncBuildTest : public fleetjit::testing::CapiRuntimeTest<> {
 protected:
  void SetUp() override {
    CapiRuntimeTest::SetUp();
    if (HasFatalFailure()) return;
    // NVRTC present? A synchronous build of a tiny source says.
    Options o{FreshSource("probe")};
    fj_build_options opts = o.Get();
    fj_module* m = nullptr;
    fj_status* st = fj_module_build(rt_, &opts, &m);
    if (fj_status_code(st) == FJ_UNAVAILABLE) {
      std::string why = fj_status_message(st, nullptr);
      fj_status_free(st);
      GTEST_SKIP() << "no NVRTC: " << why;
    }
    FJ_ASSERT_OK(st);
    fj_module_destroy(m);
  }
};

TEST_F(AsyncBuildTest, ReturnsAtOnceAndTakesTheModuleOnce) {
  Options o{FreshSource("once")};
  fj_build_options opts = o.Get();
  fj_build* b = nullptr;
  FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
  ASSERT_NE(b, nullptr);
  int32_t done = -1;
  FJ_ASSERT_OK(fj_build_poll(b, &done));
  EXPECT_TRUE(done == 0 || done == 1);
  FJ_ASSERT_OK(fj_build_wait(b, UINT32_MAX, &done));
  EXPECT_EQ(done, 1);
  FJ_ASSERT_OK(fj_build_poll(b, &done));
  EXPECT_EQ(done, 1);
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_build_take(b, &m));
  ASSERT_NE(m, nullptr);
  fj_module_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_module_info_get(m, &info));
  EXPECT_STREQ(info.target, "sm_90");
  EXPECT_EQ(info.cache_result, FJ_CACHE_COMPILED);
  fj_module* again = nullptr;
  EXPECT_EQ(Code(fj_build_take(b, &again)), FJ_FAILED_PRECONDITION);
  EXPECT_EQ(again, nullptr);
  FJ_ASSERT_OK(fj_build_destroy(b));
  // The module outlives its build handle.
  FJ_ASSERT_OK(fj_module_info_get(m, &info));
  FJ_ASSERT_OK(fj_module_destroy(m));
  EXPECT_EQ(Code(fj_build_poll(b, &done)), FJ_INVALID_ARGUMENT);  // destroyed
}

TEST_F(AsyncBuildTest, BadInputIsRefusedAtSubmit) {
  fj_build* b = nullptr;
  int32_t done = 0;
  EXPECT_EQ(Code(fj_module_build_async(rt_, nullptr, &b)), FJ_INVALID_ARGUMENT);
  Options o{FreshSource("bad")};
  fj_build_options opts = o.Get();
  EXPECT_EQ(Code(fj_module_build_async(nullptr, &opts, &b)),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_build_async(rt_, &opts, nullptr)),
            FJ_INVALID_ARGUMENT);
  opts.struct_size = 8;
  EXPECT_EQ(Code(fj_module_build_async(rt_, &opts, &b)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_EQ(Code(fj_build_poll(nullptr, &done)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_build_wait(nullptr, 0, &done)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_build_take(nullptr, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_build_destroy(nullptr)), FJ_OK);
  // A module handle is not a build handle.
  EXPECT_EQ(Code(fj_build_poll(reinterpret_cast<fj_build*>(rt_), &done)),
            FJ_INVALID_ARGUMENT);
  opts = o.Get();
  FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
  EXPECT_EQ(Code(fj_build_poll(b, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_build_take(b, nullptr)), FJ_INVALID_ARGUMENT);
  FJ_ASSERT_OK(fj_build_destroy(b));
  EXPECT_EQ(Code(fj_build_destroy(b)), FJ_INVALID_ARGUMENT);
}

TEST_F(AsyncBuildTest, CompileErrorsComeFromTakeWithTheLog) {
  Options o{"extern \"C\" __global__ void k() { this is not C++; }"};
  fj_build_options opts = o.Get();
  fj_build* b = nullptr;
  FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
  int32_t done = 0;
  FJ_ASSERT_OK(fj_build_wait(b, UINT32_MAX, &done));
  fj_module* m = nullptr;
  fj_status* st = fj_build_take(b, &m);
  EXPECT_EQ(fj_status_code(st), FJ_BUILD_ERROR);
  const char* log = fj_status_detail(st, S("build_log"), nullptr);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(log).find("error"), std::string::npos);
  fj_status_free(st);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(Code(fj_build_take(b, &m)), FJ_FAILED_PRECONDITION);
  FJ_ASSERT_OK(fj_build_destroy(b));
}

// The caller's strings may die right after the call.
TEST_F(AsyncBuildTest, OptionStringsAreCopiedAtSubmit) {
  auto source = std::make_unique<std::string>(FreshSource("copied"));
  auto target = std::make_unique<std::string>("sm_90");
  auto name = std::make_unique<std::string>("copied.cu");
  auto define = std::make_unique<std::string>("-DUNUSED_FLAG=1");
  fj_str nvrtc_options[1] = {S(*define)};
  fj_build_options opts{};
  opts.struct_size = sizeof(opts);
  opts.source = S(*source);
  opts.target = S(*target);
  opts.name = S(*name);
  opts.nvrtc_options = nvrtc_options;
  opts.num_nvrtc_options = 1;
  fj_build* b = nullptr;
  FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
  // Scribble over, then free, everything the options pointed to.
  for (std::string* s :
       {source.get(), target.get(), name.get(), define.get()}) {
    std::memset(s->data(), '#', s->size());
  }
  source.reset(), target.reset(), name.reset(), define.reset();
  nvrtc_options[0] = fj_str{nullptr, 0};
  std::memset(&opts, 0xAB, sizeof(opts));
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_build_take(b, &m));
  fj_module_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_module_info_get(m, &info));
  EXPECT_STREQ(info.target, "sm_90");
  const void* data = nullptr;
  size_t size = 0;
  FJ_ASSERT_OK(fj_module_image(m, &data, &size));
  std::string image(static_cast<const char*>(data), size);
  EXPECT_NE(image.find("saxpy"), std::string::npos);
  FJ_ASSERT_OK(fj_build_destroy(b));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(AsyncBuildTest, WaitTimesOutWithoutAnError) {
  Options o{FreshSource("timeout")};
  fj_build_options opts = o.Get();
  fj_build* b = nullptr;
  FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
  int32_t done = -1;
  FJ_ASSERT_OK(fj_build_wait(b, 0, &done));
  EXPECT_TRUE(done == 0 || done == 1);
  FJ_ASSERT_OK(fj_build_wait(b, UINT32_MAX, &done));
  EXPECT_EQ(done, 1);
  FJ_ASSERT_OK(fj_build_destroy(b));  // never taken: the module is dropped
}

// 64 threads, half blocking and half not, one source: NVRTC runs once.
TEST_F(AsyncBuildTest, SingleFlightHoldsAcrossBlockingAndAsyncCallers) {
  Options o{FreshSource("single-flight")};
  fj_cache_stats before{};
  before.struct_size = sizeof(before);
  FJ_ASSERT_OK(fj_cache_stats_get(rt_, &before));
  constexpr int kThreads = 64;
  std::atomic<int> ready{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      fj_build_options opts = o.Get();
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      fj_module* m = nullptr;
      if (t % 2 == 0) {
        if (Code(fj_module_build(rt_, &opts, &m)) != FJ_OK)
          failures.fetch_add(1);
      } else {
        fj_build* b = nullptr;
        if (Code(fj_module_build_async(rt_, &opts, &b)) != FJ_OK ||
            Code(fj_build_take(b, &m)) != FJ_OK) {
          failures.fetch_add(1);
        }
        fj_status_free(fj_build_destroy(b));
      }
      fj_status_free(fj_module_destroy(m));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  fj_cache_stats after{};
  after.struct_size = sizeof(after);
  FJ_ASSERT_OK(fj_cache_stats_get(rt_, &after));
  EXPECT_EQ(after.compiles - before.compiles, 1u);
  EXPECT_EQ(after.misses - before.misses, 1u);
  EXPECT_EQ(after.memory_hits - before.memory_hits, uint64_t{kThreads - 1});
}

// Destroying a build abandons it: a queued one never runs, a running one
// finishes in the background; a later build of the source still works.
TEST_F(AsyncBuildTest, DestroyedBuildsAreAbandoned) {
  std::vector<Options> sources;
  for (int i = 0; i < 6; ++i)
    sources.push_back(Options{FreshSource("abandoned")});
  for (const Options& o : sources) {
    fj_build_options opts = o.Get();
    fj_build* b = nullptr;
    FJ_ASSERT_OK(fj_module_build_async(rt_, &opts, &b));
    FJ_ASSERT_OK(fj_build_destroy(b));
  }
  fj_build_options opts = sources.back().Get();
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_module_build(rt_, &opts, &m));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

// A runtime destroyed with builds queued and running neither hangs nor
// leaks: queued builds are cancelled, running ones joined, handles invalid.
TEST(AsyncBuildShutdownTest, DestroyingTheRuntimeWithBuildsInFlight) {
  fj_runtime* rt = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &rt)), FJ_OK);
  std::vector<Options> sources;
  for (int i = 0; i < 24; ++i)
    sources.push_back(Options{FreshSource("shutdown")});
  std::vector<fj_build*> builds;
  for (const Options& o : sources) {
    fj_build_options opts = o.Get();
    fj_build* b = nullptr;
    FJ_ASSERT_OK(fj_module_build_async(rt, &opts, &b));
    builds.push_back(b);
  }
  // One taken (a live module at destruction), the rest in flight.
  fj_module* m = nullptr;
  fj_status_free(fj_build_take(builds[0], &m));
  auto destroyed = std::async(std::launch::async,
                              [rt] { return Code(fj_runtime_destroy(rt)); });
  // At most the running builds (<= 8) must finish: bounded by compile time.
  ASSERT_EQ(destroyed.wait_for(std::chrono::minutes(5)),
            std::future_status::ready)
      << "fj_runtime_destroy hung with builds in flight";
  EXPECT_EQ(destroyed.get(), FJ_OK);
  int32_t done = 0;
  for (fj_build* b : builds)
    EXPECT_EQ(Code(fj_build_poll(b, &done)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_build_destroy(builds[1])), FJ_INVALID_ARGUMENT);
  if (m != nullptr) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    EXPECT_EQ(Code(fj_module_info_get(m, &info)), FJ_INVALID_ARGUMENT);
  }
}

}  // namespace
