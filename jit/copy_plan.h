// Which copy implementation a build uses, and what it does natively.
//
// <fleetjit/copy.cuh> has three implementations side by side (sync,
// cp_async, tma). ChooseCopyImplementation picks the best one a target's
// hardware has; a forced implementation is checked against the hardware so
// that forcing tma on an sm_80 build is a clear status, not a fault.
#ifndef FLEETJIT_JIT_COPY_PLAN_H_
#define FLEETJIT_JIT_COPY_PLAN_H_

#include <array>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/target.h"

namespace fleetjit::jit {

// Values equal FJ_COPY_IMPL in <fleetjit/copy.cuh>.
enum class CopyImpl { kSync = 0, kCpAsync = 1, kTma = 2 };

// Indexed like fj_feature in the C header.
enum class Feature {
  kBarrier,
  kGroupWait,
  kCopyG2S,
  kCopyS2G,
  kPredicate,
  kTileCopy,
  kOobZeros,
  kOobNan,
  kMulticast,
  kL2Prefetch,
};
inline constexpr int kFeatureCount = 10;

enum class Support { kNative = 1, kEmulated = 2 };

struct CopyPlan {
  Target target;
  CopyImpl impl = CopyImpl::kSync;
  std::array<Support, kFeatureCount> support{};
};

absl::string_view CopyImplName(CopyImpl impl);   // "sync", "cp_async", "tma"
absl::string_view FeatureName(Feature feature);  // "group_wait"
absl::string_view SupportName(Support support);  // "native", "emulated"
// Parses "sync" | "cp_async" | "tma" (also "cp.async"); nullopt otherwise.
std::optional<CopyImpl> ParseCopyImpl(absl::string_view name);

// The fastest implementation the target's hardware has.
CopyImpl ChooseCopyImplementation(const Target& target);

// True if the target's hardware has `impl`.
bool TargetHasCopyImpl(const Target& target, CopyImpl impl);

// The runtime-wide forced implementation (fj_runtime_options'
// copy_impl_override, FLEETJIT_COPY_IMPL) as it applies to a build for
// `target`: itself where the target has it, else nullopt, so the target
// gets its own best implementation. Forcing one to rehearse the fleet does
// not refuse the builds a suite makes for older targets. An implementation
// forced for one build (fj_build_options.copy_impl) is not softened:
// MakeCopyPlan refuses it.
std::optional<CopyImpl> RuntimeOverrideFor(const Target& target,
                                           std::optional<CopyImpl> forced);

// The plan for `target`, with `forced` if given. FAILED_PRECONDITION when
// the target's hardware lacks the forced implementation.
absl::StatusOr<CopyPlan> MakeCopyPlan(const Target& target,
                                      std::optional<CopyImpl> forced);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_COPY_PLAN_H_
