// ABI 1.3 on the GPU, over the C ABI, each against a host reference with
// fresh random inputs and poisoned outputs:
//  - module globals: a __constant__ table rewritten on a stream between
//    launches (each launch sees its own table), a __device__ counter summed
//    by atomics and read back, a templated global found by its name
//    expression;
//  - a cooperative launch whose kernel calls grid.sync() at the largest
//    co-resident grid, and the refusal of one block more;
//  - programmatic dependent launch: the secondary's prologue starts before
//    the primary's tail ends (globaltimer stamps), its data after
//    griddepcontrol.wait is the primary's, and without the flag it starts
//    after; refused before sm_90;
//  - a stream of the greatest priority, an L2 access-policy window over a
//    persisting set-aside (results unchanged; refusals past the limits);
//  - kernel attributes (const, local, max dynamic shared bytes, PTX and
//    binary versions, carveout) and the occupancy queries;
//  - cuFloatComplex / cuDoubleComplex arguments (FJ_ARG_C64 / C128) to an
//    extern "C" and a C++ kernel.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_gpu_util.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/seed.h"

// Inside fleetjit::testing: capi_gpu_util.h's builders, S and Code
// unqualified.
namespace fleetjit::testing {
namespace {

constexpr const char* kSource = R"(
#include <cooperative_groups.h>
#include <cuComplex.h>

__constant__ float table[64];
__device__ unsigned long long counter;
template <typename T> __device__ T scale_by;

extern "C" __global__ void lookup(const int* idx, float* out, int n,
                                  int slot) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[slot * n + i] = table[idx[i]] * scale_by<float>;
}

extern "C" __global__ void count(const unsigned* v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&counter, (unsigned long long)v[i]);
}

// Every block sums its slice into partial[], the grid syncs, then every
// block sums partial[] into out[block]: right only if grid.sync() held.
extern "C" __global__ void grid_sum(const int* in, int n, long long* partial,
                                    long long* out) {
  namespace cg = cooperative_groups;
  cg::grid_group grid = cg::this_grid();
  __shared__ long long s[256];
  long long mine = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    mine += in[i];
  }
  s[threadIdx.x] = mine;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
  grid.sync();
  if (threadIdx.x == 0) {
    long long total = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
    out[blockIdx.x] = total;
  }
}

__device__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The primary lets its dependents launch at once, then spins `spin_ns`,
// writes data[] and stamps its end.
extern "C" __global__ void primary(int* data, int n, int salt,
                                   unsigned long long spin_ns,
                                   unsigned long long* end_stamp) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  const unsigned long long start = now();
  while (now() - start < spin_ns) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    data[i] = i * 7 + salt;
  }
  __syncthreads();
  if (threadIdx.x == 0) end_stamp[blockIdx.x] = now();
}

// The secondary stamps its start (its prologue), waits for the primary's
// memory, then reads it.
extern "C" __global__ void secondary(const int* data, int* out, int n,
                                     unsigned long long* start_stamp) {
  if (threadIdx.x == 0) start_stamp[blockIdx.x] = now();
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    out[i] = data[i] + 1;
  }
}

// A local array whose address a non-inlined function takes lives in local
// memory (a stack frame).
__device__ __noinline__ void fill_local(int* p, const int* in) {
  for (int i = 0; i < 64; ++i) p[i] = in[i] * 3 + i;
}
extern "C" __global__ void spill(const int* in, int* out, int k) {
  int local[64];  // its address leaves the kernel: a stack frame
  fill_local(local, in);
  out[threadIdx.x] = local[(threadIdx.x * k) & 63];
}

// y[i] = b * x[i] + a, in double.
extern "C" __global__ void cscale_c(cuFloatComplex a, int n,
                                    cuDoubleComplex b,
                                    const cuFloatComplex* x,
                                    cuDoubleComplex* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  cuDoubleComplex xi = cuComplexFloatToDouble(x[i]);
  y[i] = cuCadd(cuCmul(b, xi), cuComplexFloatToDouble(a));
}
__global__ void cscale_cpp(cuFloatComplex a, int n, cuDoubleComplex b,
                           const cuFloatComplex* x, cuDoubleComplex* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  cuDoubleComplex xi = cuComplexFloatToDouble(x[i]);
  y[i] = cuCadd(cuCmul(b, xi), cuComplexFloatToDouble(a));
}
)";

class Abi13GpuTest : public CapiRuntimeTest<> {
 protected:
  void SetUp() override {
    CapiRuntimeTest::SetUp();
    if (HasFatalFailure()) return;
    if (gpus_ == 0) GTEST_SKIP() << "no GPU: " << fj_runtime_driver_error(rt_);
    info_.struct_size = sizeof(info_);
    FJ_ASSERT_OK(fj_device_info_get(rt_, 0, &info_));
    fj_build_options o = BuildOptions(kSource, "");
    o.flags = FJ_BUILD_NO_CACHE;
    o.name_expressions = exprs_;
    o.num_name_expressions = 2;
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
    FJ_ASSERT_OK(fj_stream_create(rt_, 0, &stream_));
  }
  void TearDown() override {
    for (uint64_t p : allocations_) EXPECT_EQ(Code(fj_mem_free(rt_, p)), FJ_OK);
    if (stream_ != nullptr) EXPECT_EQ(Code(fj_stream_destroy(stream_)), FJ_OK);
    CapiRuntimeTest::TearDown();
  }
  fj_kernel* Kernel(const std::string& name) {
    fj_kernel* k = nullptr;
    fj_status* st = fj_module_get_kernel(module_, S(name), 0, &k);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    return k;
  }
  // Device memory poisoned with `poison`, freed at TearDown.
  uint64_t Alloc(uint64_t bytes, uint8_t poison = 0xFF) {
    uint64_t p = 0;
    fj_status* st = fj_mem_alloc(rt_, 0, bytes, &p);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    allocations_.push_back(p);
    EXPECT_EQ(Code(fj_memset_d8(rt_, p, poison, bytes, nullptr)), FJ_OK);
    return p;
  }
  template <typename T>
  uint64_t Upload(const std::vector<T>& v) {
    uint64_t p = Alloc(v.size() * sizeof(T));
    EXPECT_EQ(
        Code(fj_memcpy_htod(rt_, p, v.data(), v.size() * sizeof(T), nullptr)),
        FJ_OK);
    return p;
  }
  template <typename T>
  std::vector<T> Download(uint64_t p, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(Code(fj_memcpy_dtoh(rt_, v.data(), p, n * sizeof(T), nullptr)),
              FJ_OK);
    return v;
  }

  std::string e0_ = "&scale_by<float>", e1_ = "cscale_cpp";
  fj_str exprs_[2] = {S(e0_), S(e1_)};
  fj_device_info info_{};
  fj_module* module_ = nullptr;
  fj_stream* stream_ = nullptr;
  std::vector<uint64_t> allocations_;
};

TEST_F(Abi13GpuTest, AConstantTableRewrittenBetweenLaunchesIsSeenByEach) {
  std::mt19937_64 rng = SeededRng("ConstantTable");
  constexpr int kN = 4096, kRounds = 6;
  std::vector<int> idx(kN);
  for (int& i : idx) i = static_cast<int>(rng() % 64);
  const uint64_t d_idx = Upload(idx);
  const uint64_t d_out = Alloc(sizeof(float) * kN * kRounds);
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  const float scale = dist(rng);
  const std::string scale_name = "scale_by<float>", table = "table";
  fj_global_info g{};
  g.struct_size = sizeof(g);
  FJ_ASSERT_OK(fj_module_get_global(module_, S(scale_name), 0, &g));
  EXPECT_EQ(g.bytes, sizeof(float));
  FJ_ASSERT_OK(fj_module_global_write(module_, S(scale_name), 0, 0, &scale,
                                      sizeof(scale), stream_));
  FJ_ASSERT_OK(fj_module_get_global(module_, S(table), 0, &g));
  ASSERT_EQ(g.bytes, 64 * sizeof(float));
  // Each round's table stays alive until the stream is synchronised.
  std::vector<std::vector<float>> tables(kRounds, std::vector<float>(64));
  fj_kernel* k = Kernel("lookup");
  ASSERT_NE(k, nullptr);
  for (int r = 0; r < kRounds; ++r) {
    for (float& v : tables[r]) v = dist(rng);
    FJ_ASSERT_OK(fj_module_global_write(module_, S(table), 0, 0,
                                        tables[r].data(), g.bytes, stream_));
    fj_arg args[] = {PtrArg(d_idx), PtrArg(d_out), I32Arg(kN), I32Arg(r)};
    fj_launch_config c = LaunchOn((kN + 255) / 256, 256, stream_);
    FJ_ASSERT_OK(fj_launch(k, &c, args, 4));
  }
  // The last table read back through the stream too.
  std::vector<float> back(64, -1.0f);
  FJ_ASSERT_OK(fj_module_global_read(module_, S(table), 0, 0, back.data(),
                                     g.bytes, stream_));
  FJ_ASSERT_OK(fj_stream_synchronize(stream_));
  EXPECT_EQ(back, tables.back());
  std::vector<float> out = Download<float>(d_out, size_t{kN} * kRounds);
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(out[static_cast<size_t>(r) * kN + i], tables[r][idx[i]] * scale)
          << "round " << r << " element " << i;
    }
  }
}

TEST_F(Abi13GpuTest, ADeviceCounterIsReadBack) {
  std::mt19937_64 rng = SeededRng("DeviceCounter");
  constexpr int kN = 100000;
  std::vector<unsigned> v(kN);
  unsigned long long want = rng() >> 8;
  const unsigned long long start = want;
  for (unsigned& x : v) {
    x = static_cast<unsigned>(rng() % 100000);
    want += x;
  }
  const uint64_t d_v = Upload(v);
  const std::string counter = "counter";
  FJ_ASSERT_OK(fj_module_global_write(module_, S(counter), 0, 0, &start,
                                      sizeof(start), stream_));
  fj_arg args[] = {PtrArg(d_v), I32Arg(kN)};
  fj_launch_config c = LaunchOn((kN + 255) / 256, 256, stream_);
  FJ_ASSERT_OK(fj_launch(Kernel("count"), &c, args, 2));
  unsigned long long got = ~want;
  FJ_ASSERT_OK(fj_module_global_read(module_, S(counter), 0, 0, &got,
                                     sizeof(got), stream_));
  FJ_ASSERT_OK(fj_stream_synchronize(stream_));
  EXPECT_EQ(got, want);
  // Past its end.
  EXPECT_EQ(
      Code(fj_module_global_read(module_, S(counter), 0, 4, &got, 8, nullptr)),
      FJ_OUT_OF_RANGE);
}

TEST_F(Abi13GpuTest, ACooperativeGridSyncsAndAnOversizedGridIsRefused) {
  if (info_.cooperative_launch == 0) {
    GTEST_SKIP() << "device 0 has no cooperative launches";
  }
  std::mt19937_64 rng = SeededRng("CooperativeGridSync");
  fj_kernel* k = Kernel("grid_sum");
  ASSERT_NE(k, nullptr);
  int32_t per_sm = 0;
  FJ_ASSERT_OK(fj_kernel_occupancy(k, 256, 0, &per_sm));
  ASSERT_GT(per_sm, 0);
  const uint32_t blocks = static_cast<uint32_t>(per_sm * info_.sm_count);
  constexpr int kN = 1 << 22;
  std::vector<int> in(kN);
  long long want = 0;
  for (int& x : in) {
    x = static_cast<int>(rng() % 2001) - 1000;
    want += x;
  }
  const uint64_t d_in = Upload(in);
  const uint64_t d_partial = Alloc(sizeof(long long) * (blocks + 1));
  const uint64_t d_out = Alloc(sizeof(long long) * (blocks + 1));
  fj_arg args[] = {PtrArg(d_in), I32Arg(kN), PtrArg(d_partial), PtrArg(d_out)};
  fj_launch_config c = LaunchOn(blocks, 256, stream_);
  c.flags = FJ_LAUNCH_COOPERATIVE;
  FJ_ASSERT_OK(fj_launch(k, &c, args, 4));
  FJ_ASSERT_OK(fj_stream_synchronize(stream_));
  std::vector<long long> out = Download<long long>(d_out, blocks);
  for (uint32_t b = 0; b < blocks; ++b) {
    ASSERT_EQ(out[b], want) << "block " << b << " of " << blocks;
  }
  c.grid[0] = blocks + 1;
  fj_status* st = fj_launch(k, &c, args, 4);
  EXPECT_EQ(fj_status_code(st), FJ_OUT_OF_RANGE);
  const std::string message = fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_TRUE(absl::StrContains(
      message, absl::StrCat(blocks + 1, " blocks exceeds the ", blocks)))
      << message;
}

TEST_F(Abi13GpuTest, ADependentLaunchOverlapsThePrimarysTail) {
  fj_kernel* p = Kernel("primary");
  fj_kernel* s = Kernel("secondary");
  ASSERT_TRUE(p != nullptr && s != nullptr);
  const int32_t sms = info_.sm_count;
  constexpr int kN = 1 << 16;
  const uint64_t d_data = Alloc(sizeof(int) * kN);
  const uint64_t d_out = Alloc(sizeof(int) * kN);
  const uint64_t d_end = Alloc(sizeof(uint64_t) * sms, 0);
  const uint64_t d_start = Alloc(sizeof(uint64_t) * 8, 0);
  std::mt19937_64 rng = SeededRng("ProgrammaticLaunch");
  if (info_.cc_major < 9) {
    fj_arg sargs[] = {PtrArg(d_data), PtrArg(d_out), I32Arg(kN),
                      PtrArg(d_start)};
    fj_launch_config c = LaunchOn(8, 128, stream_);
    c.flags = FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
    EXPECT_EQ(Code(fj_launch(s, &c, sargs, 4)), FJ_FAILED_PRECONDITION);
    GTEST_SKIP() << "no programmatic dependent launch before sm_90";
  }
  for (bool pdl : {true, false}) {
    SCOPED_TRACE(pdl ? "with PDL" : "without PDL (the anchor)");
    const int32_t salt = static_cast<int32_t>(rng() % 100000);
    FJ_ASSERT_OK(fj_memset_d8(rt_, d_out, 0xFF, sizeof(int) * kN, stream_));
    fj_arg pargs[] = {PtrArg(d_data), I32Arg(kN), I32Arg(salt), U64Arg(200000),
                      PtrArg(d_end)};
    fj_launch_config pc = LaunchOn(sms, 128, stream_);
    FJ_ASSERT_OK(fj_launch(p, &pc, pargs, 5));
    fj_arg sargs[] = {PtrArg(d_data), PtrArg(d_out), I32Arg(kN),
                      PtrArg(d_start)};
    fj_launch_config sc = LaunchOn(8, 128, stream_);
    sc.flags = pdl ? FJ_LAUNCH_PROGRAMMATIC_DEPENDENT : 0;
    FJ_ASSERT_OK(fj_launch(s, &sc, sargs, 4));
    FJ_ASSERT_OK(fj_stream_synchronize(stream_));
    std::vector<uint64_t> ends = Download<uint64_t>(d_end, sms);
    std::vector<uint64_t> starts = Download<uint64_t>(d_start, 8);
    const uint64_t primary_end = *std::max_element(ends.begin(), ends.end());
    const uint64_t secondary_start =
        *std::min_element(starts.begin(), starts.end());
    if (pdl) {
      EXPECT_LT(secondary_start, primary_end)
          << "the secondary started " << (secondary_start - primary_end)
          << " ns after the primary ended";
    } else {
      EXPECT_GE(secondary_start, primary_end);
    }
    // After griddepcontrol.wait the primary's writes are all visible.
    std::vector<int> out = Download<int>(d_out, kN);
    for (int i = 0; i < kN; ++i) ASSERT_EQ(out[i], i * 7 + salt + 1) << i;
  }
}

TEST_F(Abi13GpuTest, APriorityStreamAndAnL2WindowKeepResultsRight) {
  std::mt19937_64 rng = SeededRng("PriorityAndWindow");
  int32_t least = 0, greatest = 0;
  FJ_ASSERT_OK(fj_stream_priority_range(rt_, 0, &least, &greatest));
  EXPECT_LE(greatest, least);
  fj_stream* high = nullptr;
  FJ_ASSERT_OK(fj_stream_create_with_priority(rt_, 0, greatest, &high));
  EXPECT_EQ(Code(fj_stream_create_with_priority(rt_, 0, greatest - 1, &high)),
            FJ_OUT_OF_RANGE);
  constexpr int kN = 1 << 20;
  std::vector<unsigned> v(kN);
  unsigned long long want = 0;
  for (unsigned& x : v) want += (x = static_cast<unsigned>(rng() % 1000));
  const uint64_t d_v = Upload(v);
  const std::string counter = "counter";
  const unsigned long long zero = 0;
  FJ_ASSERT_OK(
      fj_module_global_write(module_, S(counter), 0, 0, &zero, 8, high));
  fj_arg args[] = {PtrArg(d_v), I32Arg(kN)};
  fj_launch_config c = LaunchOn((kN + 255) / 256, 256, high);
  if (info_.cc_major >= 8 && info_.max_persisting_l2_bytes > 0) {
    const uint64_t aside =
        std::min<uint64_t>(info_.max_persisting_l2_bytes, 4u << 20);
    uint64_t set = 0;
    FJ_ASSERT_OK(fj_device_set_persisting_l2(rt_, 0, aside, &set));
    EXPECT_GT(set, 0u);
    c.l2_window_base = d_v;
    c.l2_window_bytes = std::min<uint64_t>(
        sizeof(unsigned) * kN,
        static_cast<uint64_t>(info_.max_access_policy_window_bytes));
    c.l2_hit_ratio = 1.0f;
    fj_launch_config too_big = c;
    too_big.l2_window_bytes =
        uint64_t(info_.max_access_policy_window_bytes) + 1;
    EXPECT_EQ(Code(fj_launch(Kernel("count"), &too_big, args, 2)),
              FJ_OUT_OF_RANGE);
    EXPECT_EQ(
        Code(fj_device_set_persisting_l2(
            rt_, 0, uint64_t(info_.max_persisting_l2_bytes) + 1, nullptr)),
        FJ_OUT_OF_RANGE);
  }
  FJ_ASSERT_OK(fj_launch(Kernel("count"), &c, args, 2));
  unsigned long long got = 0;
  FJ_ASSERT_OK(fj_module_global_read(module_, S(counter), 0, 0, &got, 8, high));
  FJ_ASSERT_OK(fj_stream_synchronize(high));
  EXPECT_EQ(got, want);
  FJ_ASSERT_OK(fj_stream_destroy(high));
  if (info_.max_persisting_l2_bytes > 0) {
    FJ_ASSERT_OK(fj_device_set_persisting_l2(rt_, 0, 0, nullptr));
  }
}

TEST_F(Abi13GpuTest, KernelAttributesAndOccupancy) {
  fj_kernel* k = Kernel("lookup");
  fj_kernel* local = Kernel("spill");
  ASSERT_TRUE(k != nullptr && local != nullptr);
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_kernel_info_get(k, &info));
  EXPECT_GE(info.const_bytes, 64 * 4);  // the __constant__ table
  EXPECT_GT(info.ptx_version, 0);
  EXPECT_EQ(info.binary_version, info_.cc_major * 10 + info_.cc_minor);
  fj_kernel_info spill{};
  spill.struct_size = sizeof(spill);
  FJ_ASSERT_OK(fj_kernel_info_get(local, &spill));
  EXPECT_GE(spill.local_bytes, 64 * 4);
  const int32_t most =
      info_.shared_memory_per_block_optin - info.static_shared_bytes;
  FJ_ASSERT_OK(fj_kernel_set_attribute(
      k, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, 100 << 10));
  FJ_ASSERT_OK(
      fj_kernel_set_attribute(k, FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 50));
  FJ_ASSERT_OK(fj_kernel_info_get(k, &info));
  EXPECT_EQ(info.max_dynamic_shared_bytes, 100 << 10);
  // A hint the driver may round to a split it supports.
  EXPECT_GE(info.preferred_carveout, 0);
  EXPECT_LE(info.preferred_carveout, 100);
  EXPECT_EQ(Code(fj_kernel_set_attribute(
                k, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, most + 1)),
            FJ_OUT_OF_RANGE);
  int32_t per_sm = 0, with_shared = 0, block = 0, grid = 0;
  FJ_ASSERT_OK(fj_kernel_occupancy(k, 256, 0, &per_sm));
  EXPECT_GT(per_sm, 0);
  FJ_ASSERT_OK(fj_kernel_occupancy(k, 256, 100 << 10, &with_shared));
  EXPECT_LT(with_shared, per_sm);
  EXPECT_GE(with_shared, 1);
  FJ_ASSERT_OK(fj_kernel_suggest_block(k, 0, &block, &grid));
  EXPECT_GT(block, 0);
  EXPECT_EQ(block % 32, 0);
  EXPECT_GE(grid, info_.sm_count);
}

TEST_F(Abi13GpuTest, ComplexScalarsReachBothKindsOfKernel) {
  std::mt19937_64 rng = SeededRng("ComplexScalars");
  std::uniform_real_distribution<float> fd(-10.f, 10.f);
  constexpr int kN = 5000;
  std::vector<float> x(2 * kN);
  for (float& v : x) v = fd(rng);
  const float a[2] = {fd(rng), fd(rng)};
  const double b[2] = {fd(rng) * 1.25, fd(rng) * 0.75};
  const uint64_t d_x = Upload(x);
  for (const char* name : {"cscale_c", "cscale_cpp"}) {
    SCOPED_TRACE(name);
    const uint64_t d_y = Alloc(sizeof(double) * 2 * kN);
    fj_arg args[5] = {};
    for (fj_arg& arg : args) arg.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_C64;
    std::memcpy(&args[0].v, a, sizeof(a));
    args[1] = I32Arg(kN);
    args[2].kind = FJ_ARG_C128;
    args[2].v.bytes = b;
    args[3] = PtrArg(d_x);
    args[4] = PtrArg(d_y);
    fj_launch_config c = LaunchOn((kN + 127) / 128, 128, stream_);
    FJ_ASSERT_OK(fj_launch(Kernel(name), &c, args, 5));
    FJ_ASSERT_OK(fj_stream_synchronize(stream_));
    std::vector<double> y = Download<double>(d_y, 2 * kN);
    for (int i = 0; i < kN; ++i) {
      const std::complex<double> xi(x[2 * i], x[2 * i + 1]);
      const std::complex<double> want = std::complex<double>(b[0], b[1]) * xi +
                                        std::complex<double>(a[0], a[1]);
      ASSERT_NEAR(y[2 * i], want.real(), 1e-9 * (1 + std::abs(want))) << i;
      ASSERT_NEAR(y[2 * i + 1], want.imag(), 1e-9 * (1 + std::abs(want))) << i;
    }
  }
}

}  // namespace
}  // namespace fleetjit::testing
