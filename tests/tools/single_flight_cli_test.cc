// Cross-process single flight through the whole runtime (issue 47): eight
// `fleetjit build` processes start together on one new cache folder, all
// building one kernel with this machine's NVRTC (no GPU). One compiles; the
// seven others wait for its entry (written after its launch thunk, under the
// lock the runtime holds until then) and report a disk hit. With
// FLEETJIT_BUILD_WAIT=0 every one of them compiles, as before.
#include <fcntl.h>
#include <spawn.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "platform/nvrtc_locate.h"
#include "tests/common/corpus.h"
#include "tests/common/process.h"
#include "tests/tools/cli_process.h"

namespace fleetjit::testing {
namespace {

struct Counts {
  int compiled = 0, disk_hits = 0, failed = 0;
};

// Starts `n` `fleetjit build --target sm_90 SOURCE` at once into `cache`.
Counts BuildTogether(const ScratchDir& dir, const std::string& cache,
                     const std::string& wait, int n) {
  const std::string source = dir.Sub("saxpy.cu");
  std::ofstream(source) << SaxpySource();
  std::vector<pid_t> pids;
  std::vector<std::string> outs;
  for (int i = 0; i < n; ++i) {
    outs.push_back(dir.Sub(absl::StrCat("out-", wait, "-", i)));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, outs.back().c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pids.push_back(
        Spawn({CliPath(), "build", "--target", "sm_90", source},
              {"FLEETJIT_CACHE_DIR=" + cache, "FLEETJIT_BUILD_WAIT=" + wait,
               "FLEETJIT_LIBCUDA=/nonexistent/libcuda.so.1"},
              {"FLEETJIT_REMOTE_CACHE", "FLEETJIT_CACHE_BUNDLE"}, &actions));
    posix_spawn_file_actions_destroy(&actions);
  }
  Counts counts;
  for (int i = 0; i < n; ++i) {
    const int code = pids[i] > 0 ? Wait(pids[i]) : -1;
    const std::string out = Slurp(outs[i]);
    if (code != 0) {
      ADD_FAILURE() << "process " << i << " exited " << code << ": " << out;
      ++counts.failed;
    }
    counts.compiled += absl::StrContains(out, " compiled ");
    counts.disk_hits += absl::StrContains(out, "disk hit");
  }
  return counts;
}

TEST(SingleFlightCliTest, EightProcessesBuildingOneKernelCompileItOnce) {
  if (!ResolveNvrtcLibrary("").ok()) GTEST_SKIP() << "no NVRTC here";
  ScratchDir dir;
  Counts on = BuildTogether(dir, dir.Sub("cache-on"), "120", 8);
  std::printf("lock on: %d compiled, %d disk hits\n", on.compiled,
              on.disk_hits);
  EXPECT_EQ(on.compiled, 1);
  EXPECT_EQ(on.disk_hits, 7);
  Counts off = BuildTogether(dir, dir.Sub("cache-off"), "0", 8);
  std::printf("lock off: %d compiled, %d disk hits\n", off.compiled,
              off.disk_hits);
  EXPECT_EQ(off.compiled, 8);
}

}  // namespace
}  // namespace fleetjit::testing
