// The copy layer's checked mode through the C ABI, on the fake driver (no
// GPU): FLEETJIT_CHECK=1 builds a caller's kernels with -DFJ_CHECK=1 (a
// checked tma module has the note table `fj_check_notes`; a build that says
// -DFJ_CHECK=0 opts out), and after a launch of a checked kernel, with the
// log level at debug, each note the device left is logged once per call
// site, naming the call, the line and the coordinates that stay on TMA.
// The device's side (the trap, the notes it writes) runs on the GPU host:
// tests/jit/checked_mode_gpu_test.cc.
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fleetjit/copy/check_notes.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/env.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

constexpr char kSource[] = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void halo(FJ_TENSOR(float, 2) t, int x, float* out) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(tile, t, fj::at(x - 1, blockIdx.x * 32), bar);
  bar.arrive_and_wait(0);
  out[threadIdx.x] = tile[threadIdx.x];
}
)";

struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
};
void Collect(void* user, int32_t level, fj_str message) {
  auto* log = static_cast<LogLines*>(user);
  std::lock_guard<std::mutex> lock(log->mu);
  if (level == FJ_LOG_DEBUG)
    log->lines.emplace_back(message.data, message.size);
}

class CheckedModeTest : public ::testing::Test {
 protected:
  // A runtime on the fake driver, FLEETJIT_CHECK as `check` says, logging
  // at `level` into log_.
  void Start(const char* check, int32_t level) {
    fleetjit::testing::EnvGuard env({"FLEETJIT_CHECK", "FLEETJIT_LOG"});
    if (check != nullptr) ::setenv("FLEETJIT_CHECK", check, 1);
    fjfake_reset(1);
    const std::string driver = fleetjit::testing::FakeDriverPath();
    fj_runtime_options ro{};
    ro.struct_size = sizeof(ro);
    ro.libcuda_path = S(driver);
    ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    ro.log_fn = Collect;
    ro.log_user = &log_;
    ro.log_level = level;
    FJ_ASSERT_OK(fj_runtime_create(&ro, &rt_));
  }
  void TearDown() override {
    if (memory_ != 0) EXPECT_EQ(Code(fj_mem_free(rt_, memory_)), FJ_OK);
    if (module_ != nullptr) EXPECT_EQ(Code(fj_module_destroy(module_)), FJ_OK);
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    fjfake_reset(1);
  }
  // Builds kSource for compute_90 under tma with `option` (may be "").
  void Build(const std::string& option = "") {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    o.copy_impl = FJ_COPY_IMPL_TMA;
    fj_str opt = S(option);
    if (!option.empty()) {
      o.nvrtc_options = &opt;
      o.num_nvrtc_options = 1;
    }
    FJ_ASSERT_OK(fj_module_build(rt_, &o, &module_));
  }
  bool HasNotes() {
    fj_global_info info{};
    info.struct_size = sizeof(info);
    fj_status* st = fj_module_get_global(module_, S(notes_), 0, &info);
    const bool found = fj_status_code(st) == FJ_OK;
    EXPECT_TRUE(found || fj_status_code(st) == FJ_NOT_FOUND)
        << fj_status_message(st, nullptr);
    fj_status_free(st);
    if (found) {
      EXPECT_EQ(info.bytes, 2 * FJ_CHECK_NOTE_SLOTS * sizeof(uint64_t));
    }
    return found;
  }
  fj_status* Launch() {
    fj_kernel* k = nullptr;
    fj_status* st = fj_module_get_kernel(module_, S(kernel_), 0, &k);
    if (st != nullptr) return st;
    if (memory_ == 0) {
      st = fj_mem_alloc(rt_, 0, 1 << 20, &memory_);
      if (st != nullptr) return st;
    }
    int64_t shape[2] = {64, 64};
    fj_tensor t{reinterpret_cast<void*>(static_cast<uintptr_t>(memory_)),
                {2, 0},
                2,
                {2, 32, 1},
                shape,
                nullptr,
                0};
    fj_tensor_arg arg{};
    arg.struct_size = sizeof(arg);
    arg.tensor = &t;
    arg.box[0] = 32;
    arg.box[1] = 32;
    arg.oob = FJ_OOB_ZEROS;
    fj_arg args[3] = {};
    for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_TENSOR;
    args[0].v.tensor = &arg;
    args[1].kind = FJ_ARG_I32;
    args[1].v.i32 = 0;
    args[2].kind = FJ_ARG_POINTER;
    args[2].v.pointer = memory_ + (1 << 19);
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = 2;
    cfg.block[0] = 128;
    return fj_launch(k, &cfg, args, 3);
  }
  // What the device writes when halo's load (x = 0: at(-1, y)) leaves TMA
  // at the call's line: the note check_notes.h describes.
  void WriteNote(unsigned line) {
    uint64_t note[2] = {(uint64_t{line} << 32) |
                            (uint64_t{fj::check_load_tile} << 8) |
                            fj::check_unaligned_start,
                        0xFFFFFFFFull | (uint64_t{4} << 32)};
    FJ_ASSERT_OK(fj_module_global_write(module_, S(notes_), 0, 0, note,
                                        sizeof(note), nullptr));
  }
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(log_.mu);
    std::vector<std::string> out;
    for (const std::string& l : log_.lines) {
      if (absl::StrContains(l, "checked build")) out.push_back(l);
    }
    return out;
  }

  std::string source_ = kSource, target_ = "compute_90", kernel_ = "halo";
  std::string notes_ = FJ_CHECK_NOTES_SYMBOL;
  LogLines log_;
  fj_runtime* rt_ = nullptr;
  fj_module* module_ = nullptr;
  uint64_t memory_ = 0;
};

TEST_F(CheckedModeTest, FleetjitCheckBuildsCheckedModules) {
  Start("1", FJ_LOG_WARN);
  Build();
  EXPECT_TRUE(HasNotes()) << "FLEETJIT_CHECK=1 did not add -DFJ_CHECK=1";
  FJ_ASSERT_OK(fj_module_destroy(module_));
  module_ = nullptr;
  // A build that says otherwise keeps its word.
  Build("-DFJ_CHECK=0");
  EXPECT_FALSE(HasNotes());
}

TEST_F(CheckedModeTest, WithoutTheSwitchBuildsAreNotChecked) {
  Start(nullptr, FJ_LOG_WARN);
  Build();
  EXPECT_FALSE(HasNotes());
  FJ_ASSERT_OK(fj_module_destroy(module_));
  module_ = nullptr;
  Build("-DFJ_CHECK=1");  // or a build's own option
  EXPECT_TRUE(HasNotes());
}

TEST_F(CheckedModeTest, DebugLogNamesEachCallSiteOnce) {
  Start("1", FJ_LOG_DEBUG);
  Build();
  ASSERT_TRUE(HasNotes());
  FJ_ASSERT_OK(Launch());
  EXPECT_TRUE(Lines().empty()) << "no note yet";
  WriteNote(9);
  FJ_ASSERT_OK(Launch());
  FJ_ASSERT_OK(Launch());  // the same note: not logged again
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  const std::string& l = lines[0];
  EXPECT_TRUE(absl::StrContains(l, "fj::load_tile at line 9")) << l;
  EXPECT_TRUE(absl::StrContains(l, "halo")) << l;
  EXPECT_TRUE(absl::StrContains(l, "innermost start coordinate -1 (x 4 bytes)"))
      << l;
  EXPECT_TRUE(absl::StrContains(l, "multiple of 4 elements stay on TMA")) << l;
}

TEST_F(CheckedModeTest, NoNotesAreReadBelowDebug) {
  Start("1", FJ_LOG_INFO);
  Build();
  WriteNote(9);
  FJ_ASSERT_OK(Launch());
  EXPECT_TRUE(Lines().empty());
}

}  // namespace
