// `fleetjit bench build` (tools/bench.h): a plain NVRTC compile of a kernel
// with no includes (the anchor, through the NVRTC the runtime would load)
// next to fleetjit's cold build of the same kernel, a disk hit in a fresh
// runtime and a memory hit, for a named target or the live device's. Each
// cold build compiles a source no cache has seen; the cache is a scratch
// directory unless --cache-dir names one (FLEETJIT_CACHE_DIR overrides
// both, as it does for every runtime).
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "platform/nvrtc_library.h"
#include "platform/nvrtc_locate.h"
#include "reference/measure.h"
#include "runtime/config.h"
#include "tools/bench.h"
#include "tools/cli_util.h"

namespace fleetjit::cli {
namespace {

constexpr const char* kKernel = measure::kPlainKernel;

// Runtimes that all use `cache_dir`.
class Builder {
 public:
  explicit Builder(std::string cache_dir, std::string target)
      : cache_dir_(std::move(cache_dir)), target_(std::move(target)) {}

  absl::StatusOr<fj_runtime*> NewRuntime() const {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.cache_dir = fj_str{cache_dir_.data(), cache_dir_.size()};
    fj_runtime* rt = nullptr;
    FJ_RETURN_IF_ERROR(FromFj(fj_runtime_create(&o, &rt), "fj_runtime_create"));
    return rt;
  }
  // Milliseconds fj_module_build of `source` took; fails unless the module
  // came as `expected` says.
  absl::StatusOr<double> BuildMs(fj_runtime* rt, const std::string& source,
                                 fj_cache_result expected) const {
    fj_build_options b{};
    b.struct_size = sizeof(b);
    b.source = fj_str{source.data(), source.size()};
    b.name = fj_str{"bench_build.cu", 14};
    b.target = fj_str{target_.data(), target_.size()};
    fj_module* m = nullptr;
    const double t0 = measure::NowMs();
    FJ_RETURN_IF_ERROR(FromFj(fj_module_build(rt, &b, &m), "fj_module_build"));
    const double ms = measure::NowMs() - t0;
    fj_module_info info{};
    info.struct_size = sizeof(info);
    absl::Status st =
        FromFj(fj_module_info_get(m, &info), "fj_module_info_get");
    fj_status_free(fj_module_destroy(m));
    FJ_RETURN_IF_ERROR(st);
    if (info.cache_result != expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          "expected a ", CacheResultName(expected), ", got a ",
          CacheResultName(info.cache_result),
          " (is the disk cache off? FLEETJIT_CACHE=0 turns it off)"));
    }
    return ms;
  }
  // Waits until `rt`'s disk entries are written.
  static absl::Status Flush(fj_runtime* rt) {
    return FromFj(fj_cache_flush(rt, 10000), "fj_cache_flush");
  }

 private:
  std::string cache_dir_, target_;
};

// The target to build for: --target, else the live device's.
absl::StatusOr<std::string> TargetFor(const BenchOptions& o,
                                      nlohmann::ordered_json& context) {
  if (!o.target.empty()) return o.target;
  fj_runtime* rt = nullptr;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_runtime_create(nullptr, &rt), "fj_runtime_create"));
  absl::Cleanup destroy = [&] { fj_status_free(fj_runtime_destroy(rt)); };
  int32_t count = 0;
  FJ_RETURN_IF_ERROR(FromFj(fj_device_count(rt, &count), "fj_device_count"));
  if (count == 0) {
    return absl::UnavailableError(
        absl::StrCat("no GPU (", fj_runtime_driver_error(rt),
                     "); name a target: --target sm_90"));
  }
  FJ_ASSIGN_OR_RETURN(context["device"], DeviceJson(rt, o.device));
  return context["device"]["target"].get<std::string>();
}

}  // namespace

absl::StatusOr<BenchReport> BenchBuild(const BenchOptions& o) {
  BenchReport report;
  FJ_ASSIGN_OR_RETURN(const std::string target, TargetFor(o, report.context));
  // The anchor's NVRTC: the file the runtime's loader would open.
  RuntimeOptions options;
  FJ_RETURN_IF_ERROR(ApplyEnvironment(options), "reading FLEETJIT_* variables");
  absl::StatusOr<std::string> path = ResolveNvrtcLibrary(options.libnvrtc_path);
  if (!path.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no NVRTC: ", path.status().message()));
  }
  NvrtcLibrary library({*path});
  absl::StatusOr<const NvrtcApi*> api = library.Get();
  if (!api.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no NVRTC: ", api.status().message()));
  }
  const std::vector<std::string> nvrtc_options = {"-arch=" + target,
                                                  "-std=c++17"};

  std::string dir = o.cache_dir;
  absl::Cleanup remove_scratch = [&] {
    if (o.cache_dir.empty() && !dir.empty()) std::filesystem::remove_all(dir);
  };
  if (dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/fjbench.XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      return absl::InternalError("mkdtemp failed");
    dir = pattern;
  }
  Builder builder(dir, target);
  FJ_ASSIGN_OR_RETURN(fj_runtime * rt, builder.NewRuntime());
  absl::Cleanup destroy = [&] { fj_status_free(fj_runtime_destroy(rt)); };
  // Warm-ups: NVRTC's own start-up, once each way; `warm` is the build a
  // fresh runtime makes first (a disk hit), so the timed disk hits do not
  // pay for the runtime's first build.
  const std::string warm = measure::UniqueSource(kKernel);
  FJ_RETURN_IF_ERROR(
      measure::BareNvrtcMs(**api, measure::UniqueSource(kKernel), nvrtc_options)
          .status(),
      "bare NVRTC");
  FJ_RETURN_IF_ERROR(builder.BuildMs(rt, warm, FJ_CACHE_COMPILED).status(),
                     "warm-up");
  FJ_RETURN_IF_ERROR(Builder::Flush(rt));

  const int reps = o.reps > 0 ? o.reps : 5;
  std::vector<double> bare, cold, disk, memory;
  std::string disk_skipped;  // why, when the disk tier is off
  for (int i = 0; i < reps; ++i) {
    FJ_ASSIGN_OR_RETURN(
        double b,
        measure::BareNvrtcMs(**api, measure::UniqueSource(kKernel),
                             nvrtc_options),
        "bare NVRTC");
    bare.push_back(b);
    const std::string source = measure::UniqueSource(kKernel);
    FJ_ASSIGN_OR_RETURN(
        double c, builder.BuildMs(rt, source, FJ_CACHE_COMPILED), "cold build");
    cold.push_back(c);
    FJ_ASSIGN_OR_RETURN(double m,
                        builder.BuildMs(rt, source, FJ_CACHE_MEMORY_HIT),
                        "memory hit");
    memory.push_back(m);
    if (!disk_skipped.empty()) continue;
    FJ_RETURN_IF_ERROR(Builder::Flush(rt));
    FJ_ASSIGN_OR_RETURN(fj_runtime * fresh, builder.NewRuntime());
    absl::StatusOr<double> d = builder.BuildMs(fresh, warm, FJ_CACHE_DISK_HIT);
    if (d.ok()) d = builder.BuildMs(fresh, source, FJ_CACHE_DISK_HIT);
    fj_status_free(fj_runtime_destroy(fresh));
    if (absl::IsFailedPrecondition(d.status())) {  // no disk tier here
      disk_skipped = std::string(d.status().message());
      continue;
    }
    FJ_RETURN_IF_ERROR(d.status(), "disk hit");
    disk.push_back(*d);
  }
  const double anchor = measure::Median(bare);
  const std::string what =
      absl::StrCat("NVRTC compile, no includes (", target, ")");
  report.context["target"] = target;
  report.context["nvrtc"] = absl::StrCat((*api)->major, ".", (*api)->minor);
  report.context["timing"] =
      absl::StrCat("median of ", reps, " builds of fresh sources");
  report.rows.push_back({"cold build (cache miss)", "ms", false, what, anchor,
                         "fj_module_build", measure::Median(cold)});
  if (disk_skipped.empty()) {
    report.rows.push_back({"disk hit (fresh runtime)", "ms", false, what,
                           anchor, "fj_module_build", measure::Median(disk)});
  } else {
    report.skipped.push_back({"disk hit", disk_skipped});
  }
  report.rows.push_back({"memory hit (same runtime)", "ms", false, what, anchor,
                         "fj_module_build", measure::Median(memory)});
  return report;
}

}  // namespace fleetjit::cli
