// A loaded kernel's attributes and occupancy (see kernel_attributes.h).
#include "runtime/load/kernel_attributes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit {
namespace {

// Makes `k`'s context current on this thread.
absl::Status EnterKernelContext(const LoadedKernel& k) {
  if (k.api == nullptr || k.device == nullptr || k.function == nullptr) {
    return absl::FailedPreconditionError("the kernel is not loaded");
  }
  if (k.device->is_poisoned()) return k.device->poisoned();
  CUcontext current = nullptr;
  if (k.api->cuCtxGetCurrent(&current) == CUDA_SUCCESS &&
      current == k.context) {
    return absl::OkStatus();
  }
  return FJ_CU_CALL(*k.api, cuCtxSetCurrent, k.context);
}

}  // namespace

absl::StatusOr<KernelAttributes> ReadKernelAttributes(const LoadedKernel& k) {
  FJ_RETURN_IF_ERROR(EnterKernelContext(k));
  KernelAttributes a;
  struct {
    CUfunction_attribute attribute;
    int* out;
    const char* what;
  } slots[] = {
      {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &a.const_bytes, "CONST_SIZE_BYTES"},
      {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &a.local_bytes, "LOCAL_SIZE_BYTES"},
      {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
       &a.max_dynamic_shared_bytes, "MAX_DYNAMIC_SHARED_SIZE_BYTES"},
      {CU_FUNC_ATTRIBUTE_PTX_VERSION, &a.ptx_version, "PTX_VERSION"},
      {CU_FUNC_ATTRIBUTE_BINARY_VERSION, &a.binary_version, "BINARY_VERSION"},
      {CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, &a.cache_mode_ca, "CACHE_MODE_CA"},
      {CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
       &a.preferred_carveout, "PREFERRED_SHARED_MEMORY_CARVEOUT"},
  };
  for (auto& slot : slots) {
    FJ_RETURN_IF_ERROR(
        CheckCu(*k.api,
                k.api->cuFuncGetAttribute(slot.out, slot.attribute, k.function),
                absl::StrCat("cuFuncGetAttribute(", slot.what, ")")),
        absl::StrCat("reading the attributes of '", k.display_name, "'"));
  }
  return a;
}

absl::Status SetKernelAttribute(LoadedKernel& k, int attr, int value) {
  FJ_RETURN_IF_ERROR(EnterKernelContext(k));
  const DeviceFacts& f = k.device->facts();
  CUfunction_attribute cu_attr;
  const char* what;
  if (attr == kKernelAttrMaxDynamicSharedBytes) {
    const int most =
        std::max(0, f.shared_per_block_optin - k.static_shared_bytes);
    if (value < 0 || value > most) {
      return absl::OutOfRangeError(absl::StrCat(
          "FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES = ", value,
          " is outside [0, ", most, "] for '", k.display_name, "' on device ",
          f.ordinal, " (its opt-in limit ", f.shared_per_block_optin, " minus ",
          k.static_shared_bytes, " bytes of static shared memory)"));
    }
    cu_attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    what = "MAX_DYNAMIC_SHARED_SIZE_BYTES";
  } else if (attr == kKernelAttrPreferredCarveout) {
    if (value < -1 || value > 100) {
      return absl::OutOfRangeError(
          absl::StrCat("FJ_KERNEL_ATTR_PREFERRED_CARVEOUT = ", value,
                       " is outside [-1, 100] (a percentage, -1 the default)"));
    }
    cu_attr = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
    what = "PREFERRED_SHARED_MEMORY_CARVEOUT";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("attr is ", attr, ", not an fj_kernel_attr (0..",
                     kKernelAttrLast, ")"));
  }
  FJ_RETURN_IF_ERROR(
      CheckCu(*k.api, k.api->cuFuncSetAttribute(k.function, cu_attr, value),
              absl::StrCat("cuFuncSetAttribute(", what, ")")),
      absl::StrCat("setting an attribute of '", k.display_name, "'"));
  if (cu_attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    // The launch path raises the limit again when a launch needs more.
    k.dynamic_shared_limit.store(value, std::memory_order_relaxed);
    k.dynamic_shared_raised.store(false, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> KernelOccupancy(const LoadedKernel& k, uint32_t threads,
                                    uint32_t dynamic_shared) {
  FJ_RETURN_IF_ERROR(EnterKernelContext(k));
  const int most = k.max_threads_per_block > 0
                       ? k.max_threads_per_block
                       : k.device->facts().max_threads_per_block;
  if (threads == 0 || (most > 0 && threads > static_cast<uint32_t>(most))) {
    return absl::OutOfRangeError(absl::StrCat("block_threads = ", threads,
                                              " is outside [1, ", most,
                                              "] for '", k.display_name, "'"));
  }
  if (k.api->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks "
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
  }
  int blocks = 0;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(*k.api, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
                 &blocks, k.function, static_cast<int>(threads), dynamic_shared,
                 CU_OCCUPANCY_DEFAULT),
      absl::StrCat("the occupancy of '", k.display_name, "'"));
  return blocks;
}

absl::StatusOr<std::pair<int, int>> SuggestBlock(const LoadedKernel& k,
                                                 uint32_t dynamic_shared) {
  FJ_RETURN_IF_ERROR(EnterKernelContext(k));
  if (k.api->cuOccupancyMaxPotentialBlockSize == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuOccupancyMaxPotentialBlockSize");
  }
  int min_grid = 0, block = 0;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(*k.api, cuOccupancyMaxPotentialBlockSize, &min_grid, &block,
                 k.function, nullptr, dynamic_shared, 0),
      absl::StrCat("a block size for '", k.display_name, "'"));
  return std::make_pair(block, min_grid);
}

}  // namespace fleetjit
