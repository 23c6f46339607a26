// fork() (issue 12, item 5; issue 45 for builds): CUDA is not fork-safe, so
// in a child every call on the parent's runtime or its objects, builds and
// destroys included, is FAILED_PRECONDITION (saying to create the runtime
// after fork) without touching the parent's objects, and a runtime created in
// the child works end to end. On the CPU through the fake driver; on a GPU
// host also through the real one (where a child of a process that
// initialised CUDA may not get the driver at all: then the new runtime
// must say so in fj_runtime_driver_error instead of crashing).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "runtime/builder/background_worker.h"
#include "runtime/builder/build_pool.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/process.h"
#include "tests/common/seed.h"
#include "tests/common/test_paths.h"

namespace fleetjit::testing {
namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }
fj_str S(const char* s) { return fj_str{s, std::strlen(s)}; }

constexpr const char* kSource =
    "extern \"C\" __global__ void add(float* p, float v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += v; "
    "}\n";

// Everything a session holds.
struct Session {
  fj_runtime* rt = nullptr;
  fj_module* module = nullptr;
  fj_kernel* kernel = nullptr;
  fj_stream* stream = nullptr;
  uint64_t buffer = 0;
  int n = 0;
  std::string error;  // the first failure, "" if none

  bool Check(const char* what, fj_status* st) {
    if (st == nullptr) return true;
    if (error.empty())
      error = std::string(what) + ": " + fj_status_message(st, nullptr);
    fj_status_free(st);
    return false;
  }
};

// Creates a runtime on `driver` ("" = the system's) and everything else;
// with no device, only the runtime. Returns false with s.error set.
bool Open(Session& s, const std::string& driver, const std::string& cache_dir) {
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  o.libcuda_path = S(driver);
  o.cache_dir = S(cache_dir);
  static const std::string target = "compute_90";
  if (!driver.empty()) o.target_override = S(target);  // the fake loads PTX
  if (!s.Check("fj_runtime_create", fj_runtime_create(&o, &s.rt))) return false;
  int32_t devices = 0;
  fj_device_count(s.rt, &devices);
  if (devices == 0) {
    s.error = std::string("no device: ") + fj_runtime_driver_error(s.rt);
    return false;
  }
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(kSource);
  s.n = 4096;
  return s.Check("fj_module_build", fj_module_build(s.rt, &b, &s.module)) &&
         s.Check("fj_module_get_kernel",
                 fj_module_get_kernel(s.module, S("add"), 0, &s.kernel)) &&
         s.Check("fj_stream_create", fj_stream_create(s.rt, 0, &s.stream)) &&
         s.Check("fj_mem_alloc", fj_mem_alloc(s.rt, 0, 4 * s.n, &s.buffer));
}

// A random round trip through device memory, and a launch.
bool RoundTrip(Session& s, std::mt19937_64& rng) {
  std::vector<float> in(s.n), out(s.n, -1.f);
  for (float& v : in) v = static_cast<float>(rng() % 100000) / 7.f;
  fj_arg args[3] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = s.buffer;
  args[1].kind = FJ_ARG_F32;
  args[1].v.f32 =
      0.f;  // adds nothing: the data survive on the fake and a GPU alike
  args[2].kind = FJ_ARG_I32;
  args[2].v.i32 = s.n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = s.n / 256;
  cfg.block[0] = 256;
  cfg.stream = s.stream;
  if (!s.Check("fj_memcpy_htod",
               fj_memcpy_htod(s.rt, s.buffer, in.data(), 4 * s.n, s.stream)) ||
      !s.Check("fj_launch", fj_launch(s.kernel, &cfg, args, 3)) ||
      !s.Check("fj_memcpy_dtoh",
               fj_memcpy_dtoh(s.rt, out.data(), s.buffer, 4 * s.n, s.stream)) ||
      !s.Check("fj_stream_synchronize", fj_stream_synchronize(s.stream))) {
    return false;
  }
  if (std::memcmp(in.data(), out.data(), 4 * s.n) != 0) {
    s.error = "the round trip changed the data";
    return false;
  }
  return true;
}

bool Close(Session& s) {
  bool ok = s.Check("fj_stream_destroy", fj_stream_destroy(s.stream));
  ok &= s.Check("fj_mem_free", fj_mem_free(s.rt, s.buffer));
  ok &= s.Check("fj_module_destroy", fj_module_destroy(s.module));
  ok &= s.Check("fj_runtime_destroy", fj_runtime_destroy(s.rt));
  return ok;
}

// In the child: every driver-bound call on the parent's session is
// FAILED_PRECONDITION. Returns "" or what went wrong.
std::string ParentSessionRefused(Session& parent) {
  std::vector<float> host(parent.n, 1.f);
  fj_arg args[3] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = parent.buffer;
  args[1].kind = FJ_ARG_F32;
  args[2].kind = FJ_ARG_I32;
  args[2].v.i32 = parent.n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  uint64_t extra = 0;
  fj_stream* another = nullptr;
  fj_kernel* again = nullptr;
  fj_module* built = nullptr;
  fj_build* pending = nullptr;
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(kSource);
  fj_module_info info{};
  info.struct_size = sizeof(info);
  // Rule 7 covers every call, builds and destroys included (issue 45): a
  // build in a child once returned OK.
  struct {
    const char* name;
    fj_status* status;
  } calls[] = {
      {"fj_mem_alloc", fj_mem_alloc(parent.rt, 0, 1024, &extra)},
      {"fj_memcpy_htod",
       fj_memcpy_htod(parent.rt, parent.buffer, host.data(), 64, nullptr)},
      {"fj_memcpy_dtoh", fj_memcpy_dtoh(parent.rt, host.data(), parent.buffer,
                                        64, parent.stream)},
      {"fj_memset_d8", fj_memset_d8(parent.rt, parent.buffer, 0, 64, nullptr)},
      {"fj_launch", fj_launch(parent.kernel, &cfg, args, 3)},
      {"fj_stream_synchronize", fj_stream_synchronize(parent.stream)},
      {"fj_stream_create", fj_stream_create(parent.rt, 0, &another)},
      {"fj_mem_free", fj_mem_free(parent.rt, parent.buffer)},
      {"fj_module_build", fj_module_build(parent.rt, &b, &built)},
      {"fj_module_build_async", fj_module_build_async(parent.rt, &b, &pending)},
      {"fj_module_get_kernel",
       fj_module_get_kernel(parent.module, S("add"), 0, &again)},
      {"fj_module_info_get", fj_module_info_get(parent.module, &info)},
      {"fj_stream_destroy", fj_stream_destroy(parent.stream)},
      {"fj_module_destroy", fj_module_destroy(parent.module)},
      {"fj_runtime_destroy", fj_runtime_destroy(parent.rt)},
  };
  std::string problems;
  for (auto& c : calls) {
    const fj_code code = fj_status_code(c.status);
    std::string message = fj_status_message(c.status, nullptr);
    fj_status_free(c.status);
    if (code != FJ_FAILED_PRECONDITION || !absl::StrContains(message, "fork")) {
      problems += std::string(c.name) + " gave " + fj_code_name(code) + " (" +
                  message + "); ";
    }
  }
  if (built != nullptr || pending != nullptr || again != nullptr) {
    problems += "a refused call wrote its output; ";
  }
  return problems;
}

TEST(ForkTest, FakeDriverChildIsRefusedAndANewRuntimeWorks) {
  auto rng = SeededRng("FakeDriverChildIsRefusedAndANewRuntimeWorks");
  const std::string driver =
      BesideExecutable("../lib/libfj_fake_cuda.so", FJ_FAKE_CUDA_PATH);
  char dir_template[] = "/tmp/fj-fork-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  fjfake_reset(1);
  Session parent;
  if (!Open(parent, driver, dir)) {
    if (absl::StrContains(parent.error, "NVRTC")) GTEST_SKIP() << parent.error;
    FAIL() << parent.error;
  }
  ASSERT_TRUE(RoundTrip(parent, rng)) << parent.error;
  fjfake_live before;
  fjfake_get_live(&before);
  const uint64_t child_seed = rng();
  auto all_calls = [] {
    uint64_t n = 0;
    for (const auto& [name, calls] : fjfake_call_counts()) n += calls;
    return n;
  };
  const int code = InChild([&] {
    const uint64_t calls_before = all_calls();
    std::string refused = ParentSessionRefused(parent);
    if (!refused.empty()) {
      std::fprintf(stderr, "child: %s\n", refused.c_str());
      return 1;
    }
    // Refused before reaching the driver, which a fork() child must not use.
    if (all_calls() != calls_before) {
      std::fprintf(stderr, "child: the refused calls made %llu driver calls\n",
                   static_cast<unsigned long long>(all_calls() - calls_before));
      return 3;
    }
    std::mt19937_64 child_rng(child_seed);
    Session fresh;
    if (!Open(fresh, driver, dir) || !RoundTrip(fresh, child_rng) ||
        !Close(fresh)) {
      std::fprintf(stderr, "child: new runtime: %s\n", fresh.error.c_str());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(code, 0)
      << "1: a call on the parent's runtime was not refused; 2: a new "
         "runtime failed; 3: a refused call reached the driver (stderr says "
         "which); -2: the child hung (its stacks are on stderr)";
  // The parent's runtime is untouched by all that.
  ASSERT_TRUE(RoundTrip(parent, rng)) << parent.error;
  ASSERT_TRUE(Close(parent)) << parent.error;
  fjfake_live after;
  fjfake_get_live(&after);
  EXPECT_EQ(after.allocations, before.allocations - 1);
  EXPECT_EQ(after.streams, before.streams - 1);
  EXPECT_EQ(after.modules, 0);
  EXPECT_EQ(after.context_retains, 0);
  std::system((std::string("rm -rf ") + dir).c_str());
}

// fork() during a background job (a thunk generation inside LLVM, a disk
// publication) must not hand the child the locks that job holds: fork()
// waits until the running job is done and starts no other; the child drops
// the queued jobs and runs its own inline; the parent's worker resumes.
TEST(ForkTest, ForkWaitsForTheRunningBackgroundJobAndTheParentResumes) {
  auto rng =
      SeededRng("ForkWaitsForTheRunningBackgroundJobAndTheParentResumes");
  const int job_ms = 100 + static_cast<int>(rng() % 100);
  BackgroundWorker worker;
  std::atomic<bool> started{false}, finished{false};
  std::atomic<int> queued_ran{0};
  worker.Post([&] {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(job_ms));
    finished = true;
  });
  const int queued = 2 + static_cast<int>(rng() % 3);
  for (int i = 0; i < queued; ++i) worker.Post([&] { ++queued_ran; });
  while (!started) std::this_thread::yield();
  const int code = InChild([&] {
    if (!finished) return 1;        // forked in the middle of the job
    if (queued_ran != 0) return 2;  // a job started while fork() waited
    // The child's own job runs inline; the parent's queued ones never do.
    bool ran = false;
    worker.Post([&] { ran = true; });
    if (!ran || queued_ran != 0) return 3;
    worker.WaitIdle();  // no thread here to wait for: returns
    return queued_ran == 0 ? 0 : 4;
  });
  EXPECT_EQ(code, 0) << "1: fork() did not wait for the running job; 2: a "
                        "queued job started during fork(); 3/4: the child ran "
                        "an inherited job or not its own; -2: it hung";
  worker.WaitIdle();
  EXPECT_TRUE(finished);
  EXPECT_EQ(queued_ran, queued);  // the parent's queue resumed after fork()
}

// Forks right after `start_thread(rng)` has a worker start its thread, 40
// times; "" when every child allocated, freed and started a thread of its
// own, or what went wrong. A thread still starting when fork() runs may
// hold a lock (its TLS, the allocator's per-thread state, its first lock)
// that stays held in the child forever, so fork() must wait until it has
// parked. A child that hangs is killed after 30 s (its stacks printed).
template <typename StartThread>
std::string ForkAsThreadsStart(std::mt19937_64& rng, StartThread start_thread) {
  std::string failures;
  for (int round = 0; round < 40 && failures.empty(); ++round) {
    auto worker = start_thread(rng);
    const uint64_t child_seed = rng();
    const int code = InChild(
        [child_seed] {
          std::mt19937_64 child_rng(child_seed);
          std::vector<std::unique_ptr<char[]>> blocks;
          for (int i = 0; i < 20000; ++i) {
            blocks.emplace_back(new char[1 + child_rng() % 4096]);
            if (blocks.size() > 64) blocks.erase(blocks.begin());
          }
          std::thread([] {
            absl::Mutex mu;
            absl::MutexLock lock(&mu);
            std::vector<int> v(1000, 1);
          }).join();
          return 0;
        },
        std::chrono::seconds(30));
    if (code != 0) {
      failures += "round " + std::to_string(round) + ": child exit " +
                  std::to_string(code) + " (-2: it hung)";
    }
  }
  return failures;
}

TEST(ForkTest, ForkAsAWorkerThreadStartsLeavesTheChildWhole) {
  auto rng = SeededRng("ForkAsAWorkerThreadStartsLeavesTheChildWhole");
  EXPECT_EQ(ForkAsThreadsStart(rng,
                               [](std::mt19937_64& r) {
                                 auto worker =
                                     std::make_unique<BackgroundWorker>();
                                 const size_t bytes = 1 + r() % 65536;
                                 worker->Post([bytes] {
                                   std::vector<char> scratch(bytes, 'x');
                                 });
                                 return worker;
                               }),
            "");
}

TEST(ForkTest, ForkAsBuildPoolThreadsStartLeavesTheChildWhole) {
  auto rng = SeededRng("ForkAsBuildPoolThreadsStartLeavesTheChildWhole");
  EXPECT_EQ(ForkAsThreadsStart(
                rng,
                [](std::mt19937_64& r) {
                  auto pool = std::make_unique<BuildPool>(4);
                  const int builds = 1 + static_cast<int>(r() % 4);
                  for (int i = 0; i < builds; ++i) {
                    pool->Submit([]() -> absl::StatusOr<ModuleRecord> {
                      return absl::UnavailableError(std::string(200, 'x'));
                    });
                  }
                  return pool;
                }),
            "");
}

TEST(ForkTest, RealDriverChildIsRefusedAndANewRuntimeSaysWhatItGot) {
  auto rng = SeededRng("RealDriverChildIsRefusedAndANewRuntimeSaysWhatItGot");
  char dir_template[] = "/tmp/fj-fork-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  Session parent;
  if (!Open(parent, "", dir)) GTEST_SKIP() << parent.error;
  ASSERT_TRUE(RoundTrip(parent, rng)) << parent.error;
  const uint64_t child_seed = rng();
  const int code = InChild([&] {
    std::string refused = ParentSessionRefused(parent);
    if (!refused.empty()) {
      std::fprintf(stderr, "child: %s\n", refused.c_str());
      return 1;
    }
    std::mt19937_64 child_rng(child_seed);
    Session fresh;
    if (!Open(fresh, "", dir)) {
      // The driver refuses a child of a process that initialised it: that
      // must be a status naming the call, not a crash.
      std::fprintf(stderr, "child: new runtime: %s\n", fresh.error.c_str());
      if (fresh.rt == nullptr || !absl::StrContains(fresh.error, "cu"))
        return 3;
      fj_status_free(fj_runtime_destroy(fresh.rt));
      return 0;
    }
    if (!RoundTrip(fresh, child_rng) || !Close(fresh)) {
      std::fprintf(stderr, "child: new runtime: %s\n", fresh.error.c_str());
      return 2;
    }
    std::fprintf(stderr,
                 "child: a new runtime in the child works on the GPU\n");
    return 0;
  });
  EXPECT_EQ(code, 0)
      << "1: a call on the parent's runtime was not refused; 2: a new "
         "runtime failed; 3: no status naming the driver call; -2: the "
         "child hung";
  ASSERT_TRUE(RoundTrip(parent, rng)) << parent.error;
  ASSERT_TRUE(Close(parent)) << parent.error;
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace fleetjit::testing
