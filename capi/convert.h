// Conversions between the C ABI's argument structs and the C++ core's
// types, for the shim (fleetjit.cc). Each Read* validates what it reads
// (struct_size, NULL data with a size, enum ranges, unknown flags) and
// names the offending argument; each Fill* writes a whole public struct.
#ifndef FLEETJIT_CAPI_CONVERT_H_
#define FLEETJIT_CAPI_CONVERT_H_

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "jit/copy_plan.h"
#include "runtime/runtime.h"
#include "runtime/tensor_encoder.h"

namespace fleetjit::capi {

inline absl::Status NullArgument(const char* name) {
  return absl::InvalidArgumentError(absl::StrCat(name, " is NULL"));
}

// Copies a caller's argument struct into a zero-initialised T, checking
// struct_size: shorter than `min_size` (version 1) is an error, longer is
// fine (the unknown tail is ignored).
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

// For output structs: checks struct_size before the call does any work.
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

// Copies back the part of `full` the caller has room for, keeping its
// struct_size.
template <typename T>
void WriteOutStruct(const T& full, T* out) {
  size_t caller_size = out->struct_size;
  std::memcpy(out, &full, std::min(caller_size, sizeof(T)));
  out->struct_size = caller_size;
}

absl::StatusOr<std::string> ReadStr(fj_str s, const char* name);
absl::StatusOr<std::optional<jit::CopyImpl>> ReadCopyImpl(int value);
fj_copy_impl ToFjCopyImpl(jit::CopyImpl impl);

// fj_runtime_options (NULL: defaults), without the environment.
absl::StatusOr<RuntimeOptions> ReadRuntimeOptions(const fj_runtime_options* options);
absl::StatusOr<BuildSpec> ReadBuildSpec(const fj_build_options* options);
// Checks args[0].struct_size (the stride of `args`); 0 without arguments.
absl::StatusOr<size_t> ReadArgStride(const fj_arg* args, size_t num_args);

void FillPlan(const jit::CopyPlan& plan, fj_copy_plan& out);
fj_device_info DeviceInfo(const DeviceReport& report);
fj_module_info ModuleInfo(const ModuleRecord& record);
fj_kernel_info KernelInfo(const LoadedKernel& kernel);
fj_cache_stats CacheStatsOf(const CacheStats& stats);
absl::StatusOr<fj_tensor_check> CheckTensorArg(const fj_tensor_arg* arg);

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_CONVERT_H_
