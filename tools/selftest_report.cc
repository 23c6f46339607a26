#include "tools/selftest_report.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "absl/strings/str_format.h"
#include "tools/cli_util.h"

namespace fleetjit::cli {
namespace {

using Json = nlohmann::ordered_json;

Json CellJson(const selftest::CellResult& c) {
  return {{"feature", c.feature},
          {"impl", c.impl},
          {"pass", c.failures == 0},
          {"cases", c.cases},
          {"launches", c.launches},
          {"failures", c.failures},
          {"ms", c.ms},
          {"tensor_maps", c.tensor_maps},
          {"tma_fallbacks", c.fallbacks},
          {"first_failure", c.first_failure},
          {"failure_samples", c.failure_samples}};
}

void PrintCell(std::FILE* text, const selftest::CellResult& c, bool* header) {
  if (!*header) {
    std::fprintf(text, "%-12s %-22s %-6s %8s %8s %10s\n", "feature", "impl",
                 "result", "cases", "launches", "time");
    *header = true;
  }
  std::string extra;
  if (c.tensor_maps + c.fallbacks > 0) {
    extra = absl::StrFormat("  (%d tensors via TMA map, %d fell back)",
                            c.tensor_maps, c.fallbacks);
  }
  std::fprintf(text, "%-12s %-22s %-6s %8d %8d %8.1f ms%s\n", c.feature.c_str(),
               c.impl.c_str(), c.failures == 0 ? "pass" : "FAIL", c.cases,
               c.launches, c.ms, extra.c_str());
  if (c.failures > 0) {
    std::fprintf(text, "    %d failed case%s\n", c.failures,
                 c.failures == 1 ? "" : "s");
    for (const auto& s : c.failure_samples) {
      std::fprintf(text, "    %s\n", s.c_str());
    }
  }
  std::fflush(text);
}

}  // namespace

DeviceReport RunDeviceMatrix(fj_runtime* rt,
                             const selftest::MatrixOptions& options,
                             bool json) {
  DeviceReport report;
  report.ordinal = options.device;
  const auto t0 = std::chrono::steady_clock::now();
  std::FILE* text = json ? stderr : stdout;
  fj_device_info info{};
  info.struct_size = sizeof(info);
  if (Failed(fj_device_info_get(rt, options.device, &info),
             "reading the device")) {
    report.exit_code = kExitFailure;
    report.summary = "selftest: error: cannot read the device";
    report.json = {{"ordinal", options.device},
                   {"error", "cannot read the device"},
                   {"summary", "selftest: error"}};
    return report;
  }
  std::fprintf(text,
               "fleetjit selftest: device %d: %s (sm_%d%d, %d SMs), seed "
               "%" PRIu64 " (--seed %" PRIu64 " reproduces), scale %d\n",
               options.device, info.name, info.cc_major, info.cc_minor,
               info.sm_count, options.seed, options.seed, options.scale);
  std::fflush(text);
  selftest::MatrixOptions o = options;
  o.log = [text](const std::string& line) {
    std::fprintf(text, "%s\n", line.c_str());
    std::fflush(text);
  };
  bool header = false;
  auto results = selftest::RunConformanceMatrix(
      rt, o,
      [&](const selftest::CellResult& c) { PrintCell(text, c, &header); });
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!results.ok()) {
    const std::string message(results.status().message());
    const absl::StatusCode code = results.status().code();
    std::fprintf(stderr, "fleetjit selftest: %s\n", message.c_str());
    report.exit_code = code == absl::StatusCode::kUnavailable ? kExitNoGpu
                       : code == absl::StatusCode::kInvalidArgument
                           ? kExitUsage
                           : kExitFailure;
    report.summary = "selftest: error: " + message;
    report.json = {{"ordinal", options.device},
                   {"error", message},
                   {"summary", "selftest: error"}};
    return report;
  }
  long long launches = 0, maps = 0, fallbacks = 0;
  int failed_cells = 0;
  std::vector<std::string> impl_rows, ptx_rows;
  Json cells = Json::array();
  for (const auto& c : *results) {
    report.cases += c.cases;
    report.failures += c.failures;
    launches += c.launches;
    maps += c.tensor_maps;
    fallbacks += c.fallbacks;
    failed_cells += c.failures > 0;
    auto& rows = c.impl.find('@') == std::string::npos ? impl_rows : ptx_rows;
    if (std::find(rows.begin(), rows.end(), c.impl) == rows.end()) {
      rows.push_back(c.impl);
    }
    cells.push_back(CellJson(c));
  }
  report.exit_code =
      report.failures == 0 && !results->empty() ? kExitOk : kExitFailure;
  report.summary = absl::StrFormat(
      "selftest: %lld cases, %lld failures, %zu implementation%s + %zu PTX "
      "target%s, %.1f s",
      report.cases, report.failures, impl_rows.size(),
      impl_rows.size() == 1 ? "" : "s", ptx_rows.size(),
      ptx_rows.size() == 1 ? "" : "s", secs);
  report.json = {{"gpu", true},
                 {"ordinal", options.device},
                 {"device", info.name},
                 {"cc", absl::StrFormat("%d.%d", info.cc_major, info.cc_minor)},
                 {"seed", options.seed},
                 {"scale", options.scale},
                 {"cases", report.cases},
                 {"launches", launches},
                 {"failures", report.failures},
                 {"failed_cells", failed_cells},
                 {"tensor_maps", maps},
                 {"tma_fallbacks", fallbacks},
                 {"seconds", secs},
                 {"implementations", impl_rows},
                 {"ptx_targets", ptx_rows},
                 {"cells", std::move(cells)},
                 {"summary", report.summary}};
  if (!json) {
    std::printf("total: %zu cells (%d failed), %lld cases in %lld launches",
                results->size(), failed_cells, report.cases, launches);
    if (maps + fallbacks > 0) {
      std::printf("; tma rows: %lld tensors through a TMA map, %lld fell back",
                  maps, fallbacks);
    }
    std::printf("; seed %" PRIu64 "\n", options.seed);
  }
  return report;
}

}  // namespace fleetjit::cli
