// NVRTC faults (issue 12, item 3), over the C ABI: NVRTC missing, not a
// library, lacking entry points, reporting the wrong version, and each of
// its calls failing. The stand-in library (fake_nvrtc.cc) forwards to the
// real NVRTC and misbehaves as each test asks. A crashing NVRTC is in
// process_faults_test.cc: it takes its process down, so it runs in a
// child.
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "platform/nvrtc_locate.h"
#include "tests/common/test_paths.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::testing {
namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }
// Literals: a temporary std::string would die before the struct is used.
fj_str S(const char* s) { return fj_str{s, std::strlen(s)}; }

struct Outcome {
  fj_code code = FJ_OK;
  std::string message;
};

std::string FakeNvrtc() {
  return BesideExecutable("fake_nvrtc/libnvrtc.so.13", FJ_FAKE_NVRTC_PATH);
}

// Builds a small kernel with NVRTC `nvrtc` (no cache: NVRTC always runs).
Outcome BuildWith(const std::string& nvrtc, const std::string& cache_dir,
                  int variant = 0) {
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.libnvrtc_path = S(nvrtc);
  ro.cache_dir = S(cache_dir);
  fj_runtime* rt = nullptr;
  Outcome out;
  if (fj_status* st = fj_runtime_create(&ro, &rt)) {
    out = {fj_status_code(st), fj_status_message(st, nullptr)};
    fj_status_free(st);
    return out;
  }
  const std::string source = absl::StrCat(
      "template <typename T> __global__ void k(T* p) { p[threadIdx.x] = T(",
      variant, "); }\n");
  const std::string target = "sm_90";
  const fj_str expressions[] = {S("k<float>")};
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(source);
  o.target = S(target);
  o.name_expressions = expressions;
  o.num_name_expressions = 1;
  o.flags = FJ_BUILD_NO_CACHE;
  fj_module* m = nullptr;
  if (fj_status* st = fj_module_build(rt, &o, &m)) {
    out = {fj_status_code(st), fj_status_message(st, nullptr)};
    fj_status_free(st);
  }
  fj_status_free(fj_module_destroy(m));
  fj_status_free(fj_runtime_destroy(rt));
  return out;
}

class NvrtcFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto real = ResolveNvrtcLibrary("");
    if (!real.ok()) GTEST_SKIP() << "no NVRTC: " << real.status();
    real_ = *real;
    if (access(FakeNvrtc().c_str(), R_OK) != 0) {
      GTEST_SKIP() << "the stand-in NVRTC is not here (" << FakeNvrtc()
                   << "): scripts/gpu-host/stage --build does not carry "
                      "tests/fake_nvrtc/";
    }
    setenv("FJ_FAKE_NVRTC_REAL", real_.c_str(), 1);
    for (const char* v : {"FJ_FAKE_NVRTC_VERSION", "FJ_FAKE_NVRTC_CRASH",
                          "FJ_FAKE_NVRTC_FAIL"}) {
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : {"FJ_FAKE_NVRTC_VERSION", "FJ_FAKE_NVRTC_FAIL"})
      unsetenv(v);
  }
  std::string real_;
  TempDir dir_;
};

TEST_F(NvrtcFaultsTest, TheStandInWorksWhenItBehaves) {
  Outcome out = BuildWith(FakeNvrtc(), dir_.path());
  EXPECT_EQ(out.code, FJ_OK) << out.message;
}

TEST_F(NvrtcFaultsTest, MissingNvrtcSaysWhatToInstall) {
  Outcome out = BuildWith(dir_.Sub("nowhere/libnvrtc.so.13"), dir_.path());
  EXPECT_EQ(out.code, FJ_UNAVAILABLE) << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "nowhere/libnvrtc.so.13"))
      << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "NVRTC")) << out.message;
}

// FJ_RUNTIME_PRELOAD_NVRTC on a host without NVRTC fails the create with
// FJ_UNAVAILABLE (fleetjit.h, "Start-up"), as a build without it does. No
// NVRTC is needed to check it.
TEST(NvrtcPreloadTest, AMissingNvrtcFailsTheCreateWithUnavailable) {
  for (const char* v : {"FLEETJIT_LIBNVRTC", "FLEETJIT_PRELOAD_NVRTC"}) {
    unsetenv(v);
  }
  TempDir dir;
  const std::string missing = dir.Sub("nowhere/libnvrtc.so.13");
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.flags = FJ_RUNTIME_PRELOAD_NVRTC;
  ro.libnvrtc_path = S(missing);
  ro.cache_dir = S(dir.path());
  fj_runtime* rt = nullptr;
  fj_status* st = fj_runtime_create(&ro, &rt);
  ASSERT_NE(st, nullptr) << "created a runtime without its NVRTC";
  const std::string message = fj_status_message(st, nullptr);
  EXPECT_EQ(fj_status_code(st), FJ_UNAVAILABLE) << message;
  fj_status_free(st);
  EXPECT_EQ(rt, nullptr);
  EXPECT_TRUE(absl::StrContains(message, "preloading NVRTC")) << message;
  EXPECT_TRUE(absl::StrContains(message, missing)) << message;
  EXPECT_TRUE(absl::StrContains(message, "FLEETJIT_LIBNVRTC")) << message;
}

TEST_F(NvrtcFaultsTest, AFileThatIsNotALibraryIsUnavailable) {
  const std::string path = dir_.Sub("libnvrtc.so.13");
  WriteFile(path, "this is not an ELF file\n");
  Outcome out = BuildWith(path, dir_.path());
  EXPECT_EQ(out.code, FJ_UNAVAILABLE) << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "cannot load NVRTC"))
      << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "FLEETJIT_LIBNVRTC"))
      << out.message;
}

TEST_F(NvrtcFaultsTest, ALibraryWithoutTheEntryPointsNamesThem) {
  // Any shared library that is not NVRTC: the fake CUDA driver.
  const std::string path = dir_.Sub("libnvrtc.so.13");
  std::filesystem::copy_file(
      BesideExecutable("../lib/libfj_fake_cuda.so", FJ_FAKE_CUDA_PATH), path);
  Outcome out = BuildWith(path, dir_.path());
  EXPECT_EQ(out.code, FJ_UNAVAILABLE) << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "lacks nvrtcGetErrorString"))
      << out.message;
}

TEST_F(NvrtcFaultsTest, AnOlderNvrtcIsRefusedWithItsVersion) {
  setenv("FJ_FAKE_NVRTC_VERSION", "11.8", 1);
  Outcome out = BuildWith(FakeNvrtc(), dir_.path());
  EXPECT_EQ(out.code, FJ_FAILED_PRECONDITION) << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "reports NVRTC 11.8"))
      << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "needs NVRTC 12 or later"))
      << out.message;
}

TEST_F(NvrtcFaultsTest, ALibraryReportingAnotherVersionThanItsNameIsRefused) {
  // Named libnvrtc.so.13 (the cache key says "nvrtc 13"), reporting 12.4.
  setenv("FJ_FAKE_NVRTC_VERSION", "12.4", 1);
  Outcome out = BuildWith(FakeNvrtc(), dir_.path());
  EXPECT_EQ(out.code, FJ_FAILED_PRECONDITION) << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "reports NVRTC 12.4"))
      << out.message;
  EXPECT_TRUE(absl::StrContains(out.message, "file name says 13"))
      << out.message;
  // The same major with another minor matches a name that gives only 13.
  setenv("FJ_FAKE_NVRTC_VERSION", "13.7", 1);
  out = BuildWith(FakeNvrtc(), dir_.path());
  EXPECT_EQ(out.code, FJ_OK) << out.message;
}

TEST_F(NvrtcFaultsTest, EachNvrtcCallFailingIsAStatusNamingIt) {
  // Every entry point a build calls (nvrtcVersion through the loader; the
  // optional ones are probed, not required).
  const char* kCalls[] = {
      "nvrtcVersion",        "nvrtcCreateProgram",  "nvrtcAddNameExpression",
      "nvrtcCompileProgram", "nvrtcGetLoweredName", "nvrtcGetPTXSize",
      "nvrtcGetPTX",         "nvrtcGetCUBINSize",   "nvrtcGetCUBIN"};
  int variant = 0;
  for (const char* call : kCalls) {
    SCOPED_TRACE(call);
    setenv("FJ_FAKE_NVRTC_FAIL", call, 1);
    Outcome out = BuildWith(FakeNvrtc(), dir_.path(), ++variant);
    EXPECT_NE(out.code, FJ_OK);
    EXPECT_NE(out.code, FJ_BUILD_ERROR)
        << "NVRTC's own failure reported as the source's";
    EXPECT_TRUE(absl::StrContains(out.message, call)) << out.message;
  }
  // The program log is informational (warnings on success, the error
  // string stands in on failure): a build that cannot read it is the same
  // build.
  for (const char* call : {"nvrtcGetProgramLogSize", "nvrtcGetProgramLog"}) {
    SCOPED_TRACE(call);
    setenv("FJ_FAKE_NVRTC_FAIL", call, 1);
    Outcome out = BuildWith(FakeNvrtc(), dir_.path(), ++variant);
    EXPECT_EQ(out.code, FJ_OK) << out.message;
  }
  unsetenv("FJ_FAKE_NVRTC_FAIL");
  Outcome out = BuildWith(FakeNvrtc(), dir_.path(), ++variant);
  EXPECT_EQ(out.code, FJ_OK) << out.message;
}

}  // namespace
}  // namespace fleetjit::testing
