// The conformance matrix: rows (implementations, optionally on PTX
// targets), columns (features, each a list of variants), and the loop that
// runs every cell and reports it. The pieces live beside it: case_gen.h
// (random cases), matrix.h (building, launching, comparing), watchdog.h and
// c_abi.h.
#include "conformance/runner.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "conformance/c_abi.h"
#include "conformance/case_gen.h"
#include "conformance/matrix.h"
#include "conformance/watchdog.h"

namespace fleetjit::selftest {
namespace {

using internal::Clock;
using internal::Fj;
using internal::kKernelFile;
using internal::Matrix;
using internal::Mix;
using internal::RowSpec;
using internal::Tally;
using internal::Variant;
using internal::Variants;

int ImplMinCc(fj_copy_impl impl) {
  return impl == FJ_COPY_IMPL_TMA ? 90 : impl == FJ_COPY_IMPL_CP_ASYNC ? 80 : 0;
}

absl::StatusOr<RowSpec> ParseRow(absl::string_view name, int device_cc) {
  RowSpec r;
  r.name = std::string(name);
  absl::string_view impl = name, target;
  const size_t at = name.find('@');
  if (at != absl::string_view::npos) {
    impl = name.substr(0, at);
    target = name.substr(at + 1);
  }
  if (impl == "tma") {
    r.impl = FJ_COPY_IMPL_TMA;
  } else if (impl == "cp_async") {
    r.impl = FJ_COPY_IMPL_CP_ASYNC;
  } else if (impl == "sync") {
    r.impl = FJ_COPY_IMPL_SYNC;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown implementation '", impl, "' in '", name,
        "': use tma, cp_async or sync, optionally @compute_XX or @sm_XX"));
  }
  r.target_cc = device_cc;
  if (!target.empty()) {
    absl::string_view digits = target;
    if (absl::ConsumePrefix(&digits, "compute_") ||
        absl::ConsumePrefix(&digits, "sm_")) {
      std::string d(digits);
      while (!d.empty() &&
             !absl::ascii_isdigit(static_cast<unsigned char>(d.back()))) {
        d.pop_back();  // "90a", "100f"
      }
      if (!absl::SimpleAtoi(d, &r.target_cc)) r.target_cc = -1;
    } else {
      r.target_cc = -1;
    }
    if (r.target_cc <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad target '", target, "' in '", name,
                       "': use compute_XX or sm_XX"));
    }
    r.target = std::string(target);
    if (r.target_cc > device_cc) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", name, "': target ", target, " is newer than the device (cc ",
          device_cc / 10, ".", device_cc % 10, ")"));
    }
  }
  if (ImplMinCc(r.impl) > r.target_cc) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", name, "': ", impl, " needs compute capability ",
        ImplMinCc(r.impl) / 10, ".", ImplMinCc(r.impl) % 10, " or newer; ",
        target.empty() ? "the device is " : "the target is ", r.target_cc / 10,
        ".", r.target_cc % 10));
  }
  return r;
}

std::vector<std::string> DefaultRows(int cc) {
  std::vector<std::string> rows;
  if (cc >= 90) rows.push_back("tma");
  if (cc >= 80) rows.push_back("cp_async");
  rows.push_back("sync");
  if (cc >= 90) rows.push_back("cp_async@compute_80");
  if (cc >= 80) rows.push_back("sync@compute_75");
  return rows;
}

absl::StatusOr<fj_device_info> LiveDevice(fj_runtime* rt, int device) {
  if (rt == nullptr) return absl::InvalidArgumentError("no runtime");
  int32_t count = 0;
  absl::Status s = Fj(fj_device_count(rt, &count), "counting devices");
  if (!s.ok()) return s;
  if (count == 0) {
    const char* why = fj_runtime_driver_error(rt);
    return absl::UnavailableError(absl::StrCat(
        "no CUDA GPU: ",
        why != nullptr && *why != '\0' ? why : "the driver reports 0 devices"));
  }
  if (device < 0 || device >= count) {
    return absl::NotFoundError(
        absl::StrCat("device ", device, " does not exist (", count, " device",
                     count == 1 ? "" : "s", ")"));
  }
  fj_device_info info{};
  info.struct_size = sizeof(info);
  s = Fj(fj_device_info_get(rt, device, &info), "reading the device");
  if (!s.ok()) return s;
  return info;
}

}  // namespace

const std::vector<std::string>& MatrixFeatures() {
  static const auto* f = new std::vector<std::string>{
      "barrier",   "group_wait",  "copy_g2s",  "copy_s2g",
      "predicate", "tile_copy",   "oob_zeros", "oob_nan",
      "multicast", "l2_prefetch", "pipeline",  "indexed"};
  return *f;
}

const std::vector<std::string>& AllVariants() {
  static const auto* v = [] {
    auto* out = new std::vector<std::string>;
    for (const std::string& f : MatrixFeatures()) {
      for (const Variant& x : Variants()) {
        if (f == x.feature) out->push_back(x.name);
      }
    }
    return out;
  }();
  return *v;
}

std::vector<std::string> FeatureVariants(absl::string_view feature) {
  std::vector<std::string> out;
  for (const Variant& x : Variants()) {
    if (feature == x.feature) out.push_back(x.name);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> DeviceImpls(fj_runtime* rt,
                                                     int device) {
  auto info = LiveDevice(rt, device);
  if (!info.ok()) return info.status();
  return DefaultRows(info->cc_major * 10 + info->cc_minor);
}

uint64_t FreshSeed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
               static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  s = Mix(s) & ((1ull << 53) - 1);  // exact in a JSON number
  return s == 0 ? 1 : s;
}

absl::StatusOr<std::vector<CellResult>> RunConformanceMatrix(
    fj_runtime* rt, const MatrixOptions& options,
    std::function<void(const CellResult&)> progress) {
  auto info = LiveDevice(rt, options.device);
  if (!info.ok()) return info.status();
  const int cc = info->cc_major * 10 + info->cc_minor;
  if (options.scale < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale is ", options.scale, "; it must be >= 1"));
  }
  // Columns and variants.
  std::vector<std::string> features =
      options.features.empty() ? MatrixFeatures() : options.features;
  for (const std::string& f : features) {
    if (std::find(MatrixFeatures().begin(), MatrixFeatures().end(), f) ==
        MatrixFeatures().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown feature '", f,
                       "'; features: ", absl::StrJoin(MatrixFeatures(), ", ")));
    }
  }
  for (const std::string& v : options.variants) {
    if (std::find(AllVariants().begin(), AllVariants().end(), v) ==
        AllVariants().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown variant '", v,
                       "'; variants: ", absl::StrJoin(AllVariants(), ", ")));
    }
  }
  auto variants_of = [&](const std::string& f) {
    std::vector<const Variant*> out;
    for (const Variant& x : Variants()) {
      if (f != x.feature) continue;
      if (!options.variants.empty() &&
          std::find(options.variants.begin(), options.variants.end(), x.name) ==
              options.variants.end()) {
        continue;
      }
      out.push_back(&x);
    }
    return out;
  };
  // Rows.
  std::vector<RowSpec> specs;
  for (const std::string& name :
       options.impls.empty() ? DefaultRows(cc) : options.impls) {
    auto spec = ParseRow(name, cc);
    if (!spec.ok()) return spec.status();
    specs.push_back(*spec);
  }
  const uint64_t seed = options.seed != 0 ? options.seed : FreshSeed();
  Matrix m(rt, options.device, seed, options.scale);
  absl::Status s = m.Init(*info);
  if (!s.ok()) return s;
  for (auto& spec : specs) m.AddRow(spec);
  if (options.log) {
    options.log(absl::StrCat("building ", kKernelFile, " for ", specs.size(),
                             " row", specs.size() == 1 ? "" : "s",
                             " (in parallel)"));
  }
  m.BuildAll(options.log);

  std::vector<CellResult> results;
  absl::Status dead;  // set once the device stops working
  for (const std::string& f : features) {
    const std::vector<const Variant*> vs = variants_of(f);
    if (vs.empty()) continue;
    for (auto& row : m.rows()) {
      CellResult cell;
      cell.feature = f;
      cell.impl = row->spec.name;
      cell.seed = seed;
      const auto t0 = Clock::now();
      Tally t;
      if (!row->build_error.empty()) {
        t.Fail(1, absl::StrCat(
                      "[impl ", row->spec.name, ", feature ", f,
                      "] not run: the conformance kernels did not build: ",
                      row->build_error));
      } else if (!dead.ok()) {
        t.Fail(1, absl::StrCat("[impl ", row->spec.name, ", feature ", f,
                               "] not run: ", dead.message()));
      } else {
        for (const Variant* v : vs) {
          absl::Status st = m.RunVariant(*row, *v, f, t);
          if (!st.ok()) {
            dead = st;
            break;
          }
        }
      }
      cell.cases = t.cases;
      cell.failures = t.failures;
      cell.launches = t.launches;
      cell.tensor_maps = t.maps;
      cell.fallbacks = t.fallbacks;
      cell.failure_samples = t.samples;
      if (!t.samples.empty()) cell.first_failure = t.samples.front();
      cell.ms =
          std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (progress) progress(cell);
      results.push_back(std::move(cell));
    }
  }
  return results;
}

}  // namespace fleetjit::selftest
