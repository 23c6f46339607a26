// The C ABI: a thin shim over the runtime (see LevelDB's db/c.cc). Each
// handle names one C++ object in the checked handle table (handles.h):
// fj_runtime a Runtime, fj_module a Module, fj_kernel a KernelRef,
// fj_stream a Stream, fj_build a PendingBuild (runtime/registry.h).
//
// Every entry is one chain inside Guard (entry.h), which lets no exception
// escape: look the handles up, read the arguments (convert.h: struct_size,
// enum ranges, NULLs), make one call into the runtime, and write the result
// (convert.h again); ToFjStatus converts the status. Lifetimes, copies,
// streams and poisoning are the runtime's; this file holds no state and no
// lock.
#include "fleetjit/fleetjit.h"

#include <cstddef>
#include <cstdint>

#include "base/raw_enum.h"
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/entry.h"

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

namespace {

// One of the four plain copies (fj_memcpy_*, fj_memset_d8).
fj_status* CopyEntry(fj_runtime* runtime, fj_stream* stream,
                     const CopyRequest& request) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Stream * s, StreamOf(stream, rt));
    return rt->CopyMemory(request, s);
  });
}

}  // namespace

extern "C" {

FJ_API uint32_t fj_version(void) {
  return (uint32_t{FJ_VERSION_MAJOR} << 16) | FJ_VERSION_MINOR;
}

// The enum arguments are read as ints (RawEnum): any value may arrive.
FJ_API const char* fj_copy_impl_name(fj_copy_impl impl) {
  return CopyImplName(RawEnum(impl));
}
FJ_API const char* fj_feature_name(fj_feature feature) {
  return FeatureName(RawEnum(feature));
}
FJ_API const char* fj_support_name(fj_support support) {
  return SupportName(RawEnum(support));
}

FJ_API fj_status* fj_copy_plan_for_target(fj_str target, fj_copy_impl impl,
                                          fj_copy_plan* out_plan) {
  return Guard([&]() -> absl::Status {
    FJ_RETURN_IF_ERROR(
        CheckOutStruct(out_plan, "out_plan", sizeof(fj_copy_plan)));
    FJ_ASSIGN_OR_RETURN(PlanRequest request,
                        ReadPlanRequest(target, RawEnum(impl)));
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan,
                        jit::MakeCopyPlan(request.target, request.impl));
    return WriteOutStruct(FjCopyPlan(plan), out_plan);
  });
}

// ---------------------------------------------------------------- runtime

FJ_API fj_status* fj_runtime_create(const fj_runtime_options* options,
                                    fj_runtime** out_runtime) {
  return Guard([&]() -> absl::Status {
    if (out_runtime == nullptr) return NullArgument("out_runtime");
    FJ_ASSIGN_OR_RETURN(RuntimeOptions opts, ReadRuntimeOptions(options));
    FJ_RETURN_IF_ERROR(ApplyEnvironment(opts), "reading FLEETJIT_* variables");
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt,
                        Runtime::Create(std::move(opts)),
                        "creating the runtime");
    return PublishRuntime(std::move(rt), out_runtime);
  });
}

FJ_API fj_status* fj_runtime_destroy(fj_runtime* runtime) {
  return Guard([&]() -> absl::Status {
    FJ_RETURN_IF_ERROR(CheckCanWaitHere());
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime));  // fork: refused
    FJ_ASSIGN_OR_RETURN(
        rt, Take<Runtime>(runtime, HandleType::kRuntime, "runtime"));
    if (rt == nullptr) return absl::OkStatus();
    Graveyard taken = rt->TakeAll(ReleaseTag);
    absl::Status buried = BuryOutsideGate(rt, [&] { return taken.Bury(); });
    Runtime::Unpin(rt);  // the handle's pin
    return buried;
  });
}

FJ_API const char* fj_runtime_driver_error(const fj_runtime* runtime) {
  CallScope in_gate;
  auto rt = GetRuntime(runtime);
  if (!rt.ok()) return "invalid runtime handle";
  const absl::Status& s = (*rt)->driver_status();
  return s.ok() ? "" : s.message().data();
}

// ---------------------------------------------------------------- devices

FJ_API fj_status* fj_device_count(const fj_runtime* runtime,
                                  int32_t* out_count) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_count == nullptr) return NullArgument("out_count");
    *out_count = rt->device_count();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_device_info_get(fj_runtime* runtime, int32_t ordinal,
                                     fj_device_info* out_info) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_RETURN_IF_ERROR(CheckOutStruct(
        out_info, "out_info", offsetof(fj_device_info, cooperative_launch)));
    FJ_ASSIGN_OR_RETURN(DeviceReport report, rt->DescribeDevice(ordinal));
    return WriteOutStruct(FjDeviceInfo(report), out_info);
  });
}

// ---------------------------------------------------------------- memory

FJ_API fj_status* fj_mem_alloc(fj_runtime* runtime, int32_t ordinal,
                               uint64_t bytes, uint64_t* out_address) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_address == nullptr) return NullArgument("out_address");
    if (bytes > static_cast<uint64_t>(INT64_MAX)) {
      // A negative size converted by the caller: not a request for memory.
      return absl::InvalidArgumentError(absl::StrCat(
          "fj_mem_alloc: bytes ", bytes, " is above 2^63-1: a negative size (",
          static_cast<int64_t>(bytes), ") converted to uint64_t?"));
    }
    FJ_ASSIGN_OR_RETURN(*out_address, rt->Allocate(ordinal, bytes));
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_mem_free(fj_runtime* runtime, uint64_t address) {
  return OnRuntime(runtime, [&](Runtime* rt) { return rt->Free(address); });
}

using Kind = CopyRequest::Kind;
FJ_API fj_status* fj_memcpy_htod(fj_runtime* runtime, uint64_t dst,
                                 const void* src, uint64_t bytes,
                                 fj_stream* stream) {
  return CopyEntry(runtime, stream,
                   {.kind = Kind::kHtoD,
                    .dst_device = dst,
                    .src_host = src,
                    .bytes = bytes});
}
FJ_API fj_status* fj_memcpy_dtoh(fj_runtime* runtime, void* dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream) {
  return CopyEntry(runtime, stream,
                   {.kind = Kind::kDtoH,
                    .dst_host = dst,
                    .src_device = src,
                    .bytes = bytes});
}
FJ_API fj_status* fj_memcpy_dtod(fj_runtime* runtime, uint64_t dst,
                                 uint64_t src, uint64_t bytes,
                                 fj_stream* stream) {
  return CopyEntry(runtime, stream,
                   {.kind = Kind::kDtoD,
                    .dst_device = dst,
                    .src_device = src,
                    .bytes = bytes});
}
FJ_API fj_status* fj_memset_d8(fj_runtime* runtime, uint64_t dst, uint8_t value,
                               uint64_t bytes, fj_stream* stream) {
  return CopyEntry(
      runtime, stream,
      {.kind = Kind::kSet, .dst_device = dst, .value = value, .bytes = bytes});
}

// ---------------------------------------------------------------- streams

FJ_API fj_status* fj_stream_create(fj_runtime* runtime, int32_t ordinal,
                                   fj_stream** out_stream) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Stream * s, rt->CreateStream(ordinal));
    return Publish(rt, HandleType::kStream, s, out_stream);
  });
}

FJ_API fj_status* fj_stream_synchronize(fj_stream* stream) {
  return OnHandle<GetStream>(
      stream, [&](Stream* s) -> absl::Status { return s->Synchronize(); });
}

FJ_API fj_status* fj_stream_destroy(fj_stream* stream) {
  return OnDestroy<GetStream>(stream, [&](Stream* s) -> absl::Status {
    Runtime* rt = s->owner();
    std::unique_ptr<Stream> taken = rt->registry().TakeStream(s);
    return BuryOutsideGate(rt, [&] {
      return taken == nullptr ? absl::OkStatus() : taken->Close();
    });
  });
}

// ---------------------------------------------------------------- modules

FJ_API fj_status* fj_module_build(fj_runtime* runtime,
                                  const fj_build_options* options,
                                  fj_module** out_module) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(BuildSpec spec, ReadBuildSpec(options));
    RuntimePin pin(rt);
    absl::StatusOr<Module*> m;
    {
      OutsideGate blocking;  // a compile: destroys elsewhere need not wait
      m = rt->BuildModule(spec);
    }
    if (!m.ok()) return m.status();
    return Publish(rt, HandleType::kModule, *m, out_module);
  });
}

FJ_API fj_status* fj_module_info_get(const fj_module* module,
                                     fj_module_info* out_info) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    FJ_RETURN_IF_ERROR(
        CheckOutStruct(out_info, "out_info", sizeof(fj_module_info)));
    return WriteOutStruct(FjModuleInfo(m->record), out_info);
  });
}

FJ_API fj_status* fj_module_image(const fj_module* module,
                                  const void** out_data, size_t* out_size) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    if (out_data == nullptr) return NullArgument("out_data");
    if (out_size == nullptr) return NullArgument("out_size");
    *out_data = m->record.artifact->image.data();
    *out_size = m->record.artifact->image.size();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_destroy(fj_module* module) {
  return OnDestroy<GetModule>(module, [&](Module* m) -> absl::Status {
    Runtime* rt = m->runtime;
    std::unique_ptr<Module> taken = rt->registry().TakeModule(m, ReleaseTag);
    return BuryOutsideGate(rt, [&] {
      taken.reset();
      return absl::OkStatus();
    });
  });
}

FJ_API fj_status* fj_module_get_kernel(fj_module* module, fj_str name,
                                       int32_t device, fj_kernel** out_kernel) {
  return OnHandle<GetModule>(module, [&](Module* m) -> absl::Status {
    if (out_kernel == nullptr) return NullArgument("out_kernel");
    FJ_ASSIGN_OR_RETURN(std::string kernel_name, ReadStr(name, "name"));
    FJ_ASSIGN_OR_RETURN(KernelRef * k,
                        m->runtime->OpenKernel(*m, kernel_name, device));
    // On failure the unnamed KernelRef goes with its module.
    return PublishKernel(*m, k, out_kernel);
  });
}

FJ_API fj_status* fj_kernel_info_get(const fj_kernel* kernel,
                                     fj_kernel_info* out_info) {
  return OnHandle<GetKernel>(kernel, [&](KernelRef* k) -> absl::Status {
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info",
                                      offsetof(fj_kernel_info, const_bytes)));
    fj_kernel_info info = FjKernelInfo(*k->kernel);
    // 1.3's fields, read from the driver only for a caller that has them,
    // and left 0 once a kernel fault poisoned the device (the 1.0 fields
    // still answer then, as they always did).
    if (StructSize(out_info) > offsetof(fj_kernel_info, const_bytes) &&
        !k->kernel->device->is_poisoned()) {
      FJ_ASSIGN_OR_RETURN(KernelAttributes a,
                          fleetjit::ReadKernelAttributes(*k->kernel));
      AddKernelAttributes(a, info);
    }
    return WriteOutStruct(info, out_info);
  });
}

FJ_API fj_status* fj_tensor_arg_check(const fj_tensor_arg* arg,
                                      fj_tensor_check* out_check) {
  return Guard([&]() -> absl::Status {
    if (arg == nullptr) return NullArgument("arg");
    FJ_RETURN_IF_ERROR(
        CheckOutStruct(out_check, "out_check", sizeof(fj_tensor_check)));
    FJ_ASSIGN_OR_RETURN(fj_tensor_check check, CheckTensorArg(arg));
    return WriteOutStruct(check, out_check);
  });
}

// ---------------------------------------------------------------- launch

// The launch path looks its handles up as plain pointers and reads a
// current caller's struct in place; a status (and a StatusOr) is made only
// for bad input, by the checked helpers that name what is wrong (about 180
// instructions per launch here, callgrind over the fake driver).
FJ_API __attribute__((hot)) fj_status* fj_launch(fj_kernel* kernel,
                                                 const fj_launch_config* config,
                                                 const fj_arg* args,
                                                 size_t num_args) {
  return Guard([&]() -> absl::Status {
    auto* k = static_cast<KernelRef*>(
        LookupHandle(HandleValue(kernel), HandleType::kKernel));
    // (The hints lay the common case out as one straight run of code.)
    if (__builtin_expect(k == nullptr, 0)) return GetKernel(kernel).status();
    LaunchConfig lc;
    const fj_stream* stream_handle;
    // In place only when aligned: a misaligned struct is copied, as before.
    if (__builtin_expect(config != nullptr &&
                             reinterpret_cast<uintptr_t>(config) %
                                     alignof(fj_launch_config) ==
                                 0 &&
                             StructSize(config) >= sizeof(fj_launch_config),
                         1)) {
      ReadLaunchConfig(*config, &lc);
      stream_handle = config->stream;
    } else {
      fj_launch_config cfg;
      // 1.0-1.2 callers' structs end before flags.
      FJ_RETURN_IF_ERROR(
          ReadStruct(config, "config", offsetof(fj_launch_config, flags), cfg));
      ReadLaunchConfig(cfg, &lc);
      stream_handle = cfg.stream;
    }
    Runtime* rt = k->module->runtime;
    Stream* stream = nullptr;
    if (stream_handle != nullptr) {
      stream = FindStream(stream_handle, rt);
      if (__builtin_expect(stream == nullptr, 0)) {
        return StreamOf(stream_handle, rt).status();
      }
    }
    size_t stride = 0;
    if (num_args != 0) {
      stride = ArgStrideOrZero(args);
      if (__builtin_expect(stride == 0, 0)) {
        return ReadArgStride(args, num_args).status();
      }
    }
    return rt->LaunchKernel(*k, lc, stream, args, num_args, stride);
  });
}

// ---------------------------------------------------------------- cache

FJ_API fj_status* fj_cache_stats_get(fj_runtime* runtime,
                                     fj_cache_stats* out_stats) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    // 1.0 callers' structs end before the remote tier's fields.
    const size_t v1_size = offsetof(fj_cache_stats, remote_state);
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_stats, "out_stats", v1_size));
    return WriteOutStruct(FjCacheStats(rt->cache_stats()), out_stats);
  });
}

FJ_API fj_status* fj_cache_flush(fj_runtime* runtime, uint32_t timeout_ms) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    rt->WaitForBackgroundWork();
    if (rt->cache().FlushRemote(ReadTimeout(timeout_ms)))
      return absl::OkStatus();
    return absl::DeadlineExceededError(absl::StrCat(
        "remote cache publications still queued after ", timeout_ms, " ms"));
  });
}

FJ_API fj_status* fj_cache_clear(fj_runtime* runtime) {
  return OnRuntime(runtime, [&](Runtime* rt) { return rt->cache().Clear(); });
}

// ------------------------------------------ copies, prefetches, peer access
// Thin entries over CopyEngine (runtime/copy/copy_engine.h); the
// descriptors become specs (runtime/copy/copy_request.h) in capi/convert.cc.

FJ_API fj_status* fj_copy(fj_runtime* runtime, const fj_copy_desc* desc,
                          fj_stream* stream) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(copy::CopySpec spec, ReadCopyDesc(desc));
    FJ_ASSIGN_OR_RETURN(CopyEngine::Stream s, CopyStreamOf(stream, rt));
    return rt->copy().CopyTensorWindow(spec, s);
  });
}

FJ_API fj_status* fj_prefetch(fj_runtime* runtime, const fj_prefetch_desc* desc,
                              fj_stream* stream) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(copy::PrefetchSpec spec, ReadPrefetchDesc(desc));
    FJ_ASSIGN_OR_RETURN(CopyEngine::Stream s, CopyStreamOf(stream, rt));
    return rt->copy().Prefetch(spec, s);
  });
}

FJ_API fj_status* fj_peer_query(fj_runtime* runtime, int32_t reader,
                                int32_t owner, int32_t* out_can_access) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_can_access == nullptr) return NullArgument("out_can_access");
    FJ_ASSIGN_OR_RETURN(bool can, rt->copy().CanAccessPeer(reader, owner));
    return WriteBool(can, out_can_access, "out_can_access");
  });
}

FJ_API fj_status* fj_peer_enable(fj_runtime* runtime, int32_t reader,
                                 int32_t owner) {
  return OnRuntime(runtime, [&](Runtime* rt) {
    return rt->copy().EnablePeer(reader, owner);
  });
}

FJ_API fj_status* fj_peer_disable(fj_runtime* runtime, int32_t reader,
                                  int32_t owner) {
  return OnRuntime(runtime, [&](Runtime* rt) {
    return rt->copy().DisablePeer(reader, owner);
  });
}

// ---------------------------------------------------------------- CUDA's
// headers

FJ_API fj_status* fj_runtime_include_dir(fj_runtime* runtime, size_t index,
                                         size_t* out_count,
                                         const char** out_path,
                                         const char** out_origin) {
  return OnRuntime(runtime, [&](Runtime* rt) {
    return WriteIncludeDir(rt->cuda_include_dirs(), index, out_count, out_path,
                           out_origin);
  });
}

// ------------------------------------------- in a server (since 1.1)
// The caller's streams; log and start-up options are read by
// ReadRuntimeOptions (convert.cc) and applied by Runtime::Create.

FJ_API fj_status* fj_stream_wrap(fj_runtime* runtime, int32_t device,
                                 uint64_t cu_stream, fj_stream** out_stream) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Stream * s, rt->WrapStream(device, cu_stream),
                        "fj_stream_wrap");
    return Publish(rt, HandleType::kStream, s, out_stream);
  });
}

}  // extern "C"
