// The bundle route of README's "Deploying to a fleet" (issue 47), end to
// end: a build box (this machine's NVRTC, `fleetjit build --target` and
// `fleetjit cache export`) makes one signed bundle; a "server" process on
// the fake driver, with NVRTC hidden, no remote tier and no disk cache,
// builds the same kernels through the C ABI from the bundle alone, gets
// launchable kernels and launches them, and never maps NVRTC. A server with
// another fleet key refuses the bundle; one with NVRTC finds its full key.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "platform/nvrtc_locate.h"
#include "tests/common/corpus.h"
#include "tests/common/process.h"
#include "tests/tools/cli_process.h"

namespace fleetjit::testing {
namespace {

constexpr char kFleetKey[] =
    "3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d";
constexpr char kOtherKey[] =
    "ffffff69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d";

bool NvrtcMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libnvrtc") != std::string::npos) return true;
  }
  return false;
}

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }

// What the server child expects of each build.
enum class Expect { kBundleHit, kRefused };

// The server, in a child process: the environment names the bundle, the
// fake driver and (or not) a missing NVRTC; builds `source` for the live
// device (the fake sm_90), gets `kernel` and launches it, and builds it for
// sm_80 too. Exit 0 when every build went as `expect` says and NVRTC was
// never mapped.
int Server(const std::string& source, const char* kernel, Expect expect) {
  fj_runtime* rt = nullptr;
  if (fj_runtime_create(nullptr, &rt) != nullptr) return 10;
  int32_t devices = 0;
  if (fj_device_count(rt, &devices) != nullptr || devices != 1) return 11;
  for (const char* target : {"", "sm_80"}) {
    fj_build_options o = {sizeof o};
    o.source = Str(source);
    o.target = fj_str{target, std::strlen(target)};
    fj_module* m = nullptr;
    fj_status* s = fj_module_build(rt, &o, &m);
    if (expect == Expect::kRefused) {
      if (s == nullptr || fj_status_code(s) != FJ_UNAVAILABLE) return 20;
      const std::string message = fj_status_message(s, nullptr);
      std::fprintf(stderr, "refused as expected: %s\n", message.c_str());
      fj_status_free(s);
      if (!absl::StrContains(message, "bundle off")) return 21;
      continue;
    }
    if (s != nullptr) {
      std::fprintf(stderr, "build for '%s': %s\n", target,
                   fj_status_message(s, nullptr));
      return 30;
    }
    fj_module_info info = {sizeof info};
    if (fj_module_info_get(m, &info) != nullptr ||
        info.cache_result != FJ_CACHE_DISK_HIT) {
      return 31;
    }
    if (*target == 0 && std::string(info.target) != "sm_90") return 32;
    // The live device's module loads and launches; sm_80's is for another
    // host of the fleet (its cubin does not run on this sm_90).
    if (*target == 0) {
      fj_kernel* k = nullptr;
      if (fj_module_get_kernel(m, fj_str{kernel, std::strlen(kernel)}, 0, &k) !=
          nullptr) {
        return 33;
      }
      uint64_t x = 0, y = 0;
      if (fj_mem_alloc(rt, 0, 1024, &x) != nullptr ||
          fj_mem_alloc(rt, 0, 1024, &y) != nullptr) {
        return 34;
      }
      fj_arg args[4] = {};
      for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
      args[0].kind = FJ_ARG_POINTER;
      args[0].v.pointer = y;
      args[1].kind = FJ_ARG_POINTER;
      args[1].v.pointer = x;
      args[2].kind = FJ_ARG_F32;
      args[2].v.f32 = 2.f;
      args[3].kind = FJ_ARG_I32;
      args[3].v.i32 = 256;
      fj_launch_config cfg = {sizeof cfg};
      cfg.grid[0] = 1;
      cfg.block[0] = 256;
      if (fj_status* l = fj_launch(k, &cfg, args, 4); l != nullptr) {
        std::fprintf(stderr, "launch: %s\n", fj_status_message(l, nullptr));
        return 35;
      }
    }
  }
  if (expect == Expect::kBundleHit) {
    fj_cache_stats stats = {sizeof stats};
    if (fj_cache_stats_get(rt, &stats) != nullptr || stats.compiles != 0 ||
        stats.disk_hits != 2) {
      return 40;
    }
  }
  fj_runtime_destroy(rt);
  if (NvrtcMapped()) return 50;
  return 0;
}

class BundleRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ResolveNvrtcLibrary("").ok()) {
      GTEST_SKIP() << "no NVRTC here to play the build box";
    }
    // The build box: two targets into its cache, then one signed bundle.
    const std::vector<std::pair<std::string, std::optional<std::string>>> env =
        {{"FLEETJIT_CACHE_DIR", dir_.Sub("build-box")},
         {"FLEETJIT_FLEET_KEY", kFleetKey},
         {"FLEETJIT_LIBCUDA", "/nonexistent/libcuda.so.1"}};
    const std::string source = dir_.Sub("saxpy.cu");
    std::ofstream(source) << SaxpySource();
    CliRun build = RunCli({"build", "--target", "sm_80,sm_90", source}, env);
    ASSERT_EQ(build.code, 0) << build.err;
    CliRun exported = RunCli({"cache", "export", bundle_}, env);
    ASSERT_EQ(exported.code, 0) << exported.err;
    EXPECT_TRUE(absl::StrContains(exported.out, "signed with the fleet key"))
        << exported.out;
  }

  // Runs Server in a child with the server's environment.
  int RunServer(const char* fleet_key, Expect expect, bool hide_nvrtc) {
    return InChild([&] {
      ::setenv("FLEETJIT_LIBCUDA", FJ_FAKE_CUDA, 1);
      ::setenv("FLEETJIT_CACHE_BUNDLE", bundle_.c_str(), 1);
      ::setenv("FLEETJIT_FLEET_KEY", fleet_key, 1);
      ::setenv("FLEETJIT_CACHE", "0", 1);  // the bundle alone
      ::unsetenv("FLEETJIT_REMOTE_CACHE");
      ::setenv("FLEETJIT_THUNKS", "0", 1);  // no LLVM needed either
      if (hide_nvrtc) {
        ::setenv("FLEETJIT_LIBNVRTC", "/nonexistent/libnvrtc.so.13", 1);
        ::setenv("LD_LIBRARY_PATH", "/nonexistent", 1);
      }
      return Server(SaxpySource(), "saxpy", expect);
    });
  }

  ScratchDir dir_;
  const std::string bundle_ = dir_.Sub("app.fjb");
};

TEST_F(BundleRouteTest, AServerWithoutNvrtcBuildsFromTheBundleAlone) {
  EXPECT_EQ(RunServer(kFleetKey, Expect::kBundleHit, /*hide_nvrtc=*/true), 0);
}

TEST_F(BundleRouteTest, AServerWithAnotherFleetKeyRefusesTheBundle) {
  EXPECT_EQ(RunServer(kOtherKey, Expect::kRefused, /*hide_nvrtc=*/true), 0);
}

// A server with the build box's NVRTC looks up its own full key, and a hit
// still never loads NVRTC.
TEST_F(BundleRouteTest, AServerWithTheSameNvrtcHitsItsFullKey) {
  EXPECT_EQ(RunServer(kFleetKey, Expect::kBundleHit, /*hide_nvrtc=*/false), 0);
}

}  // namespace
}  // namespace fleetjit::testing
