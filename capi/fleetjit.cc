// The C ABI: a thin shim over the runtime (see LevelDB's db/c.cc). Each
// handle names one C++ object in the checked handle table (handles.h):
// fj_runtime a Runtime, fj_module a Module, fj_kernel a KernelRef, fj_stream
// a Stream. Every entry validates its inputs (NULLs, struct_size, enum
// ranges, handles), unwraps, makes one call into the runtime, and converts
// the result with ToFjStatus; Guard lets no exception escape. fj_build is a
// PendingBuild (runtime/registry.h). Lifetimes,
// copies, streams and poisoning are the runtime's (runtime/registry.h,
// memory.h, stream.h, device.h); this file holds no state and no lock.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/handles.h"
#include "capi/status.h"
#include "fleetjit/fleetjit.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/runtime.h"

namespace fleetjit::capi {
namespace {

// Runs `body`, turning any exception into an INTERNAL status.
template <typename F>
fj_status* Guard(F&& body) {
  try {
    return ToFjStatus(body());
  } catch (const std::bad_alloc&) {
    return ToFjStatus(absl::ResourceExhaustedError("out of host memory"));
  } catch (const std::exception& e) {
    return ToFjStatus(absl::InternalError(absl::StrCat("unexpected exception: ", e.what())));
  } catch (...) {
    return ToFjStatus(absl::InternalError("unexpected exception"));
  }
}

absl::Status NotLive(const char* name, const char* extra = "") {
  return absl::InvalidArgumentError(absl::StrCat(
      name, " is not a live fj_", name, " handle (destroyed or foreign", extra, ")"));
}

// The object behind a caller's handle of kind `type`, or a status naming
// the argument: NULL, or not a live handle of that kind (destroyed, foreign,
// forged, or a handle of another kind).
template <typename Object, typename Handle>
absl::StatusOr<Object*> LookUp(const Handle* h, HandleType type, const char* name,
                               const char* extra = "") {
  if (h == nullptr) return NullArgument(name);
  auto* obj = static_cast<Object*>(LookupHandle(HandleValue(h), type));
  if (obj == nullptr) return NotLive(name, extra);
  return obj;
}
absl::StatusOr<Runtime*> GetRuntime(const fj_runtime* h) {
  return LookUp<Runtime>(h, HandleType::kRuntime, "runtime");
}
absl::StatusOr<Module*> GetModule(const fj_module* h) {
  return LookUp<Module>(h, HandleType::kModule, "module");
}
absl::StatusOr<KernelRef*> GetKernel(const fj_kernel* h) {
  return LookUp<KernelRef>(h, HandleType::kKernel, "kernel", ", or its module was destroyed");
}
// The stream of an optional fj_stream, checking it belongs to `rt`.
absl::StatusOr<Stream*> StreamOf(const fj_stream* h, Runtime* rt) {
  if (h == nullptr) return nullptr;
  FJ_ASSIGN_OR_RETURN(Stream * s, LookUp<Stream>(h, HandleType::kStream, "stream"), "");
  if (s->owner() != rt) return absl::InvalidArgumentError("stream belongs to another runtime");
  return s;
}

// Invalidates the handle `tag` of an object a runtime's destroy cascade
// takes down (see runtime/registry.h).
bool ReleaseTag(ObjectKind kind, uint64_t tag) {
  static constexpr HandleType kTypes[] = {HandleType::kModule, HandleType::kKernel,
                                          HandleType::kStream, HandleType::kBuild};
  return ReleaseHandle(tag, kTypes[static_cast<int>(kind)]) != nullptr;
}

// Names `object` with a new handle in *out and in object->tag.
template <typename Handle, typename Object>
absl::Status Publish(HandleType type, Object* object, Handle** out) {
  uint64_t h = RegisterHandle(type, object);
  if (h == 0) return absl::ResourceExhaustedError("too many live handles");
  object->tag = h;
  *out = AsHandle<Handle>(h);
  return absl::OkStatus();
}

// One of the four copies: validates the handles, then one runtime call.
fj_status* CopyEntry(fj_runtime* runtime, fj_stream* stream, const CopyRequest& request) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    FJ_ASSIGN_OR_RETURN(Stream * s, StreamOf(stream, rt), "");
    return rt->Copy(request, s);
  });
}

}  // namespace
}  // namespace fleetjit::capi

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

extern "C" {

FJ_API uint32_t fj_version(void) {
  return (uint32_t{FJ_VERSION_MAJOR} << 16) | FJ_VERSION_MINOR;
}

FJ_API const char* fj_copy_impl_name(fj_copy_impl impl) {
  if (impl == FJ_COPY_IMPL_AUTO) return "auto";
  if (impl < FJ_COPY_IMPL_AUTO || impl > FJ_COPY_IMPL_LAST) return "unknown";
  return jit::CopyImplName(static_cast<jit::CopyImpl>(impl - 1)).data();
}

FJ_API const char* fj_feature_name(fj_feature feature) {
  if (feature < 0 || feature >= FJ_FEATURE_COUNT) return "unknown";
  return jit::FeatureName(static_cast<jit::Feature>(feature)).data();
}

FJ_API const char* fj_support_name(fj_support support) {
  if (support == FJ_SUPPORT_NATIVE) return "native";
  if (support == FJ_SUPPORT_EMULATED) return "emulated";
  return "unknown";
}

FJ_API fj_status* fj_copy_plan_for_target(fj_str target, fj_copy_impl impl,
                                          fj_copy_plan* out_plan) {
  return Guard([&]() -> absl::Status {
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_plan, "out_plan", sizeof(fj_copy_plan)), "");
    FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(target, "target"), "");
    FJ_ASSIGN_OR_RETURN(jit::Target t, jit::ParseTarget(name), "");
    FJ_ASSIGN_OR_RETURN(std::optional<jit::CopyImpl> forced, ReadCopyImpl(impl), "");
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, jit::MakeCopyPlan(t, forced), "");
    fj_copy_plan full{};
    FillPlan(plan, full);
    WriteOutStruct(full, out_plan);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- runtime

FJ_API fj_status* fj_runtime_create(const fj_runtime_options* options,
                                    fj_runtime** out_runtime) {
  return Guard([&]() -> absl::Status {
    if (out_runtime == nullptr) return NullArgument("out_runtime");
    FJ_ASSIGN_OR_RETURN(RuntimeOptions opts, ReadRuntimeOptions(options), "");
    FJ_RETURN_IF_ERROR(ApplyEnvironment(opts), "reading FLEETJIT_* variables");
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create(std::move(opts)),
                        "creating the runtime");
    uint64_t h = RegisterHandle(HandleType::kRuntime, rt.get());
    if (h == 0) return absl::ResourceExhaustedError("too many live handles");
    rt.release();
    *out_runtime = AsHandle<fj_runtime>(h);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_runtime_destroy(fj_runtime* runtime) {
  return Guard([&]() -> absl::Status {
    if (runtime == nullptr) return absl::OkStatus();
    auto* rt = static_cast<Runtime*>(ReleaseHandle(HandleValue(runtime), HandleType::kRuntime));
    if (rt == nullptr) return NotLive("runtime");
    return Runtime::Destroy(std::unique_ptr<Runtime>(rt), ReleaseTag);
  });
}

FJ_API const char* fj_runtime_driver_error(const fj_runtime* runtime) {
  auto rt = GetRuntime(runtime);
  if (!rt.ok()) return "invalid runtime handle";
  const absl::Status& s = (*rt)->driver_status();
  return s.ok() ? "" : s.message().data();
}

// ---------------------------------------------------------------- devices

FJ_API fj_status* fj_device_count(const fj_runtime* runtime, int32_t* out_count) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_count == nullptr) return NullArgument("out_count");
    *out_count = rt->device_count();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_device_info_get(fj_runtime* runtime, int32_t ordinal,
                                     fj_device_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_device_info)), "");
    FJ_ASSIGN_OR_RETURN(DeviceReport report, rt->DescribeDevice(ordinal), "");
    WriteOutStruct(DeviceInfo(report), out_info);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- memory

FJ_API fj_status* fj_mem_alloc(fj_runtime* runtime, int32_t ordinal,
                               uint64_t bytes, uint64_t* out_address) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_address == nullptr) return NullArgument("out_address");
    FJ_ASSIGN_OR_RETURN(*out_address, rt->Allocate(ordinal, bytes), "");
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_mem_free(fj_runtime* runtime, uint64_t address) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    return rt->Free(address);
  });
}

FJ_API fj_status* fj_memcpy_htod(fj_runtime* runtime, uint64_t dst, const void* src,
                                 uint64_t bytes, fj_stream* stream) {
  CopyRequest r{CopyRequest::Kind::kHtoD};
  r.dst_device = dst, r.src_host = src, r.bytes = bytes;
  return CopyEntry(runtime, stream, r);
}
FJ_API fj_status* fj_memcpy_dtoh(fj_runtime* runtime, void* dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream) {
  CopyRequest r{CopyRequest::Kind::kDtoH};
  r.dst_host = dst, r.src_device = src, r.bytes = bytes;
  return CopyEntry(runtime, stream, r);
}
FJ_API fj_status* fj_memcpy_dtod(fj_runtime* runtime, uint64_t dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream) {
  CopyRequest r{CopyRequest::Kind::kDtoD};
  r.dst_device = dst, r.src_device = src, r.bytes = bytes;
  return CopyEntry(runtime, stream, r);
}
FJ_API fj_status* fj_memset_d8(fj_runtime* runtime, uint64_t dst, uint8_t value,
                               uint64_t bytes, fj_stream* stream) {
  CopyRequest r{CopyRequest::Kind::kSet};
  r.dst_device = dst, r.value = value, r.bytes = bytes;
  return CopyEntry(runtime, stream, r);
}

// ---------------------------------------------------------------- streams

FJ_API fj_status* fj_stream_create(fj_runtime* runtime, int32_t ordinal,
                                   fj_stream** out_stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Stream * s, rt->CreateStream(ordinal), "");
    absl::Status published = Publish(HandleType::kStream, s, out_stream);
    if (!published.ok()) rt->DestroyStream(s).IgnoreError();
    return published;
  });
}

FJ_API fj_status* fj_stream_synchronize(fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Stream * s, LookUp<Stream>(stream, HandleType::kStream, "stream"), "");
    return s->Synchronize();
  });
}

FJ_API fj_status* fj_stream_destroy(fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    if (stream == nullptr) return absl::OkStatus();
    auto* s = static_cast<Stream*>(ReleaseHandle(HandleValue(stream), HandleType::kStream));
    if (s == nullptr) return NotLive("stream");
    return s->owner()->DestroyStream(s);
  });
}

// ---------------------------------------------------------------- modules

FJ_API fj_status* fj_module_build(fj_runtime* runtime, const fj_build_options* options,
                                  fj_module** out_module) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(BuildSpec spec, ReadBuildSpec(options), "");
    FJ_ASSIGN_OR_RETURN(Module * m, rt->BuildModule(spec), "");
    absl::Status published = Publish(HandleType::kModule, m, out_module);
    if (!published.ok()) rt->DestroyModule(m, ReleaseTag);
    return published;
  });
}

FJ_API fj_status* fj_module_info_get(const fj_module* module, fj_module_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Module * m, GetModule(module), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_module_info)), "");
    WriteOutStruct(ModuleInfo(m->record), out_info);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_image(const fj_module* module, const void** out_data,
                                  size_t* out_size) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Module * m, GetModule(module), "");
    if (out_data == nullptr) return NullArgument("out_data");
    if (out_size == nullptr) return NullArgument("out_size");
    *out_data = m->record.artifact->image.data();
    *out_size = m->record.artifact->image.size();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_destroy(fj_module* module) {
  return Guard([&]() -> absl::Status {
    if (module == nullptr) return absl::OkStatus();
    auto* m = static_cast<Module*>(ReleaseHandle(HandleValue(module), HandleType::kModule));
    if (m == nullptr) return NotLive("module");
    m->runtime->DestroyModule(m, ReleaseTag);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_get_kernel(fj_module* module, fj_str name, int32_t device,
                                       fj_kernel** out_kernel) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Module * m, GetModule(module), "");
    if (out_kernel == nullptr) return NullArgument("out_kernel");
    FJ_ASSIGN_OR_RETURN(std::string kernel_name, ReadStr(name, "name"), "");
    FJ_ASSIGN_OR_RETURN(KernelRef * k, m->runtime->OpenKernel(*m, kernel_name, device), "");
    // On failure the untagged KernelRef goes with its module.
    return Publish(HandleType::kKernel, k, out_kernel);
  });
}

FJ_API fj_status* fj_kernel_info_get(const fj_kernel* kernel, fj_kernel_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(KernelRef * k, GetKernel(kernel), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_kernel_info)), "");
    WriteOutStruct(KernelInfo(*k->kernel), out_info);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_tensor_arg_check(const fj_tensor_arg* arg, fj_tensor_check* out_check) {
  return Guard([&]() -> absl::Status {
    if (arg == nullptr) return NullArgument("arg");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_check, "out_check", sizeof(fj_tensor_check)), "");
    FJ_ASSIGN_OR_RETURN(fj_tensor_check check, CheckTensorArg(arg), "");
    WriteOutStruct(check, out_check);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- launch

FJ_API fj_status* fj_launch(fj_kernel* kernel, const fj_launch_config* config,
                            const fj_arg* args, size_t num_args) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(KernelRef * k, GetKernel(kernel), "");
    fj_launch_config cfg;
    FJ_RETURN_IF_ERROR(ReadStruct(config, "config", sizeof(fj_launch_config), cfg), "");
    Runtime* rt = k->module->runtime;
    FJ_ASSIGN_OR_RETURN(Stream * stream, StreamOf(cfg.stream, rt), "");
    FJ_ASSIGN_OR_RETURN(size_t stride, ReadArgStride(args, num_args), "");
    return rt->LaunchKernel(*k, cfg, stream, args, num_args, stride);
  });
}

// ---------------------------------------------------------------- cache

FJ_API fj_status* fj_cache_stats_get(fj_runtime* runtime, fj_cache_stats* out_stats) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_stats, "out_stats", offsetof(fj_cache_stats, remote_state)), "");
    WriteOutStruct(CacheStatsOf(rt->cache_stats()), out_stats);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_cache_flush(fj_runtime* runtime, uint32_t timeout_ms) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    rt->WaitForBackgroundWork();
    if (!rt->cache().FlushRemote(absl::Milliseconds(timeout_ms))) {
      return absl::DeadlineExceededError(absl::StrCat(
          "remote cache publications still queued after ", timeout_ms, " ms"));
    }
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_cache_clear(fj_runtime* runtime) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    return rt->cache().Clear();
  });
}

}  // extern "C"

// ------------------------------------------ copies, prefetches, peer access
// Thin entries over CopyEngine (runtime/copy/copy_engine.h).

namespace fleetjit::capi {
namespace {

// The GPU and CUstream of an optional fj_stream of `rt`.
absl::StatusOr<CopyEngine::Stream> CopyStreamOf(const fj_stream* h, Runtime* rt) {
  FJ_ASSIGN_OR_RETURN(Stream * s, StreamOf(h, rt), "");
  if (s == nullptr) return CopyEngine::Stream{};
  return CopyEngine::Stream{s->device().facts().ordinal, s->handle()};
}

// An enum field as the int it is in memory (any value may be there).
int32_t RawInt(const void* object, size_t offset) {
  int32_t v;
  std::memcpy(&v, static_cast<const char*>(object) + offset, sizeof(v));
  return v;
}

}  // namespace
}  // namespace fleetjit::capi

extern "C" {

FJ_API fj_status* fj_copy(fj_runtime* runtime, const fj_copy_desc* desc, fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    fj_copy_desc d;
    FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_copy_desc), d), "");
    FJ_ASSIGN_OR_RETURN(CopyEngine::Stream s, CopyStreamOf(stream, rt), "");
    copy::CopySpec spec;
    spec.src = d.src;
    spec.dst = d.dst;
    spec.index = d.gather_index;
    std::copy(d.src_start, d.src_start + 5, spec.start.begin());
    spec.oob = RawInt(&d, offsetof(fj_copy_desc, oob));
    return rt->copy().Copy(spec, s);
  });
}

FJ_API fj_status* fj_prefetch(fj_runtime* runtime, const fj_prefetch_desc* desc,
                              fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    fj_prefetch_desc d;
    FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_prefetch_desc), d), "");
    FJ_ASSIGN_OR_RETURN(CopyEngine::Stream s, CopyStreamOf(stream, rt), "");
    copy::PrefetchSpec spec;
    spec.address = d.address;
    spec.bytes = d.bytes;
    spec.tensor = d.tensor;
    std::copy(d.tile_start, d.tile_start + 5, spec.start.begin());
    std::copy(d.tile_extent, d.tile_extent + 5, spec.extent.begin());
    spec.mode = RawInt(&d, offsetof(fj_prefetch_desc, mode));
    spec.reader_device = d.reader_device;
    spec.stage_address = d.stage_address;
    spec.stage_bytes = d.stage_bytes;
    return rt->copy().Prefetch(spec, s);
  });
}

FJ_API fj_status* fj_peer_query(fj_runtime* runtime, int32_t reader, int32_t owner,
                                int32_t* out_can_access) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_can_access == nullptr) return NullArgument("out_can_access");
    FJ_ASSIGN_OR_RETURN(bool can, rt->copy().CanAccessPeer(reader, owner), "");
    *out_can_access = can ? 1 : 0;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_peer_enable(fj_runtime* runtime, int32_t reader, int32_t owner) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    return rt->copy().EnablePeer(reader, owner);
  });
}

FJ_API fj_status* fj_peer_disable(fj_runtime* runtime, int32_t reader, int32_t owner) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    return rt->copy().DisablePeer(reader, owner);
  });
}

// ---------------------------------------------------------------- CUDA's headers

FJ_API fj_status* fj_runtime_include_dir(fj_runtime* runtime, size_t index,
                                         size_t* out_count, const char** out_path,
                                         const char** out_origin) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    const std::vector<jit::IncludeDir>& dirs = rt->cuda_include_dirs();
    if (out_count != nullptr) *out_count = dirs.size();
    if (out_path == nullptr && out_origin == nullptr) return absl::OkStatus();
    if (index >= dirs.size()) {
      return absl::OutOfRangeError(
          absl::StrCat("include folder ", index, " of ", dirs.size()));
    }
    if (out_path != nullptr) *out_path = dirs[index].path.c_str();
    if (out_origin != nullptr) *out_origin = dirs[index].origin.c_str();
    return absl::OkStatus();
  });
}

}  // extern "C"

// ------------------------------------------- in a server (since 1.1)
// The caller's streams (fj_stream_wrap); log and start-up options are read
// by ReadRuntimeOptions (convert.cc) and applied by Runtime::Create.

extern "C" {

FJ_API fj_status* fj_stream_wrap(fj_runtime* runtime, int32_t device, uint64_t cu_stream,
                                 fj_stream** out_stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Stream * s, rt->WrapStream(device, cu_stream), "fj_stream_wrap");
    absl::Status published = Publish(HandleType::kStream, s, out_stream);
    if (!published.ok()) rt->DestroyStream(s).IgnoreError();
    return published;
  });
}

}  // extern "C"

// ------------------------------------------- asynchronous builds, loading
// fj_build a PendingBuild (runtime/build_pool.h); fj_module_load over
// Runtime::LoadModule (runtime/module_import.h).

namespace fleetjit::capi {
namespace {

absl::StatusOr<PendingBuild*> GetBuild(const fj_build* h) {
  return LookUp<PendingBuild>(h, HandleType::kBuild, "build");
}

absl::StatusOr<ImageSpec> ReadImageSpec(const fj_module_load_options* options) {
  fj_module_load_options o;
  FJ_RETURN_IF_ERROR(ReadStruct(options, "options", sizeof(fj_module_load_options), o), "");
  if (o.image == nullptr || o.image_size == 0) {
    return absl::InvalidArgumentError("options->image is NULL or empty");
  }
  int kind = RawInt(&o, offsetof(fj_module_load_options, kind));
  if (kind < FJ_IMAGE_AUTO || kind > FJ_IMAGE_KIND_LAST) {
    return absl::InvalidArgumentError(absl::StrCat("options->kind ", kind, " is out of range"));
  }
  ImageSpec spec;
  spec.image.assign(static_cast<const char*>(o.image), o.image_size);
  static constexpr jit::ImageKind kKinds[] = {jit::ImageKind::kAuto, jit::ImageKind::kCubin,
                                              jit::ImageKind::kPtx, jit::ImageKind::kFatbin};
  spec.kind = kKinds[kind];
  FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(o.name, "options->name"), "");
  if (!name.empty()) spec.name = std::move(name);
  FJ_ASSIGN_OR_RETURN(std::string target, ReadStr(o.target, "options->target"), "");
  if (!target.empty()) {
    FJ_ASSIGN_OR_RETURN(spec.target, jit::ParseTarget(target), "options->target");
  }
  return spec;
}

}  // namespace
}  // namespace fleetjit::capi

extern "C" {

FJ_API fj_status* fj_module_build_async(fj_runtime* runtime, const fj_build_options* options,
                                        fj_build** out_build) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_build == nullptr) return NullArgument("out_build");
    FJ_ASSIGN_OR_RETURN(BuildSpec spec, ReadBuildSpec(options), "");  // copies every string
    PendingBuild* b = rt->SubmitBuild(std::move(spec));
    absl::Status published = Publish(HandleType::kBuild, b, out_build);
    if (!published.ok()) rt->DestroyBuild(b);
    return published;
  });
}

FJ_API fj_status* fj_build_poll(const fj_build* build, int32_t* out_done) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(PendingBuild * b, GetBuild(build), "");
    if (out_done == nullptr) return NullArgument("out_done");
    *out_done = b->job->done() ? 1 : 0;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_build_wait(fj_build* build, uint32_t timeout_ms, int32_t* out_done) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(PendingBuild * b, GetBuild(build), "");
    if (out_done == nullptr) return NullArgument("out_done");
    absl::Duration timeout =
        timeout_ms == UINT32_MAX ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms);
    *out_done = b->job->Wait(timeout) ? 1 : 0;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_build_take(fj_build* build, fj_module** out_module) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(PendingBuild * b, GetBuild(build), "");
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(Module * m, b->runtime->TakeBuild(*b), "");
    absl::Status published = Publish(HandleType::kModule, m, out_module);
    if (!published.ok()) b->runtime->DestroyModule(m, ReleaseTag);
    return published;
  });
}

FJ_API fj_status* fj_build_destroy(fj_build* build) {
  return Guard([&]() -> absl::Status {
    if (build == nullptr) return absl::OkStatus();
    auto* b = static_cast<PendingBuild*>(ReleaseHandle(HandleValue(build), HandleType::kBuild));
    if (b == nullptr) return NotLive("build");
    b->runtime->DestroyBuild(b);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_load(fj_runtime* runtime, const fj_module_load_options* options,
                                 fj_module** out_module) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(Runtime * rt, GetRuntime(runtime), "");
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(ImageSpec spec, ReadImageSpec(options), "");
    FJ_ASSIGN_OR_RETURN(Module * m, rt->LoadModule(spec), "");
    absl::Status published = Publish(HandleType::kModule, m, out_module);
    if (!published.ok()) rt->DestroyModule(m, ReleaseTag);
    return published;
  });
}

}  // extern "C"
