// ABI 1.3's entries on the CPU: module globals, cooperative launches and
// occupancy, launch flags and the L2 window, stream priorities, the
// persisting L2 set-aside, kernel attributes and the build log. Bad input
// (NULLs, struct_size, stale handles, enum and value ranges) is checked
// with no GPU; the paths that need a device run on the fake CUDA driver
// (tests/common/fake_cuda: an H100-like sm_90, 132 SMs, whose copies are
// real), with PTX built by the real NVRTC. What the GPU does with them is
// tests/capi/globals_and_attributes_gpu_test.cc.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "conformance/c_abi.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"
#include "tests/common/seed.h"
#include "tests/common/test_paths.h"

namespace {

namespace fs = std::filesystem;
using fleetjit::selftest::internal::PtrArg;
using fleetjit::testing::Code;
using fleetjit::testing::S;

// The code and message of a status, freeing it.
struct Result {
  fj_code code;
  std::string message;
};
Result R(fj_status* st) {
  Result r{fj_status_code(st), fj_status_message(st, nullptr)};
  fj_status_free(st);
  return r;
}

#define EXPECT_STATUS(expr, code_, text)                            \
  do {                                                              \
    Result r_ = R(expr);                                            \
    EXPECT_EQ(r_.code, code_) << r_.message;                        \
    EXPECT_TRUE(absl::StrContains(r_.message, text)) << r_.message; \
  } while (0)

constexpr const char* kSource = R"(
__constant__ float table[8];
__device__ unsigned int counter;
namespace ns { __device__ int value[4]; }
template <typename T> __device__ T tvar[3];
extern "C" __global__ void use(float* out) {
  out[threadIdx.x] = table[threadIdx.x] + counter + ns::value[0] +
                     tvar<double>[1];
}
extern "C" __global__ void cplx(float2 a, int n, double2 b, float* out) {
  out[n] = a.x + a.y + (float)(b.x + b.y);
}
)";

bool HaveNvrtc() {
  fj_runtime* rt = nullptr;
  if (Code(fj_runtime_create(nullptr, &rt)) != FJ_OK) return false;
  std::string src = "extern \"C\" __global__ void k() {}";
  std::string target = "sm_90";
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(src);
  o.target = S(target);
  o.flags = FJ_BUILD_NO_CACHE;
  fj_module* m = nullptr;
  const bool ok = Code(fj_module_build(rt, &o, &m)) == FJ_OK;
  fj_module_destroy(m);
  fj_runtime_destroy(rt);
  return ok;
}

// A runtime on the fake driver with kSource built as compute_90 PTX (the
// fake loads PTX) and its kernels on device 0.
class FakeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed";
    ASSERT_TRUE(fleetjit::testing::CreateFakeRuntime(&rt_));
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    o.name_expressions = exprs_;
    o.num_name_expressions = 2;
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
    FJ_ASSERT_OK(fj_module_get_kernel(module_, S(use_), 0, &use_kernel_));
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    fjfake_reset(1);
  }

  std::string driver_ = ::fleetjit::testing::FakeDriverPath();
  std::string source_ = kSource;
  std::string target_ = "compute_90";
  std::string use_ = "use";
  std::string e0_ = "&ns::value", e1_ = "&tvar<double>";
  fj_str exprs_[2] = {S(e0_), S(e1_)};
  fj_runtime* rt_ = nullptr;
  fj_module* module_ = nullptr;
  fj_kernel* use_kernel_ = nullptr;
};

fj_global_info GlobalInfo() {
  fj_global_info g{};
  g.struct_size = sizeof(g);
  return g;
}

TEST_F(FakeDeviceTest, GlobalsAreFoundByNameAndByNameExpression) {
  struct Want {
    std::string name;
    uint64_t bytes;
    std::string symbol;
  } wants[] = {{"table", 32, "table"},
               {"counter", 4, "counter"},
               {"ns::value", 16, "_ZN2ns5valueE"},
               {"&ns::value", 16, "_ZN2ns5valueE"},
               {"tvar<double>", 24, "_Z4tvarIdE"}};
  for (const Want& w : wants) {
    fj_global_info g = GlobalInfo();
    FJ_ASSERT_OK(fj_module_get_global(module_, S(w.name), 0, &g));
    EXPECT_EQ(g.bytes, w.bytes) << w.name;
    EXPECT_NE(g.address, 0u) << w.name;
    EXPECT_STREQ(g.lowered_name, w.symbol.c_str()) << w.name;
  }
}

TEST_F(FakeDeviceTest, GlobalsAreWrittenAndReadBackOnAStream) {
  std::mt19937_64 rng = fleetjit::testing::SeededRng("GlobalsRoundTrip");
  fj_stream* stream = nullptr;
  FJ_ASSERT_OK(fj_stream_create(rt_, 0, &stream));
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  float table[8], part[3];
  for (float& v : table) v = dist(rng);
  for (float& v : part) v = dist(rng);
  const std::string name = "table";
  FJ_ASSERT_OK(fj_module_global_write(module_, S(name), 0, 0, table,
                                      sizeof(table), stream));
  // Three floats in the middle, then the whole table read back.
  FJ_ASSERT_OK(fj_module_global_write(module_, S(name), 0, 3 * sizeof(float),
                                      part, sizeof(part), stream));
  float back[8];
  std::memset(back, 0xAB, sizeof(back));
  FJ_ASSERT_OK(fj_module_global_read(module_, S(name), 0, 0, back, sizeof(back),
                                     stream));
  FJ_ASSERT_OK(fj_stream_synchronize(stream));
  for (int i = 0; i < 8; ++i) {
    const float want = i >= 3 && i < 6 ? part[i - 3] : table[i];
    EXPECT_EQ(back[i], want) << i;
  }
  // Without a stream the copy is complete on return.
  const uint32_t count = static_cast<uint32_t>(rng());
  const std::string counter = "counter";
  FJ_ASSERT_OK(fj_module_global_write(module_, S(counter), 0, 0, &count,
                                      sizeof(count), nullptr));
  uint32_t read = ~count;
  FJ_ASSERT_OK(fj_module_global_read(module_, S(counter), 0, 0, &read,
                                     sizeof(read), nullptr));
  EXPECT_EQ(read, count);
  FJ_ASSERT_OK(fj_stream_destroy(stream));
}

TEST_F(FakeDeviceTest, GlobalsRefuseBadInput) {
  const std::string table = "table", missing = "missing", empty;
  fj_global_info g = GlobalInfo();
  float buf[8] = {};
  EXPECT_STATUS(fj_module_get_global(nullptr, S(table), 0, &g),
                FJ_INVALID_ARGUMENT, "module is NULL");
  EXPECT_STATUS(fj_module_get_global(module_, S(table), 0, nullptr),
                FJ_INVALID_ARGUMENT, "out_info is NULL");
  fj_global_info small = GlobalInfo();
  small.struct_size = 8;
  EXPECT_STATUS(fj_module_get_global(module_, S(table), 0, &small),
                FJ_INVALID_ARGUMENT, "struct_size is 8");
  EXPECT_STATUS(fj_module_get_global(module_, S(empty), 0, &g),
                FJ_INVALID_ARGUMENT, "name is empty");
  fj_str bad_str{nullptr, 5};
  EXPECT_EQ(Code(fj_module_get_global(module_, bad_str, 0, &g)),
            FJ_INVALID_ARGUMENT);
  EXPECT_STATUS(fj_module_get_global(module_, S(missing), 0, &g), FJ_NOT_FOUND,
                "no global 'missing'");
  EXPECT_STATUS(fj_module_get_global(module_, S(table), 7, &g), FJ_NOT_FOUND,
                "7");
  // Past the end, NULL host memory.
  EXPECT_STATUS(
      fj_module_global_write(module_, S(table), 0, 4, buf, 32, nullptr),
      FJ_OUT_OF_RANGE, "which has 32 bytes");
  EXPECT_STATUS(
      fj_module_global_read(module_, S(table), 0, 33, buf, 0, nullptr),
      FJ_OUT_OF_RANGE, "past the end");
  EXPECT_STATUS(fj_module_global_read(module_, S(table), 0, UINT64_MAX - 2, buf,
                                      8, nullptr),
                FJ_OUT_OF_RANGE, "past the end");
  EXPECT_STATUS(
      fj_module_global_write(module_, S(table), 0, 0, nullptr, 4, nullptr),
      FJ_INVALID_ARGUMENT, "src is NULL");
  EXPECT_STATUS(
      fj_module_global_read(module_, S(table), 0, 0, nullptr, 4, nullptr),
      FJ_INVALID_ARGUMENT, "dst is NULL");
  // A stale module handle.
  fj_module* stale = module_;
  FJ_ASSERT_OK(fj_module_destroy(module_));
  module_ = nullptr;
  EXPECT_STATUS(fj_module_get_global(stale, S(table), 0, &g),
                FJ_INVALID_ARGUMENT, "not a live");
  EXPECT_STATUS(fj_module_global_write(stale, S(table), 0, 0, buf, 4, nullptr),
                FJ_INVALID_ARGUMENT, "not a live");
  // Its kernels went with it.
  int32_t n = 0, block = 0;
  EXPECT_STATUS(fj_kernel_occupancy(use_kernel_, 32, 0, &n),
                FJ_INVALID_ARGUMENT, "not a live");
  EXPECT_STATUS(fj_kernel_suggest_block(use_kernel_, 0, &block, nullptr),
                FJ_INVALID_ARGUMENT, "not a live");
  EXPECT_STATUS(fj_kernel_set_attribute(use_kernel_,
                                        FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 0),
                FJ_INVALID_ARGUMENT, "not a live");
  const char* log = nullptr;
  EXPECT_STATUS(fj_module_build_log(stale, &log, nullptr), FJ_INVALID_ARGUMENT,
                "not a live");
}

TEST_F(FakeDeviceTest, AStreamOfAnotherDeviceIsRefused) {
  fj_runtime_destroy(rt_);
  rt_ = nullptr;
  fjfake_reset(2);
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libcuda_path = S(driver_);
  ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
  FJ_ASSERT_OK(fj_runtime_create(&ro, &rt_));
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(source_);
  o.target = S(target_);
  fj_module* m = nullptr;
  FJ_ASSERT_OK(fj_module_build(rt_, &o, &m));
  fj_stream* s1 = nullptr;
  FJ_ASSERT_OK(fj_stream_create(rt_, 1, &s1));
  float v = 1;
  const std::string table = "table";
  EXPECT_STATUS(fj_module_global_write(m, S(table), 0, 0, &v, 4, s1),
                FJ_INVALID_ARGUMENT, "stream is of device 1");
  FJ_ASSERT_OK(fj_module_global_write(m, S(table), 1, 0, &v, 4, s1));
  FJ_ASSERT_OK(fj_stream_destroy(s1));
}

fj_launch_config Launch(uint32_t grid, uint32_t block) {
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = grid;
  c.block[0] = block;
  return c;
}

TEST_F(FakeDeviceTest, ACooperativeGridLargerThanTheDeviceHoldsIsRefused) {
  fj_device_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_device_info_get(rt_, 0, &info));
  EXPECT_EQ(info.cooperative_launch, 1);
  int32_t per_sm = 0;
  FJ_ASSERT_OK(fj_kernel_occupancy(use_kernel_, 256, 0, &per_sm));
  ASSERT_GT(per_sm, 0);
  const uint32_t most = static_cast<uint32_t>(per_sm * info.sm_count);
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const fj_arg arg = PtrArg(out);
  fj_launch_config c = Launch(most, 256);
  c.flags = FJ_LAUNCH_COOPERATIVE;
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  c.grid[0] = most + 1;
  EXPECT_STATUS(fj_launch(use_kernel_, &c, &arg, 1), FJ_OUT_OF_RANGE,
                absl::StrCat(most + 1, " blocks exceeds the ", most,
                             " blocks that can be co-resident"));
  // Without the flag the same grid is an ordinary launch.
  c.flags = 0;
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

TEST_F(FakeDeviceTest, LaunchConfigGrowsAtItsEnd) {
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const fj_arg arg = PtrArg(out);
  // A 1.2 caller's struct ends before flags: its garbage past the end is
  // not read.
  fj_launch_config c = Launch(1, 32);
  c.flags = 0xFFFFFFFF;
  c.struct_size = offsetof(fj_launch_config, flags);
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  c.struct_size = offsetof(fj_launch_config, flags) - 1;
  EXPECT_STATUS(fj_launch(use_kernel_, &c, &arg, 1), FJ_INVALID_ARGUMENT,
                "struct_size");
  c.struct_size = sizeof(c);
  EXPECT_STATUS(fj_launch(use_kernel_, &c, &arg, 1), FJ_INVALID_ARGUMENT,
                "unknown bits");
  c.flags = FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  c.flags = 0;
  c.l2_window_base = out;
  c.l2_window_bytes = 4096;
  c.l2_hit_ratio = 1.0f;
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  c.l2_window_bytes = (128u << 20) + 1;
  EXPECT_STATUS(fj_launch(use_kernel_, &c, &arg, 1), FJ_OUT_OF_RANGE,
                "largest access-policy window");
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

// fj_launch reads a current, aligned config in place and copies any other
// (a shorter struct, or one that lies misaligned): both must see every field.
TEST_F(FakeDeviceTest, LaunchConfigIsReadWhereverItLies) {
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const fj_arg arg = PtrArg(out);
  std::mt19937 rng(std::random_device{}());
  alignas(16) unsigned char bytes[sizeof(fj_launch_config) + 16];
  for (size_t offset : {size_t{0}, size_t{4}, size_t{1}}) {
    SCOPED_TRACE(absl::StrCat("config at byte offset ", offset));
    const uint32_t block = 32 + 32 * (rng() % 8);
    fj_launch_config c = Launch(1 + rng() % 64, block);
    auto* placed = reinterpret_cast<fj_launch_config*>(bytes + offset);
    std::memcpy(bytes + offset, &c, sizeof(c));
    FJ_ASSERT_OK(fj_launch(use_kernel_, placed, &arg, 1));
    // Every field is read: a block over the kernel's limit, unknown flags
    // and an L2 window are each refused by name.
    c.block[0] = 4096;
    std::memcpy(bytes + offset, &c, sizeof(c));
    EXPECT_STATUS(fj_launch(use_kernel_, placed, &arg, 1), FJ_OUT_OF_RANGE,
                  "block.x = 4096");
    c.block[0] = block;
    c.flags = 0x80000000u;
    std::memcpy(bytes + offset, &c, sizeof(c));
    EXPECT_STATUS(fj_launch(use_kernel_, placed, &arg, 1), FJ_INVALID_ARGUMENT,
                  "unknown bits");
    c.flags = 0;
    c.l2_window_base = out;
    c.l2_window_bytes = 4096;
    c.l2_hit_ratio = 1.5f;
    std::memcpy(bytes + offset, &c, sizeof(c));
    EXPECT_STATUS(fj_launch(use_kernel_, placed, &arg, 1), FJ_OUT_OF_RANGE,
                  "l2_hit_ratio = 1.5");
    // A stale stream handle in either kind of read.
    fj_stream* s = nullptr;
    FJ_ASSERT_OK(fj_stream_create(rt_, 0, &s));
    FJ_ASSERT_OK(fj_stream_destroy(s));
    c = Launch(1, block);
    c.stream = s;
    std::memcpy(bytes + offset, &c, sizeof(c));
    EXPECT_STATUS(fj_launch(use_kernel_, placed, &arg, 1), FJ_INVALID_ARGUMENT,
                  "not a live fj_stream");
  }
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

// fj_launch does not read the thread's current context before a launch:
// the launch is tried as the thread stands, and only a failed one enters
// the kernel's context and tries once more. The fake driver refuses a
// function of a context that is not current, as CUDA does.
TEST_F(FakeDeviceTest, ALaunchEntersTheKernelsContextOnlyWhenItHasTo) {
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const fj_arg arg = PtrArg(out);
  const fj_launch_config c = Launch(1, 32);
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  auto calls = [] {
    return std::vector<uint64_t>{fjfake_calls("cuLaunchKernelEx"),
                                 fjfake_calls("cuCtxGetCurrent"),
                                 fjfake_calls("cuCtxSetCurrent")};
  };
  auto since = [&](const std::vector<uint64_t>& before) {
    std::vector<uint64_t> now = calls();
    for (size_t i = 0; i < now.size(); ++i) now[i] -= before[i];
    return now;
  };
  using Calls = std::vector<uint64_t>;  // launches, gets, sets

  // In the kernel's context: one driver launch each, nothing else.
  std::mt19937 rng(std::random_device{}());
  const uint64_t n = 2 + rng() % 30;
  Calls before = calls();
  for (uint64_t i = 0; i < n; ++i) {
    FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  }
  EXPECT_EQ(since(before), (Calls{n, 0, 0}));

  // A fresh thread has no context: its first launch fails in the driver,
  // enters the kernel's context and succeeds; its next launch is plain.
  std::vector<Calls> seen;
  std::string first, second;
  std::thread([&] {
    Calls b = calls();
    first = R(fj_launch(use_kernel_, &c, &arg, 1)).message;
    seen.push_back(since(b));
    b = calls();
    second = R(fj_launch(use_kernel_, &c, &arg, 1)).message;
    seen.push_back(since(b));
  }).join();
  EXPECT_EQ(first, "");
  EXPECT_EQ(second, "");
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (Calls{2, 1, 1}));
  EXPECT_EQ(seen[1], (Calls{1, 0, 0}));

  // A launch that fails in the kernel's context is reported, not retried.
  before = calls();
  ASSERT_EQ(fjfake_fail("cuLaunchKernelEx", before[0] + 1,
                        /*CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES*/ 701),
            0);
  const Result failed = R(fj_launch(use_kernel_, &c, &arg, 1));
  EXPECT_NE(failed.code, FJ_OK);
  EXPECT_TRUE(absl::StrContains(failed.message, "cuLaunchKernelEx"))
      << failed.message;
  EXPECT_EQ(since(before), (Calls{1, 1, 0}));
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

TEST_F(FakeDeviceTest, OccupancyAndSuggestedBlockCheckTheirInput) {
  int32_t n = -1, block = -1, grid = -1;
  EXPECT_STATUS(fj_kernel_occupancy(use_kernel_, 0, 0, &n), FJ_OUT_OF_RANGE,
                "block_threads = 0");
  EXPECT_STATUS(fj_kernel_occupancy(use_kernel_, 2048, 0, &n), FJ_OUT_OF_RANGE,
                "outside [1, 1024]");
  EXPECT_STATUS(fj_kernel_occupancy(use_kernel_, 128, 0, nullptr),
                FJ_INVALID_ARGUMENT, "out_blocks_per_sm is NULL");
  EXPECT_STATUS(fj_kernel_occupancy(nullptr, 128, 0, &n), FJ_INVALID_ARGUMENT,
                "kernel is NULL");
  // The fake's SM: 2048 threads or 32 blocks or 228 KiB (+1 KiB a block).
  FJ_ASSERT_OK(fj_kernel_occupancy(use_kernel_, 128, 0, &n));
  EXPECT_EQ(n, 16);
  FJ_ASSERT_OK(fj_kernel_occupancy(use_kernel_, 128, 100 << 10, &n));
  EXPECT_EQ(n, 2);
  EXPECT_STATUS(fj_kernel_suggest_block(use_kernel_, 0, nullptr, &grid),
                FJ_INVALID_ARGUMENT, "out_block_threads is NULL");
  FJ_ASSERT_OK(fj_kernel_suggest_block(use_kernel_, 0, &block, &grid));
  EXPECT_EQ(block, 1024);
  EXPECT_EQ(grid, 132 * 2);
  FJ_ASSERT_OK(fj_kernel_suggest_block(use_kernel_, 0, &block, nullptr));
}

TEST_F(FakeDeviceTest, KernelAttributesAreRangeChecked) {
  EXPECT_STATUS(fj_kernel_set_attribute(
                    use_kernel_, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, -1),
                FJ_OUT_OF_RANGE, "outside [0, 232448]");
  EXPECT_STATUS(fj_kernel_set_attribute(use_kernel_,
                                        FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES,
                                        (227 << 10) + 1),
                FJ_OUT_OF_RANGE, "opt-in limit");
  FJ_ASSERT_OK(fj_kernel_set_attribute(
      use_kernel_, FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES, 100 << 10));
  EXPECT_STATUS(fj_kernel_set_attribute(use_kernel_,
                                        FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 101),
                FJ_OUT_OF_RANGE, "[-1, 100]");
  EXPECT_STATUS(fj_kernel_set_attribute(use_kernel_,
                                        FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, -2),
                FJ_OUT_OF_RANGE, "[-1, 100]");
  FJ_ASSERT_OK(fj_kernel_set_attribute(use_kernel_,
                                       FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 50));
  FJ_ASSERT_OK(fj_kernel_set_attribute(use_kernel_,
                                       FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, -1));
  EXPECT_STATUS(
      fj_kernel_set_attribute(use_kernel_, static_cast<fj_kernel_attr>(2), 0),
      FJ_INVALID_ARGUMENT, "fj_kernel_attr");
  EXPECT_STATUS(
      fj_kernel_set_attribute(nullptr, FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 0),
      FJ_INVALID_ARGUMENT, "kernel is NULL");
  // A launch past the limit set raises it again.
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const fj_arg arg = PtrArg(out);
  fj_launch_config c = Launch(1, 32);
  c.shared_bytes = 150 << 10;
  FJ_ASSERT_OK(fj_launch(use_kernel_, &c, &arg, 1));
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

TEST_F(FakeDeviceTest, KernelInfoGrowsAtItsEnd) {
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  info.preferred_carveout = 12345;
  FJ_ASSERT_OK(fj_kernel_info_get(use_kernel_, &info));
  EXPECT_EQ(info.preferred_carveout, 0);  // the fake reports 0 for all
  // A 1.2 caller's struct: nothing written past it.
  struct {
    fj_kernel_info info;
    char guard[64];
  } old;
  std::memset(&old, 0x5C, sizeof(old));
  old.info.struct_size = offsetof(fj_kernel_info, const_bytes);
  FJ_ASSERT_OK(fj_kernel_info_get(use_kernel_, &old.info));
  const auto* bytes = reinterpret_cast<const unsigned char*>(&old.info);
  for (size_t i = offsetof(fj_kernel_info, const_bytes); i < sizeof(old); ++i) {
    ASSERT_EQ(bytes[i], 0x5C) << i;
  }
  EXPECT_STREQ(old.info.lowered_name, "use");
  old.info.struct_size = offsetof(fj_kernel_info, const_bytes) - 4;
  EXPECT_EQ(Code(fj_kernel_info_get(use_kernel_, &old.info)),
            FJ_INVALID_ARGUMENT);
}

TEST_F(FakeDeviceTest, StreamPrioritiesAreRangeChecked) {
  int32_t least = 99, greatest = 99;
  FJ_ASSERT_OK(fj_stream_priority_range(rt_, 0, &least, &greatest));
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  FJ_ASSERT_OK(fj_stream_priority_range(rt_, 0, nullptr, nullptr));
  EXPECT_EQ(Code(fj_stream_priority_range(rt_, 3, &least, &greatest)),
            FJ_NOT_FOUND);
  fj_stream* s = nullptr;
  EXPECT_STATUS(fj_stream_create_with_priority(rt_, 0, 1, &s), FJ_OUT_OF_RANGE,
                "outside device 0's range -5");
  EXPECT_STATUS(fj_stream_create_with_priority(rt_, 0, -6, &s), FJ_OUT_OF_RANGE,
                "-6");
  EXPECT_STATUS(fj_stream_create_with_priority(rt_, 0, -5, nullptr),
                FJ_INVALID_ARGUMENT, "out_stream is NULL");
  EXPECT_EQ(s, nullptr);
  FJ_ASSERT_OK(fj_stream_create_with_priority(rt_, 0, -5, &s));
  FJ_ASSERT_OK(fj_stream_synchronize(s));
  FJ_ASSERT_OK(fj_stream_destroy(s));
  EXPECT_STATUS(fj_stream_create_with_priority(nullptr, 0, 0, &s),
                FJ_INVALID_ARGUMENT, "runtime");
}

TEST_F(FakeDeviceTest, PersistingL2IsRangeChecked) {
  fj_device_info info{};
  info.struct_size = sizeof(info);
  FJ_ASSERT_OK(fj_device_info_get(rt_, 0, &info));
  ASSERT_EQ(info.max_persisting_l2_bytes, 30 << 20);
  EXPECT_EQ(info.max_access_policy_window_bytes, 128 << 20);
  uint64_t set = 0;
  EXPECT_STATUS(fj_device_set_persisting_l2(rt_, 0, (30u << 20) + 1, &set),
                FJ_OUT_OF_RANGE, "exceeds device 0's maximum");
  FJ_ASSERT_OK(fj_device_set_persisting_l2(rt_, 0, 4u << 20, &set));
  EXPECT_EQ(set, 4u << 20);
  FJ_ASSERT_OK(fj_device_set_persisting_l2(rt_, 0, 0, nullptr));
  EXPECT_EQ(Code(fj_device_set_persisting_l2(rt_, 9, 0, nullptr)),
            FJ_NOT_FOUND);
  // A 1.2 caller's fj_device_info still reads.
  info.struct_size = offsetof(fj_device_info, cooperative_launch);
  FJ_ASSERT_OK(fj_device_info_get(rt_, 0, &info));
}

TEST_F(FakeDeviceTest, ComplexArgumentsLaunch) {
  fj_kernel* k = nullptr;
  const std::string cplx = "cplx";
  FJ_ASSERT_OK(fj_module_get_kernel(module_, S(cplx), 0, &k));
  uint64_t out = 0;
  FJ_ASSERT_OK(fj_mem_alloc(rt_, 0, 4096, &out));
  const float c64[2] = {1.0f, 2.0f};
  const double c128[2] = {3.0, 4.0};
  fj_arg args[4] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_C64;
  std::memcpy(&args[0].v, c64, sizeof(c64));
  args[1].kind = FJ_ARG_I32;
  args[1].v.i32 = 0;
  args[2].kind = FJ_ARG_C128;
  args[2].v.bytes = c128;
  args[3].kind = FJ_ARG_POINTER;
  args[3].v.pointer = out;
  fj_launch_config c = Launch(1, 1);
  FJ_ASSERT_OK(fj_launch(k, &c, args, 4));
  // Swapped: a cuDoubleComplex where a cuFloatComplex goes.
  std::swap(args[0], args[2]);
  EXPECT_STATUS(fj_launch(k, &c, args, 4), FJ_INVALID_ARGUMENT,
                "got FJ_ARG_C128");
  args[0].kind = static_cast<fj_arg_kind>(FJ_ARG_KIND_LAST + 1);
  EXPECT_STATUS(fj_launch(k, &c, args, 4), FJ_INVALID_ARGUMENT,
                "is not an fj_arg_kind");
  FJ_ASSERT_OK(fj_mem_free(rt_, out));
}

// --- Without a GPU ----------------------------------------------------------

class NoGpuTest : public fleetjit::testing::CapiRuntimeTest<> {};

TEST_F(NoGpuTest, DeviceEntriesSayWhy) {
  if (gpus_ > 0) GTEST_SKIP() << "a GPU is present";
  int32_t least = 0;
  EXPECT_EQ(Code(fj_stream_priority_range(rt_, 0, &least, nullptr)),
            FJ_UNAVAILABLE);
  fj_stream* s = nullptr;
  EXPECT_EQ(Code(fj_stream_create_with_priority(rt_, 0, 0, &s)),
            FJ_UNAVAILABLE);
  EXPECT_EQ(Code(fj_device_set_persisting_l2(rt_, 0, 0, nullptr)),
            FJ_UNAVAILABLE);
  EXPECT_EQ(Code(fj_kernel_occupancy(nullptr, 32, 0, nullptr)),
            FJ_INVALID_ARGUMENT);
  int32_t block = 0;
  EXPECT_EQ(Code(fj_kernel_suggest_block(nullptr, 0, &block, nullptr)),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_kernel_set_attribute(nullptr,
                                         FJ_KERNEL_ATTR_PREFERRED_CARVEOUT, 0)),
            FJ_INVALID_ARGUMENT);
}

TEST_F(NoGpuTest, BuildLogIsKeptWithTheCacheEntry) {
  const fs::path dir =
      fs::temp_directory_path() /
      absl::StrCat("fj_build_log_",
                   ::testing::UnitTest::GetInstance()->random_seed(), "_",
                   getpid());
  fs::remove_all(dir);
  const std::string dir_s = dir.string();
  // A fresh source each run: the first build compiles.
  std::mt19937_64 rng = fleetjit::testing::SeededRng("BuildLog");
  const std::string source =
      absl::StrCat("extern \"C\" __global__ void k(int* out) {\n  int unused_",
                   rng() % 100000, ";\n  out[0] = ", rng() % 1000, ";\n}\n");
  const std::string target = "sm_90";
  auto build = [&](fj_runtime* rt, fj_cache_result want, std::string* log_out) {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source);
    o.target = S(target);
    fj_module* m = nullptr;
    FJ_ASSERT_OK(fj_module_build(rt, &o, &m));
    fj_module_info info{};
    info.struct_size = sizeof(info);
    FJ_ASSERT_OK(fj_module_info_get(m, &info));
    EXPECT_EQ(info.cache_result, want);
    const char* log = nullptr;
    size_t size = 0;
    FJ_ASSERT_OK(fj_module_build_log(m, &log, &size));
    ASSERT_NE(log, nullptr);
    EXPECT_EQ(std::strlen(log), size);
    *log_out = std::string(log, size);
    EXPECT_EQ(Code(fj_module_build_log(m, nullptr, &size)),
              FJ_INVALID_ARGUMENT);
    FJ_ASSERT_OK(fj_module_build_log(m, &log, nullptr));
    FJ_ASSERT_OK(fj_module_destroy(m));
    EXPECT_EQ(Code(fj_module_build_log(m, &log, &size)), FJ_INVALID_ARGUMENT);
  };
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.cache_dir = S(dir_s);
  fj_runtime* a = nullptr;
  FJ_ASSERT_OK(fj_runtime_create(&ro, &a));
  std::string compiled, memory, disk;
  build(a, FJ_CACHE_COMPILED, &compiled);
  if (::testing::Test::IsSkipped() || HasFatalFailure()) return;
  EXPECT_TRUE(absl::StrContains(compiled, "warning")) << compiled;
  EXPECT_TRUE(absl::StrContains(compiled, "unused_")) << compiled;
  build(a, FJ_CACHE_MEMORY_HIT, &memory);
  EXPECT_EQ(memory, compiled);
  FJ_ASSERT_OK(fj_cache_flush(a, 10000));
  FJ_ASSERT_OK(fj_runtime_destroy(a));
  fj_runtime* b = nullptr;
  FJ_ASSERT_OK(fj_runtime_create(&ro, &b));
  build(b, FJ_CACHE_DISK_HIT, &disk);
  EXPECT_EQ(disk, compiled);
  FJ_ASSERT_OK(fj_runtime_destroy(b));
  fs::remove_all(dir);
  EXPECT_EQ(Code(fj_module_build_log(nullptr, nullptr, nullptr)),
            FJ_INVALID_ARGUMENT);
}

}  // namespace
