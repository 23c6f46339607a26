// Bad launches on a real GPU: every kind of bad launch is a status before
// the driver, and a faulting kernel poisons its device (and only it) and is
// named in later refusals. Without a GPU every test skips and says why.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/common/gpu_fixture.h"

namespace fleetjit::testing {
namespace {

TEST(LaunchGpu, BadLaunchesAreStatusesBeforeTheDriver) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * axpy, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * sum,
                 LoadKernel({"tensor_sum", {"tensor_sum"}}));
  ASSIGN_OR_FAIL(LoadedKernel * empty, LoadKernel({"empty_kernel"}));
  const DeviceFacts& f = GetGpu().device->facts();
  DeviceBuffer dx(4096), dy(4096);
  const std::vector<fj_arg> good = {PtrArg(dy.address()), PtrArg(dx.address()),
                                    F32Arg(1), I32Arg(16)};
  struct Bad {
    const char* name;
    LoadedKernel* kernel;
    fj_launch_config cfg;
    std::vector<fj_arg> args;
    absl::StatusCode code;
    const char* message;
  };
  const absl::StatusCode range = absl::StatusCode::kOutOfRange;
  const absl::StatusCode invalid = absl::StatusCode::kInvalidArgument;
  fj_launch_config tall = Config(1, 1);
  tall.grid[1] = static_cast<uint32_t>(f.max_grid_dim[1]) + 1;
  fj_launch_config deep = Config(1, 1);
  deep.block[2] = static_cast<uint32_t>(f.max_block_dim[2]) + 1;
  fj_launch_config wide =
      Config(1, static_cast<uint32_t>(f.max_threads_per_block) * 2);
  wide.block[0] = static_cast<uint32_t>(f.max_block_dim[0]);
  wide.block[1] = 2;
  fj_launch_config shared =
      Config(1, 32, static_cast<uint32_t>(f.shared_per_block_optin) + 1);
  fj_launch_config big_cluster = Config(32, 32);
  big_cluster.cluster[0] = 4;
  big_cluster.cluster[1] = 8;
  big_cluster.grid[1] = 8;
  fj_launch_config ragged_cluster = Config(6, 32);
  ragged_cluster.cluster[0] = 4;
  HostTensor rank3, half;
  rank3.Set(dx.address(), {2, 2, 2}, {}, {});
  half.Set(dx.address(), {4, 4}, {}, {}, FJ_OOB_ZEROS, {2, 16, 1});
  std::vector<fj_arg> wrong_kind = good;
  wrong_kind[0] = F32Arg(1);
  std::vector<fj_arg> wrong_size = good;
  wrong_size[3] = Arg(FJ_ARG_I64);
  std::vector<Bad> bads = {
      {"grid.y over the limit", empty, tall, {}, range, "grid.y"},
      {"block.z over the limit", empty, deep, {}, range, "block.z"},
      {"too many threads", empty, wide, {}, range, "threads exceeds"},
      {"shared memory over opt-in", empty, shared, {}, range, "opt-in limit"},
      {"too few arguments",
       axpy,
       Config(1, 32),
       {good[0], good[1]},
       invalid,
       "takes 4"},
      {"wrong kind", axpy, Config(1, 32), wrong_kind, invalid, "argument 0"},
      {"wrong size", axpy, Config(1, 32), wrong_size, invalid, "argument 3"},
      {"tensor rank",
       sum,
       Config(1, 1),
       {TensorArg(&rank3.arg), PtrArg(dy.address())},
       invalid,
       "rank-2"},
      {"tensor dtype",
       sum,
       Config(1, 1),
       {TensorArg(&half.arg), PtrArg(dy.address())},
       invalid,
       "dtype f32"},
      {"null tensor",
       sum,
       Config(1, 1),
       {TensorArg(nullptr), PtrArg(dy.address())},
       invalid,
       "NULL"},
  };
  if (f.cluster_launch) {
    bads.push_back(
        {"cluster of 32", empty, big_cluster, {}, range, "exceeds 16"});
    bads.push_back({"grid not a multiple of the cluster",
                    empty,
                    ragged_cluster,
                    {},
                    range,
                    "not a multiple"});
  } else {
    fj_launch_config c = Config(2, 32);
    c.cluster[0] = 2;
    bads.push_back({"cluster on a device without clusters",
                    empty,
                    c,
                    {},
                    absl::StatusCode::kFailedPrecondition,
                    "cannot launch"});
  }
  for (const Bad& b : bads) {
    absl::Status s = LaunchArgs(b.kernel, b.cfg, nullptr, b.args);
    EXPECT_EQ(s.code(), b.code) << b.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), b.message))
        << b.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "launching '"))
        << b.name << ": " << s;
  }
  // None of them reached the driver or hurt the device: a good launch works.
  EXPECT_FALSE(GetGpu().device->is_poisoned());
  std::vector<float> ones(16, 1.0f);
  dx.Upload(ones);
  dy.Upload(ones);
  ASSERT_TRUE(LaunchArgs(axpy, Config(1, 32), nullptr, good).ok());
  ASSERT_TRUE(Sync(nullptr, "axpy").ok());
  EXPECT_EQ(dy.Download<float>(16)[15], 2.0f);
  // A declared tensor that matches is summed correctly.
  HostTensor m;
  m.Set(dx.address(), {4, 4}, {}, {});
  DeviceBuffer out(4);
  ASSERT_TRUE(LaunchArgs(sum, Config(1, 1), nullptr,
                         {TensorArg(&m.arg), PtrArg(out.address())})
                  .ok());
  ASSERT_TRUE(Sync(nullptr, "tensor_sum").ok());
  EXPECT_EQ(out.Download<float>(1)[0], 16.0f);
}

// Runs in a fresh process (death-test style "threadsafe" re-executes the
// binary): a faulting kernel leaves its context unusable for good.
void FaultInAFreshProcess() {
  auto die = [](const std::string& why) {
    std::fprintf(stderr, "fault-child: FAILED: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  Gpu& g = GetGpu();
  if (!g.skip.empty() || !g.device->MakeCurrent().ok())
    die("no GPU in the child");
  auto fault = LoadKernel({"fault"});
  auto axpy = LoadKernel({"axpy"});
  if (!fault.ok() || !axpy.ok()) die("cannot load kernels");
  absl::Status s = LaunchArgs(*fault, Config(1, 1), nullptr, {PtrArg(0x10)});
  if (s.ok())
    s = Sync(nullptr, absl::StrCat("kernel '", (*fault)->display_name,
                                   "': cuStreamSynchronize"));
  if (s.ok()) die("the faulting kernel reported no error");
  if (!absl::StrContains(s.message(), "fault"))
    die("status does not name the kernel: " + s.ToString());
  if (!g.device->is_poisoned()) die("device not poisoned: " + s.ToString());
  absl::Status later = LaunchArgs(*axpy, Config(1, 32), nullptr,
                                  {PtrArg(0), PtrArg(0), F32Arg(1), I32Arg(0)});
  if (later.code() != absl::StatusCode::kFailedPrecondition ||
      !absl::StrContains(later.message(), "fault")) {
    die("a later launch was not refused naming the faulting kernel: " +
        later.ToString());
  }
  std::fprintf(stderr, "fault-child: poisoned: %s\n", later.ToString().c_str());
  // The driver makes the fault sticky for the whole process (two H200s,
  // driver 580: device 1's calls returned CUDA_ERROR_ILLEGAL_ADDRESS too),
  // so device 1 is refused up front, naming device 0's fault and kernel,
  // rather than failing later inside the driver.
  if (g.runtime->device_count() > 1) {
    auto d1 = g.runtime->device(1);
    if (!d1.ok()) die("device 1: " + d1.status().ToString());
    absl::StatusOr<CUcontext> c1 = (*d1)->MakeCurrent();
    if (c1.ok() ||
        c1.status().code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(c1.status().message(), "fault") ||
        !absl::StrContains(c1.status().message(), "device 1")) {
      die("device 1 was not refused naming device 0's fault: " +
          c1.status().ToString());
    }
    std::fprintf(stderr, "fault-child: device 1 refused: %s\n",
                 c1.status().ToString().c_str());
  }
  std::fprintf(stderr, "fault-child: ok\n");
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(LaunchGpuDeathTest, AFaultingKernelPoisonsItsDeviceAndIsNamed) {
  if (!GetGpu().skip.empty()) GTEST_SKIP() << GetGpu().skip;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FaultInAFreshProcess(), ::testing::ExitedWithCode(0),
              "fault-child: ok");
}

}  // namespace
}  // namespace fleetjit::testing
