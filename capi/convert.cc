#include "capi/convert.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "base/status_macros.h"
#include "runtime/launch/tensor_encoder.h"

namespace fleetjit::capi {

absl::StatusOr<int32_t> CheckEnum(int32_t value, const char* field,
                                  const char* type, int32_t first,
                                  int32_t last) {
  if (value < first || value > last) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is ", value, ", not an ", type, " (", first, "..", last, ")"));
  }
  return value;
}

absl::StatusOr<std::string> ReadStr(fj_str s, const char* name) {
  if (s.data == nullptr && s.size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ".data is NULL with size ", s.size));
  }
  return std::string(s.data == nullptr ? "" : s.data, s.size);
}

absl::StatusOr<std::vector<std::string>> ReadStrArray(const fj_str* array,
                                                      size_t count,
                                                      const char* name,
                                                      bool allow_empty) {
  if (count > 0 && array == nullptr) return NullArgument(name);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    fj_str s;
    std::memcpy(&s, array + i, sizeof(s));  // the array may lie anywhere
    const std::string field = absl::StrCat(name, "[", i, "]");
    FJ_ASSIGN_OR_RETURN(std::string text, ReadStr(s, field.c_str()));
    if (!allow_empty && text.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
    }
    out.push_back(std::move(text));
  }
  return out;
}

// The copy implementation is numbered three ways: fj_copy_impl (the C
// ABI's, 0 = auto), jit::CopyImpl (the runtime's) and -DFJ_COPY_IMPL (the
// device layer's, jit/nvrtc_build.cc ties it to jit::CopyImpl). An
// fj_copy_impl other than auto is its jit::CopyImpl plus one; these two
// functions are the only bridges, and the asserts tie every value.
constexpr int32_t kFjCopyImplOffset = FJ_COPY_IMPL_SYNC;
constexpr jit::CopyImpl CopyImplOfFj(int32_t impl) {
  return static_cast<jit::CopyImpl>(impl - kFjCopyImplOffset);
}
constexpr fj_copy_impl FjOfCopyImpl(jit::CopyImpl impl) {
  return static_cast<fj_copy_impl>(static_cast<int32_t>(impl) +
                                   kFjCopyImplOffset);
}
static_assert(FJ_COPY_IMPL_AUTO == 0 && kFjCopyImplOffset == 1);
static_assert(CopyImplOfFj(FJ_COPY_IMPL_SYNC) == jit::CopyImpl::kSync);
static_assert(CopyImplOfFj(FJ_COPY_IMPL_CP_ASYNC) == jit::CopyImpl::kCpAsync);
static_assert(CopyImplOfFj(FJ_COPY_IMPL_TMA) == jit::CopyImpl::kTma);
static_assert(FjOfCopyImpl(jit::CopyImpl::kSync) == FJ_COPY_IMPL_SYNC);
static_assert(FjOfCopyImpl(jit::CopyImpl::kCpAsync) == FJ_COPY_IMPL_CP_ASYNC);
static_assert(FjOfCopyImpl(jit::CopyImpl::kTma) == FJ_COPY_IMPL_TMA);
static_assert(FJ_COPY_IMPL_LAST == FJ_COPY_IMPL_TMA,
              "a new fj_copy_impl needs its asserts");

absl::StatusOr<std::optional<jit::CopyImpl>> ReadCopyImpl(int32_t value,
                                                          const char* field) {
  FJ_ASSIGN_OR_RETURN(int32_t impl,
                      CheckEnum(value, field, "fj_copy_impl", FJ_COPY_IMPL_AUTO,
                                FJ_COPY_IMPL_LAST));
  if (impl == FJ_COPY_IMPL_AUTO) return std::optional<jit::CopyImpl>();
  return std::optional(CopyImplOfFj(impl));
}

fj_copy_impl ToFjCopyImpl(jit::CopyImpl impl) { return FjOfCopyImpl(impl); }

const char* CopyImplName(int32_t impl) {
  if (impl == FJ_COPY_IMPL_AUTO) return "auto";
  if (impl < FJ_COPY_IMPL_AUTO || impl > FJ_COPY_IMPL_LAST) return "unknown";
  return jit::CopyImplName(CopyImplOfFj(impl)).data();
}

const char* FeatureName(int32_t feature) {
  if (feature < 0 || feature >= FJ_FEATURE_COUNT) return "unknown";
  return jit::FeatureName(static_cast<jit::Feature>(feature)).data();
}

const char* SupportName(int32_t support) {
  if (support == FJ_SUPPORT_NATIVE) return "native";
  if (support == FJ_SUPPORT_EMULATED) return "emulated";
  return "unknown";
}

absl::StatusOr<PlanRequest> ReadPlanRequest(fj_str target, int32_t impl) {
  PlanRequest r;
  FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(target, "target"));
  FJ_ASSIGN_OR_RETURN(r.target, jit::ParseTarget(name));
  FJ_ASSIGN_OR_RETURN(r.impl, ReadCopyImpl(impl, "impl"));
  return r;
}

namespace {

// The fields since 1.1 under "In a server" (zero for a shorter struct,
// which ReadStruct zero-fills).
absl::Status ReadServerOptions(const fj_runtime_options& o,
                               RuntimeOptions& opts) {
  FJ_ASSIGN_OR_RETURN(int32_t level,
                      CheckEnum(o.log_level, "options->log_level",
                                "fj_log_level", FJ_LOG_OFF, FJ_LOG_LEVEL_LAST));
  if (o.log_fn != nullptr) {
    if (level != FJ_LOG_OFF) opts.log_level = static_cast<LogLevel>(level);
    opts.log_sink = [fn = o.log_fn, user = o.log_user](LogLevel level,
                                                       absl::string_view m) {
      fn(user, static_cast<int32_t>(level), fj_str{m.data(), m.size()});
    };
  }
  if (o.num_preopen_devices > 0 && o.preopen_devices == nullptr) {
    return NullArgument("preopen_devices");
  }
  for (size_t i = 0; i < o.num_preopen_devices; ++i) {
    int32_t device;
    std::memcpy(&device, o.preopen_devices + i, sizeof(device));
    if (device < -1) {
      return absl::InvalidArgumentError(
          absl::StrCat("preopen_devices[", i, "] is ", device,
                       "; a device ordinal or -1 (all)"));
    }
    opts.preopen_devices.push_back(device);
  }
  return absl::OkStatus();
}

// A target name, empty for none.
absl::StatusOr<std::optional<jit::Target>> ReadOptionalTarget(
    fj_str s, const char* name) {
  FJ_ASSIGN_OR_RETURN(std::string text, ReadStr(s, name));
  if (text.empty()) return std::optional<jit::Target>();
  FJ_ASSIGN_OR_RETURN(jit::Target target, jit::ParseTarget(text), name);
  return std::optional(target);
}

}  // namespace

absl::StatusOr<RuntimeOptions> ReadRuntimeOptions(
    const fj_runtime_options* options) {
  RuntimeOptions opts;
  if (options == nullptr) return opts;
  fj_runtime_options o;
  FJ_RETURN_IF_ERROR(ReadStruct(
      options, "options", offsetof(fj_runtime_options, remote_cache_url), o));
  FJ_ASSIGN_OR_RETURN(opts.libcuda_path,
                      ReadStr(o.libcuda_path, "libcuda_path"));
  FJ_ASSIGN_OR_RETURN(opts.libnvrtc_path,
                      ReadStr(o.libnvrtc_path, "libnvrtc_path"));
  FJ_ASSIGN_OR_RETURN(opts.target_override,
                      ReadOptionalTarget(o.target_override, "target_override"));
  FJ_ASSIGN_OR_RETURN(opts.copy_impl_override,
                      ReadCopyImpl(RawEnum(o.copy_impl_override),
                                   "options->copy_impl_override"));
  constexpr uint32_t kKnownFlags = FJ_RUNTIME_DISABLE_DISK_CACHE |
                                   FJ_RUNTIME_DISABLE_THUNKS |
                                   FJ_RUNTIME_PRELOAD_NVRTC;
  if ((o.flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown runtime flags 0x", absl::Hex(o.flags & ~kKnownFlags)));
  }
  opts.cache.disk = (o.flags & FJ_RUNTIME_DISABLE_DISK_CACHE) == 0;
  opts.thunks = (o.flags & FJ_RUNTIME_DISABLE_THUNKS) == 0;
  opts.preload_nvrtc = (o.flags & FJ_RUNTIME_PRELOAD_NVRTC) != 0;
  FJ_ASSIGN_OR_RETURN(opts.cache.dir, ReadStr(o.cache_dir, "cache_dir"));
  if (o.cache_max_bytes != 0) opts.cache.max_bytes = o.cache_max_bytes;
  FJ_ASSIGN_OR_RETURN(opts.cache.remote.url,
                      ReadStr(o.remote_cache_url, "remote_cache_url"));
  FJ_ASSIGN_OR_RETURN(opts.cache.remote.fleet_key,
                      ReadStr(o.fleet_key, "fleet_key"));
  FJ_RETURN_IF_ERROR(ReadServerOptions(o, opts));
  return opts;
}

absl::StatusOr<BuildSpec> ReadBuildSpec(const fj_build_options* options) {
  fj_build_options o;
  FJ_RETURN_IF_ERROR(ReadStruct(options, "options",
                                offsetof(fj_build_options, include_dirs), o));
  BuildSpec spec;
  FJ_ASSIGN_OR_RETURN(spec.source, ReadStr(o.source, "source"));
  if (spec.source.empty()) return absl::InvalidArgumentError("source is empty");
  FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(o.name, "name"));
  if (!name.empty()) spec.name = name;
  FJ_ASSIGN_OR_RETURN(
      spec.options,
      ReadStrArray(o.nvrtc_options, o.num_nvrtc_options, "nvrtc_options"));
  FJ_ASSIGN_OR_RETURN(spec.name_expressions,
                      ReadStrArray(o.name_expressions, o.num_name_expressions,
                                   "name_expressions"));
  FJ_ASSIGN_OR_RETURN(std::optional<jit::Target> target,
                      ReadOptionalTarget(o.target, "target"));
  if (target.has_value()) spec.target = *target;
  spec.device = o.device;
  FJ_ASSIGN_OR_RETURN(spec.copy_impl,
                      ReadCopyImpl(RawEnum(o.copy_impl), "options->copy_impl"));
  FJ_ASSIGN_OR_RETURN(int32_t output,
                      CheckEnum(RawEnum(o.output), "options->output",
                                "fj_output", FJ_OUTPUT_AUTO, FJ_OUTPUT_PTX));
  static constexpr BuildSpec::Output kOutputs[] = {BuildSpec::Output::kAuto,
                                                   BuildSpec::Output::kCubin,
                                                   BuildSpec::Output::kPtx};
  spec.output = kOutputs[output];
  if ((o.flags & ~uint32_t{FJ_BUILD_NO_CACHE}) != 0) {
    return absl::InvalidArgumentError("unknown build flags");
  }
  spec.use_cache = (o.flags & FJ_BUILD_NO_CACHE) == 0;
  // Since 1.1 (zero when a 1.0 caller's struct ends before them).
  FJ_ASSIGN_OR_RETURN(spec.include_dirs,
                      ReadStrArray(o.include_dirs, o.num_include_dirs,
                                   "include_dirs", /*allow_empty=*/false));
  return spec;
}

absl::StatusOr<ImageSpec> ReadImageSpec(const fj_module_load_options* options) {
  fj_module_load_options o;
  FJ_RETURN_IF_ERROR(
      ReadStruct(options, "options", sizeof(fj_module_load_options), o));
  if (o.image == nullptr || o.image_size == 0) {
    return absl::InvalidArgumentError("options->image is NULL or empty");
  }
  FJ_ASSIGN_OR_RETURN(
      int32_t kind, CheckEnum(RawEnum(o.kind), "options->kind", "fj_image_kind",
                              FJ_IMAGE_AUTO, FJ_IMAGE_KIND_LAST));
  static constexpr jit::ImageKind kKinds[] = {
      jit::ImageKind::kAuto, jit::ImageKind::kCubin, jit::ImageKind::kPtx,
      jit::ImageKind::kFatbin};
  ImageSpec spec;
  spec.image.assign(static_cast<const char*>(o.image), o.image_size);
  spec.kind = kKinds[kind];
  FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(o.name, "options->name"));
  if (!name.empty()) spec.name = std::move(name);
  FJ_ASSIGN_OR_RETURN(spec.target,
                      ReadOptionalTarget(o.target, "options->target"));
  return spec;
}

absl::StatusOr<copy::CopySpec> ReadCopyDesc(const fj_copy_desc* desc) {
  fj_copy_desc d;
  FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_copy_desc), d));
  // Field by field. The oob field is read as the int it is in memory, so
  // any value a caller stored reaches ValidateCopy's range check. The C ABI
  // forces neither the implementation nor the kernel path.
  copy::CopySpec spec{.src = DlTensorOf(d.src),
                      .oob = RawEnum(d.oob),
                      .dst = DlTensorOf(d.dst),
                      .index = DlTensorOf(d.gather_index),
                      .impl = std::nullopt,
                      .force_kernel = false};
  static_assert(sizeof(d.src_start) == sizeof(spec.start));
  std::copy(std::begin(d.src_start), std::end(d.src_start), spec.start.begin());
  return spec;
}

absl::StatusOr<copy::PrefetchSpec> ReadPrefetchDesc(
    const fj_prefetch_desc* desc) {
  fj_prefetch_desc d;
  FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_prefetch_desc), d));
  // Field by field; mode read as an int, like oob above.
  copy::PrefetchSpec spec{.address = d.address,
                          .bytes = d.bytes,
                          .tensor = DlTensorOf(d.tensor),
                          .mode = RawEnum(d.mode),
                          .reader_device = d.reader_device,
                          .stage_address = d.stage_address,
                          .stage_bytes = d.stage_bytes};
  static_assert(sizeof(d.tile_start) == sizeof(spec.start));
  std::copy(std::begin(d.tile_start), std::end(d.tile_start),
            spec.start.begin());
  std::copy(std::begin(d.tile_extent), std::end(d.tile_extent),
            spec.extent.begin());
  return spec;
}

LaunchConfig LaunchConfigOf(const fj_launch_config& cfg) {
  LaunchConfig out;
  std::copy(std::begin(cfg.grid), std::end(cfg.grid), out.grid);
  std::copy(std::begin(cfg.block), std::end(cfg.block), out.block);
  out.shared_bytes = cfg.shared_bytes;
  std::copy(std::begin(cfg.cluster), std::end(cfg.cluster), out.cluster);
  return out;
}

absl::StatusOr<size_t> ReadArgStride(const fj_arg* args, size_t num_args) {
  if (num_args == 0) return 0;
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
  // Every element is read in place, so each must be aligned like the first.
  if (stride % kAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args[0].struct_size is ", stride, "; a multiple of alignof(fj_arg) = ",
        kAlign, " expected (sizeof(fj_arg) is one)"));
  }
  return stride;
}

absl::Duration ReadTimeout(uint32_t timeout_ms) {
  return timeout_ms == UINT32_MAX ? absl::InfiniteDuration()
                                  : absl::Milliseconds(timeout_ms);
}

fj_copy_plan FjCopyPlan(const jit::CopyPlan& plan) {
  fj_copy_plan out{};
  out.struct_size = sizeof(fj_copy_plan);
  std::snprintf(out.target, sizeof(out.target), "%s",
                plan.target.Name().c_str());
  out.impl = ToFjCopyImpl(plan.impl);
  for (int i = 0; i < FJ_FEATURE_COUNT; ++i) {
    out.support[i] = static_cast<fj_support>(plan.support[i]);
  }
  return out;
}

fj_device_info FjDeviceInfo(const DeviceReport& report) {
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
  info.plan = FjCopyPlan(report.plan);
  return info;
}

fj_module_info FjModuleInfo(const ModuleRecord& record) {
  const jit::Artifact& a = *record.artifact;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.target, sizeof(info.target), "%s",
                a.target.Name().c_str());
  info.copy_impl = ToFjCopyImpl(a.copy_impl);
  info.output = a.is_ptx ? FJ_OUTPUT_PTX : FJ_OUTPUT_CUBIN;
  switch (record.source) {
    case CacheSource::kCompiled:
      info.cache_result = FJ_CACHE_COMPILED;
      break;
    case CacheSource::kMemory:
      info.cache_result = FJ_CACHE_MEMORY_HIT;
      break;
    case CacheSource::kDisk:
      info.cache_result = FJ_CACHE_DISK_HIT;
      break;
    case CacheSource::kRemote:
      info.cache_result = FJ_CACHE_REMOTE_HIT;
      break;
  }
  info.build_ms = record.build_ms;
  info.compile_ms = a.compile_ms;
  info.image_bytes = a.image.size();
  return info;
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

fj_cache_stats FjCacheStats(const CacheStats& s) {
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
  switch (s.remote) {  // no default: a new state needs a public value
    case CacheStats::Remote::kOff:
      out.remote_state = FJ_REMOTE_OFF;
      break;
    case CacheStats::Remote::kUnavailable:
      out.remote_state = FJ_REMOTE_UNAVAILABLE;
      break;
    case CacheStats::Remote::kClosed:
      out.remote_state = FJ_REMOTE_CLOSED;
      break;
    case CacheStats::Remote::kOpen:
      out.remote_state = FJ_REMOTE_OPEN;
      break;
    case CacheStats::Remote::kHalfOpen:
      out.remote_state = FJ_REMOTE_HALF_OPEN;
      break;
  }
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
  if (arg == nullptr) return NullArgument("arg");
  // An aligned copy of the caller's struct, struct_size kept, so the
  // runtime's checks (DescribeTensor) see it as the caller passed it.
  fj_tensor_arg copy{};
  const size_t size = StructSize(arg);
  std::memcpy(&copy, arg, std::min(size, sizeof(copy)));
  copy.struct_size = size;
  FJ_ASSIGN_OR_RETURN(TensorDesc desc, DescribeTensor(&copy, 0));
  const std::string why = TmaRejection(desc);
  fj_tensor_check check{};
  check.struct_size = sizeof(check);
  check.tma = why.empty() ? 1 : 0;
  std::snprintf(check.reason, sizeof(check.reason), "%s", why.c_str());
  return check;
}

absl::Status WriteIncludeDir(const std::vector<jit::IncludeDir>& dirs,
                             size_t index, size_t* out_count,
                             const char** out_path, const char** out_origin) {
  if (out_count != nullptr) *out_count = dirs.size();
  if (out_path == nullptr && out_origin == nullptr) return absl::OkStatus();
  if (index >= dirs.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("include folder ", index, " of ", dirs.size()));
  }
  if (out_path != nullptr) *out_path = dirs[index].path.c_str();
  if (out_origin != nullptr) *out_origin = dirs[index].origin.c_str();
  return absl::OkStatus();
}

}  // namespace fleetjit::capi
