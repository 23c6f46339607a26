// The readers every entry shares (strings, enums, timeouts), the copy
// implementation's names and plans, and fj_device_info (convert.h).
#include "capi/convert.h"

#include <cstdint>
#include <cstdio>

#include "base/status_macros.h"

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
  std::string text(s.data == nullptr ? "" : s.data, s.size);
  // A NUL would cut the string wherever it reaches a C API (a path, a
  // library name, a symbol): refused in every string, not cut.
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " has a NUL byte at offset ", nul, " of ", s.size,
                     " (fj_str strings end at their size and hold no NUL)"));
  }
  return text;
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

absl::StatusOr<std::optional<jit::CopyImpl>> ReadCopyImpl(int32_t value,
                                                          const char* field) {
  FJ_ASSIGN_OR_RETURN(int32_t impl,
                      CheckEnum(value, field, "fj_copy_impl", FJ_COPY_IMPL_AUTO,
                                FJ_COPY_IMPL_LAST));
  if (impl == FJ_COPY_IMPL_AUTO) return std::optional<jit::CopyImpl>();
  return std::optional(CopyImplOfFj(impl));
}

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

absl::Duration ReadTimeout(uint32_t timeout_ms) {
  return timeout_ms == UINT32_MAX ? absl::InfiniteDuration()
                                  : absl::Milliseconds(timeout_ms);
}

fj_copy_plan FjCopyPlan(const jit::CopyPlan& plan) {
  fj_copy_plan out{};
  out.struct_size = sizeof(fj_copy_plan);
  std::snprintf(out.target, sizeof(out.target), "%s",
                plan.target.Name().c_str());
  out.impl = FjOfCopyImpl(plan.impl);
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
  info.cooperative_launch = f.cooperative_launch ? 1 : 0;
  info.max_persisting_l2_bytes = f.max_persisting_l2_bytes;
  info.max_access_policy_window_bytes = f.max_access_policy_window_bytes;
  info.plan = FjCopyPlan(report.plan);
  return info;
}

}  // namespace fleetjit::capi
