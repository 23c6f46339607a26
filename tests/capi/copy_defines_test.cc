// FLEETJIT_COPY_DEFINES through the C ABI, on the fake driver with NVRTC
// (no GPU): the copy-layer macros it names reach every build of the
// caller's kernels; a build whose own options name the macro keeps its
// own value; without the variable the layer's default holds. The kernel
// compiles only where the macro has the value it expects (#error
// otherwise), so a build that succeeds proves what NVRTC saw.
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/env.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

// A kernel on the layer that builds only when FJ_TMA_SMALL_TILES == want.
std::string Expecting(int want) {
  return absl::StrCat(R"(
#include <fleetjit/copy.cuh>
#if FJ_TMA_SMALL_TILES != )",
                      want, R"(
#error "FJ_TMA_SMALL_TILES is not the value this build expects"
#endif
extern "C" __global__ void k(float* out) { out[threadIdx.x] = 1.0f; }
)");
}

class CopyDefinesTest : public ::testing::Test {
 protected:
  // fj_runtime_create on the fake driver with FLEETJIT_COPY_DEFINES =
  // `defines` (unset when null); its status.
  fj_status* Create(const char* defines, fj_runtime** rt) {
    fleetjit::testing::EnvGuard env({"FLEETJIT_COPY_DEFINES"});
    if (defines != nullptr) ::setenv("FLEETJIT_COPY_DEFINES", defines, 1);
    fjfake_reset(1);
    const std::string driver = fleetjit::testing::FakeDriverPath();
    fj_runtime_options ro{};
    ro.struct_size = sizeof(ro);
    ro.libcuda_path = S(driver);
    ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    return fj_runtime_create(&ro, rt);
  }
  // rt_, created so.
  void Start(const char* defines) { FJ_ASSERT_OK(Create(defines, &rt_)); }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    fjfake_reset(1);
  }
  // Builds `source` for compute_90 under tma with `option` (may be "");
  // the status (null: built).
  fj_status* Build(const std::string& source, const std::string& option = "") {
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source);
    o.target = S(target_);
    o.copy_impl = FJ_COPY_IMPL_TMA;
    fj_str opt = S(option);
    if (!option.empty()) {
      o.nvrtc_options = &opt;
      o.num_nvrtc_options = 1;
    }
    fj_module* m = nullptr;
    fj_status* st = fj_module_build(rt_, &o, &m);
    if (m != nullptr) EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
    return st;
  }

  std::string target_ = "compute_90";
  fj_runtime* rt_ = nullptr;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(CopyDefinesTest, TheCallersBuildsGetTheMacros) {
  const int v = 2 + static_cast<int>(rng_() % 100000);
  const std::string defines =
      absl::StrCat("FJ_FLAT_LISTS=0,FJ_TMA_SMALL_TILES=", v);
  Start(defines.c_str());
  FJ_ASSERT_OK(Build(Expecting(v)));
  // The check can fail: the default value does not build here.
  fj_status* st = Build(Expecting(1024));
  ASSERT_NE(st, nullptr) << "the macro did not reach the build";
  EXPECT_TRUE(absl::StrContains(fj_status_message(st, nullptr),
                                "not the value this build expects"))
      << fj_status_message(st, nullptr);
  fj_status_free(st);
}

TEST_F(CopyDefinesTest, ABuildThatNamesTheMacroKeepsItsOwn) {
  const int v = 2 + static_cast<int>(rng_() % 100000), own = v + 1;
  Start(absl::StrCat("FJ_TMA_SMALL_TILES=", v).c_str());
  FJ_ASSERT_OK(
      Build(Expecting(own), absl::StrCat("-DFJ_TMA_SMALL_TILES=", own)));
  FJ_ASSERT_OK(Build(Expecting(own),
                     absl::StrCat("--define-macro=FJ_TMA_SMALL_TILES=", own)));
  // An undefine wins too: the layer's default comes back.
  FJ_ASSERT_OK(Build(Expecting(1024), "-UFJ_TMA_SMALL_TILES"));
}

TEST_F(CopyDefinesTest, WithoutTheVariableTheLayersDefaultHolds) {
  Start(nullptr);
  FJ_ASSERT_OK(Build(Expecting(1024)));
}

TEST_F(CopyDefinesTest, AMalformedValueFailsTheRuntimeNamingIt) {
  fj_runtime* rt = nullptr;
  fj_status* st = Create("TMA_SMALL_TILES=0", &rt);
  ASSERT_NE(st, nullptr) << "a malformed FLEETJIT_COPY_DEFINES was taken";
  EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(fj_status_message(st, nullptr),
                                "FLEETJIT_COPY_DEFINES"))
      << fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_EQ(rt, nullptr);
}

}  // namespace
