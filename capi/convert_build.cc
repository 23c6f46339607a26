// Runtime options, build and image-load options, and what a build reports
// back: fj_module_info, fj_cache_stats, the include folders (convert.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "base/status_macros.h"
#include "capi/convert.h"

namespace fleetjit::capi {

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

fj_module_info FjModuleInfo(const ModuleRecord& record) {
  const jit::Artifact& a = *record.artifact;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.target, sizeof(info.target), "%s",
                a.target.Name().c_str());
  info.copy_impl = FjOfCopyImpl(a.copy_impl);
  info.output = a.is_ptx ? FJ_OUTPUT_PTX : FJ_OUTPUT_CUBIN;
  switch (record.source) {
    case CacheSource::kCompiled:
      info.cache_result = FJ_CACHE_COMPILED;
      break;
    case CacheSource::kMemory:
      info.cache_result = FJ_CACHE_MEMORY_HIT;
      break;
    case CacheSource::kDisk:
    case CacheSource::kBundle:  // a local file too (the header says so)
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

fj_cache_stats FjCacheStats(const CacheStats& s) {
  fj_cache_stats out{};
  out.struct_size = sizeof(out);
  out.memory_hits = s.memory_hits;
  // A bundle hit is a hit on a local file: counted with the disk's.
  out.disk_hits = s.disk_hits + s.bundle_hits;
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
