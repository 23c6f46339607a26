#include "capi/convert.h"

#include <cstddef>
#include <cstdio>

#include "base/status_macros.h"
#include "jit/target.h"

namespace fleetjit::capi {

absl::StatusOr<std::string> ReadStr(fj_str s, const char* name) {
  if (s.data == nullptr && s.size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".data is NULL with size ", s.size));
  }
  return std::string(s.data == nullptr ? "" : s.data, s.size);
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

namespace {

// The fields since 1.1 under "In a server" (zero for a shorter struct,
// which ReadStruct zero-fills).
absl::Status ReadServerOptions(const fj_runtime_options& o, RuntimeOptions& opts) {
  if (o.log_level < FJ_LOG_OFF || o.log_level > FJ_LOG_LEVEL_LAST) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log_level ", o.log_level, " is not an fj_log_level (0..", FJ_LOG_LEVEL_LAST, ")"));
  }
  if (o.log_fn != nullptr) {
    if (o.log_level != FJ_LOG_OFF) opts.log_level = static_cast<LogLevel>(o.log_level);
    opts.log_sink = [fn = o.log_fn, user = o.log_user](LogLevel level, absl::string_view m) {
      fn(user, static_cast<int32_t>(level), fj_str{m.data(), m.size()});
    };
  }
  if (o.num_preopen_devices > 0 && o.preopen_devices == nullptr) {
    return NullArgument("preopen_devices");
  }
  for (size_t i = 0; i < o.num_preopen_devices; ++i) {
    if (o.preopen_devices[i] < -1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "preopen_devices[", i, "] is ", o.preopen_devices[i], "; a device ordinal or -1 (all)"));
    }
    opts.preopen_devices.push_back(o.preopen_devices[i]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RuntimeOptions> ReadRuntimeOptions(const fj_runtime_options* options) {
  RuntimeOptions opts;
  if (options == nullptr) return opts;
  fj_runtime_options o;
  FJ_RETURN_IF_ERROR(ReadStruct(options, "options", offsetof(fj_runtime_options, remote_cache_url), o), "");
  FJ_ASSIGN_OR_RETURN(opts.libcuda_path, ReadStr(o.libcuda_path, "libcuda_path"), "");
  FJ_ASSIGN_OR_RETURN(opts.libnvrtc_path, ReadStr(o.libnvrtc_path, "libnvrtc_path"), "");
  FJ_ASSIGN_OR_RETURN(std::string target, ReadStr(o.target_override, "target_override"), "");
  if (!target.empty()) {
    FJ_ASSIGN_OR_RETURN(opts.target_override, jit::ParseTarget(target), "target_override");
  }
  FJ_ASSIGN_OR_RETURN(opts.copy_impl_override, ReadCopyImpl(o.copy_impl_override),
                      "copy_impl_override");
  constexpr uint32_t kKnownFlags =
      FJ_RUNTIME_DISABLE_DISK_CACHE | FJ_RUNTIME_DISABLE_THUNKS | FJ_RUNTIME_PRELOAD_NVRTC;
  if ((o.flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown runtime flags 0x", absl::Hex(o.flags & ~kKnownFlags)));
  }
  opts.cache.disk = (o.flags & FJ_RUNTIME_DISABLE_DISK_CACHE) == 0;
  opts.thunks = (o.flags & FJ_RUNTIME_DISABLE_THUNKS) == 0;
  opts.preload_nvrtc = (o.flags & FJ_RUNTIME_PRELOAD_NVRTC) != 0;
  FJ_ASSIGN_OR_RETURN(opts.cache.dir, ReadStr(o.cache_dir, "cache_dir"), "");
  if (o.cache_max_bytes != 0) opts.cache.max_bytes = o.cache_max_bytes;
  FJ_ASSIGN_OR_RETURN(opts.cache.remote.url, ReadStr(o.remote_cache_url, "remote_cache_url"), "");
  FJ_ASSIGN_OR_RETURN(opts.cache.remote.fleet_key, ReadStr(o.fleet_key, "fleet_key"), "");
  FJ_RETURN_IF_ERROR(ReadServerOptions(o, opts), "");
  return opts;
}

absl::StatusOr<BuildSpec> ReadBuildSpec(const fj_build_options* options) {
  fj_build_options o;
  FJ_RETURN_IF_ERROR(ReadStruct(options, "options", offsetof(fj_build_options, include_dirs), o), "");
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
  if (o.num_name_expressions > 0 && o.name_expressions == nullptr) {
    return NullArgument("name_expressions");
  }
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
      return absl::InvalidArgumentError(
          absl::StrCat("output ", static_cast<int>(o.output), " is not an fj_output"));
  }
  if ((o.flags & ~uint32_t{FJ_BUILD_NO_CACHE}) != 0) {
    return absl::InvalidArgumentError("unknown build flags");
  }
  spec.use_cache = (o.flags & FJ_BUILD_NO_CACHE) == 0;
  // Since 1.1 (zero when a 1.0 caller's struct ends before them).
  if (o.num_include_dirs > 0 && o.include_dirs == nullptr) return NullArgument("include_dirs");
  for (size_t i = 0; i < o.num_include_dirs; ++i) {
    FJ_ASSIGN_OR_RETURN(std::string dir, ReadStr(o.include_dirs[i], "include_dirs[i]"), "");
    if (dir.empty()) return absl::InvalidArgumentError("include_dirs[i] is empty");
    spec.include_dirs.push_back(std::move(dir));
  }
  return spec;
}

absl::StatusOr<size_t> ReadArgStride(const fj_arg* args, size_t num_args) {
  if (num_args == 0) return 0;
  if (args == nullptr) return NullArgument("args");
  size_t stride = args[0].struct_size;
  if (stride < sizeof(fj_arg)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args[0].struct_size is ", stride, "; at least ", sizeof(fj_arg), " expected"));
  }
  return stride;
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

fj_device_info DeviceInfo(const DeviceReport& report) {
  const DeviceFacts& f = *report.facts;
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
  info.driver_version = report.driver_version;
  FillPlan(report.plan, info.plan);
  return info;
}

fj_module_info ModuleInfo(const ModuleRecord& record) {
  const jit::Artifact& a = *record.artifact;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.target, sizeof(info.target), "%s", a.target.Name().c_str());
  info.copy_impl = ToFjCopyImpl(a.copy_impl);
  info.output = a.is_ptx ? FJ_OUTPUT_PTX : FJ_OUTPUT_CUBIN;
  switch (record.source) {
    case CacheSource::kCompiled: info.cache_result = FJ_CACHE_COMPILED; break;
    case CacheSource::kMemory: info.cache_result = FJ_CACHE_MEMORY_HIT; break;
    case CacheSource::kDisk: info.cache_result = FJ_CACHE_DISK_HIT; break;
    case CacheSource::kRemote: info.cache_result = FJ_CACHE_REMOTE_HIT; break;
  }
  info.build_ms = record.build_ms;
  info.compile_ms = a.compile_ms;
  info.image_bytes = a.image.size();
  return info;
}

fj_kernel_info KernelInfo(const LoadedKernel& k) {
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

fj_cache_stats CacheStatsOf(const CacheStats& s) {
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
  out.remote_state = s.remote_state == "off"         ? FJ_REMOTE_OFF
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
  return out;
}

absl::StatusOr<fj_tensor_check> CheckTensorArg(const fj_tensor_arg* arg) {
  FJ_ASSIGN_OR_RETURN(TensorDesc desc, DescribeTensor(arg, 0), "");
  const std::string why = TmaRejection(desc);
  fj_tensor_check check{};
  check.struct_size = sizeof(check);
  check.tma = why.empty() ? 1 : 0;
  std::snprintf(check.reason, sizeof(check.reason), "%s", why.c_str());
  return check;
}

}  // namespace fleetjit::capi
