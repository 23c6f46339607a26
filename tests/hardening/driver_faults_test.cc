// Every driver call failing in turn (issue 12, item 3), through the fake
// driver's symbol table (tests/common/fake_cuda): a clean run of the
// session in driver_scenario.h counts each entry point's calls and where
// they come from; then, for every call of every entry point, the session
// runs again with exactly that call failing (a CUresult drawn at random,
// sticky kernel faults included). Each run must
//  - report the failure as a status whose "cuda_call" detail names the
//    entry point (the first failure the caller sees), unless the call is
//    one the runtime may lose without harm (kTolerated, each with why);
//  - leave no driver object behind (allocations, modules, streams, events,
//    context retains), except the one whose own destroy call failed, and
//    none for the driver to reclaim when the primary context's last retain
//    goes (a process sharing the context, like PyTorch, would leak it).
//    After a sticky error (a kernel fault: the CUresult table's verdict)
//    the context is dead: fleetjit makes no more calls into it, and its
//    objects go with it when it is released;
//  - not hang (a watchdog aborts a run past kRunLimit) and not crash.
// Host leaks are LeakSanitizer's (scripts/ci/sanitize runs this test).
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "platform/cu_errors.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/seed.h"
#include "tests/common/temp_dir.h"
#include "tests/hardening/driver_scenario.h"

namespace fleetjit::testing {
namespace {

constexpr std::chrono::seconds kRunLimit(120);

// Calls whose failure may reach the caller as something other than a
// status naming them, by the step (C ABI call) it happens in, and why.
// `gap`: not right yet, in a file this branch does not own; the test
// still requires no crash, no hang and right data, allows the one object
// named by `leaks`, and prints the gap.
struct Excuse {
  const char* call;
  const char* step_prefix;  // "" = any step
  const char* why;
  bool gap;
  int64_t fjfake_live::*leaks;
  const char* log_names;  // a log line must contain this ("" = none needed)
};

const Excuse kExcuses[] = {
    {"cuGetErrorName", "",
     "called only to describe another failure; without it the status still "
     "names the "
     "failed call (ErrorTextFailuresStillNameTheCall)",
     false, nullptr, ""},
    {"cuGetErrorString", "", "as cuGetErrorName", false, nullptr, ""},
    {"cuCtxGetCurrent", "",
     "Device::MakeCurrent: a current context that cannot be read counts as "
     "none, and the device's own context is entered with cuCtxSetCurrent, "
     "which is checked; nothing fails",
     false, nullptr, ""},
    {"cuDevicePrimaryCtxRetain", "",
     "Device::MakeCurrent retries a failed retain once outside the thread's "
     "current context (another device's sticky fault is reported there); "
     "the retry succeeds and a warning names the first failure",
     false, nullptr, "cuDevicePrimaryCtxRetain"},
    {"cuTensorMapEncodeTiled", "fj_launch",
     "a tensor TMA cannot describe launches through cp.async; the reason is "
     "logged (info)",
     false, nullptr, "cuTensorMapEncodeTiled"},
    {"cuDeviceCanAccessPeer", "fj_copy",
     "CopyEngine::Peers: a failed query reads as 'no P2P path', the copy is "
     "staged through the host (right data) and a warning names the call",
     false, nullptr, "cuDeviceCanAccessPeer"},
    {"cuCtxSetCurrent", "fj_runtime_destroy",
     "~CopyEngine: a device that cannot be entered keeps its copy stream "
     "for the driver; a warning says so",
     false, &fjfake_live::streams, "cuCtxSetCurrent"},
};

// `launch_site`: the call comes from a site fj_launch reaches (step_prefix
// "@launch").
const Excuse* ExcuseFor(const std::string& call, const std::string& step,
                        bool launch_site) {
  for (const Excuse& e : kExcuses) {
    if (call != e.call) continue;
    if (absl::string_view(e.step_prefix) == "@launch"
            ? launch_site
            : absl::StartsWith(step, e.step_prefix)) {
      return &e;
    }
  }
  return nullptr;
}

// The step of `clean` that made call `nth` of symbol `index`.
std::string StepOf(const ScenarioResult& clean, int index, uint64_t nth) {
  for (const auto& [step, calls] : clean.step_calls) {
    if (calls[index] >= nth) return step;
  }
  return "";
}

// Calls that release something: a failure leaves that object to the
// driver (nothing else can free it) and no caller to tell but the log.
int64_t fjfake_live::*ReleasedBy(const std::string& call) {
  if (call == "cuMemFree") return &fjfake_live::allocations;
  if (call == "cuMemFreeHost") return &fjfake_live::host_allocations;
  if (call == "cuModuleUnload") return &fjfake_live::modules;
  if (call == "cuStreamDestroy") return &fjfake_live::streams;
  if (call == "cuEventDestroy") return &fjfake_live::events;
  if (call == "cuDevicePrimaryCtxRelease") return &fjfake_live::context_retains;
  return nullptr;
}

std::string Describe(const fjfake_live& l) {
  return absl::StrCat("allocations=", l.allocations,
                      " host=", l.host_allocations, " modules=", l.modules,
                      " streams=", l.streams, " events=", l.events,
                      " context_retains=", l.context_retains);
}

// "lib:offset" of a call site; with `where`, addr2line's function and line.
std::string SiteName(uintptr_t site, bool where) {
  Dl_info info{};
  if (site == 0 || dladdr(reinterpret_cast<void*>(site), &info) == 0)
    return "unknown";
  const uintptr_t offset =
      site - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  std::string file = info.dli_fname;
  std::string name =
      absl::StrCat(file.substr(file.rfind('/') + 1), "+0x", absl::Hex(offset));
  if (!where) return name;
  std::string cmd = absl::StrCat("addr2line -f -C -e '", file, "' 0x",
                                 absl::Hex(offset), " 2>/dev/null");
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[1024];
    std::string text;
    while (fgets(line, sizeof(line), p) != nullptr) {
      text += line;
      text.back() == '\n' ? text.back() = ' ' : text.back();
    }
    pclose(p);
    if (!text.empty()) name = text;
  }
  return name;
}

using ::fleetjit::testing::TempDir;

// Aborts the process, naming the run, if one run takes past kRunLimit.
class Watchdog {
 public:
  Watchdog() : thread_([this] { Watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Start(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() + kRunLimit;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::seconds(1));
      if (!done_ && !what_.empty() &&
          std::chrono::steady_clock::now() > deadline_) {
        std::fprintf(stderr, "HANG: %s ran past %llds\n", what_.c_str(),
                     static_cast<long long>(kRunLimit.count()));
        std::abort();
      }
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string what_;
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

// Three devices, the third without a P2P path (driver_scenario.h).
void ResetFake() {
  fjfake_reset(3);
  fjfake_set_p2p_devices(2);
}

fjfake_live Live() {
  fjfake_live l;
  fjfake_get_live(&l);
  return l;
}

std::string Failures(const ScenarioResult& r) {
  std::string text;
  for (const StepFailure& f : r.failures) {
    absl::StrAppend(&text, "\n  ", f.step, ": [", f.cuda_call, "] ", f.message);
  }
  return text;
}

class DriverFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ResetFake();
    // The first run compiles the cached build and publishes it: later runs
    // take it from disk, as a long-lived fleet mostly does.
    std::mt19937_64 rng(1);
    ScenarioResult warm = RunDriverScenario(dir_.path(), rng);
    if (!warm.failures.empty() &&
        absl::StrContains(warm.failures[0].message, "NVRTC")) {
      GTEST_SKIP() << "no NVRTC: " << warm.failures[0].message;
    }
    ASSERT_TRUE(warm.failures.empty()) << Failures(warm);
  }
  TempDir dir_;
};

TEST_F(DriverFaultsTest, CleanSessionChecksItsDataAndLeavesNothing) {
  auto rng = SeededRng("CleanSessionChecksItsDataAndLeavesNothing");
  const fjfake_live before = Live();
  ResetFake();
  ScenarioResult r = RunDriverScenario(dir_.path(), rng);
  EXPECT_TRUE(r.failures.empty()) << Failures(r);
  EXPECT_TRUE(r.data_checked);
  EXPECT_EQ(r.data_error, "");
  EXPECT_EQ(Describe(Live()), Describe(before));
  EXPECT_EQ(Live().reclaimed, 0);
  // The session reaches the driver's main families.
  for (const char* call :
       {"cuMemAlloc", "cuModuleLoadData", "cuLaunchKernelEx",
        "cuMemcpyDtoHAsync", "cuStreamCreate", "cuFuncSetAttribute",
        "cuMemcpyAsync", "cuDevicePrimaryCtxRelease", "cuMemcpyPeerAsync",
        "cuMemHostAlloc", "cuEventRecord", "cuStreamWaitEvent",
        "cuCtxEnablePeerAccess", "cuStreamGetCtx", "cuTensorMapEncodeTiled",
        "cuMemcpyDtoD"}) {
    EXPECT_GT(fjfake_calls(call), 0u) << call;
  }
}

// The session is deterministic: run twice from one seed, it makes the same
// driver calls, the same number of times. Every-call-failing-in-turn counts
// on it. (A runtime that kept something from an earlier one skips calls the
// second time: the launch path's encoded tensors once outlived their
// runtime, and a tensor the fake's malloc put at an earlier one's address
// was not encoded. tensor_encoder_test checks that forgetting itself.)
TEST_F(DriverFaultsTest, ASessionRunTwiceMakesTheSameCalls) {
  auto rng = SeededRng("ASessionRunTwiceMakesTheSameCalls");
  const uint64_t seed = rng();
  std::map<std::string, uint64_t> calls[2];
  for (auto& counts : calls) {
    ResetFake();
    std::mt19937_64 run_rng(seed);
    ScenarioResult r = RunDriverScenario(dir_.path(), run_rng);
    ASSERT_TRUE(r.failures.empty()) << Failures(r);
    counts = fjfake_call_counts();
  }
  EXPECT_GT(calls[1]["cuTensorMapEncodeTiled"], 0u);
  EXPECT_EQ(calls[0], calls[1]);
}

TEST_F(DriverFaultsTest, ErrorTextFailuresStillNameTheCall) {
  auto rng = SeededRng("ErrorTextFailuresStillNameTheCall");
  ResetFake();
  fjfake_fail("cuGetErrorName", 0, CUDA_ERROR_INVALID_VALUE);
  fjfake_fail("cuGetErrorString", 0, CUDA_ERROR_INVALID_VALUE);
  fjfake_fail("cuMemAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY);
  ScenarioResult r = RunDriverScenario(dir_.path(), rng);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_EQ(r.failures[0].step, "fj_mem_alloc(out)");
  EXPECT_EQ(r.failures[0].cuda_call, "cuMemAlloc");
  EXPECT_TRUE(absl::StrContains(r.failures[0].message, "CUDA_ERROR(2)"))
      << r.failures[0].message;
}

TEST_F(DriverFaultsTest, EveryCallFailingInTurnIsAStatusNamingIt) {
  auto rng = SeededRng("EveryCallFailingInTurnIsAStatusNamingIt");
  // 1. Count the calls of a clean session, and where each comes from.
  ResetFake();
  std::mt19937_64 clean_rng(rng());
  ScenarioResult clean = RunDriverScenario(dir_.path(), clean_rng);
  ASSERT_TRUE(clean.failures.empty()) << Failures(clean);
  struct Call {
    std::string name;
    uint64_t nth;
    uintptr_t site;
    std::string step;  // of the clean session
  };
  std::vector<Call> calls;
  std::map<std::string, uint64_t> per_function;
  std::set<uintptr_t> launch_sites;  // sites reached by fj_launch
  for (int i = 0; i < fjfake_symbol_count(); ++i) {
    const std::string name = fjfake_symbol_name(i);
    const uint64_t n = fjfake_calls(name.c_str());
    if (n == 0) continue;
    per_function[name] = n;
    for (uint64_t k = 1; k <= n; ++k) {
      calls.push_back(
          {name, k, fjfake_call_site(name.c_str(), k), StepOf(clean, i, k)});
      if (absl::StartsWith(calls.back().step, "fj_launch")) {
        launch_sites.insert(calls.back().site);
      }
    }
  }
  ASSERT_FALSE(calls.empty());

  // 2. Each call failing in turn.
  const CUresult kResults[] = {
      CUDA_ERROR_OUT_OF_MEMORY,    CUDA_ERROR_INVALID_VALUE,
      CUDA_ERROR_UNKNOWN,          CUDA_ERROR_NOT_SUPPORTED,
      CUDA_ERROR_LAUNCH_FAILED,    CUDA_ERROR_ILLEGAL_ADDRESS,
      CUDA_ERROR_ECC_UNCORRECTABLE};
  Watchdog watchdog;
  std::set<std::string> sites_faulted;
  std::map<std::string, uint64_t> surfaced, tolerated, gaps, not_fired;
  std::set<std::string> gap_reasons;
  uint64_t injected = 0;
  for (const Call& call : calls) {
    CUresult result = kResults[rng() % std::size(kResults)];
    // Reading a cubin's parameters, CUDA_ERROR_INVALID_VALUE is the
    // driver's "no more parameters": not an error the runtime could see.
    while (call.name == "cuFuncGetParamInfo" &&
           result == CUDA_ERROR_INVALID_VALUE &&
           absl::StartsWith(call.step, "fj_module_load")) {
      result = kResults[rng() % std::size(kResults)];
    }
    const std::string what = absl::StrCat(
        call.name, " call ", call.nth, " (", SiteName(call.site, false),
        ") failing with ", static_cast<int>(result));
    SCOPED_TRACE(what);
    watchdog.Start(what);
    const fjfake_live before = Live();
    ResetFake();
    fjfake_fail(call.name.c_str(), call.nth, result);
    std::mt19937_64 run_rng(rng());
    ScenarioResult r = RunDriverScenario(dir_.path(), run_rng);
    if (fjfake_faults_fired() != 1) {
      // The session took another path before reaching this call (it is
      // deterministic: this would be a bug in the session or the runtime).
      ++not_fired[call.name];
      ADD_FAILURE() << "the planned fault did not fire";
      continue;
    }
    ++injected;
    sites_faulted.insert(
        SiteName(fjfake_call_site(call.name.c_str(), call.nth), false));
    EXPECT_EQ(r.data_error, "");

    // (a) The first failure names the call; or a destroy's release failed
    //     and the log says so; or it is excused.
    const bool named = !r.failures.empty() &&
                       (absl::StrContains(r.failures[0].cuda_call, call.name) ||
                        (r.failures[0].step == "fj_runtime_driver_error" &&
                         absl::StrContains(r.failures[0].message, call.name)));
    auto logged = [&](const std::string& needle) {
      for (const std::string& line : r.log_lines) {
        if (absl::StrContains(line, needle)) return true;
      }
      return false;
    };
    const Excuse* excuse =
        ExcuseFor(call.name, r.fired_in, launch_sites.count(call.site) != 0);
    int64_t fjfake_live::*may_leak = ReleasedBy(call.name);
    if (named) {
      ++surfaced[call.name];
    } else if (excuse != nullptr && r.failures.empty()) {
      if (*excuse->log_names != '\0') {
        EXPECT_TRUE(logged(excuse->log_names))
            << "no log line names " << excuse->log_names;
      }
      ++(excuse->gap ? gaps : tolerated)[call.name];
      if (excuse->gap) gap_reasons.insert(excuse->why);
      if (excuse->leaks != nullptr) may_leak = excuse->leaks;
    } else if (may_leak != nullptr && r.failures.empty()) {
      // A release inside a destroy: its only witness is the log.
      EXPECT_TRUE(logged(call.name)) << "no log line names the failed release";
      ++surfaced[call.name];
    } else {
      ADD_FAILURE() << "the first failure does not name " << call.name
                    << " (fired in " << r.fired_in
                    << "):" << (r.failures.empty() ? " none" : Failures(r));
    }
    // (b) No driver object left behind but the one whose release failed.
    fjfake_live after = Live();
    if (IsStickyError(result)) continue;  // a dead context: see the top
    EXPECT_EQ(after.reclaimed, 0)
        << "objects left for the context's destruction";
    if (may_leak != nullptr) {
      EXPECT_LE(after.*may_leak - before.*may_leak, 1) << Describe(after);
      after.*may_leak = before.*may_leak;
    }
    EXPECT_EQ(Describe(after), Describe(before));
  }

  // 3. The figures for the report.
  std::printf(
      "driver fault injection: %zu entry points called by the session "
      "(of %d the fake knows), %zu call sites, %llu faults injected\n",
      per_function.size(), fjfake_symbol_count(), sites_faulted.size(),
      static_cast<unsigned long long>(injected));
  for (const auto& [name, n] : per_function) {
    std::printf(
        "  %-28s calls %3llu  surfaced %3llu  tolerated %3llu  gaps %3llu\n",
        name.c_str(), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(surfaced[name]),
        static_cast<unsigned long long>(tolerated[name]),
        static_cast<unsigned long long>(gaps[name]));
  }
  for (const std::string& why : gap_reasons)
    std::printf("  known gap: %s\n", why.c_str());
  if (std::getenv("FJ_PRINT_SITES") != nullptr) {
    std::set<uintptr_t> seen;
    for (const Call& call : calls) {
      if (seen.insert(call.site).second) {
        std::printf("  site %-24s %s\n", call.name.c_str(),
                    SiteName(call.site, true).c_str());
      }
    }
  }
}

}  // namespace
}  // namespace fleetjit::testing
