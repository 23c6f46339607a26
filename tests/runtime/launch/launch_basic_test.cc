// The launch path on a real GPU, the basics: the test kernels build for
// sm_90 under every copy implementation with thunks (NVRTC only), an axpy
// and scalars of every size through the JIT-built thunk and the generic
// path, dynamic shared memory above 48 KiB, and clusters. Results are
// checked on fresh random data. Without a GPU every test skips and says why.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "jit/thunk/thunk_codegen.h"
#include "tests/common/gpu_fixture.h"

namespace fleetjit::testing {
namespace {

// Needs NVRTC but no GPU: the kernels above build for sm_90 under every copy
// implementation, their layouts are what the launch tests assume, and every
// kernel gets a thunk. Catches source mistakes before a GPU run.

TEST(LaunchGpuSource, BuildsForSm90UnderEveryImplementationWithThunks) {
  RuntimeOptions options;
  (void)ApplyCacheEnvironment(options.cache,
                              options.env_overrides);  // the test cache dir
  auto rt = Runtime::Create(options);
  ASSERT_TRUE(rt.ok()) << rt.status();
  for (jit::CopyImpl impl :
       {jit::CopyImpl::kSync, jit::CopyImpl::kCpAsync, jit::CopyImpl::kTma}) {
    SCOPED_TRACE(jit::CopyImplName(impl));
    BuildSpec build;
    build.source = kLaunchSource;
    build.name = kLaunchSourceName;
    build.name_expressions = {"typed_scalars", "tensor_sum"};
    build.target = *jit::ParseTarget("sm_90");
    build.copy_impl = impl;
    build.use_cache = false;
    auto record = (*rt)->BuildRecord(build);
    if (!record.ok() && absl::StrContains(record.status().message(), "NVRTC")) {
      GTEST_SKIP() << "no NVRTC: " << record.status();
    }
    ASSERT_TRUE(record.ok()) << record.status();
    const jit::Artifact& a = *record->artifact;
    const jit::KernelEntry* sum = a.FindKernel("tensor_sum");
    ASSERT_NE(sum, nullptr);
    ASSERT_EQ(sum->params.size(), 2u);
    EXPECT_EQ(sum->params[0].kind, jit::ParamKind::kTensor);
    EXPECT_EQ(sum->params[0].tensor_rank, 2);
    EXPECT_EQ(sum->params[0].tensor_dtype, fj::dtype_f32);
    for (const char* name : {"scalars", "typed_scalars"}) {
      const jit::KernelEntry* k = a.FindKernel(name);
      ASSERT_NE(k, nullptr) << name;
      EXPECT_EQ(k->params.size(), 15u) << name;
    }
    const jit::KernelEntry* echo = a.FindKernel("tensor_echo");
    ASSERT_NE(echo, nullptr);
    EXPECT_EQ(echo->params[0].kind, jit::ParamKind::kTensor);
    EXPECT_EQ(echo->params[0].size, 320u);
    jit::ThunkCodegenStats stats;
    auto object = jit::EmitThunkObject(a.kernels, a.copy_impl, &stats);
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_EQ(stats.skipped, 0);
    std::printf("[ info     ] %s: %zu kernels, NVRTC %.1f ms, thunks %.2f ms\n",
                std::string(jit::CopyImplName(impl)).c_str(), a.kernels.size(),
                a.compile_ms, stats.ir_ms + stats.codegen_ms);
  }
}

TEST(LaunchGpu, AxpyThroughBothPaths) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic,
                 LoadKernel({"axpy", {}, {}, /*thunk=*/false}));
  ASSERT_EQ(generic->thunk.load(), nullptr);
  std::mt19937_64 rng = SeededRng("AxpyThroughBothPaths");
  for (LoadedKernel* k : {thunked, generic}) {
    const int n = 1000 + static_cast<int>(rng() % 5000);
    std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
    const float a = static_cast<float>(1 + rng() % 4);
    DeviceBuffer dx(n * 4), dy(n * 4);
    dx.Upload(x);
    dy.Upload(y);
    ASSERT_TRUE(LaunchArgs(k, Config((n + 255) / 256, 256), nullptr,
                           {PtrArg(dy.address()), PtrArg(dx.address()),
                            F32Arg(a), I32Arg(n)})
                    .ok());
    ASSERT_TRUE(Sync(nullptr, "axpy").ok());
    std::vector<float> got = dy.Download<float>(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], y[i] + a * x[i]) << i;
  }
}

TEST(LaunchGpu, ScalarsOfEverySizeArriveIntact) {
  REQUIRE_GPU();
  std::mt19937_64 rng = SeededRng("ScalarsOfEverySizeArriveIntact");
  struct S12 {
    int32_t a, b, c;
  };
  struct S24 {
    int64_t a, b;
    int32_t c;
  };
  static_assert(sizeof(S24) == 24);
  for (const KernelSpec& spec :
       {KernelSpec{"scalars"}, KernelSpec{"scalars", {}, {}, false},
        KernelSpec{"typed_scalars", {"typed_scalars"}},
        KernelSpec{"typed_scalars", {"typed_scalars"}, {}, false}}) {
    SCOPED_TRACE(
        absl::StrCat(spec.name, spec.thunk ? " (thunk)" : " (generic)"));
    ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel(spec));
    const bool typed = spec.name == "typed_scalars";
    DeviceBuffer out(18 * 8);
    out.Poison(0xCD);
    S12 s12{static_cast<int32_t>(rng()), static_cast<int32_t>(rng()),
            static_cast<int32_t>(rng())};
    S24 s24{static_cast<int64_t>(rng()), static_cast<int64_t>(rng()),
            static_cast<int32_t>(rng())};
    std::vector<fj_arg> args(15);
    args[0] = PtrArg(out.address());
    args[1] = Arg(FJ_ARG_I8);
    args[1].v.i8 = static_cast<int8_t>(rng());
    args[2] = Arg(FJ_ARG_I16);
    args[2].v.i16 = static_cast<int16_t>(rng());
    args[3] = Arg(FJ_ARG_I32);
    args[3].v.i32 = static_cast<int32_t>(rng());
    args[4] = Arg(FJ_ARG_I64);
    args[4].v.i64 = static_cast<int64_t>(rng());
    args[5] = Arg(FJ_ARG_U8);
    args[5].v.u8 = static_cast<uint8_t>(rng());
    args[6] = Arg(FJ_ARG_U16);
    args[6].v.u16 = static_cast<uint16_t>(rng());
    args[7] = Arg(FJ_ARG_U32);
    args[7].v.u32 = static_cast<uint32_t>(rng());
    args[8] = Arg(FJ_ARG_U64);
    args[8].v.u64 = rng();
    // unsigned short parameters: F16/BF16 bits where the kind is unknown
    // (extern "C"), U16 where the C++ type says unsigned.
    args[9] = Arg(typed ? FJ_ARG_U16 : FJ_ARG_F16);
    args[9].v.u16 = static_cast<uint16_t>(rng());
    args[10] = Arg(typed ? FJ_ARG_U16 : FJ_ARG_BF16);
    args[10].v.u16 = static_cast<uint16_t>(rng());
    args[11] = F32Arg(static_cast<float>(static_cast<int32_t>(rng())) / 7.0f);
    args[12] = Arg(FJ_ARG_F64);
    args[12].v.f64 = static_cast<double>(static_cast<int64_t>(rng())) / 3.0;
    args[13] = Arg(FJ_ARG_BYTES);
    args[13].size = sizeof(s12);
    args[13].v.bytes = &s12;
    args[14] = Arg(FJ_ARG_BYTES);
    args[14].size = sizeof(s24);
    args[14].v.bytes = &s24;
    absl::Status launched = LaunchArgs(k, Config(1, 1), nullptr, args);
    ASSERT_TRUE(launched.ok()) << launched;
    ASSERT_TRUE(Sync(nullptr, "scalars").ok());
    std::vector<uint64_t> got = out.Download<uint64_t>(18);
    uint32_t f32_bits;
    std::memcpy(&f32_bits, &args[11].v.f32, 4);
    uint64_t f64_bits;
    std::memcpy(&f64_bits, &args[12].v.f64, 8);
    const uint64_t want[18] = {
        static_cast<uint64_t>(static_cast<int64_t>(args[1].v.i8)),
        static_cast<uint64_t>(static_cast<int64_t>(args[2].v.i16)),
        static_cast<uint64_t>(static_cast<int64_t>(args[3].v.i32)),
        static_cast<uint64_t>(args[4].v.i64),
        args[5].v.u8,
        args[6].v.u16,
        args[7].v.u32,
        args[8].v.u64,
        args[9].v.u16,
        args[10].v.u16,
        f32_bits,
        f64_bits,
        static_cast<uint32_t>(s12.a),
        static_cast<uint32_t>(s12.b),
        static_cast<uint32_t>(s12.c),
        static_cast<uint64_t>(s24.a),
        static_cast<uint64_t>(s24.b),
        static_cast<uint32_t>(s24.c)};
    for (int i = 0; i < 18; ++i) EXPECT_EQ(got[i], want[i]) << "field " << i;
  }
}

TEST(LaunchGpu, DynamicSharedMemoryAbove48KiB) {
  REQUIRE_GPU();
  const DeviceFacts& f = GetGpu().device->facts();
  for (bool thunk : {true, false}) {
    ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel({"smem_sum", {}, {}, thunk}));
    const uint32_t bytes = static_cast<uint32_t>(f.shared_per_block_optin -
                                                 k->static_shared_bytes);
    ASSERT_GT(bytes, 48u * 1024) << "the device cannot opt in above 48 KiB";
    const int n = static_cast<int>(bytes / 4);
    DeviceBuffer out(4);
    absl::Status s = LaunchArgs(k, Config(1, 256, bytes), nullptr,
                                {PtrArg(out.address()), I32Arg(n)});
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(Sync(nullptr, "smem_sum").ok());
    double want = 0;
    for (int i = 0; i < n; ++i) want += i % 7;
    EXPECT_EQ(out.Download<float>(1)[0], static_cast<float>(want));
    EXPECT_TRUE(k->dynamic_shared_raised.load());
    // One byte more than the device allows is refused before the driver.
    s = LaunchArgs(k, Config(1, 256, bytes + 1), nullptr,
                   {PtrArg(out.address()), I32Arg(n)});
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  }
}

TEST(LaunchGpu, ClusterLaunches) {
  REQUIRE_GPU();
  if (!GetGpu().device->facts().cluster_launch) {
    GTEST_SKIP() << "device cannot launch clusters (sm_90+)";
  }
  ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel({"cluster_ranks"}));
  for (uint32_t cluster : {2u, 8u, 16u}) {
    const uint32_t grid = 32;
    DeviceBuffer out(grid * 4);
    out.Poison(0xFF);
    fj_launch_config cfg = Config(grid, 32);
    cfg.cluster[0] = cluster;
    absl::Status s = LaunchArgs(k, cfg, nullptr, {PtrArg(out.address())});
    if (cluster == 16 && !s.ok()) {
      // Non-portable sizes depend on the device and the kernel's resources.
      std::printf("[ info     ] cluster of 16 refused: %s\n",
                  s.ToString().c_str());
      continue;
    }
    ASSERT_TRUE(s.ok()) << "cluster " << cluster << ": " << s;
    ASSERT_TRUE(Sync(nullptr, "cluster_ranks").ok());
    std::vector<uint32_t> got = out.Download<uint32_t>(grid);
    for (uint32_t b = 0; b < grid; ++b)
      EXPECT_EQ(got[b], b % cluster) << "block " << b;
    if (cluster == 16) {
      EXPECT_TRUE(k->non_portable_cluster_allowed.load());
      std::printf("[ info     ] cluster of 16 (non-portable) ran\n");
    }
  }
}

}  // namespace
}  // namespace fleetjit::testing
