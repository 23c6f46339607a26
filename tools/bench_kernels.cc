// `fleetjit bench kernels`: the reference kernels' table
// (bench/reference_kernels.h) as bench rows: each kernel under each copy
// implementation against a cuMemcpyDtoDAsync of the same bytes, in GB/s
// of (bytes read + written), so the ratio is the fraction of the copy.
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/reference_kernels.h"
#include "tools/bench.h"

namespace fleetjit::cli {

absl::StatusOr<BenchReport> BenchKernels(const BenchOptions& options) {
  refk::RunOptions run;
  run.device = options.device;
  if (options.reps > 0) run.samples = options.reps;
  run.tune = options.tune;
  std::string device;
  absl::StatusOr<std::vector<refk::Result>> results = refk::Run(run, &device);
  if (!results.ok()) return results.status();
  BenchReport report;
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
  return report;
}

}  // namespace fleetjit::cli
