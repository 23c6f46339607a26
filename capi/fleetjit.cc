// The C ABI: a thin shim over the C++ core. Each handle wraps one C++ object;
// every entry validates its inputs, converts absl::Status with ToFjStatus,
// and lets no exception escape (Guard).
#include <cuda.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "capi/handles.h"
#include "capi/status.h"
#include "fleetjit/fleetjit.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/launch.h"
#include "runtime/runtime.h"
#include "runtime/tensor_encoder.h"
#include "base/status_macros.h"

namespace fleetjit::capi {
namespace {

struct RuntimeObject {
  std::unique_ptr<Runtime> runtime;
  uint64_t handle = 0;
  std::mutex children_mu;
  std::vector<uint64_t> modules;  // guarded by children_mu
  std::vector<uint64_t> streams;  // guarded by children_mu
};

struct ModuleObject {
  RuntimeObject* owner;
  ModuleRecord record;
  uint64_t handle = 0;
  std::mutex kernels_mu;
  std::vector<uint64_t> kernels;  // guarded by kernels_mu
};

struct KernelObject {
  ModuleObject* module;
  LoadedKernel* kernel;
};

struct StreamObject {
  RuntimeObject* owner;
  Device* device;
  CUstream stream = nullptr;
};

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

absl::Status NullArgument(const char* name) {
  return absl::InvalidArgumentError(absl::StrCat(name, " is NULL"));
}

// Copies a caller's argument struct into a zero-initialised T, checking
// struct_size: shorter than version 1 is an error, longer is fine (the
// unknown tail is ignored).
template <typename T>
absl::Status ReadStruct(const T* in, const char* name, size_t min_size, T& out) {
  if (in == nullptr) return NullArgument(name);
  if (in->struct_size < min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "->struct_size is ", in->struct_size, "; at least ", min_size,
        " expected (set it to sizeof(", name, "))"));
  }
  std::memset(&out, 0, sizeof(T));
  std::memcpy(&out, in, std::min(in->struct_size, sizeof(T)));
  out.struct_size = sizeof(T);
  return absl::OkStatus();
}

// For output structs: checks struct_size, fills a full T, copies back the
// part the caller has room for.
template <typename T>
absl::Status CheckOutStruct(const T* out, const char* name, size_t min_size) {
  if (out == nullptr) return NullArgument(name);
  if (out->struct_size < min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "->struct_size is ", out->struct_size, "; at least ", min_size,
        " expected (set it to sizeof(", name, ") before the call)"));
  }
  return absl::OkStatus();
}
template <typename T>
void WriteOutStruct(const T& full, T* out) {
  size_t n = std::min(out->struct_size, sizeof(T));
  size_t caller_size = out->struct_size;
  std::memcpy(out, &full, n);
  out->struct_size = caller_size;
}

absl::StatusOr<std::string> ReadStr(fj_str s, const char* name) {
  if (s.data == nullptr && s.size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".data is NULL with size ", s.size));
  }
  return std::string(s.data == nullptr ? "" : s.data, s.size);
}

// The object behind a caller's handle of kind `type`, or a status naming
// the argument: NULL, or not a live handle of that kind (destroyed, foreign,
// forged, or a handle of another kind).
template <typename Object, typename Handle>
absl::StatusOr<Object*> LookUp(const Handle* h, HandleType type, const char* name,
                               const char* extra = "") {
  if (h == nullptr) return NullArgument(name);
  auto* obj = static_cast<Object*>(LookupHandle(HandleValue(h), type));
  if (obj == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " is not a live fj_", name, " handle (destroyed or foreign", extra, ")"));
  }
  return obj;
}
absl::StatusOr<RuntimeObject*> GetRuntime(const fj_runtime* h) {
  return LookUp<RuntimeObject>(h, HandleType::kRuntime, "runtime");
}
absl::StatusOr<ModuleObject*> GetModule(const fj_module* h) {
  return LookUp<ModuleObject>(h, HandleType::kModule, "module");
}
absl::StatusOr<KernelObject*> GetKernel(const fj_kernel* h) {
  return LookUp<KernelObject>(h, HandleType::kKernel, "kernel",
                              ", or its module was destroyed");
}
absl::StatusOr<StreamObject*> GetStream(const fj_stream* h) {
  return LookUp<StreamObject>(h, HandleType::kStream, "stream");
}

absl::StatusOr<std::optional<jit::CopyImpl>> ReadCopyImpl(int value) {
  switch (value) {
    case FJ_COPY_IMPL_AUTO: return std::optional<jit::CopyImpl>();
    case FJ_COPY_IMPL_SYNC: return std::optional(jit::CopyImpl::kSync);
    case FJ_COPY_IMPL_CP_ASYNC: return std::optional(jit::CopyImpl::kCpAsync);
    case FJ_COPY_IMPL_TMA: return std::optional(jit::CopyImpl::kTma);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "copy implementation ", value, " is not an fj_copy_impl (0..", FJ_COPY_IMPL_LAST, ")"));
}

fj_copy_impl ToFjCopyImpl(jit::CopyImpl impl) {
  return static_cast<fj_copy_impl>(static_cast<int>(impl) + 1);
}

void FillPlan(const jit::CopyPlan& plan, fj_copy_plan& out) {
  out.struct_size = sizeof(fj_copy_plan);
  std::string name = plan.target.Name();
  std::snprintf(out.target, sizeof(out.target), "%s", name.c_str());
  out.impl = ToFjCopyImpl(plan.impl);
  for (int i = 0; i < FJ_FEATURE_COUNT; ++i) {
    out.support[i] = static_cast<fj_support>(plan.support[i]);
  }
}

// Releases every kernel handle of a module, then the module object.
void DestroyModuleObject(ModuleObject* module) {
  std::lock_guard<std::mutex> lock(module->kernels_mu);
  for (uint64_t k : module->kernels) {
    delete static_cast<KernelObject*>(ReleaseHandle(k, HandleType::kKernel));
  }
  module->kernels.clear();
}

absl::Status DestroyStreamObject(StreamObject* s) {
  absl::Status status;
  const DriverApi* api = s->owner->runtime->driver();
  if (s->stream != nullptr && api != nullptr && !IsForkedChild(*api)) {
    status = s->device->MakeCurrent().status();
    if (status.ok()) {
      status = CheckCu(*api, api->cuStreamSynchronize(s->stream), "cuStreamSynchronize");
      absl::Status destroyed = CheckCu(*api, api->cuStreamDestroy(s->stream), "cuStreamDestroy");
      if (status.ok()) status = destroyed;
    }
  }
  delete s;
  return status;
}

// The CUstream for an optional fj_stream, checking it belongs to `rt`.
absl::StatusOr<CUstream> StreamOf(const fj_stream* h, RuntimeObject* rt) {
  if (h == nullptr) return static_cast<CUstream>(nullptr);
  FJ_ASSIGN_OR_RETURN(StreamObject * s, GetStream(h), "");
  if (rt != nullptr && s->owner != rt) {
    return absl::InvalidArgumentError("stream belongs to another runtime");
  }
  return s->stream;
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
    RuntimeOptions opts;
    if (options != nullptr) {
      fj_runtime_options o;
      FJ_RETURN_IF_ERROR(ReadStruct(options, "options", sizeof(fj_runtime_options), o), "");
      FJ_ASSIGN_OR_RETURN(opts.libcuda_path, ReadStr(o.libcuda_path, "libcuda_path"), "");
      FJ_ASSIGN_OR_RETURN(opts.libnvrtc_path, ReadStr(o.libnvrtc_path, "libnvrtc_path"), "");
      FJ_ASSIGN_OR_RETURN(std::string target, ReadStr(o.target_override, "target_override"), "");
      if (!target.empty()) {
        FJ_ASSIGN_OR_RETURN(opts.target_override, jit::ParseTarget(target), "target_override");
      }
      FJ_ASSIGN_OR_RETURN(opts.copy_impl_override, ReadCopyImpl(o.copy_impl_override),
                          "copy_impl_override");
      constexpr uint32_t kKnownFlags = FJ_RUNTIME_DISABLE_DISK_CACHE | FJ_RUNTIME_DISABLE_THUNKS;
      if ((o.flags & ~kKnownFlags) != 0) {
        return absl::InvalidArgumentError(absl::StrCat("unknown runtime flags 0x", absl::Hex(o.flags & ~kKnownFlags)));
      }
      opts.cache.disk = (o.flags & FJ_RUNTIME_DISABLE_DISK_CACHE) == 0;
      opts.thunks = (o.flags & FJ_RUNTIME_DISABLE_THUNKS) == 0;
      FJ_ASSIGN_OR_RETURN(opts.cache.dir, ReadStr(o.cache_dir, "cache_dir"), "");
      if (o.cache_max_bytes != 0) opts.cache.max_bytes = o.cache_max_bytes;
      FJ_ASSIGN_OR_RETURN(opts.cache.remote.url,
                          ReadStr(o.remote_cache_url, "remote_cache_url"), "");
      FJ_ASSIGN_OR_RETURN(opts.cache.remote.fleet_key,
                          ReadStr(o.fleet_key, "fleet_key"), "");
    }
    FJ_RETURN_IF_ERROR(ApplyEnvironment(opts), "reading FLEETJIT_* variables");
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create(std::move(opts)),
                        "creating the runtime");
    auto obj = std::make_unique<RuntimeObject>();
    obj->runtime = std::move(rt);
    obj->handle = RegisterHandle(HandleType::kRuntime, obj.get());
    if (obj->handle == 0) return absl::ResourceExhaustedError("too many live handles");
    *out_runtime = AsHandle<fj_runtime>(obj->handle);
    obj.release();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_runtime_destroy(fj_runtime* runtime) {
  return Guard([&]() -> absl::Status {
    if (runtime == nullptr) return absl::OkStatus();
    auto* obj = static_cast<RuntimeObject*>(ReleaseHandle(HandleValue(runtime), HandleType::kRuntime));
    if (obj == nullptr) {
      return absl::InvalidArgumentError("runtime is not a live fj_runtime handle (destroyed or foreign)");
    }
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(obj->children_mu);
      for (uint64_t s : obj->streams) {
        if (auto* stream = static_cast<StreamObject*>(ReleaseHandle(s, HandleType::kStream))) {
          absl::Status st = DestroyStreamObject(stream);
          if (status.ok()) status = st;
        }
      }
      for (uint64_t m : obj->modules) {
        if (auto* module = static_cast<ModuleObject*>(ReleaseHandle(m, HandleType::kModule))) {
          DestroyModuleObject(module);
          delete module;
        }
      }
    }
    delete obj;
    return status;
  });
}

FJ_API const char* fj_runtime_driver_error(const fj_runtime* runtime) {
  auto obj = GetRuntime(runtime);
  if (!obj.ok()) return "invalid runtime handle";
  const absl::Status& s = (*obj)->runtime->driver_status();
  return s.ok() ? "" : s.message().data();
}

// ---------------------------------------------------------------- devices

FJ_API fj_status* fj_device_count(const fj_runtime* runtime, int32_t* out_count) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    if (out_count == nullptr) return NullArgument("out_count");
    *out_count = rt->runtime->device_count();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_device_info_get(fj_runtime* runtime, int32_t ordinal,
                                     fj_device_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_device_info)), "");
    FJ_ASSIGN_OR_RETURN(Device * d, rt->runtime->device(ordinal), "");
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, rt->runtime->PlanForDevice(ordinal), "");
    const DeviceFacts& f = d->facts();
    fj_device_info info{};
    info.struct_size = sizeof(info);
    std::snprintf(info.name, sizeof(info.name), "%s", f.name.c_str());
    info.ordinal = f.ordinal;
    info.cc_major = f.cc_major;
    info.cc_minor = f.cc_minor;
    info.sm_count = f.sm_count;
    info.total_memory_bytes = f.total_memory;
    info.shared_memory_per_block = f.shared_per_block;
    info.shared_memory_per_block_optin = f.shared_per_block_optin;
    info.shared_memory_per_sm = f.shared_per_sm;
    info.l2_cache_bytes = f.l2_bytes;
    info.max_threads_per_block = f.max_threads_per_block;
    info.cluster_launch = f.cluster_launch ? 1 : 0;
    info.driver_version = rt->runtime->driver()->driver_version;
    FillPlan(plan, info.plan);
    WriteOutStruct(info, out_info);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- memory

FJ_API fj_status* fj_mem_alloc(fj_runtime* runtime, int32_t ordinal,
                               uint64_t bytes, uint64_t* out_address) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    if (out_address == nullptr) return NullArgument("out_address");
    FJ_ASSIGN_OR_RETURN(*out_address, rt->runtime->Allocate(ordinal, bytes), "");
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_mem_free(fj_runtime* runtime, uint64_t address) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    return rt->runtime->Free(address);
  });
}

namespace {

enum class CopyKind { kHtoD, kDtoH, kDtoD, kSet };

absl::Status DoCopy(fj_runtime* runtime, CopyKind kind, uint64_t dst_dev, void* dst_host,
                    uint64_t src_dev, const void* src_host, uint8_t value, uint64_t bytes,
                    fj_stream* stream) {
  FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
  FJ_ASSIGN_OR_RETURN(CUstream s, StreamOf(stream, rt), "");
  if (bytes == 0) return absl::OkStatus();
  if ((kind == CopyKind::kHtoD && src_host == nullptr) ||
      (kind == CopyKind::kDtoH && dst_host == nullptr)) {
    return NullArgument(kind == CopyKind::kHtoD ? "src" : "dst");
  }
  Device* dev = nullptr;
  if (kind != CopyKind::kDtoH) {
    FJ_ASSIGN_OR_RETURN(dev, rt->runtime->DeviceOfRange(dst_dev, bytes), "dst");
  }
  if (kind == CopyKind::kDtoH || kind == CopyKind::kDtoD) {
    FJ_ASSIGN_OR_RETURN(dev, rt->runtime->DeviceOfRange(src_dev, bytes), "src");
  }
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
  const DriverApi& api = *rt->runtime->driver();
  auto d = static_cast<CUdeviceptr>(dst_dev);
  auto sd = static_cast<CUdeviceptr>(src_dev);
  CUresult r;
  const char* call;
  switch (kind) {
    case CopyKind::kHtoD:
      call = s ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD";
      r = s ? api.cuMemcpyHtoDAsync(d, src_host, bytes, s) : api.cuMemcpyHtoD(d, src_host, bytes);
      break;
    case CopyKind::kDtoH:
      call = s ? "cuMemcpyDtoHAsync" : "cuMemcpyDtoH";
      r = s ? api.cuMemcpyDtoHAsync(dst_host, sd, bytes, s) : api.cuMemcpyDtoH(dst_host, sd, bytes);
      break;
    case CopyKind::kDtoD:
      call = s ? "cuMemcpyDtoDAsync" : "cuMemcpyDtoD";
      r = s ? api.cuMemcpyDtoDAsync(d, sd, bytes, s) : api.cuMemcpyDtoD(d, sd, bytes);
      if (r == CUDA_SUCCESS && !s) r = api.cuCtxSynchronize();
      break;
    case CopyKind::kSet:
    default:
      call = s ? "cuMemsetD8Async" : "cuMemsetD8";
      r = s ? api.cuMemsetD8Async(d, value, bytes, s) : api.cuMemsetD8(d, value, bytes);
      if (r == CUDA_SUCCESS && !s) r = api.cuCtxSynchronize();
      break;
  }
  absl::Status status = CheckCu(api, r, call);
  if (!status.ok() && status.code() == absl::StatusCode::kAborted) {
    return dev->PoisonAfterFault(status);
  }
  return status;
}

}  // namespace

FJ_API fj_status* fj_memcpy_htod(fj_runtime* runtime, uint64_t dst, const void* src,
                                 uint64_t bytes, fj_stream* stream) {
  return Guard([&] { return DoCopy(runtime, CopyKind::kHtoD, dst, nullptr, 0, src, 0, bytes, stream); });
}
FJ_API fj_status* fj_memcpy_dtoh(fj_runtime* runtime, void* dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream) {
  return Guard([&] { return DoCopy(runtime, CopyKind::kDtoH, 0, dst, src, nullptr, 0, bytes, stream); });
}
FJ_API fj_status* fj_memcpy_dtod(fj_runtime* runtime, uint64_t dst, uint64_t src,
                                 uint64_t bytes, fj_stream* stream) {
  return Guard([&] { return DoCopy(runtime, CopyKind::kDtoD, dst, nullptr, src, nullptr, 0, bytes, stream); });
}
FJ_API fj_status* fj_memset_d8(fj_runtime* runtime, uint64_t dst, uint8_t value,
                               uint64_t bytes, fj_stream* stream) {
  return Guard([&] { return DoCopy(runtime, CopyKind::kSet, dst, nullptr, 0, nullptr, value, bytes, stream); });
}

// ---------------------------------------------------------------- streams

FJ_API fj_status* fj_stream_create(fj_runtime* runtime, int32_t ordinal,
                                   fj_stream** out_stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    if (out_stream == nullptr) return NullArgument("out_stream");
    FJ_ASSIGN_OR_RETURN(Device * dev, rt->runtime->device(ordinal), "");
    FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
    const DriverApi& api = *rt->runtime->driver();
    auto obj = std::make_unique<StreamObject>();
    obj->owner = rt;
    obj->device = dev;
    FJ_RETURN_IF_ERROR(CheckCu(api, api.cuStreamCreate(&obj->stream, CU_STREAM_NON_BLOCKING),
                               "cuStreamCreate"), "");
    uint64_t h = RegisterHandle(HandleType::kStream, obj.get());
    if (h == 0) {
      api.cuStreamDestroy(obj->stream);
      return absl::ResourceExhaustedError("too many live handles");
    }
    {
      std::lock_guard<std::mutex> lock(rt->children_mu);
      rt->streams.push_back(h);
    }
    obj.release();
    *out_stream = AsHandle<fj_stream>(h);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_stream_synchronize(fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(StreamObject * s, GetStream(stream), "");
    FJ_RETURN_IF_ERROR(s->device->MakeCurrent().status(), "");
    const DriverApi& api = *s->owner->runtime->driver();
    absl::Status status =
        CheckCu(api, api.cuStreamSynchronize(s->stream), "cuStreamSynchronize");
    if (!status.ok() && status.code() == absl::StatusCode::kAborted) {
      return s->device->PoisonAfterFault(status);
    }
    return status;
  });
}

FJ_API fj_status* fj_stream_destroy(fj_stream* stream) {
  return Guard([&]() -> absl::Status {
    if (stream == nullptr) return absl::OkStatus();
    auto* s = static_cast<StreamObject*>(ReleaseHandle(HandleValue(stream), HandleType::kStream));
    if (s == nullptr) {
      return absl::InvalidArgumentError("stream is not a live fj_stream handle (destroyed or foreign)");
    }
    {
      std::lock_guard<std::mutex> lock(s->owner->children_mu);
      auto& v = s->owner->streams;
      v.erase(std::remove(v.begin(), v.end(), HandleValue(stream)), v.end());
    }
    return DestroyStreamObject(s);
  });
}

// ---------------------------------------------------------------- modules

FJ_API fj_status* fj_module_build(fj_runtime* runtime, const fj_build_options* options,
                                  fj_module** out_module) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    if (out_module == nullptr) return NullArgument("out_module");
    fj_build_options o;
    FJ_RETURN_IF_ERROR(ReadStruct(options, "options", sizeof(fj_build_options), o), "");
    BuildSpec spec;
    FJ_ASSIGN_OR_RETURN(spec.source, ReadStr(o.source, "source"), "");
    if (spec.source.empty()) return absl::InvalidArgumentError("source is empty");
    FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(o.name, "name"), "");
    if (!name.empty()) spec.name = name;
    if (o.num_nvrtc_options > 0 && o.nvrtc_options == nullptr) return NullArgument("nvrtc_options");
    for (size_t i = 0; i < o.num_nvrtc_options; ++i) {
      FJ_ASSIGN_OR_RETURN(std::string opt, ReadStr(o.nvrtc_options[i], "nvrtc_options[i]"), "");
      spec.options.push_back(std::move(opt));
    }
    if (o.num_name_expressions > 0 && o.name_expressions == nullptr) return NullArgument("name_expressions");
    for (size_t i = 0; i < o.num_name_expressions; ++i) {
      FJ_ASSIGN_OR_RETURN(std::string e, ReadStr(o.name_expressions[i], "name_expressions[i]"), "");
      spec.name_expressions.push_back(std::move(e));
    }
    FJ_ASSIGN_OR_RETURN(std::string target, ReadStr(o.target, "target"), "");
    if (!target.empty()) {
      FJ_ASSIGN_OR_RETURN(spec.target, jit::ParseTarget(target), "");
    }
    spec.device = o.device;
    FJ_ASSIGN_OR_RETURN(spec.copy_impl, ReadCopyImpl(o.copy_impl), "");
    switch (o.output) {
      case FJ_OUTPUT_AUTO: spec.output = BuildSpec::Output::kAuto; break;
      case FJ_OUTPUT_CUBIN: spec.output = BuildSpec::Output::kCubin; break;
      case FJ_OUTPUT_PTX: spec.output = BuildSpec::Output::kPtx; break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("output ", static_cast<int>(o.output), " is not an fj_output"));
    }
    if ((o.flags & ~uint32_t{FJ_BUILD_NO_CACHE}) != 0) {
      return absl::InvalidArgumentError("unknown build flags");
    }
    spec.use_cache = (o.flags & FJ_BUILD_NO_CACHE) == 0;
    FJ_ASSIGN_OR_RETURN(ModuleRecord record, rt->runtime->Build(spec), "");
    auto obj = std::make_unique<ModuleObject>();
    obj->owner = rt;
    obj->record = std::move(record);
    obj->handle = RegisterHandle(HandleType::kModule, obj.get());
    if (obj->handle == 0) return absl::ResourceExhaustedError("too many live handles");
    {
      std::lock_guard<std::mutex> lock(rt->children_mu);
      rt->modules.push_back(obj->handle);
    }
    *out_module = AsHandle<fj_module>(obj->handle);
    obj.release();
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_info_get(const fj_module* module, fj_module_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(ModuleObject * m, GetModule(module), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_module_info)), "");
    const jit::Artifact& a = *m->record.artifact;
    fj_module_info info{};
    info.struct_size = sizeof(info);
    std::snprintf(info.target, sizeof(info.target), "%s", a.target.Name().c_str());
    info.copy_impl = ToFjCopyImpl(a.copy_impl);
    info.output = a.is_ptx ? FJ_OUTPUT_PTX : FJ_OUTPUT_CUBIN;
    switch (m->record.source) {
      case CacheSource::kCompiled: info.cache_result = FJ_CACHE_COMPILED; break;
      case CacheSource::kMemory: info.cache_result = FJ_CACHE_MEMORY_HIT; break;
      case CacheSource::kDisk: info.cache_result = FJ_CACHE_DISK_HIT; break;
      case CacheSource::kRemote: info.cache_result = FJ_CACHE_REMOTE_HIT; break;
    }
    info.build_ms = m->record.build_ms;
    info.compile_ms = a.compile_ms;
    info.image_bytes = a.image.size();
    WriteOutStruct(info, out_info);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_image(const fj_module* module, const void** out_data,
                                  size_t* out_size) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(ModuleObject * m, GetModule(module), "");
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
    auto* m = static_cast<ModuleObject*>(ReleaseHandle(HandleValue(module), HandleType::kModule));
    if (m == nullptr) {
      return absl::InvalidArgumentError("module is not a live fj_module handle (destroyed or foreign)");
    }
    {
      std::lock_guard<std::mutex> lock(m->owner->children_mu);
      auto& v = m->owner->modules;
      v.erase(std::remove(v.begin(), v.end(), HandleValue(module)), v.end());
    }
    DestroyModuleObject(m);
    delete m;
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_module_get_kernel(fj_module* module, fj_str name, int32_t device,
                                       fj_kernel** out_kernel) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(ModuleObject * m, GetModule(module), "");
    if (out_kernel == nullptr) return NullArgument("out_kernel");
    FJ_ASSIGN_OR_RETURN(std::string kernel_name, ReadStr(name, "name"), "");
    FJ_ASSIGN_OR_RETURN(LoadedKernel * k,
                        m->owner->runtime->GetKernel(m->record, kernel_name, device), "");
    auto obj = std::make_unique<KernelObject>(KernelObject{m, k});
    uint64_t h = RegisterHandle(HandleType::kKernel, obj.get());
    if (h == 0) return absl::ResourceExhaustedError("too many live handles");
    {
      std::lock_guard<std::mutex> lock(m->kernels_mu);
      m->kernels.push_back(h);
    }
    obj.release();
    *out_kernel = AsHandle<fj_kernel>(h);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_kernel_info_get(const fj_kernel* kernel, fj_kernel_info* out_info) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(KernelObject * k, GetKernel(kernel), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_info, "out_info", sizeof(fj_kernel_info)), "");
    fj_kernel_info info{};
    info.struct_size = sizeof(info);
    std::snprintf(info.lowered_name, sizeof(info.lowered_name), "%s",
                  k->kernel->entry->lowered_name.c_str());
    info.num_params = static_cast<int32_t>(k->kernel->entry->params.size());
    info.param_bytes = k->kernel->entry->param_bytes;
    info.max_threads_per_block = k->kernel->max_threads_per_block;
    info.static_shared_bytes = k->kernel->static_shared_bytes;
    info.num_regs = k->kernel->num_regs;
    info.uses_thunk = k->kernel->thunk.load(std::memory_order_acquire) != nullptr ? 1 : 0;
    WriteOutStruct(info, out_info);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_tensor_arg_check(const fj_tensor_arg* arg, fj_tensor_check* out_check) {
  return Guard([&]() -> absl::Status {
    if (arg == nullptr) return NullArgument("arg");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_check, "out_check", sizeof(fj_tensor_check)), "");
    FJ_ASSIGN_OR_RETURN(TensorDesc desc, DescribeTensor(arg, 0), "");
    const std::string why = TmaRejection(desc);
    fj_tensor_check check{};
    check.struct_size = sizeof(check);
    check.tma = why.empty() ? 1 : 0;
    std::snprintf(check.reason, sizeof(check.reason), "%s", why.c_str());
    WriteOutStruct(check, out_check);
    return absl::OkStatus();
  });
}

// ---------------------------------------------------------------- launch

FJ_API fj_status* fj_launch(fj_kernel* kernel, const fj_launch_config* config,
                            const fj_arg* args, size_t num_args) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(KernelObject * k, GetKernel(kernel), "");
    fj_launch_config cfg;
    FJ_RETURN_IF_ERROR(ReadStruct(config, "config", sizeof(fj_launch_config), cfg), "");
    FJ_ASSIGN_OR_RETURN(CUstream stream, StreamOf(cfg.stream, k->module->owner), "");
    size_t stride = 0;
    if (num_args > 0) {
      if (args == nullptr) return NullArgument("args");
      stride = args[0].struct_size;
      if (stride < sizeof(fj_arg)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "args[0].struct_size is ", stride, "; at least ", sizeof(fj_arg), " expected"));
      }
    }
    absl::Status launched = Launch(*k->kernel, cfg, stream, args, num_args, stride);
    if (launched.ok()) k->kernel->device->NoteLaunch(&k->kernel->display_name);
    return launched;
  });
}

// ---------------------------------------------------------------- cache

FJ_API fj_status* fj_cache_stats_get(fj_runtime* runtime, fj_cache_stats* out_stats) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_stats, "out_stats", sizeof(fj_cache_stats)), "");
    CacheStats s = rt->runtime->cache_stats();
    fj_cache_stats out{};
    out.struct_size = sizeof(out);
    out.memory_hits = s.memory_hits;
    out.disk_hits = s.disk_hits;
    out.misses = s.misses;
    out.compiles = s.compiles;
    out.compile_ms_total = s.compile_ms_total;
    out.evictions = s.evictions;
    out.rejected_entries = s.rejected_entries;
    out.disk_entries = s.disk_entries;
    out.disk_bytes = s.disk_bytes;
    out.remote_state =
        s.remote_state == "off"         ? FJ_REMOTE_OFF
        : s.remote_state == "closed"    ? FJ_REMOTE_CLOSED
        : s.remote_state == "open"      ? FJ_REMOTE_OPEN
        : s.remote_state == "half-open" ? FJ_REMOTE_HALF_OPEN
                                        : FJ_REMOTE_UNAVAILABLE;
    out.remote_hits = s.remote_hits;
    out.remote_misses = s.remote_misses;
    out.remote_errors = s.remote_errors;
    out.remote_rejected = s.remote_rejected;
    out.remote_writes = s.remote_writes;
    out.remote_write_drops = s.remote_write_drops;
    out.remote_breaker_opens = s.remote_breaker_opens;
    WriteOutStruct(out, out_stats);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_cache_flush(fj_runtime* runtime, uint32_t timeout_ms) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    rt->runtime->WaitForBackgroundWork();
    if (!rt->runtime->cache().FlushRemote(absl::Milliseconds(timeout_ms))) {
      return absl::DeadlineExceededError(absl::StrCat(
          "remote cache publications still queued after ", timeout_ms, " ms"));
    }
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_cache_clear(fj_runtime* runtime) {
  return Guard([&]() -> absl::Status {
    FJ_ASSIGN_OR_RETURN(RuntimeObject * rt, GetRuntime(runtime), "");
    return rt->runtime->cache().Clear();
  });
}

}  // extern "C"
