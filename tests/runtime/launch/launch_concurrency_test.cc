// Launches on a real GPU from many places at once: many threads on their
// own streams (pointer and tensor arguments), and several runtimes in one
// process, with thunks on and off. Without a GPU every test skips and says
// why.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/common/gpu_fixture.h"

namespace fleetjit::testing {
namespace {

TEST(LaunchGpu, ManyThreadsLaunchConcurrentlyOnTheirOwnStreams) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic, LoadKernel({"axpy", {}, {}, false}));
  ASSIGN_OR_FAIL(LoadedKernel * echo, LoadKernel({"tensor_echo"}));
  std::mt19937_64 seeds = SeededRng("ManyThreadsLaunchConcurrently");
  constexpr int kThreads = 16;
  constexpr int kLaunches = 300;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const uint64_t seed = seeds();
    threads.emplace_back([&, t, seed] {
      auto fail = [&](const std::string& why) {
        ++failures;
        if (errors[t].empty()) errors[t] = why;
      };
      std::mt19937_64 rng(seed);
      if (!GetGpu().device->MakeCurrent().ok()) return fail("MakeCurrent");
      const DriverApi& api = *GetGpu().api;
      CUstream stream = nullptr;
      if (api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        return fail("cuStreamCreate");
      }
      if (t % 4 == 3) {
        // Tensor launches: a small pool of tensors, reused and changed.
        const size_t elems = 4096;
        std::vector<float> storage = RandomInts(rng, elems, 1000);
        DeviceBuffer d(elems * 4);
        d.Upload(storage);
        HostTensor pool[3];
        for (int i = 0; i < 3; ++i) {
          pool[i].Set(d.address() + 64 * i, {8, 16 + 8 * i}, {}, {4, 8});
        }
        DeviceBuffer raw(320), gathered(elems * 4);
        for (int i = 0; i < kLaunches / 10; ++i) {
          HostTensor& ht = pool[rng() % 3];
          absl::Status s =
              LaunchArgs(echo, Config(2, 128), stream,
                         {TensorArg(&ht.arg), PtrArg(raw.address()),
                          PtrArg(gathered.address())});
          if (!s.ok()) return fail(s.ToString());
          if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS)
            return fail("sync");
          std::vector<float> g =
              gathered.Download<float>(ht.shape[0] * ht.shape[1]);
          const int64_t first =
              (reinterpret_cast<uintptr_t>(ht.tensor.data) - d.address()) / 4;
          for (size_t e = 0; e < g.size(); ++e) {
            if (g[e] != storage[first + e])
              return fail(absl::StrCat("tensor element ", e));
          }
        }
      } else {
        LoadedKernel* k = t % 2 ? thunked : generic;
        const int n = 4096 + static_cast<int>(rng() % 4096);
        std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
        DeviceBuffer dx(n * 4), dy(n * 4);
        dx.Upload(x);
        dy.Upload(y);
        for (int i = 0; i < kLaunches; ++i) {
          absl::Status s =
              LaunchArgs(k, Config((n + 127) / 128, 128), stream,
                         {PtrArg(dy.address()), PtrArg(dx.address()),
                          F32Arg(1.0f), I32Arg(n)});
          if (!s.ok()) return fail(s.ToString());
        }
        if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS)
          return fail("sync");
        std::vector<float> got = dy.Download<float>(n);
        for (int i = 0; i < n; ++i) {
          if (got[i] != y[i] + kLaunches * x[i])
            return fail(absl::StrCat("element ", i));
        }
      }
      api.cuStreamDestroy(stream);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(failures.load(), 0);
}

// Two runtimes in one process, each with its own thunk JIT, plus one with
// thunks off (what FLEETJIT_THUNKS=0 / FJ_RUNTIME_DISABLE_THUNKS give):
// every kernel computes the same result.
TEST(LaunchGpu, TwoRuntimesAndThunksOff) {
  REQUIRE_GPU();
  std::mt19937_64 rng = SeededRng("TwoRuntimesAndThunksOff");
  for (bool thunks : {true, false}) {
    SCOPED_TRACE(thunks ? "second runtime, thunks on"
                        : "third runtime, thunks off");
    RuntimeOptions options;
    (void)ApplyCacheEnvironment(options.cache,
                                options.env_overrides);  // the test cache dir
    options.thunks = thunks;
    auto rt = Runtime::Create(options);
    ASSERT_TRUE(rt.ok()) << rt.status();
    BuildSpec build;
    build.source = kLaunchSource;
    build.name = kLaunchSourceName;
    build.use_cache = false;
    auto record = (*rt)->BuildRecord(build);
    ASSERT_TRUE(record.ok()) << record.status();
    // The thunk object is generated after Build returns (never with
    // thunks off); kernels loaded after that get it at load.
    EXPECT_TRUE(record->artifact->thunk_object.empty());
    (*rt)->WaitForBackgroundWork();
    EXPECT_EQ((*rt)->thunks().stats().objects_generated, thunks ? 1u : 0u);
    auto k = (*rt)->LoadKernel(*record, "axpy", 0);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ((*k)->thunk.load() != nullptr, thunks);
    ASSIGN_OR_FAIL(LoadedKernel * ours,
                   LoadKernel({"axpy"}));  // the first runtime's
    const int n = 3000;
    std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
    DeviceBuffer dx(n * 4), dy(n * 4);
    dx.Upload(x);
    dy.Upload(y);
    for (LoadedKernel* kernel : {*k, ours}) {
      ASSERT_TRUE((*(*rt)->device(0))->MakeCurrent().ok());
      absl::Status s = LaunchArgs(kernel, Config((n + 255) / 256, 256), nullptr,
                                  {PtrArg(dy.address()), PtrArg(dx.address()),
                                   F32Arg(1.0f), I32Arg(n)});
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_TRUE(Sync(nullptr, "axpy").ok());
    std::vector<float> got = dy.Download<float>(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], y[i] + 2 * x[i]) << i;
  }
}

}  // namespace
}  // namespace fleetjit::testing
