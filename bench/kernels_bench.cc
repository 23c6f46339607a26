// The reference kernels (reference/reference_kernels.h: RMSNorm, softmax,
// transpose, ...) under every copy implementation, each against a
// cuMemcpyDtoDAsync of the same bytes in the same run: GPU time (CUDA
// events, 3 warm-ups, median of 10 timings of 10 launches), the fraction
// of the copy, registers and SMEM (fj_kernel_info), the launch shape that
// won the sweep, and the output checked against the CPU reference.
//
//   build/bench/kernels_bench [FILTER [IMPL [THREADS/CTAS_PER_SM/STAGES]]]
//     FILTER: a substring of the kernel's name ("" = all), IMPL: one
//     variant (tma, cp_async, sync, cp_async@compute_80), and one launch
//     shape instead of the sweep (for a profiler: ncu -k regex:rmsnorm ...).
//   build/bench/kernels_bench --tune [FILTER [IMPL]]
//     the shapes swept by fj_tune instead: tuned once per device model,
//     driver and implementation and kept in the module cache's tiers
//     (FLEETJIT_CACHE_DIR, the remote tier), so a second run, in another
//     process or on another host of the fleet, looks the shapes up
//     (docs/tuning.md). Each line says how its shape was found.
//   build/bench/kernels_bench --warm-list
//     prints one `fleetjit build` argument line per build the sweep makes
//     (run from examples/: `xargs -P 16 -L 1 fleetjit build < LIST`), so a
//     GPU host fills the module cache on every core before the timing.
//
// Goals (issue 20): >= 0.85 of the copy under tma and cp_async, >= 0.70
// under sync. The torch comparison is bench/kernels_torch.py.
#include <cstdio>
#include <set>
#include <string>

#include "reference/reference_kernels.h"

int main(int argc, char** argv) {
  using namespace fleetjit::refk;  // NOLINT
  if (argc == 2 && std::string(argv[1]) == "--warm-list") {
    std::set<std::string> seen;
    for (const KernelCase& c : Cases()) {
      const std::string file = c.example.substr(c.example.rfind('/') + 1);
      for (const Variant& v : Variants()) {
        for (const Shape& s : c.shapes) {
          std::string line = file + " --impl " + fj_copy_impl_name(v.impl);
          if (v.target[0] != '\0') line += std::string(" --target ") + v.target;
          for (const std::string& d : ShapeDefines(c, s.stages, s.define))
            line += " -D " + d.substr(2);  // "-DNAME=V" -> "-D NAME=V"
          if (seen.insert(line).second) std::printf("%s\n", line.c_str());
        }
      }
    }
    return 0;
  }
  RunOptions options;
  if (argc > 1 && std::string(argv[1]) == "--tune") {
    options.tune = true;
    --argc;
    ++argv;
  }
  if (argc > 1) options.filter = argv[1];
  if (argc > 2) options.variant = argv[2];
  if (argc > 3 &&
      std::sscanf(argv[3], "%d/%d/%d", &options.shape.threads,
                  &options.shape.ctas_per_sm, &options.shape.stages) != 3) {
    std::printf("kernels_bench: shape '%s' is not THREADS/CTAS_PER_SM/STAGES\n",
                argv[3]);
    return 2;
  }
  options.on_result = [](const Result& r) {
    if (!r.skipped.empty()) {
      std::printf("  %-36s %-20s not measured: %s\n", r.kernel.c_str(),
                  r.impl.c_str(), r.skipped.c_str());
    } else {
      std::printf("  %-36s %-20s %.3fx of the copy (", r.kernel.c_str(),
                  r.impl.c_str(), r.fraction);
      for (const auto& [s, ms] : r.tried) {
        std::printf(" %s %.1fus", ShapeName(s).c_str(), ms * 1e3);
      }
      std::printf(" ) %s%s%s\n", r.verified.c_str(),
                  r.tuning.empty() ? "" : ", ", r.tuning.c_str());
    }
    std::fflush(stdout);
  };
  std::string device;
  auto results = Run(options, &device);
  if (!results.ok()) {
    std::printf("kernels_bench: %s\n",
                std::string(results.status().message()).c_str());
    return absl::IsUnavailable(results.status()) ? 0 : 1;
  }
  std::printf(
      "\nkernels_bench on %s: fraction = cuMemcpyDtoDAsync of the input's "
      "bytes / kernel, GPU time\n%s",
      device.c_str(), FormatTable(*results).c_str());
  bool ok = true;
  for (const Result& r : *results)
    ok = ok && (r.skipped.empty() ? r.verified == "ok" : true);
  return ok ? 0 : 1;
}
