// fj_stream_wrap on a real GPU: a stream the caller made with the raw
// driver (dlopen'ed here, as a framework would) is borrowed; an async copy,
// a kernel that reads what it copied, and the copy back are ordered on it
// with no synchronisation in between (behind a spinning kernel, so a
// missing dependency would race); destroying the wrapper, and the runtime,
// leaves the raw stream usable. Without a GPU every test skips.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

// The few driver calls a framework would make, with their ABI types.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
struct RawDriver {
  void* lib = nullptr;
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  // Optional: another context of the same device (null when absent).
  CUresult (*cuCtxCreate)(CUcontext*, unsigned, CUdevice) = nullptr;
  CUresult (*cuCtxDestroy)(CUcontext) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemsetD32Async)(uint64_t, unsigned, size_t, CUstream);

  bool Load() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return false;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(lib, name));
      return fn != nullptr;
    };
    return get(cuInit, "cuInit") && get(cuDeviceGet, "cuDeviceGet") &&
           get(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
           get(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") &&
           get(cuCtxSetCurrent, "cuCtxSetCurrent") &&
           get(cuCtxGetCurrent, "cuCtxGetCurrent") &&
           (get(cuCtxCreate, "cuCtxCreate_v2"),
            get(cuCtxDestroy, "cuCtxDestroy_v2"), true) &&
           get(cuStreamCreate, "cuStreamCreate") &&
           get(cuStreamDestroy, "cuStreamDestroy_v2") &&
           get(cuStreamSynchronize, "cuStreamSynchronize") &&
           get(cuMemHostAlloc, "cuMemHostAlloc") &&
           get(cuMemFreeHost, "cuMemFreeHost") &&
           get(cuMemsetD32Async, "cuMemsetD32Async") && cuInit(0) == 0;
  }
};

std::string Take(fj_status* st) {
  std::string m = st == nullptr
                      ? ""
                      : std::string(fj_code_name(fj_status_code(st))) + ": " +
                            fj_status_message(st, nullptr);
  fj_status_free(st);
  return m;
}
#define FJ_OK_OR_FAIL(call) ASSERT_EQ(Take(call), "")

constexpr const char* kSource = R"(
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
extern "C" __global__ void affine(const unsigned* in, unsigned* out, unsigned n,
                                  unsigned a, unsigned b) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    out[i] = in[i] * a + b;
  }
}
)";

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(a);
  a.kind = kind;
  return a;
}

// affine's arguments: out[i] = in[i] * a + b for i < n.
struct AffineArgs {
  AffineArgs(uint64_t in, uint64_t out, unsigned n, unsigned a_, unsigned b_) {
    a[0].v.pointer = in;
    a[1].v.pointer = out;
    a[2].v.u32 = n;
    a[3].v.u32 = a_;
    a[4].v.u32 = b_;
  }
  fj_arg a[5] = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER), Arg(FJ_ARG_U32),
                 Arg(FJ_ARG_U32), Arg(FJ_ARG_U32)};
};

class StreamWrapGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FJ_OK_OR_FAIL(fj_runtime_create(nullptr, &rt_));
    int32_t n = 0;
    FJ_OK_OR_FAIL(fj_device_count(rt_, &n));
    if (n == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    ASSERT_TRUE(drv_.Load()) << "libcuda.so.1 could not be opened directly";
    ASSERT_EQ(drv_.cuDeviceGet(&dev_, 0), 0);
    ASSERT_EQ(drv_.cuDevicePrimaryCtxRetain(&ctx_, dev_), 0);
    ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), 0);
    ASSERT_EQ(drv_.cuStreamCreate(&raw_, /*CU_STREAM_NON_BLOCKING*/ 1), 0);
    fj_build_options b{};
    b.struct_size = sizeof(b);
    b.source = fj_str{kSource, std::strlen(kSource)};
    b.name = fj_str{"stream_wrap_test.cu", 19};
    FJ_OK_OR_FAIL(fj_module_build(rt_, &b, &module_));
    FJ_OK_OR_FAIL(fj_module_get_kernel(module_, fj_str{"spin", 4}, 0, &spin_));
    FJ_OK_OR_FAIL(
        fj_module_get_kernel(module_, fj_str{"affine", 6}, 0, &affine_));
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Take(fj_runtime_destroy(rt_)), "");
    if (raw_ != nullptr) {
      drv_.cuCtxSetCurrent(ctx_);
      EXPECT_EQ(drv_.cuStreamDestroy(raw_), 0);
    }
    if (ctx_ != nullptr) drv_.cuDevicePrimaryCtxRelease(dev_);
  }

  // Spin (~20 ms), copy in, affine, copy out: all on `s`, no sync between.
  void RunOrdered(fj_stream* s, unsigned* host_in, unsigned* host_out,
                  uint64_t in, uint64_t out, unsigned n, unsigned a,
                  unsigned b) {
    fj_launch_config one{};
    one.struct_size = sizeof(one);
    one.grid[0] = one.block[0] = 1;
    one.stream = s;
    fj_arg cycles = Arg(FJ_ARG_I64);
    cycles.v.i64 = 40'000'000;
    FJ_OK_OR_FAIL(fj_launch(spin_, &one, &cycles, 1));
    FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, in, host_in, uint64_t{n} * 4, s));
    fj_launch_config cfg = one;
    cfg.grid[0] = 264;
    cfg.block[0] = 256;
    const AffineArgs args(in, out, n, a, b);
    FJ_OK_OR_FAIL(fj_launch(affine_, &cfg, args.a, 5));
    FJ_OK_OR_FAIL(fj_memcpy_dtoh(rt_, host_out, out, uint64_t{n} * 4, s));
  }

  fj_runtime* rt_ = nullptr;
  RawDriver drv_;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream raw_ = nullptr;
  fj_module* module_ = nullptr;
  fj_kernel* spin_ = nullptr;
  fj_kernel* affine_ = nullptr;
};

TEST_F(StreamWrapGpuTest, CopyKernelCopyAreOrderedOnTheCallersStream) {
  constexpr unsigned kN = 4u << 20;  // 16 MiB
  std::mt19937 rng(std::random_device{}());
  const unsigned a = rng() | 1, b = rng();
  unsigned *host_in = nullptr, *host_out = nullptr;
  ASSERT_EQ(drv_.cuMemHostAlloc(reinterpret_cast<void**>(&host_in), kN * 4, 0),
            0);
  ASSERT_EQ(drv_.cuMemHostAlloc(reinterpret_cast<void**>(&host_out), kN * 4, 0),
            0);
  for (unsigned i = 0; i < kN; ++i) host_in[i] = rng();
  std::memset(host_out, 0xA5, kN * 4);  // poisoned
  uint64_t in = 0, out = 0;
  FJ_OK_OR_FAIL(fj_mem_alloc(rt_, 0, kN * 4, &in));
  FJ_OK_OR_FAIL(fj_mem_alloc(rt_, 0, kN * 4, &out));
  FJ_OK_OR_FAIL(fj_memset_d8(rt_, in, 0x5A, kN * 4, nullptr));
  FJ_OK_OR_FAIL(fj_memset_d8(rt_, out, 0xA5, kN * 4, nullptr));

  fj_stream* s = nullptr;
  FJ_OK_OR_FAIL(fj_stream_wrap(rt_, 0, reinterpret_cast<uintptr_t>(raw_), &s));
  RunOrdered(s, host_in, host_out, in, out, kN, a, b);
  // The caller's own synchronisation, on its own stream.
  ASSERT_EQ(drv_.cuStreamSynchronize(raw_), 0);
  size_t bad = 0;
  for (unsigned i = 0; i < kN; ++i) bad += host_out[i] != host_in[i] * a + b;
  EXPECT_EQ(bad, 0u) << "of " << kN << " elements differ from the reference";

  // Forgetting the wrapper leaves the caller's stream alive and usable.
  FJ_OK_OR_FAIL(fj_stream_destroy(s));
  ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), 0);
  ASSERT_EQ(drv_.cuMemsetD32Async(out, 0x1234567u, kN, raw_), 0);
  ASSERT_EQ(drv_.cuStreamSynchronize(raw_), 0);
  FJ_OK_OR_FAIL(fj_memcpy_dtoh(rt_, host_out, out, kN * 4, nullptr));
  EXPECT_EQ(host_out[0], 0x1234567u);
  EXPECT_EQ(host_out[kN - 1], 0x1234567u);

  // So does the runtime's destroy cascade.
  FJ_OK_OR_FAIL(fj_stream_wrap(rt_, 0, reinterpret_cast<uintptr_t>(raw_), &s));
  FJ_OK_OR_FAIL(fj_mem_free(rt_, in));
  FJ_OK_OR_FAIL(fj_mem_free(rt_, out));
  FJ_OK_OR_FAIL(fj_runtime_destroy(rt_));
  rt_ = nullptr;
  EXPECT_EQ(Take(fj_stream_synchronize(s)).rfind("INVALID_ARGUMENT", 0), 0u);
  ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), 0);
  EXPECT_EQ(drv_.cuStreamSynchronize(raw_), 0);
  drv_.cuMemFreeHost(host_in);
  drv_.cuMemFreeHost(host_out);
}

// fj_launch does not read the thread's current context before a launch: it
// tries the launch as the thread stands and enters the kernel's context
// only when the driver refuses (docs/launch.md). Whatever the calling thread
// has current - nothing (a fresh thread), the kernel's own context, or
// another context of the same device - the kernel's results must be right,
// on the default stream and on a stream of the kernel's context.
TEST_F(StreamWrapGpuTest, KernelsRunRightWhicheverContextTheThreadHasCurrent) {
  constexpr unsigned kN = 1u << 16;
  std::mt19937 rng(std::random_device{}());
  std::vector<unsigned> host_in(kN), host_out(kN);
  for (unsigned& v : host_in) v = rng();
  uint64_t in = 0, out = 0;
  FJ_OK_OR_FAIL(fj_mem_alloc(rt_, 0, kN * 4, &in));
  FJ_OK_OR_FAIL(fj_mem_alloc(rt_, 0, kN * 4, &out));
  FJ_OK_OR_FAIL(fj_memcpy_htod(rt_, in, host_in.data(), kN * 4, nullptr));
  fj_stream* wrapped = nullptr;
  FJ_OK_OR_FAIL(
      fj_stream_wrap(rt_, 0, reinterpret_cast<uintptr_t>(raw_), &wrapped));

  fj_stream* legacy = nullptr;  // CU_STREAM_LEGACY, to wait for the default
  FJ_OK_OR_FAIL(fj_stream_wrap(rt_, 0, 1, &legacy));

  CUcontext other = nullptr;
  if (drv_.cuCtxCreate != nullptr && drv_.cuCtxDestroy != nullptr &&
      drv_.cuCtxCreate(&other, 0, dev_) != 0) {
    other = nullptr;
  }
  ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), 0);
  struct Case {
    const char* name;
    CUcontext current;  // null: a fresh thread's (none)
    bool skip;
  };
  const Case cases[] = {
      {"none current", nullptr, false},
      {"the kernel's context current", ctx_, false},
      {"another context of the device current", other, other == nullptr}};
  int ran = 0;
  for (const Case& c : cases) {
    if (c.skip) {
      std::printf("  [%s] skipped: cuCtxCreate_v2 gave no second context\n",
                  c.name);
      continue;
    }
    for (fj_stream* stream : {static_cast<fj_stream*>(nullptr), wrapped}) {
      SCOPED_TRACE(std::string(c.name) +
                   (stream ? ", the caller's stream" : ", the default stream"));
      FJ_OK_OR_FAIL(fj_memset_d8(rt_, out, 0xA5, kN * 4, nullptr));
      const unsigned a = rng() | 1, b = rng();
      std::string launched, synced;
      CUcontext after = nullptr;
      std::thread([&] {
        if (c.current != nullptr) drv_.cuCtxSetCurrent(c.current);
        fj_launch_config cfg{};
        cfg.struct_size = sizeof(cfg);
        cfg.grid[0] = 64;
        cfg.block[0] = 256;
        cfg.stream = stream;
        const AffineArgs args(in, out, kN, a, b);
        launched = Take(fj_launch(affine_, &cfg, args.a, 5));
        drv_.cuCtxGetCurrent(&after);
        synced = Take(fj_stream_synchronize(stream ? stream : legacy));
      }).join();
      ASSERT_EQ(launched, "");
      ASSERT_EQ(synced, "");
      FJ_OK_OR_FAIL(fj_memcpy_dtoh(rt_, host_out.data(), out, kN * 4, nullptr));
      size_t bad = 0;
      for (unsigned i = 0; i < kN; ++i)
        bad += host_out[i] != host_in[i] * a + b;
      EXPECT_EQ(bad, 0u) << "of " << kN << " elements differ";
      std::printf("  [%s, %s stream] right; current after the launch: %s\n",
                  c.name, stream ? "caller's" : "default",
                  after == ctx_      ? "the kernel's"
                  : after == other   ? "the other"
                  : after == nullptr ? "none"
                                     : "unknown");
      ++ran;
    }
  }
  if (other != nullptr) EXPECT_EQ(drv_.cuCtxDestroy(other), 0);
  ASSERT_EQ(drv_.cuCtxSetCurrent(ctx_), 0);
  FJ_OK_OR_FAIL(fj_stream_destroy(wrapped));
  FJ_OK_OR_FAIL(fj_stream_destroy(legacy));
  FJ_OK_OR_FAIL(fj_mem_free(rt_, in));
  FJ_OK_OR_FAIL(fj_mem_free(rt_, out));
  EXPECT_GE(ran, 4);
}

TEST_F(StreamWrapGpuTest, DefaultStreamsAreAccepted) {
  for (uint64_t special : {uint64_t{0}, uint64_t{1}, uint64_t{2}}) {
    fj_stream* s = nullptr;
    FJ_OK_OR_FAIL(fj_stream_wrap(rt_, 0, special, &s));
    FJ_OK_OR_FAIL(fj_stream_synchronize(s));
    FJ_OK_OR_FAIL(fj_stream_destroy(s));
  }
}

TEST_F(StreamWrapGpuTest, AStreamOfAnotherDeviceIsRefused) {
  int32_t n = 0;
  FJ_OK_OR_FAIL(fj_device_count(rt_, &n));
  if (n < 2) GTEST_SKIP() << "needs two GPUs";
  fj_stream* s = nullptr;
  fj_status* st = fj_stream_wrap(rt_, 1, reinterpret_cast<uintptr_t>(raw_), &s);
  EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fj_status_message(st, nullptr)).find("another context"),
            std::string::npos)
      << fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_EQ(s, nullptr);
}

}  // namespace
