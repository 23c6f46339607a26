// BuildPool (runtime/builder/build_pool.h): builds on its threads, and a
// fork() while builds run. A child inherits every lock a running build
// holds (here a stand-in for NVRTC's: every build takes `g_compiler`), so
// the pool's fork handlers let running builds finish first; the child then
// builds on threads of its own, and the parent's pool resumes. Each build
// returns a fresh random tag that its job must hand back.
#include "runtime/builder/build_pool.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/common/process.h"
#include "tests/common/seed.h"

namespace fleetjit {
namespace {

std::mutex g_compiler;  // what every build holds while it "compiles"
std::atomic<int> g_started{0};

// A build that holds the compiler lock for `ms` and names its record `tag`.
std::function<absl::StatusOr<ModuleRecord>()> SlowBuild(std::string tag,
                                                        int ms) {
  return [tag, ms]() -> absl::StatusOr<ModuleRecord> {
    std::lock_guard<std::mutex> lock(g_compiler);
    g_started.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ModuleRecord r;
    r.name = tag;
    return r;
  };
}

TEST(BuildPool, RunsEveryBuildAndHandsBackItsResult) {
  std::mt19937_64 rng = testing::SeededRng("RunsEveryBuild");
  BuildPool pool(3);
  std::vector<std::pair<std::string, std::shared_ptr<BuildJob>>> jobs;
  for (int i = 0; i < 8; ++i) {
    const std::string tag = absl::StrCat("b", i, "-", rng());
    jobs.push_back({tag, pool.Submit(SlowBuild(tag, 5))});
  }
  for (auto& [tag, job] : jobs) {
    ASSERT_TRUE(job->Wait(absl::Seconds(60)));
    absl::StatusOr<ModuleRecord> r = job->Take();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->name, tag);
    EXPECT_FALSE(job->Take().ok());  // once
  }
}

TEST(BuildPool, ForkWhileBuildsRunThenBuildInTheChild) {
  std::mt19937_64 rng = testing::SeededRng("ForkWhileBuildsRun");
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    BuildPool pool(4);
    g_started = 0;
    std::vector<std::pair<std::string, std::shared_ptr<BuildJob>>> jobs;
    for (int i = 0; i < 6; ++i) {
      const std::string tag = absl::StrCat("parent", i, "-", rng());
      jobs.push_back({tag, pool.Submit(SlowBuild(tag, 40 + 20 * round))});
    }
    // fork() while a build holds the compiler lock and others wait for it.
    while (g_started.load() == 0) std::this_thread::yield();
    const std::string child_tag = absl::StrCat("child-", rng());
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child: a build on the inherited pool, which must get a thread
      // and a free compiler lock.
      std::shared_ptr<BuildJob> job = pool.Submit(SlowBuild(child_tag, 1));
      if (!job->Wait(absl::Seconds(30))) _exit(3);
      absl::StatusOr<ModuleRecord> r = job->Take();
      if (!r.ok()) _exit(4);
      _exit(r->name == child_tag ? 0 : 5);
    }
    EXPECT_EQ(testing::WaitWithin(pid, std::chrono::seconds(60)), 0)
        << "the child's build (3: hung, 4: failed, 5: wrong result, -2: the "
           "child was killed after 60 s)";
    // The parent's pool resumed: every build finishes with its own result,
    // and a new one runs too.
    jobs.push_back({child_tag, pool.Submit(SlowBuild(child_tag, 1))});
    for (auto& [tag, job] : jobs) {
      ASSERT_TRUE(job->Wait(absl::Seconds(60))) << tag;
      absl::StatusOr<ModuleRecord> r = job->Take();
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->name, tag);
    }
  }
}

}  // namespace
}  // namespace fleetjit
