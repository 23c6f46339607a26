// Destroying a handle while other threads use it (header rule 4): through
// the C ABI on the fake CUDA driver, each race run for many rounds. A call
// that meets a destroy either finishes or is refused with a clear status
// (a stale handle, or FAILED_PRECONDITION "destroyed while this call
// ran"); nothing crashes or touches freed memory (the CI runs this under
// ASan and TSan). Rounds: FJ_RACE_ROUNDS (default 1000; 200 for the slower
// races on builds). FJ_RACE_REAL_DRIVER=1 runs them on the system's driver
// and its first GPU (the GPU host), skipping without one.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"
#include "tests/common/temp_dir.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

constexpr int kThreads = 8;

int Rounds(int fallback) {
  const char* v = std::getenv("FJ_RACE_ROUNDS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

bool RealDriver() {
  const char* v = std::getenv("FJ_RACE_REAL_DRIVER");
  return v != nullptr && std::string(v) == "1";
}

// The driver the races run on: the fake's path, or "" for the system's.
std::string DriverPath() {
  return RealDriver() ? "" : fleetjit::testing::FakeDriverPath();
}

// A runtime on DriverPath() (disk cache off; `cache_dir`, when given, on),
// or a failure saying why.
::testing::AssertionResult NewRuntime(fj_runtime** out,
                                      const std::string& cache_dir = "") {
  if (!RealDriver() && cache_dir.empty()) {
    return fleetjit::testing::CreateFakeRuntime(out);
  }
  if (!RealDriver()) fjfake_reset(1);
  const std::string driver = DriverPath();
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = S(driver);
  if (cache_dir.empty()) {
    ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
  } else {
    ro.cache_dir = S(cache_dir);
  }
  fj_status* st = fj_runtime_create(&ro, out);
  if (st != nullptr) {
    ::testing::AssertionResult failed = ::testing::AssertionFailure()
                                        << fj_status_message(st, nullptr);
    fj_status_free(st);
    return failed;
  }
  int32_t n = 0;
  fj_status_free(fj_device_count(*out, &n));
  if (n < 1) {
    fj_runtime_destroy(*out);
    *out = nullptr;
    return ::testing::AssertionFailure() << "no device";
  }
  return ::testing::AssertionSuccess();
}

// What the racing threads saw: every status code, and any message that is
// not one of the expected refusals.
struct Seen {
  std::mutex mu;
  int ok = 0, refused = 0;
  std::vector<std::string> unexpected;

  void Note(fj_status* st) {
    const fj_code code = fj_status_code(st);
    const std::string message =
        st == nullptr ? "" : fj_status_message(st, nullptr);
    fj_status_free(st);
    std::lock_guard<std::mutex> lock(mu);
    if (code == FJ_OK) {
      ++ok;
    } else if ((code == FJ_INVALID_ARGUMENT &&
                message.find("is not a live fj_") != std::string::npos) ||
               (code == FJ_FAILED_PRECONDITION &&
                message.find("destroyed while this call ran") !=
                    std::string::npos)) {
      ++refused;
    } else if (unexpected.size() < 5) {
      unexpected.push_back(absl::StrCat(fj_code_name(code), ": ", message));
    }
  }
};

// Runs `work(i)` on kThreads threads and `destroy()` on this one once every
// thread has made at least one call (each reports it through `started`).
void Race(const std::function<void(int, std::atomic<int>&)>& work,
          const std::function<void()>& destroy) {
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { work(i, started); });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  destroy();
  for (std::thread& t : threads) t.join();
}

class DestroyRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The saxpy image, built once for the device (the fake's sm_90, or the
    // GPU), loaded into each round's runtime without a compile. On a GPU a
    // runtime kept open all along keeps the primary context retained, so
    // each round's runtime does not create it again.
    fj_runtime* rt = nullptr;
    if (RealDriver()) {
      ::testing::AssertionResult made = NewRuntime(&keeper_);
      if (!made) GTEST_SKIP() << "no GPU: " << made.message();
    }
    ASSERT_TRUE(NewRuntime(&rt));
    fj_build_options o{};
    o.struct_size = sizeof(o);
    const std::string source = fleetjit::testing::SaxpySource();
    o.source = S(source);
    fj_module* m = nullptr;
    FJ_ASSERT_OK(fj_module_build(rt, &o, &m));
    const void* data = nullptr;
    size_t size = 0;
    FJ_ASSERT_OK(fj_module_image(m, &data, &size));
    image_.assign(static_cast<const char*>(data), size);
    FJ_ASSERT_OK(fj_runtime_destroy(rt));
  }
  void TearDown() override {
    if (keeper_ != nullptr) fj_runtime_destroy(keeper_);
  }

  // A fresh runtime with saxpy loaded, its kernel, and a buffer of n floats
  // for y and x.
  struct Round {
    fj_runtime* rt = nullptr;
    fj_module* module = nullptr;
    fj_kernel* kernel = nullptr;
    uint64_t buffer = 0;
  };
  ::testing::AssertionResult Start(Round* r) {
    if (!NewRuntime(&r->rt))
      return ::testing::AssertionFailure() << "no runtime";
    fj_module_load_options lo{};
    lo.struct_size = sizeof(lo);
    lo.image = image_.data();
    lo.image_size = image_.size();
    if (Code(fj_module_load(r->rt, &lo, &r->module)) != FJ_OK ||
        Code(fj_module_get_kernel(r->module, S(kName), 0, &r->kernel)) !=
            FJ_OK ||
        Code(fj_mem_alloc(r->rt, 0, 2 * kN * sizeof(float), &r->buffer)) !=
            FJ_OK) {
      return ::testing::AssertionFailure() << "cannot load saxpy";
    }
    return ::testing::AssertionSuccess();
  }

  // One saxpy launch's arguments over `r`'s buffer.
  std::vector<fj_arg> Args(const Round& r) const {
    std::vector<fj_arg> args(4);
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_POINTER;
    args[0].v.pointer = r.buffer;
    args[1].kind = FJ_ARG_POINTER;
    args[1].v.pointer = r.buffer + kN * sizeof(float);
    args[2].kind = FJ_ARG_F32;
    args[2].v.f32 = 2.0f;
    args[3].kind = FJ_ARG_I32;
    args[3].v.i32 = kN;
    return args;
  }

  // Launches until a launch is refused (the kernel, module, runtime or
  // stream was destroyed).
  void LaunchUntilRefused(const Round& r, fj_stream* stream, Seen& seen,
                          std::atomic<int>& started) {
    const std::vector<fj_arg> args = Args(r);
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = kN / 256;
    cfg.grid[1] = cfg.grid[2] = 1;
    cfg.block[0] = 256;
    cfg.block[1] = cfg.block[2] = 1;
    cfg.stream = stream;
    for (int n = 0;; ++n) {
      fj_status* st = fj_launch(r.kernel, &cfg, args.data(), args.size());
      const bool refused = st != nullptr;
      seen.Note(st);
      if (n == 0) started.fetch_add(1);
      if (refused) return;
      std::this_thread::yield();  // 8 threads on few cores: let destroy in
    }
  }

  static void Expect(Seen& seen, const char* race) {
    EXPECT_TRUE(seen.unexpected.empty())
        << race << ": " << seen.unexpected.size()
        << " unexpected statuses, the first: " << seen.unexpected[0];
    EXPECT_GT(seen.refused, 0) << race << ": no call met the destroy";
  }

  static constexpr int kN = 1 << 12;
  static constexpr char kName[] = "saxpy";
  std::string image_;
  fj_runtime* keeper_ = nullptr;
};

TEST_F(DestroyRaceTest, ModuleDestroyedWhileThreadsLaunch) {
  Seen seen;
  for (int round = 0; round < Rounds(1000); ++round) {
    Round r;
    ASSERT_TRUE(Start(&r));
    Race(
        [&](int, std::atomic<int>& started) {
          LaunchUntilRefused(r, nullptr, seen, started);
        },
        [&] { FJ_ASSERT_OK(fj_module_destroy(r.module)); });
    FJ_ASSERT_OK(fj_runtime_destroy(r.rt));
  }
  Expect(seen, "module destroy vs launches");
}

TEST_F(DestroyRaceTest, RuntimeDestroyedWhileThreadsLaunch) {
  Seen seen;
  for (int round = 0; round < Rounds(1000); ++round) {
    Round r;
    ASSERT_TRUE(Start(&r));
    Race(
        [&](int, std::atomic<int>& started) {
          LaunchUntilRefused(r, nullptr, seen, started);
        },
        [&] { FJ_ASSERT_OK(fj_runtime_destroy(r.rt)); });
  }
  Expect(seen, "runtime destroy vs launches");
}

TEST_F(DestroyRaceTest, StreamDestroyedWhileThreadsLaunchOnIt) {
  Seen seen;
  for (int round = 0; round < Rounds(1000); ++round) {
    Round r;
    ASSERT_TRUE(Start(&r));
    fj_stream* stream = nullptr;
    FJ_ASSERT_OK(fj_stream_create(r.rt, 0, &stream));
    Race(
        [&](int, std::atomic<int>& started) {
          LaunchUntilRefused(r, stream, seen, started);
        },
        [&] { FJ_ASSERT_OK(fj_stream_destroy(stream)); });
    FJ_ASSERT_OK(fj_runtime_destroy(r.rt));
  }
  Expect(seen, "stream destroy vs launches");
}

TEST_F(DestroyRaceTest, ModuleDestroyedDuringGetKernel) {
  Seen seen;
  for (int round = 0; round < Rounds(1000); ++round) {
    Round r;
    ASSERT_TRUE(Start(&r));
    Race(
        [&](int, std::atomic<int>& started) {
          for (int n = 0;; ++n) {
            fj_kernel* k = nullptr;
            fj_status* st = fj_module_get_kernel(r.module, S(kName), 0, &k);
            const bool refused = st != nullptr;
            if (!refused) {
              // The kernel it named is live until the module goes: use it.
              fj_kernel_info info{};
              info.struct_size = sizeof(info);
              seen.Note(fj_kernel_info_get(k, &info));
            }
            seen.Note(st);
            if (n == 0) started.fetch_add(1);
            if (refused) return;
            std::this_thread::yield();
          }
        },
        [&] { FJ_ASSERT_OK(fj_module_destroy(r.module)); });
    FJ_ASSERT_OK(fj_runtime_destroy(r.rt));
  }
  Expect(seen, "module destroy vs get_kernel");
}

// The runtime destroyed while threads are inside blocking builds: disk
// hits (a temp cache folder) most rounds, a cold NVRTC compile every 25th.
TEST_F(DestroyRaceTest, RuntimeDestroyedDuringBlockingBuilds) {
  fleetjit::testing::TempDir dir;
  const std::string cache = dir.path();
  const std::string source = fleetjit::testing::SaxpySource();
  Seen seen;
  for (int round = 0; round < Rounds(200); ++round) {
    fj_runtime* rt = nullptr;
    ASSERT_TRUE(NewRuntime(&rt, cache));
    // Every 25th round a source never built before: a compile in flight.
    const std::string text =
        round % 25 == 0 ? absl::StrCat(source, "\n// round ", round, "\n")
                        : source;
    Race(
        [&](int i, std::atomic<int>& started) {
          for (int n = 0;; ++n) {
            fj_build_options o{};
            o.struct_size = sizeof(o);
            o.source = S(text);
            fj_module* m = nullptr;
            if (n == 0) started.fetch_add(1);
            fj_status* st = fj_module_build(rt, &o, &m);
            const bool refused = st != nullptr;
            seen.Note(st);
            if (refused) return;
            seen.Note(fj_module_destroy(m));
          }
        },
        [&] { FJ_ASSERT_OK(fj_runtime_destroy(rt)); });
  }
  Expect(seen, "runtime destroy vs blocking builds");
}

TEST_F(DestroyRaceTest, BuildDestroyedWhileThreadsWaitOnIt) {
  Seen seen;
  const std::string source = fleetjit::testing::SaxpySource();
  fj_runtime* rt = nullptr;
  ASSERT_TRUE(NewRuntime(&rt));
  for (int round = 0; round < Rounds(200); ++round) {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source);
    fj_build* b = nullptr;
    FJ_ASSERT_OK(fj_module_build_async(rt, &o, &b));
    Race(
        [&](int i, std::atomic<int>& started) {
          for (int n = 0;; ++n) {
            int32_t done = 0;
            fj_status* st = i % 2 == 0 ? fj_build_wait(b, 1, &done)
                                       : fj_build_poll(b, &done);
            const bool refused = st != nullptr;
            seen.Note(st);
            if (n == 0) started.fetch_add(1);
            if (refused) return;
          }
        },
        [&] { FJ_ASSERT_OK(fj_build_destroy(b)); });
  }
  FJ_ASSERT_OK(fj_runtime_destroy(rt));
  Expect(seen, "build destroy vs waits");
}

// Two destroys at once: a module's and its runtime's (each round the
// module destroy either wins its handle or finds it gone).
TEST_F(DestroyRaceTest, ModuleAndRuntimeDestroyedAtOnce) {
  for (int round = 0; round < Rounds(1000); ++round) {
    Round r;
    ASSERT_TRUE(Start(&r));
    std::atomic<bool> go{false};
    fj_code module_code = FJ_INTERNAL;
    std::thread t([&] {
      while (!go.load()) std::this_thread::yield();
      module_code = Code(fj_module_destroy(r.module));
    });
    go.store(true);
    FJ_ASSERT_OK(fj_runtime_destroy(r.rt));
    t.join();
    EXPECT_TRUE(module_code == FJ_OK || module_code == FJ_INVALID_ARGUMENT)
        << fj_code_name(module_code);
  }
}

}  // namespace
