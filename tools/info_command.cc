// fleetjit info [--json] [--target sm_XX,...]: the devices and the copy plan
// fleetjit uses on each, or the plan for named targets (no GPU needed).
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "fleetjit_floor.h"  // generated: cmake/floor.cmake
#include "tools/cli_util.h"
#include "tools/commands.h"

extern char** environ;

namespace fleetjit::cli {
namespace {

std::vector<std::string> EnvironmentOverrides() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "FLEETJIT_", 9) == 0) out.emplace_back(*e);
  }
  return out;
}

void PrintPlanText(const fj_copy_plan& plan, const char* indent) {
  std::printf("%scopy plan: target %s, implementation %s\n", indent, plan.target,
              fj_copy_impl_name(plan.impl));
  for (int f = 0; f < FJ_FEATURE_COUNT; ++f) {
    std::printf("%s  %-12s %s\n", indent, fj_feature_name(static_cast<fj_feature>(f)),
                fj_support_name(plan.support[f]));
  }
}

std::string PlanJson(const fj_copy_plan& plan) {
  std::string s = "{\"target\":\"" + JsonEscape(plan.target) + "\",\"impl\":\"" +
                  fj_copy_impl_name(plan.impl) + "\",\"features\":{";
  for (int f = 0; f < FJ_FEATURE_COUNT; ++f) {
    if (f) s += ",";
    s += std::string("\"") + fj_feature_name(static_cast<fj_feature>(f)) + "\":\"" +
         fj_support_name(plan.support[f]) + "\"";
  }
  return s + "}}";
}

}  // namespace

int RunInfo(std::vector<std::string> args) {
  bool json = TakeSwitch(args, "--json");
  std::string targets = TakeFlag(args, "--target");
  std::string impl_name = TakeFlag(args, "--impl");
  if (!args.empty()) {
    std::fprintf(stderr, "fleetjit info: unexpected argument '%s'\n", args[0].c_str());
    return kExitUsage;
  }
  fj_copy_impl impl = FJ_COPY_IMPL_AUTO;
  if (!impl_name.empty()) {
    bool found = false;
    for (int i = FJ_COPY_IMPL_SYNC; i <= FJ_COPY_IMPL_LAST; ++i) {
      if (impl_name == fj_copy_impl_name(static_cast<fj_copy_impl>(i))) {
        impl = static_cast<fj_copy_impl>(i);
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "fleetjit info: --impl must be sync, cp_async or tma\n");
      return kExitUsage;
    }
  }
  uint32_t v = fj_version();
  std::vector<std::string> env = EnvironmentOverrides();

  // Named targets: the plan alone.
  if (!targets.empty()) {
    std::string json_out = "{\"targets\":[";
    bool first = true;
    for (const std::string& t : SplitComma(targets)) {
      fj_copy_plan plan{};
      plan.struct_size = sizeof(plan);
      if (Failed(fj_copy_plan_for_target(Str(t), impl, &plan), t.c_str())) return kExitFailure;
      if (json) {
        json_out += (first ? "" : ",") + PlanJson(plan);
        first = false;
      } else {
        PrintPlanText(plan, "");
      }
    }
    if (json) std::printf("%s]}\n", json_out.c_str());
    return kExitOk;
  }

  fj_runtime* rt = CreateRuntime();
  if (rt == nullptr) return kExitFailure;
  int32_t count = 0;
  if (Failed(fj_device_count(rt, &count), "counting devices")) return kExitFailure;
  std::string json_out = "{\"version\":\"" + std::to_string(v >> 16) + "." +
                         std::to_string(v & 0xffff) + "\",\"floor\":\"" FJ_FLOOR_SUMMARY
                         "\",\"driver_error\":\"" +
                         JsonEscape(fj_runtime_driver_error(rt)) + "\",\"environment\":[";
  for (size_t i = 0; i < env.size(); ++i) {
    json_out += (i ? ",\"" : "\"") + JsonEscape(env[i]) + "\"";
  }
  json_out += "],\"devices\":[";
  if (!json) {
    std::printf("fleetjit %u.%u\n", v >> 16, v & 0xffff);
    std::printf("needs %s\n", FJ_FLOOR_SUMMARY);
    for (const std::string& e : env) std::printf("environment override: %s\n", e.c_str());
    if (count == 0) {
      std::printf("devices: none (%s)\n", fj_runtime_driver_error(rt));
      std::printf("builds for named targets still work: fleetjit info --target sm_80,sm_90\n");
    }
  }
  int rc = kExitOk;
  for (int32_t d = 0; d < count; ++d) {
    fj_device_info info{};
    info.struct_size = sizeof(info);
    if (Failed(fj_device_info_get(rt, d, &info), "reading device info")) {
      rc = kExitFailure;
      continue;
    }
    if (json) {
      char buf[1024];
      std::snprintf(buf, sizeof(buf),
                    "%s{\"ordinal\":%d,\"name\":\"%s\",\"cc\":\"%d.%d\",\"sm_count\":%d,"
                    "\"total_memory_bytes\":%llu,\"shared_memory_per_block\":%d,"
                    "\"shared_memory_per_block_optin\":%d,\"shared_memory_per_sm\":%d,"
                    "\"l2_cache_bytes\":%d,\"cluster_launch\":%d,\"driver_version\":%d,\"plan\":",
                    d ? "," : "", info.ordinal, JsonEscape(info.name).c_str(), info.cc_major,
                    info.cc_minor, info.sm_count,
                    static_cast<unsigned long long>(info.total_memory_bytes),
                    info.shared_memory_per_block, info.shared_memory_per_block_optin,
                    info.shared_memory_per_sm, info.l2_cache_bytes, info.cluster_launch,
                    info.driver_version);
      json_out += buf + PlanJson(info.plan) + "}";
    } else {
      std::printf("device %d: %s\n", info.ordinal, info.name);
      std::printf("  compute capability %d.%d, %d SMs, %.1f GiB, L2 %d KiB, driver %d\n",
                  info.cc_major, info.cc_minor, info.sm_count,
                  info.total_memory_bytes / 1073741824.0, info.l2_cache_bytes / 1024,
                  info.driver_version);
      std::printf("  shared memory: %d B/block default, %d B/block opt-in, %d B/SM; clusters: %s\n",
                  info.shared_memory_per_block, info.shared_memory_per_block_optin,
                  info.shared_memory_per_sm, info.cluster_launch ? "yes" : "no");
      PrintPlanText(info.plan, "  ");
    }
  }
  if (json) std::printf("%s]}\n", json_out.c_str());
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  return rc;
}

}  // namespace fleetjit::cli
