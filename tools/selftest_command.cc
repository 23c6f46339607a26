// fleetjit selftest [--device N|all] [--json] [--seed N] [--scale N]
//                   [--impl a,b] [--feature a,b] [--variant a,b] [--list]
//
// Runs the copy-layer conformance matrix (conformance/runner.h) on device
// 0, device N, or every device (`--device all`, one matrix after another,
// all with the same seed): every feature of <fleetjit/copy.cuh> under
// every copy implementation the GPU can run, plus PTX targets that run the
// pre-Hopper paths through the driver JIT. Prints one line per (feature,
// implementation), a total, and as its LAST line a one-line summary
// (scripts/gpu-host/gpu-check prints it). --json prints one object: a device's,
// or with --device all {"devices": [one per device], ...}. Exit codes: 0 all
// pass, 1 any failure, 2 usage, 3 no GPU.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "conformance/runner.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/selftest_report.h"

namespace fleetjit::cli {
namespace {

using Json = nlohmann::ordered_json;

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.size() > 2 && (s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
    char* end = nullptr;
    *out = std::strtoull(s.c_str() + 2, &end, 16);
    return end != nullptr && *end == '\0';
  }
  return absl::SimpleAtoi(s, out);
}

// Prints the no-GPU answer (exit 3) in the chosen format.
int NoGpu(fj_runtime* rt, bool json) {
  const char* why = fj_runtime_driver_error(rt);
  const std::string reason =
      why != nullptr && *why != '\0' ? why : "the driver reports 0 devices";
  std::fprintf(stderr,
               "fleetjit selftest: no GPU (%s). The conformance matrix runs on "
               "a CUDA device; `fleetjit info --target sm_90` shows the copy "
               "plan without one.\n",
               reason.c_str());
  if (json) {
    std::printf("%s\n", DumpJson({{"gpu", false},
                                  {"reason", reason},
                                  {"summary", "selftest: no GPU"}})
                            .c_str());
  } else {
    std::printf("selftest: no GPU (%s), nothing run\n", reason.c_str());
  }
  std::fflush(stdout);
  return kExitNoGpu;
}

}  // namespace

int RunSelftest(std::vector<std::string> args) {
  bool json = false, list = false;
  std::string seed_s, device_s, impls, features, variants;
  selftest::MatrixOptions o;
  CLI::App app(
      "The copy-layer conformance matrix on the live GPU(s): every feature "
      "of <fleetjit/copy.cuh> under every copy implementation the device "
      "runs. Exit codes: 0 all pass, 1 any failure, 2 usage, 3 no GPU.",
      "fleetjit selftest");
  app.add_option("--device", device_s,
                 "N or all: the device(s) to test (default 0)");
  app.add_flag("--json", json, "print one JSON object (progress to stderr)");
  app.add_option("--seed", seed_s,
                 "reproduce a run (default: a fresh random seed, printed)");
  app.add_option("--scale", o.scale, "N times the cases of each cell")
      ->check(CLI::Range(1, 1000));
  app.add_option("--impl", impls,
                 "rows: tma, cp_async, sync, IMPL@compute_XX (default: all "
                 "the device runs, incl. cp_async@compute_80, "
                 "sync@compute_75)");
  app.add_option("--feature", features, "columns (default: all)");
  app.add_option("--variant", variants, "restrict features to these variants");
  app.add_flag("--list", list, "list the features and their variants");
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (!seed_s.empty() && (!ParseU64(seed_s, &o.seed) || o.seed == 0)) {
    std::fprintf(stderr,
                 "fleetjit selftest: --seed needs a non-zero integer, got "
                 "'%s'\n",
                 seed_s.c_str());
    return kExitUsage;
  }
  int only_device = 0;
  const bool all = device_s == "all";
  if (!all && !device_s.empty() &&
      (!absl::SimpleAtoi(device_s, &only_device) || only_device < 0)) {
    std::fprintf(stderr,
                 "fleetjit selftest: --device needs an ordinal or 'all', got "
                 "'%s'\n",
                 device_s.c_str());
    return kExitUsage;
  }
  o.impls = SplitComma(impls);
  o.features = SplitComma(features);
  o.variants = SplitComma(variants);
  if (list) {
    for (const std::string& f : selftest::MatrixFeatures()) {
      std::printf("%-12s %s\n", f.c_str(),
                  absl::StrJoin(selftest::FeatureVariants(f), ", ").c_str());
    }
    return kExitOk;
  }

  const auto t0 = std::chrono::steady_clock::now();
  int create_rc = kExitFailure;
  fj_runtime* rt = CreateRuntime(&create_rc);
  if (rt == nullptr) return create_rc;
  int32_t count = 0;
  if (Failed(fj_device_count(rt, &count), "counting devices")) {
    fj_status_free(fj_runtime_destroy(rt));
    return kExitFailure;
  }
  if (count == 0) {
    const int rc = NoGpu(rt, json);
    fj_status_free(fj_runtime_destroy(rt));
    return rc;
  }
  if (!all && only_device >= count) {
    std::fprintf(stderr, "fleetjit selftest: device %d does not exist (%d)\n",
                 only_device, count);
    fj_status_free(fj_runtime_destroy(rt));
    return kExitUsage;
  }
  if (o.seed == 0) o.seed = selftest::FreshSeed();
  FILE* text = json ? stderr : stdout;  // progress goes to stderr with --json
  std::vector<DeviceReport> reports;
  for (int d = all ? 0 : only_device; d < (all ? count : only_device + 1);
       ++d) {
    o.device = d;
    reports.push_back(RunDeviceMatrix(rt, o, text));
  }
  // Nothing may print after the summary line: release the runtime first.
  fj_status_free(fj_runtime_destroy(rt));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  int rc = kExitOk;
  for (const DeviceReport& r : reports) {
    if (r.exit_code != kExitOk && rc == kExitOk) rc = r.exit_code;
  }
  if (!all) {
    const DeviceReport& r = reports.front();
    if (json) {
      std::printf("%s\n", DumpJson(r.json).c_str());
    } else {
      std::printf("%s\n", r.summary.c_str());
    }
    std::fflush(stdout);
    return rc;
  }
  long long cases = 0, failures = 0;
  Json devices = Json::array();
  for (const DeviceReport& r : reports) {
    cases += r.cases;
    failures += r.failures;
    devices.push_back(r.json);
    if (!json) std::printf("device %d: %s\n", r.ordinal, r.summary.c_str());
  }
  const std::string summary = absl::StrFormat(
      "selftest: %zu device%s, %lld cases, %lld failures%s, %.1f s",
      reports.size(), reports.size() == 1 ? "" : "s", cases, failures,
      rc == kExitOk ? "" : " (see the devices above)", secs);
  if (json) {
    const Json j = {{"gpu", true},
                    {"seed", o.seed},
                    {"scale", o.scale},
                    {"cases", cases},
                    {"failures", failures},
                    {"seconds", secs},
                    {"devices", std::move(devices)},
                    {"summary", summary}};
    std::printf("%s\n", DumpJson(j).c_str());
  } else {
    std::printf("%s\n", summary.c_str());
  }
  std::fflush(stdout);
  return rc;
}

}  // namespace fleetjit::cli
