// fj_launch's arguments (the configuration, the fj_arg array's stride) and
// fj_kernel_info (convert.h).
#include <cstdint>
#include <cstdio>

#include "base/status_macros.h"
#include "capi/convert.h"

namespace fleetjit::capi {

absl::StatusOr<size_t> ReadArgStride(const fj_arg* args, size_t num_args) {
  if (num_args == 0) return 0;
  if (const size_t stride = ArgStrideOrZero(args)) return stride;
  // Refused by ArgStrideOrZero's rule: say which part of it.
  if (args == nullptr) return NullArgument("args");
  constexpr size_t kAlign = alignof(fj_arg);
  if (reinterpret_cast<uintptr_t>(args) % kAlign != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("args is not aligned for fj_arg (", kAlign, " bytes)"));
  }
  const size_t stride = args[0].struct_size;
  if (stride < sizeof(fj_arg)) {
    return absl::InvalidArgumentError(
        absl::StrCat("args[0].struct_size is ", stride, "; at least ",
                     sizeof(fj_arg), " expected"));
  }
  // The rule's last part: every element is read in place, so each must be
  // aligned like the first.
  return absl::InvalidArgumentError(absl::StrCat(
      "args[0].struct_size is ", stride, "; a multiple of alignof(fj_arg) = ",
      kAlign, " expected (sizeof(fj_arg) is one)"));
}

fj_kernel_info FjKernelInfo(const LoadedKernel& k) {
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.lowered_name, sizeof(info.lowered_name), "%s",
                k.entry->lowered_name.c_str());
  info.num_params = static_cast<int32_t>(k.entry->params.size());
  info.param_bytes = k.entry->param_bytes;
  info.max_threads_per_block = k.max_threads_per_block;
  info.static_shared_bytes = k.static_shared_bytes;
  info.num_regs = k.num_regs;
  info.uses_thunk = k.thunk.load(std::memory_order_acquire) != nullptr ? 1 : 0;
  return info;
}

void AddKernelAttributes(const KernelAttributes& a, fj_kernel_info& info) {
  info.const_bytes = a.const_bytes;
  info.local_bytes = a.local_bytes;
  info.max_dynamic_shared_bytes = a.max_dynamic_shared_bytes;
  info.ptx_version = a.ptx_version;
  info.binary_version = a.binary_version;
  info.cache_mode_ca = a.cache_mode_ca;
  info.preferred_carveout = a.preferred_carveout;
}

fj_global_info FjGlobalInfo(const ModuleLoader::Global& g) {
  fj_global_info info{};
  info.struct_size = sizeof(info);
  info.address = g.address;
  info.bytes = g.bytes;
  std::snprintf(info.lowered_name, sizeof(info.lowered_name), "%s",
                g.symbol.c_str());
  return info;
}

}  // namespace fleetjit::capi
