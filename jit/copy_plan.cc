#include "jit/copy_plan.h"

#include "absl/strings/str_cat.h"

namespace fleetjit::jit {
namespace {

int MinArch(CopyImpl impl) {
  switch (impl) {
    case CopyImpl::kSync:
      return 0;
    case CopyImpl::kCpAsync:
      return 80;  // cp.async arrived with Ampere
    case CopyImpl::kTma:
      return 90;  // bulk copies and TMA with Hopper
  }
  return 0;
}

// What the hardware does itself under each implementation (the rest the
// copy layer emulates). Mirrors the table at the top of <fleetjit/copy.cuh>.
Support SupportOf(CopyImpl impl, Feature f, const Target& target) {
  using enum Feature;
  const Support N = Support::kNative, E = Support::kEmulated;
  switch (impl) {
    case CopyImpl::kSync:
      // No asynchronous copy engine: ld/st plus block barriers. Spans are
      // prefetched with prefetch.global.L2, which every target has.
      return f == kCopyS2G || f == kL2Prefetch ? N : E;
    case CopyImpl::kCpAsync:
      switch (f) {
        case kBarrier:    // mbarrier + cp.async.mbarrier.arrive (sm_80)
        case kGroupWait:  // cp.async.commit_group / wait_group
        case kCopyG2S:
        case kCopyS2G:
        case kPredicate:  // src-size 0 / ignore-src
        case kOobZeros:   // src-size clamping
        case kL2Prefetch:
          return N;
        default:     // tiles walked in software, NaN by stores,
          return E;  // no clusters below sm_90
      }
    case CopyImpl::kTma:
      switch (f) {
        case kGroupWait:  // TMA loads complete only on mbarriers: grouped
          return E;       // loads go through cp.async instead
        case kMulticast:  // .multicast::cluster: sm_90, and the
                          // arch/family-specific Blackwell datacenter targets
          return target.arch == 90 ||
                         ((target.arch == 100 || target.arch == 103 ||
                           target.arch == 110) &&
                          target.suffix != '\0')
                     ? N
                     : E;
        default:
          return N;
      }
  }
  return E;
}

}  // namespace

absl::string_view CopyImplName(CopyImpl impl) {
  switch (impl) {
    case CopyImpl::kSync:
      return "sync";
    case CopyImpl::kCpAsync:
      return "cp_async";
    case CopyImpl::kTma:
      return "tma";
  }
  return "unknown";
}

absl::string_view FeatureName(Feature feature) {
  static constexpr absl::string_view kNames[kFeatureCount] = {
      "barrier",   "group_wait", "copy_g2s", "copy_s2g",  "predicate",
      "tile_copy", "oob_zeros",  "oob_nan",  "multicast", "l2_prefetch"};
  int i = static_cast<int>(feature);
  return i >= 0 && i < kFeatureCount ? kNames[i] : "unknown";
}

absl::string_view SupportName(Support support) {
  return support == Support::kNative ? "native" : "emulated";
}

std::optional<CopyImpl> ParseCopyImpl(absl::string_view name) {
  if (name == "sync") return CopyImpl::kSync;
  if (name == "cp_async" || name == "cp.async") return CopyImpl::kCpAsync;
  if (name == "tma") return CopyImpl::kTma;
  return std::nullopt;
}

CopyImpl ChooseCopyImplementation(const Target& target) {
  if (target.arch >= MinArch(CopyImpl::kTma)) return CopyImpl::kTma;
  if (target.arch >= MinArch(CopyImpl::kCpAsync)) return CopyImpl::kCpAsync;
  return CopyImpl::kSync;
}

bool TargetHasCopyImpl(const Target& target, CopyImpl impl) {
  return target.arch >= MinArch(impl);
}

std::optional<CopyImpl> RuntimeOverrideFor(const Target& target,
                                           std::optional<CopyImpl> forced) {
  if (forced.has_value() && !TargetHasCopyImpl(target, *forced)) {
    return std::nullopt;
  }
  return forced;
}

absl::StatusOr<CopyPlan> MakeCopyPlan(const Target& target,
                                      std::optional<CopyImpl> forced) {
  CopyPlan plan;
  plan.target = target;
  plan.impl = forced.value_or(ChooseCopyImplementation(target));
  if (target.arch < MinArch(plan.impl)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "copy implementation '", CopyImplName(plan.impl), "' needs sm_",
        MinArch(plan.impl), " or newer; target ", target.Name(),
        " lacks it (choose ", CopyImplName(ChooseCopyImplementation(target)),
        " or auto)"));
  }
  for (int i = 0; i < kFeatureCount; ++i) {
    plan.support[i] = SupportOf(plan.impl, static_cast<Feature>(i), target);
  }
  return plan;
}

}  // namespace fleetjit::jit
