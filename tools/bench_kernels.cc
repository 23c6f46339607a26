// `fleetjit bench kernels`: the reference kernels' table
// (reference/reference_kernels.h) and the newcomer corpus (bench/corpus/,
// tools/bench_corpus.cc) as bench rows: each kernel under each copy
// implementation against a cuMemcpyDtoDAsync of the same bytes, in GB/s
// of (bytes read + written), so the ratio is the fraction of the copy.
// Progress goes to stderr, one line per measured case.
#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reference/reference_kernels.h"
#include "tools/bench.h"
#include "tools/corpus.h"

namespace fleetjit::cli {
namespace {

void Say(const std::string& line) {
  std::fprintf(stderr, "fleetjit bench kernels: %s\n", line.c_str());
  std::fflush(stderr);
}

absl::Status ReferenceRows(const BenchOptions& options, BenchReport& report) {
  refk::RunOptions run;
  run.device = options.device;
  if (options.reps > 0) run.samples = options.reps;
  run.tune = options.tune;
  run.filter = options.filter;
  size_t total = 0, done = 0;
  for (const refk::KernelCase& c : refk::Cases()) {
    if (c.name.find(options.filter) != std::string::npos)
      total += refk::Variants().size();
  }
  if (total == 0) return absl::OkStatus();
  Say(absl::StrCat("reference kernels: ", total,
                   " case(s); each builds and times its launch shapes "
                   "(a cold module cache compiles them first)"));
  run.on_result = [&](const refk::Result& r) {
    ++done;
    Say(r.skipped.empty()
            ? absl::StrFormat("reference [%d/%d] %s, %s: %.3f of the copy, "
                              "%s (%s)",
                              done, total, r.kernel, r.impl, r.fraction,
                              refk::ShapeName(r.shape), r.verified)
            : absl::StrFormat("reference [%d/%d] %s, %s: not measured: %s",
                              done, total, r.kernel, r.impl, r.skipped));
  };
  std::string device;
  absl::StatusOr<std::vector<refk::Result>> results = refk::Run(run, &device);
  if (!results.ok()) return results.status();
  report.context["device_name"] = device;
  report.context["timing"] = "GPU time (CUDA events), median of " +
                             std::to_string(run.samples) + " timings of " +
                             std::to_string(run.batch) +
                             " launches; GB/s = 2 x the input's bytes / time";
  for (const refk::Result& r : *results) {
    const std::string name = absl::StrCat(r.kernel, ", ", r.impl);
    if (!r.skipped.empty()) {
      report.skipped.emplace_back(name, r.skipped);
      continue;
    }
    const refk::KernelCase* c = nullptr;
    for (const refk::KernelCase& k : refk::Cases()) {
      if (k.name == r.kernel) c = &k;
    }
    const double bytes = 2.0 * (c != nullptr ? c->copy_bytes : 0);
    BenchRow row;
    row.name = name;
    row.unit = "GB/s";
    row.higher_is_better = true;
    row.anchor = "cuMemcpyDtoDAsync, same bytes";
    row.anchor_value = bytes / (r.copy_ms * 1e6);
    row.fleetjit = r.impl;
    row.fleetjit_value = bytes / (r.ms * 1e6);
    row.notes["gpu_us"] = r.ms * 1e3;
    row.notes["copy_us"] = r.copy_ms * 1e3;
    row.notes["regs"] = r.regs;
    row.notes["static_smem"] = r.static_smem;
    row.notes["dynamic_smem"] = r.dynamic_smem;
    row.notes["shape"] = absl::StrCat(
        r.shape.threads, " threads, ", r.shape.ctas_per_sm, " CTA/SM, ",
        r.shape.stages, " stages",
        r.shape.define ? absl::StrCat(", -D", r.shape.define) : std::string());
    row.notes["verified"] = r.verified;
    if (!r.tuning.empty()) row.notes["tuning"] = r.tuning;
    report.rows.push_back(std::move(row));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BenchReport> BenchKernels(const BenchOptions& options) {
  // The corpus's sets: those named, else ./bench/corpus's (the source
  // tree's, when run from its root), else none.
  std::vector<std::string> sets;
  if (options.only != "reference") {
    std::vector<std::string> dirs = options.corpus;
    std::error_code ec;
    if (dirs.empty() && std::filesystem::is_directory("bench/corpus", ec))
      dirs.push_back("bench/corpus");
    absl::StatusOr<std::vector<std::string>> found = corpus::FindSets(dirs);
    if (!found.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--corpus ", found.status().message()));
    }
    sets = *found;
    if (sets.empty() && options.only == "corpus") {
      return absl::InvalidArgumentError(
          "--only corpus: no corpus set found (run from the source tree's "
          "root, or name one with --corpus DIR)");
    }
  }
  BenchReport report;
  if (options.only != "corpus") {
    absl::Status st = ReferenceRows(options, report);
    if (!st.ok()) return st;
  }
  if (!sets.empty()) {
    absl::Status st = BenchCorpus(options, sets, &report, Say);
    if (!st.ok()) return st;
  }
  return report;
}

}  // namespace fleetjit::cli
