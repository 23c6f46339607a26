// Conversions between the C ABI's arguments and the C++ core's types, for
// the shim (fleetjit.cc), in one file per topic: convert.cc (strings, enums,
// plans, devices), convert_build.cc (runtime, build and load options, module
// info, cache stats), convert_launch.cc (launch configuration, fj_arg array,
// kernel info), convert_copy.cc (copy and prefetch descriptors, tensor
// checks). Each Read* validates what it reads (struct_size,
// alignment, NULL data with a size, enum ranges, unknown flags) and names
// the offending field; each Fj* makes a whole public output struct.
//
// Two rules hold for everything a caller hands in:
//  - Enum fields and enum arguments are read as the int32 they are in
//    memory (RawEnum, base/raw_enum.h), range-checked, then converted: a
//    caller may store any value, and loading it as the enum type is
//    undefined in C++.
//  - Structs are read by memcpy, so a struct at any address reads safely.
//    The one array read with a caller-given stride, fj_arg[], must have a
//    stride and a base aligned for fj_arg (the runtime reads its elements
//    in place): anything else is refused.
#ifndef FLEETJIT_CAPI_CONVERT_H_
#define FLEETJIT_CAPI_CONVERT_H_

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/raw_enum.h"
#include "fleetjit/fleetjit.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/builder/image_import.h"
#include "runtime/copy/copy_request.h"
#include "runtime/load/kernel_attributes.h"
#include "runtime/runtime.h"

namespace fleetjit::capi {

inline absl::Status NullArgument(const char* name) {
  return absl::InvalidArgumentError(absl::StrCat(name, " is NULL"));
}

// The struct_size a caller's struct starts with, read wherever it lies.
template <typename T>
size_t StructSize(const T* in) {
  size_t size;
  std::memcpy(&size, in, sizeof(size));
  return size;
}

// Copies a caller's argument struct into a zero-initialised T, checking
// struct_size: shorter than `min_size` (version 1) is an error, longer is
// fine (the unknown tail is ignored).
template <typename T>
absl::Status ReadStruct(const T* in, const char* name, size_t min_size,
                        T& out) {
  if (in == nullptr) return NullArgument(name);
  const size_t size = StructSize(in);
  if (size < min_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "->struct_size is ", size, "; at least ", min_size,
                     " expected (set it to sizeof(", name, "))"));
  }
  if (size >= sizeof(T)) {
    // The common case, on every launch: one fixed-size copy (a few vector
    // moves; the variable-size memset + memcpy were two `rep` strings).
    std::memcpy(&out, in, sizeof(T));
  } else {
    std::memset(&out, 0, sizeof(T));
    std::memcpy(&out, in, size);
  }
  out.struct_size = sizeof(T);
  return absl::OkStatus();
}

// For output structs: checks struct_size before the call does any work.
template <typename T>
absl::Status CheckOutStruct(const T* out, const char* name, size_t min_size) {
  if (out == nullptr) return NullArgument(name);
  const size_t size = StructSize(out);
  if (size < min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "->struct_size is ", size, "; at least ", min_size,
        " expected (set it to sizeof(", name, ") before the call)"));
  }
  return absl::OkStatus();
}

// Copies back the part of `full` the caller has room for, keeping its
// struct_size (checked by CheckOutStruct). Returns OK, to end an entry.
template <typename T>
absl::Status WriteOutStruct(const T& full, T* out) {
  const size_t caller_size = StructSize(out);
  std::memcpy(static_cast<void*>(out), &full, std::min(caller_size, sizeof(T)));
  std::memcpy(static_cast<void*>(out), &caller_size, sizeof(caller_size));
  return absl::OkStatus();
}

// An enum value in [first, last], else INVALID_ARGUMENT
// "FIELD is VALUE, not an TYPE (FIRST..LAST)".
absl::StatusOr<int32_t> CheckEnum(int32_t value, const char* field,
                                  const char* type, int32_t first,
                                  int32_t last);

// The bytes of `s`; INVALID_ARGUMENT naming `name` when its data is NULL
// with a size, or it holds a NUL byte.
absl::StatusOr<std::string> ReadStr(fj_str s, const char* name);
// `count` strings of `array` ("name[i]" in messages); NULL with a count is
// an error. Empty strings are refused when `allow_empty` is false.
absl::StatusOr<std::vector<std::string>> ReadStrArray(const fj_str* array,
                                                      size_t count,
                                                      const char* name,
                                                      bool allow_empty = true);
// The copy implementation is numbered three ways: fj_copy_impl (the C
// ABI's, 0 = auto), jit::CopyImpl (the runtime's) and -DFJ_COPY_IMPL (the
// device layer's, jit/nvrtc_build.cc ties it to jit::CopyImpl). An
// fj_copy_impl other than auto is its jit::CopyImpl plus one; these two
// functions are the only bridges (used by every convert*.cc), and the asserts
// tie every value.
inline constexpr int32_t kFjCopyImplOffset = FJ_COPY_IMPL_SYNC;
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

// An fj_copy_impl (as RawEnum read it) of the field `field`.
absl::StatusOr<std::optional<jit::CopyImpl>> ReadCopyImpl(int32_t value,
                                                          const char* field);

// The stable names of enum values ("unknown" out of range).
const char* CopyImplName(int32_t impl);
const char* FeatureName(int32_t feature);
const char* SupportName(int32_t support);

// fj_copy_plan_for_target's arguments.
struct PlanRequest {
  jit::Target target;
  std::optional<jit::CopyImpl> impl;
};
absl::StatusOr<PlanRequest> ReadPlanRequest(fj_str target, int32_t impl);

// fj_launch_config's geometry (the stream is resolved by the caller): a
// struct of at least sizeof(fj_launch_config), read in place on the launch
// path, or a shorter caller's struct after ReadStruct zero-filled its tail.
inline void ReadLaunchConfig(const fj_launch_config& cfg, LaunchConfig* out) {
  // Field by field, straight into *out, in 4- and 8-byte moves. A
  // temporary copied out made wide loads wait on the narrow stores that
  // built it (a store-forwarding stall, ~25 ns of fj_launch over the fake);
  // so would wide loads of a config its caller has just built on the stack,
  // as the bindings do.
  for (int i = 0; i < 3; ++i) {
    out->grid[i] = cfg.grid[i];
    out->block[i] = cfg.block[i];
    out->cluster[i] = cfg.cluster[i];
  }
  out->shared_bytes = cfg.shared_bytes;
  out->flags = cfg.flags;
  out->l2_hit_ratio = cfg.l2_hit_ratio;
  out->l2_window_base = cfg.l2_window_base;
  out->l2_window_bytes = cfg.l2_window_bytes;
}

// fj_runtime_options (NULL: defaults), without the environment.
absl::StatusOr<RuntimeOptions> ReadRuntimeOptions(
    const fj_runtime_options* options);
absl::StatusOr<BuildSpec> ReadBuildSpec(const fj_build_options* options);
absl::StatusOr<ImageSpec> ReadImageSpec(const fj_module_load_options* options);
// fj_link_options, every input checked (capi/link.cc). Since 1.3.
absl::StatusOr<LinkSpec> ReadLinkSpec(const fj_link_options* options);
absl::StatusOr<copy::CopySpec> ReadCopyDesc(const fj_copy_desc* desc);
absl::StatusOr<copy::PrefetchSpec> ReadPrefetchDesc(
    const fj_prefetch_desc* desc);
// Checks the fj_arg array: `args` aligned, args[0].struct_size (the
// stride) at least sizeof(fj_arg) and a multiple of alignof(fj_arg).
// Returns the stride; 0 without arguments.
absl::StatusOr<size_t> ReadArgStride(const fj_arg* args, size_t num_args);
// The rule ReadArgStride applies for num_args > 0, building no status: the
// stride, or 0 when the array is refused (ReadArgStride then says why).
inline size_t ArgStrideOrZero(const fj_arg* args) {
  constexpr size_t kAlign = alignof(fj_arg);
  if (args == nullptr || reinterpret_cast<uintptr_t>(args) % kAlign != 0)
    return 0;
  const size_t stride = args[0].struct_size;
  return stride >= sizeof(fj_arg) && stride % kAlign == 0 ? stride : 0;
}
// A timeout in milliseconds; UINT32_MAX is forever.
absl::Duration ReadTimeout(uint32_t timeout_ms);

fj_copy_plan FjCopyPlan(const jit::CopyPlan& plan);
fj_device_info FjDeviceInfo(const DeviceReport& report);
fj_module_info FjModuleInfo(const ModuleRecord& record);
fj_kernel_info FjKernelInfo(const LoadedKernel& kernel);
// fj_kernel_info's 1.3 fields.
void AddKernelAttributes(const KernelAttributes& a, fj_kernel_info& info);
fj_global_info FjGlobalInfo(const ModuleLoader::Global& g);
fj_cache_stats FjCacheStats(const CacheStats& stats);
absl::StatusOr<fj_tensor_check> CheckTensorArg(const fj_tensor_arg* arg);
// fj_runtime_include_dir's outputs for folder `index` of `dirs`.
absl::Status WriteIncludeDir(const std::vector<jit::IncludeDir>& dirs,
                             size_t index, size_t* out_count,
                             const char** out_path, const char** out_origin);

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_CONVERT_H_
