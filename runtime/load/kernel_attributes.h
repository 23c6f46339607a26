// A loaded kernel's attributes and occupancy (ABI 1.3: fj_kernel_info_get's
// attribute fields, fj_kernel_set_attribute, fj_kernel_occupancy,
// fj_kernel_suggest_block): each checks its range before the driver is
// called and names the call when the driver refuses.
#ifndef FLEETJIT_RUNTIME_LOAD_KERNEL_ATTRIBUTES_H_
#define FLEETJIT_RUNTIME_LOAD_KERNEL_ATTRIBUTES_H_

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/load/kernel.h"

namespace fleetjit {

// The fj_kernel_attr values (<fleetjit/fleetjit.h>, which the runtime's
// rooms below the launch wire format do not include; capi asserts that
// they match).
inline constexpr int kKernelAttrMaxDynamicSharedBytes = 0;
inline constexpr int kKernelAttrPreferredCarveout = 1;
inline constexpr int kKernelAttrLast = kKernelAttrPreferredCarveout;

// What fj_kernel_info's 1.3 fields report (cuFuncGetAttribute).
struct KernelAttributes {
  int const_bytes = 0, local_bytes = 0, max_dynamic_shared_bytes = 0;
  int ptx_version = 0, binary_version = 0, cache_mode_ca = 0;
  int preferred_carveout = -1;
};
absl::StatusOr<KernelAttributes> ReadKernelAttributes(const LoadedKernel& k);
// fj_kernel_set_attribute: `attr` is an fj_kernel_attr, range-checked.
absl::Status SetKernelAttribute(LoadedKernel& k, int attr, int value);
// Blocks of `threads` threads and `dynamic_shared` bytes per SM.
absl::StatusOr<int> KernelOccupancy(const LoadedKernel& k, uint32_t threads,
                                    uint32_t dynamic_shared);
// (block threads, minimum grid) for the most occupancy.
absl::StatusOr<std::pair<int, int>> SuggestBlock(const LoadedKernel& k,
                                                 uint32_t dynamic_shared);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LOAD_KERNEL_ATTRIBUTES_H_
