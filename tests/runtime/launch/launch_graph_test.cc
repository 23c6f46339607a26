// CUDA graph capture and replay on a real GPU: launches through the thunk,
// the generic path and a tensor kernel are captured (nothing runs), then
// replayed with the results checked. Without a GPU the test skips and says
// why.
#include <gtest/gtest.h>

#include <vector>

#include "tests/common/gpu_fixture.h"

namespace fleetjit::testing {
namespace {

TEST(LaunchGpu, GraphCaptureAndReplay) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic, LoadKernel({"axpy", {}, {}, false}));
  ASSIGN_OR_FAIL(LoadedKernel * tile, LoadKernel({"tile_add"}));
  std::mt19937_64 rng = SeededRng("GraphCaptureAndReplay");
  const DriverApi& api = *GetGpu().api;
  const int n = 5000;
  std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
  DeviceBuffer dx(n * 4), dy(n * 4);
  dx.Upload(x);
  dy.Upload(y);
  const int rows = 40, cols = 64;
  std::vector<float> tin_host = RandomInts(rng, rows * cols, 50);
  TileOperands ops(tin_host, rows, cols);
  fj_launch_config tile_cfg = Config(cols / 32, 128);
  tile_cfg.grid[1] = (rows + 15) / 16;

  CUstream stream = nullptr;
  ASSERT_EQ(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // Global mode: any unsafe call (a sync, an allocation) during capture,
  // from any thread, fails the capture.
  ASSERT_EQ(api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  constexpr int kPerGraph = 4;
  for (int i = 0; i < kPerGraph; ++i) {
    LoadedKernel* k = i % 2 ? generic : thunked;
    absl::Status s = LaunchArgs(
        k, Config((n + 255) / 256, 256), stream,
        {PtrArg(dy.address()), PtrArg(dx.address()), F32Arg(2.0f), I32Arg(n)});
    ASSERT_TRUE(s.ok()) << "captured launch " << i << ": " << s;
  }
  absl::Status s = LaunchArgs(
      tile, tile_cfg, stream,
      {TensorArg(&ops.tin.arg), TensorArg(&ops.tout.arg), F32Arg(3.0f)});
  ASSERT_TRUE(s.ok()) << s;
  CUgraph graph = nullptr;
  ASSERT_EQ(api.cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(api.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  // Nothing ran during capture.
  EXPECT_EQ(dy.Download<float>(n), y);
  constexpr int kReplays = 3;
  for (int r = 0; r < kReplays; ++r) {
    ASSERT_EQ(api.cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  }
  ASSERT_TRUE(Sync(stream, "graph replay").ok());
  std::vector<float> got = dy.Download<float>(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], y[i] + kReplays * kPerGraph * 2.0f * x[i]) << i;
  }
  std::vector<float> tiles = ops.dout.Download<float>(rows * cols);
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(tiles[i], tin_host[i] + 3.0f) << i;
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy(stream);
}

}  // namespace
}  // namespace fleetjit::testing
