// The Runtime:: methods of ABI 1.3's module entries: globals (fj_module_get
// _global, fj_module_global_write/read), kernel attributes and occupancy
// (fj_kernel_info_get's new fields, fj_kernel_set_attribute,
// fj_kernel_occupancy, fj_kernel_suggest_block), stream priorities and the
// persisting L2 set-aside. Each checks its range before the driver is
// called and names the call when the driver refuses.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/launch/launch.h"
#include "runtime/runtime.h"

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

absl::StatusOr<ModuleLoader::Global> Runtime::FindGlobal(const Module& module,
                                                         absl::string_view name,
                                                         int ordinal) {
  if (name.empty()) return absl::InvalidArgumentError("name is empty");
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  if (dev->is_poisoned()) return dev->poisoned();
  return loader_->LoadGlobal(module.record, name, ordinal);
}

absl::Status Runtime::CopyGlobal(const Module& module, absl::string_view name,
                                 int ordinal, uint64_t offset, void* host,
                                 uint64_t bytes, bool to_global,
                                 Stream* stream) {
  if (host == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        to_global ? "src" : "dst", " is NULL but bytes is ", bytes));
  }
  if (stream != nullptr && stream->device().facts().ordinal != ordinal) {
    return absl::InvalidArgumentError(
        absl::StrCat("stream is of device ", stream->device().facts().ordinal,
                     ", the global was asked for on device ", ordinal));
  }
  FJ_ASSIGN_OR_RETURN(ModuleLoader::Global g,
                      FindGlobal(module, name, ordinal));
  if (offset > g.bytes || bytes > g.bytes - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("bytes [", offset, ", ", offset + bytes,
                     ") run past the end of global '", name, "', which has ",
                     g.bytes, " bytes"));
  }
  if (bytes == 0) return absl::OkStatus();
  const DriverApi& api = *driver_;
  const CUdeviceptr at = g.address + offset;
  CUresult r;
  const char* call;
  if (stream == nullptr) {
    r = to_global ? api.cuMemcpyHtoD(at, host, bytes)
                  : api.cuMemcpyDtoH(host, at, bytes);
    call = to_global ? "cuMemcpyHtoD" : "cuMemcpyDtoH";
  } else {
    r = to_global ? api.cuMemcpyHtoDAsync(at, host, bytes, stream->handle())
                  : api.cuMemcpyDtoHAsync(host, at, bytes, stream->handle());
    call = to_global ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
  }
  return CheckStickyError(*g.device, api, r,
                          absl::StrCat(to_global ? "writing" : "reading",
                                       " global '", name, "': ", call));
}

absl::StatusOr<Runtime::KernelAttributes> Runtime::ReadKernelAttributes(
    const LoadedKernel& k) {
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

absl::Status Runtime::SetKernelAttribute(LoadedKernel& k, int attr, int value) {
  FJ_RETURN_IF_ERROR(EnterKernelContext(k));
  const DeviceFacts& f = k.device->facts();
  CUfunction_attribute cu_attr;
  const char* what;
  if (attr == FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES) {
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
  } else if (attr == FJ_KERNEL_ATTR_PREFERRED_CARVEOUT) {
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
                     FJ_KERNEL_ATTR_LAST, ")"));
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

absl::StatusOr<int> Runtime::KernelOccupancy(const LoadedKernel& k,
                                             uint32_t threads,
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

absl::StatusOr<std::pair<int, int>> Runtime::SuggestBlock(
    const LoadedKernel& k, uint32_t dynamic_shared) {
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

absl::StatusOr<std::pair<int, int>> Runtime::StreamPriorityRange(int ordinal) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  return Stream::PriorityRange(*driver_, *dev);
}

absl::StatusOr<Stream*> Runtime::CreateStreamWithPriority(int ordinal,
                                                          int priority) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  FJ_ASSIGN_OR_RETURN(
      std::unique_ptr<Stream> stream,
      Stream::CreateWithPriority(this, *driver_, *dev, priority));
  return registry_.AddStream(std::move(stream));
}

absl::StatusOr<uint64_t> Runtime::SetPersistingL2(int ordinal, uint64_t bytes) {
  FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
  const DeviceFacts& f = dev->facts();
  if (f.cc_major < 8 || f.max_persisting_l2_bytes <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", ordinal, " (sm_", f.arch(),
        ") has no persisting L2 set-aside (sm_80 and newer have it)"));
  }
  if (bytes > static_cast<uint64_t>(f.max_persisting_l2_bytes)) {
    return absl::OutOfRangeError(absl::StrCat(
        "a persisting L2 set-aside of ", bytes, " bytes exceeds device ",
        ordinal, "'s maximum, ", f.max_persisting_l2_bytes, " bytes"));
  }
  if (driver_->cuCtxSetLimit == nullptr || driver_->cuCtxGetLimit == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuCtxSetLimit / cuCtxGetLimit");
  }
  if (dev->is_poisoned()) return dev->poisoned();
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status());
  FJ_RETURN_IF_ERROR(
      CheckCu(*driver_,
              driver_->cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, bytes),
              "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)"),
      absl::StrCat("setting aside L2 on device ", ordinal));
  size_t set = 0;
  FJ_RETURN_IF_ERROR(
      CheckCu(*driver_,
              driver_->cuCtxGetLimit(&set, CU_LIMIT_PERSISTING_L2_CACHE_SIZE),
              "cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)"),
      absl::StrCat("reading the L2 set-aside of device ", ordinal));
  return static_cast<uint64_t>(set);
}

}  // namespace fleetjit
