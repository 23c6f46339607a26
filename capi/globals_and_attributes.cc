// The C ABI's whole-module entries (since 1.3): build logs, globals, kernel
// attributes and occupancy, stream priorities, the persisting L2. Written
// as capi/fleetjit.cc's entries are (one chain inside Guard; see there).
#include "base/raw_enum.h"
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/entry.h"
#include "fleetjit/fleetjit.h"

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

extern "C" {

// ------------------------------------------- the whole module (since 1.3)
// Globals and stream priorities (the facade, runtime/runtime.cc), kernel
// attributes and occupancy (runtime/load/kernel_attributes.h), the
// persisting L2 (Device::SetPersistingL2, runtime/device/device.h).

FJ_API fj_status* fj_module_build_log(const fj_module* module,
                                      const char** out_log, size_t* out_size) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    if (out_log == nullptr) return NullArgument("out_log");
    const std::string& log = m->record.artifact->log;
    *out_log = log.c_str();
    if (out_size != nullptr) *out_size = log.size();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_get_global(fj_module* module, fj_str name,
                                       int32_t device,
                                       fj_global_info* out_info) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    FJ_RETURN_IF_ERROR(
        CheckOutStruct(out_info, "out_info", sizeof(fj_global_info)));
    FJ_ASSIGN_OR_RETURN(std::string global, ReadStr(name, "name"));
    FJ_ASSIGN_OR_RETURN(ModuleLoader::Global g,
                        m->runtime->FindGlobal(*m, global, device));
    return WriteOutStruct(FjGlobalInfo(g), out_info);
  });
}

namespace {
fj_status* GlobalCopyEntry(fj_module* module, fj_str name, int32_t device,
                           uint64_t offset, void* host, uint64_t bytes,
                           bool to_global, fj_stream* stream) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(std::string global, ReadStr(name, "name"));
    FJ_ASSIGN_OR_RETURN(Stream * s, StreamOf(stream, m->runtime));
    return m->runtime->CopyGlobal(*m, global, device, offset, host, bytes,
                                  to_global, s);
  });
}
}  // namespace

FJ_API fj_status* fj_module_global_write(fj_module* module, fj_str name,
                                         int32_t device, uint64_t offset,
                                         const void* src, uint64_t bytes,
                                         fj_stream* stream) {
  return GlobalCopyEntry(module, name, device, offset, const_cast<void*>(src),
                         bytes, /*to_global=*/true, stream);
}

FJ_API fj_status* fj_module_global_read(fj_module* module, fj_str name,
                                        int32_t device, uint64_t offset,
                                        void* dst, uint64_t bytes,
                                        fj_stream* stream) {
  return GlobalCopyEntry(module, name, device, offset, dst, bytes,
                         /*to_global=*/false, stream);
}

// The room of kernel attributes speaks C++ (runtime/load/kernel_attributes.h)
// and numbers the attributes as the ABI does.
static_assert(kKernelAttrMaxDynamicSharedBytes ==
              FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES);
static_assert(kKernelAttrPreferredCarveout ==
              FJ_KERNEL_ATTR_PREFERRED_CARVEOUT);
static_assert(kKernelAttrLast == FJ_KERNEL_ATTR_LAST);

FJ_API fj_status* fj_kernel_set_attribute(fj_kernel* kernel,
                                          fj_kernel_attr attr, int32_t value) {
  return OnHandle<GetKernel>(kernel, [&](KernelRef* k) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(int32_t a,
                        CheckEnum(RawEnum(attr), "attr", "fj_kernel_attr",
                                  FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES,
                                  FJ_KERNEL_ATTR_LAST));
    return fleetjit::SetKernelAttribute(*k->kernel, a, value);
  });
}

FJ_API fj_status* fj_kernel_occupancy(const fj_kernel* kernel,
                                      uint32_t block_threads,
                                      uint32_t dynamic_shared_bytes,
                                      int32_t* out_blocks_per_sm) {
  return OnHandle<GetKernel>(kernel, [&](KernelRef* k) -> absl::Status {
    if (out_blocks_per_sm == nullptr) return NullArgument("out_blocks_per_sm");
    FJ_ASSIGN_OR_RETURN(*out_blocks_per_sm,
                        fleetjit::KernelOccupancy(*k->kernel, block_threads,
                                                  dynamic_shared_bytes));
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_kernel_suggest_block(const fj_kernel* kernel,
                                          uint32_t dynamic_shared_bytes,
                                          int32_t* out_block_threads,
                                          int32_t* out_min_grid) {
  return OnHandle<GetKernel>(kernel, [&](KernelRef* k) -> absl::Status {
    if (out_block_threads == nullptr) return NullArgument("out_block_threads");
    FJ_ASSIGN_OR_RETURN(auto suggested, fleetjit::SuggestBlock(
                                            *k->kernel, dynamic_shared_bytes));
    *out_block_threads = suggested.first;
    if (out_min_grid != nullptr) *out_min_grid = suggested.second;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_stream_priority_range(fj_runtime* runtime, int32_t ordinal,
                                           int32_t* out_least,
                                           int32_t* out_greatest) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(auto range, rt->StreamPriorityRange(ordinal));
    if (out_least != nullptr) *out_least = range.first;
    if (out_greatest != nullptr) *out_greatest = range.second;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_stream_create_with_priority(fj_runtime* runtime,
                                                 int32_t ordinal,
                                                 int32_t priority,
                                                 fj_stream** out_stream) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Stream * s,
                        rt->CreateStreamWithPriority(ordinal, priority));
    return Publish(rt, HandleType::kStream, s, out_stream);
  });
}

FJ_API fj_status* fj_device_set_persisting_l2(fj_runtime* runtime,
                                              int32_t ordinal, uint64_t bytes,
                                              uint64_t* out_bytes) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(uint64_t set, rt->SetPersistingL2(ordinal, bytes));
    if (out_bytes != nullptr) *out_bytes = set;
    return absl::OkStatus();
  });
}

}  // extern "C"
