// fleetjit bench copy|launch|build [--json]: the anchor-vs-fleetjit table
// of this node, measured in one run (tools/bench.h says what each runs).
// Without a GPU, copy and launch exit 3 saying so; build runs for a named
// --target on any machine with NVRTC.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench.h"
#include "tools/cli_app.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

using Json = nlohmann::ordered_json;

Json ReportJson(const std::string& verb, const BenchReport& report) {
  Json rows = Json::array();
  for (const BenchRow& r : report.rows) {
    Json row = {{"case", r.name},
                {"unit", r.unit},
                {"better", r.higher_is_better ? "higher" : "lower"},
                {"anchor", r.anchor},
                {"anchor_value", r.anchor_value},
                {"fleetjit", r.fleetjit},
                {"fleetjit_value", r.fleetjit_value},
                {"ratio", r.ratio()}};
    for (const auto& [key, value] : r.notes.items()) row[key] = value;
    rows.push_back(std::move(row));
  }
  Json skipped = Json::array();
  for (const auto& [name, why] : report.skipped) {
    skipped.push_back({{"case", name}, {"why", why}});
  }
  Json out = {{"bench", verb}};
  for (const auto& [key, value] : report.context.items()) out[key] = value;
  out["rows"] = std::move(rows);
  out["skipped"] = std::move(skipped);
  return out;
}

void PrintText(const std::string& verb, const BenchReport& report) {
  std::printf("fleetjit bench %s", verb.c_str());
  const Json& c = report.context;
  if (c.contains("device")) {
    const Json& d = c["device"];
    std::printf(" on GPU %d: %s (cc %s, %d SMs, target %s)",
                d["ordinal"].get<int>(), d["name"].get<std::string>().c_str(),
                d["cc"].get<std::string>().c_str(), d["sm_count"].get<int>(),
                d["target"].get<std::string>().c_str());
  }
  if (c.contains("target") && !c.contains("device")) {
    std::printf(" for %s", c["target"].get<std::string>().c_str());
  }
  if (c.contains("timing"))
    std::printf("; %s", c["timing"].get<std::string>().c_str());
  std::printf("\n");
  if (c.contains("corpus_timing"))
    std::printf("%s\n", c["corpus_timing"].get<std::string>().c_str());
  for (const BenchRow& r : report.rows) {
    std::printf(
        "  %s\n    %-44s %12.3f %s\n    %-44s %12.3f %s   %.3gx the anchor (%s "
        "is "
        "better)\n",
        r.name.c_str(), (r.anchor + " (anchor)").c_str(), r.anchor_value,
        r.unit.c_str(), r.fleetjit.c_str(), r.fleetjit_value, r.unit.c_str(),
        r.ratio(), r.higher_is_better ? "higher" : "lower");
    if (r.notes.contains("plain_gbps")) {  // a corpus row: its plain twin
      const double plain = r.notes["plain_gbps"].get<double>();
      std::printf(
          "    %-44s %12.3f %s   %.3gx the anchor; layer/plain %.3f; "
          "%s\n",
          "plain twin", plain, r.unit.c_str(),
          r.anchor_value > 0 ? plain / r.anchor_value : 0.0,
          r.notes["layer_over_plain"].get<double>(),
          r.notes["verified"].get<std::string>().c_str());
    }
  }
  for (const auto& [name, why] : report.skipped) {
    std::printf("  %s: not measured: %s\n", name.c_str(), why.c_str());
  }
}

}  // namespace

int RunBench(std::vector<std::string> args) {
  std::string verb;
  bool json = false;
  BenchOptions options;
  CLI::App app(
      "What this node gets from fleetjit next to what you would call instead, "
      "both measured "
      "now.\n"
      "  copy    cuMemcpyDtoDAsync vs fj_copy (contiguous; a 2-D window with "
      "zero fill vs the "
      "same bytes contiguous; with two P2P GPUs, cuMemcpyPeerAsync vs "
      "fj_copy)\n"
      "  launch  raw cuLaunchKernel vs fj_launch of the same kernel: host time "
      "per launch and "
      "launch rate\n"
      "  build   plain NVRTC compile vs fleetjit cold build, disk hit and "
      "memory hit (runs "
      "without a GPU for a named --target)\n"
      "  kernels the reference kernels (examples/) and the newcomer corpus "
      "(bench/corpus/: each layer kernel and its plain twin) under each copy "
      "implementation vs a D2D copy of the same bytes; progress on stderr",
      "fleetjit bench");
  app.add_option("what", verb, "copy, launch, build or kernels")
      ->check(CLI::IsMember({"copy", "launch", "build", "kernels"}));
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--device", options.device, "the GPU to measure (default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--target", options.target,
                 "build: the target, e.g. sm_90 (default: the GPU's)");
  app.add_option("--mib", options.mib, "copy: MiB per copy (default 1024)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option(
         "--reps", options.reps,
         "samples (copy, default 10), rounds (launch, 200), builds (build, 5)")
      ->check(CLI::Range(1, 100000));
  app.add_flag("--tune", options.tune,
               "kernels: sweep the launch shapes through fj_tune, once per "
               "GPU model, driver and implementation (kept in the module "
               "cache; a later run looks them up)");
  app.add_option("--corpus", options.corpus,
                 "kernels: a corpus set folder, or a folder of set*/ folders "
                 "(repeatable; default: ./bench/corpus when it exists)")
      ->allow_extra_args(false);
  app.add_option("--only", options.only,
                 "kernels: only the corpus or only the reference kernels")
      ->check(CLI::IsMember({"corpus", "reference"}));
  app.add_option("--filter", options.filter,
                 "kernels: only the kernels whose name contains this");
  app.add_option("--cache-dir", options.cache_dir,
                 "build: the cache directory to measure (default: a scratch "
                 "one, removed)");
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (verb.empty()) {
    std::fprintf(stderr,
                 "fleetjit bench: say what to measure: copy, launch, build or "
                 "kernels\n");
    return kExitUsage;
  }
  if (verb != "kernels" && options.tune) {
    std::fprintf(stderr, "fleetjit bench: --tune is for 'bench kernels'\n");
    return kExitUsage;
  }
  if (verb != "kernels" && (!options.corpus.empty() || !options.only.empty() ||
                            !options.filter.empty())) {
    std::fprintf(stderr,
                 "fleetjit bench: --corpus, --only and --filter are for "
                 "'bench kernels'\n");
    return kExitUsage;
  }
  if (verb != "build" && !options.target.empty()) {
    std::fprintf(stderr, "fleetjit bench: --target is for 'bench build'\n");
    return kExitUsage;
  }
  if (!options.target.empty() &&
      !TargetsAreValid({options.target}, "fleetjit bench")) {
    return kExitUsage;
  }
  absl::StatusOr<BenchReport> report = verb == "copy"     ? BenchCopy(options)
                                       : verb == "launch" ? BenchLaunch(options)
                                       : verb == "kernels"
                                           ? BenchKernels(options)
                                           : BenchBuild(options);
  if (!report.ok()) {
    std::fprintf(stderr, "fleetjit bench %s: %s\n", verb.c_str(),
                 std::string(report.status().message()).c_str());
    if (absl::IsUnavailable(report.status())) return kExitNoGpu;
    return absl::IsInvalidArgument(report.status()) ? kExitUsage : kExitFailure;
  }
  if (json) {
    std::printf("%s\n", DumpJson(ReportJson(verb, *report)).c_str());
  } else {
    PrintText(verb, *report);
  }
  if (report->failed) {
    std::fprintf(stderr,
                 "fleetjit bench %s: a corpus kernel's output differs from "
                 "its plain twin's, or a case failed (see 'verified' and "
                 "'skipped')\n",
                 verb.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace fleetjit::cli
