// fleetjit selftest [--json] [--seed N] [--scale N] [--impl a,b] [--feature a,b]
//                   [--variant a,b] [--list]
//
// Runs the copy-layer conformance matrix (conformance/runner.h) on device 0:
// every feature of <fleetjit/copy.cuh> under every copy implementation the
// GPU can run, plus PTX targets that run the pre-Hopper paths through the
// driver JIT. Prints one line per (feature, implementation), a total, and
// as its LAST line a one-line summary (scripts/gpu-check prints it). Exit
// codes: 0 all pass, 1 any failure, 2 usage, 3 no GPU.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "conformance/runner.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

constexpr char kUsage[] =
    "usage: fleetjit selftest [--json] [--seed N] [--scale N] [--impl a,b]\n"
    "                         [--feature a,b] [--variant a,b] [--list]\n"
    "  --seed N      reproduce a run (default: a fresh random seed, printed)\n"
    "  --scale N     N times the cases of each cell (default 1)\n"
    "  --impl a,b    rows: tma, cp_async, sync, IMPL@compute_XX (default: all\n"
    "                the device runs, incl. cp_async@compute_80, sync@compute_75)\n"
    "  --feature a,b columns (default: all); --list shows them and their variants\n";

bool ParseU64(const std::string& s, uint64_t* out) {
  if (s.size() > 2 && (s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
    char* end = nullptr;
    *out = std::strtoull(s.c_str() + 2, &end, 16);
    return end != nullptr && *end == '\0';
  }
  return absl::SimpleAtoi(s, out);
}

std::string CellJson(const selftest::CellResult& c) {
  std::vector<std::string> samples;
  for (const auto& s : c.failure_samples) samples.push_back("\"" + JsonEscape(s) + "\"");
  return absl::StrCat(
      "{\"feature\":\"", JsonEscape(c.feature), "\",\"impl\":\"", JsonEscape(c.impl),
      "\",\"pass\":", c.failures == 0 ? "true" : "false", ",\"cases\":", c.cases,
      ",\"launches\":", c.launches, ",\"failures\":", c.failures,
      ",\"ms\":", absl::StrFormat("%.3f", c.ms), ",\"tensor_maps\":", c.tensor_maps,
      ",\"tma_fallbacks\":", c.fallbacks, ",\"first_failure\":\"",
      JsonEscape(c.first_failure), "\",\"failure_samples\":[", absl::StrJoin(samples, ","),
      "]}");
}

}  // namespace

int RunSelftest(std::vector<std::string> args) {
  const bool json = TakeSwitch(args, "--json");
  const bool list = TakeSwitch(args, "--list");
  bool has_seed = false, has_scale = false;
  const std::string seed_s = TakeFlag(args, "--seed", &has_seed);
  const std::string scale_s = TakeFlag(args, "--scale", &has_scale);
  const std::string impls = TakeFlag(args, "--impl");
  const std::string features = TakeFlag(args, "--feature");
  const std::string variants = TakeFlag(args, "--variant");
  if (!args.empty()) {
    std::fprintf(stderr, "fleetjit selftest: unexpected argument '%s'\n%s", args[0].c_str(),
                 kUsage);
    return kExitUsage;
  }
  selftest::MatrixOptions o;
  if (has_seed && (!ParseU64(seed_s, &o.seed) || o.seed == 0)) {
    std::fprintf(stderr, "fleetjit selftest: --seed needs a non-zero integer, got '%s'\n",
                 seed_s.c_str());
    return kExitUsage;
  }
  if (has_scale && (!absl::SimpleAtoi(scale_s, &o.scale) || o.scale < 1 || o.scale > 1000)) {
    std::fprintf(stderr, "fleetjit selftest: --scale needs an integer in 1..1000, got '%s'\n",
                 scale_s.c_str());
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
  fj_runtime* rt = CreateRuntime();
  if (rt == nullptr) return kExitFailure;
  int32_t count = 0;
  fj_status* st = fj_device_count(rt, &count);
  if (Failed(st, "counting devices")) {
    fj_status_free(fj_runtime_destroy(rt));
    return kExitFailure;
  }
  if (count == 0) {
    const char* why = fj_runtime_driver_error(rt);
    const std::string reason =
        why != nullptr && *why != '\0' ? why : "the driver reports 0 devices";
    fj_status_free(fj_runtime_destroy(rt));
    std::fprintf(stderr,
                 "fleetjit selftest: no GPU (%s). The conformance matrix runs on a CUDA "
                 "device; `fleetjit info --target sm_90` shows the copy plan without one.\n",
                 reason.c_str());
    if (json) {
      std::printf("{\"gpu\":false,\"reason\":\"%s\",\"summary\":\"selftest: no GPU\"}\n",
                  JsonEscape(reason).c_str());
    } else {
      std::printf("selftest: no GPU (%s), nothing run\n", reason.c_str());
    }
    std::fflush(stdout);
    return kExitNoGpu;
  }
  fj_device_info info{};
  info.struct_size = sizeof(info);
  if (Failed(fj_device_info_get(rt, 0, &info), "reading device 0")) {
    fj_status_free(fj_runtime_destroy(rt));
    return kExitFailure;
  }
  if (o.seed == 0) o.seed = selftest::FreshSeed();
  FILE* text = json ? stderr : stdout;  // progress goes to stderr with --json
  std::fprintf(text,
               "fleetjit selftest: device 0: %s (sm_%d%d, %d SMs), seed %" PRIu64
               " (--seed %" PRIu64 " reproduces), scale %d\n",
               info.name, info.cc_major, info.cc_minor, info.sm_count, o.seed, o.seed, o.scale);
  std::fflush(text);
  o.log = [text](const std::string& line) {
    std::fprintf(text, "%s\n", line.c_str());
    std::fflush(text);
  };
  bool header = false;
  auto progress = [&](const selftest::CellResult& c) {
    if (!header) {
      std::fprintf(text, "%-12s %-22s %-6s %8s %8s %10s\n", "feature", "impl", "result",
                   "cases", "launches", "time");
      header = true;
    }
    std::string extra;
    if (c.tensor_maps + c.fallbacks > 0) {
      extra = absl::StrFormat("  (%d tensors via TMA map, %d fell back)", c.tensor_maps,
                              c.fallbacks);
    }
    std::fprintf(text, "%-12s %-22s %-6s %8d %8d %8.1f ms%s\n", c.feature.c_str(),
                 c.impl.c_str(), c.failures == 0 ? "pass" : "FAIL", c.cases, c.launches, c.ms,
                 extra.c_str());
    if (c.failures > 0) {
      std::fprintf(text, "    %d failed case%s\n", c.failures, c.failures == 1 ? "" : "s");
      for (const auto& s : c.failure_samples) std::fprintf(text, "    %s\n", s.c_str());
    }
    std::fflush(text);
  };
  auto results = selftest::RunConformanceMatrix(rt, o, progress);
  // Nothing may print after the summary line: release the runtime first.
  fj_status_free(fj_runtime_destroy(rt));
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!results.ok()) {
    const bool no_gpu = results.status().code() == absl::StatusCode::kUnavailable;
    const bool usage = results.status().code() == absl::StatusCode::kInvalidArgument;
    std::fprintf(stderr, "fleetjit selftest: %s\n", std::string(results.status().message()).c_str());
    if (json) {
      std::printf("{\"error\":\"%s\",\"summary\":\"selftest: error\"}\n",
                  JsonEscape(std::string(results.status().message())).c_str());
    } else {
      std::printf("selftest: error: %s\n", std::string(results.status().message()).c_str());
    }
    std::fflush(stdout);
    return no_gpu ? kExitNoGpu : usage ? kExitUsage : kExitFailure;
  }
  long long cases = 0, failures = 0, launches = 0, maps = 0, fallbacks = 0;
  int failed_cells = 0;
  std::vector<std::string> impl_rows, ptx_rows;
  for (const auto& c : *results) {
    cases += c.cases;
    failures += c.failures;
    launches += c.launches;
    maps += c.tensor_maps;
    fallbacks += c.fallbacks;
    failed_cells += c.failures > 0;
    auto& rows = c.impl.find('@') == std::string::npos ? impl_rows : ptx_rows;
    if (std::find(rows.begin(), rows.end(), c.impl) == rows.end()) rows.push_back(c.impl);
  }
  const std::string summary = absl::StrFormat(
      "selftest: %lld cases, %lld failures, %zu implementation%s + %zu PTX target%s, %.1f s",
      cases, failures, impl_rows.size(), impl_rows.size() == 1 ? "" : "s", ptx_rows.size(),
      ptx_rows.size() == 1 ? "" : "s", secs);
  if (json) {
    std::vector<std::string> cells;
    for (const auto& c : *results) cells.push_back(CellJson(c));
    std::printf(
        "{\"gpu\":true,\"device\":\"%s\",\"cc\":\"%d.%d\",\"seed\":%" PRIu64
        ",\"scale\":%d,\"cases\":%lld,\"launches\":%lld,\"failures\":%lld,"
        "\"failed_cells\":%d,\"tensor_maps\":%lld,\"tma_fallbacks\":%lld,\"seconds\":%.3f,"
        "\"implementations\":[%s],\"ptx_targets\":[%s],\"cells\":[%s],\"summary\":\"%s\"}\n",
        JsonEscape(info.name).c_str(), info.cc_major, info.cc_minor, o.seed, o.scale, cases,
        launches, failures, failed_cells, maps, fallbacks, secs,
        absl::StrJoin(impl_rows, ",",
                      [](std::string* out, const std::string& s) {
                        absl::StrAppend(out, "\"", JsonEscape(s), "\"");
                      })
            .c_str(),
        absl::StrJoin(ptx_rows, ",",
                      [](std::string* out, const std::string& s) {
                        absl::StrAppend(out, "\"", JsonEscape(s), "\"");
                      })
            .c_str(),
        absl::StrJoin(cells, ",").c_str(), JsonEscape(summary).c_str());
  } else {
    std::printf("total: %zu cells (%d failed), %lld cases in %lld launches", results->size(),
                failed_cells, cases, launches);
    if (maps + fallbacks > 0) {
      std::printf("; tma rows: %lld tensors through a TMA map, %lld fell back", maps, fallbacks);
    }
    std::printf("; seed %" PRIu64 "\n", o.seed);
    std::printf("%s\n", summary.c_str());
  }
  std::fflush(stdout);
  return failures == 0 && !results->empty() ? kExitOk : kExitFailure;
}

}  // namespace fleetjit::cli
