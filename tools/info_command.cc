// fleetjit info [--json] [--target sm_XX,...] [--impl X]: the devices and
// the copy plan fleetjit uses on each, or the plan for named targets (no
// GPU needed).
#include <optional>
#include <string>
#include <vector>

#include "runtime/cache/module_cache.h"
#include "runtime/config.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

// The variables of the runtime's table (runtime/config.h) that are set, as
// NAME=value, secrets redacted.
std::vector<std::string> EnvironmentOverrides() {
  std::vector<std::string> out;
  for (const EnvVariable& row : EnvVariables()) {
    if (std::optional<std::string> v = ShownEnvValue(row)) {
      out.push_back(std::string(row.name) + "=" + *v);
    }
  }
  return out;
}

// The cache tiers the runtime would use (the same options and FLEETJIT_*
// variables), each on or off with why.
nlohmann::ordered_json CacheTiers() {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  RuntimeOptions options;
  if (!ApplyEnvironment(options).ok()) return out;  // CreateRuntime says why
  ModuleCache cache(options.cache);
  for (const ModuleCache::TierState& t : cache.Tiers()) {
    out.push_back({{"tier", t.tier}, {"on", t.on}, {"detail", t.detail}});
  }
  return out;
}

// For each feature the plan emulates, the suffixed targets (sm_100a,
// sm_100f) of the same architecture whose plan, under the same
// implementation, has it natively: what a build could name to get it.
std::vector<std::vector<std::string>> NativeWithSuffix(
    const fj_copy_plan& plan) {
  std::vector<std::vector<std::string>> out(FJ_FEATURE_COUNT);
  std::string base = plan.target;
  if (base.empty() || base.back() == 'a' || base.back() == 'f') return out;
  for (const char* suffix : {"a", "f"}) {
    const std::string target = base + suffix;
    fj_copy_plan other{};
    other.struct_size = sizeof(other);
    fj_status* st = fj_copy_plan_for_target(Str(target), plan.impl, &other);
    if (st != nullptr) {  // no such suffix for this architecture
      fj_status_free(st);
      continue;
    }
    for (int f = 0; f < FJ_FEATURE_COUNT; ++f) {
      if (plan.support[f] != FJ_SUPPORT_NATIVE &&
          other.support[f] == FJ_SUPPORT_NATIVE) {
        out[f].push_back(target);
      }
    }
  }
  return out;
}

void PrintPlanText(const fj_copy_plan& plan, const char* indent) {
  std::printf("%scopy plan: target %s, implementation %s\n", indent,
              plan.target, fj_copy_impl_name(plan.impl));
  const std::vector<std::vector<std::string>> hints = NativeWithSuffix(plan);
  for (int f = 0; f < FJ_FEATURE_COUNT; ++f) {
    std::string hint;
    for (const std::string& t : hints[f]) {
      hint += (hint.empty() ? " (native on " : ", ") + t;
    }
    if (!hint.empty()) hint += ")";
    std::printf("%s  %-12s %s%s\n", indent,
                fj_feature_name(static_cast<fj_feature>(f)),
                fj_support_name(plan.support[f]), hint.c_str());
  }
}

nlohmann::ordered_json PlanJson(const fj_copy_plan& plan) {
  nlohmann::ordered_json features = nlohmann::ordered_json::object();
  nlohmann::ordered_json native = nlohmann::ordered_json::object();
  const std::vector<std::vector<std::string>> hints = NativeWithSuffix(plan);
  for (int f = 0; f < FJ_FEATURE_COUNT; ++f) {
    const char* name = fj_feature_name(static_cast<fj_feature>(f));
    features[name] = fj_support_name(plan.support[f]);
    if (!hints[f].empty()) native[name] = hints[f];
  }
  return {{"target", plan.target},
          {"impl", fj_copy_impl_name(plan.impl)},
          {"features", std::move(features)},
          {"native_with_suffix", std::move(native)}};
}

// CUDA's header folders the runtime searches, with why each is listed.
nlohmann::ordered_json IncludeFolders(fj_runtime* rt) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  size_t count = 0;
  if (Failed(fj_runtime_include_dir(rt, 0, &count, nullptr, nullptr),
             "listing include folders")) {
    return out;
  }
  for (size_t i = 0; i < count; ++i) {
    const char* path = nullptr;
    const char* origin = nullptr;
    if (Failed(fj_runtime_include_dir(rt, i, nullptr, &path, &origin),
               "listing include folders")) {
      break;
    }
    out.push_back({{"path", path}, {"origin", origin}});
  }
  return out;
}

}  // namespace

int RunInfo(std::vector<std::string> args) {
  bool json = false;
  std::string targets, impl_name;
  CLI::App app(
      "The devices and the copy plan fleetjit uses on each, with the "
      "FLEETJIT_* overrides in effect; or, with --target, the plan of named "
      "targets (no GPU needed).",
      "fleetjit info");
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--target", targets, "named targets, e.g. sm_80,sm_90");
  app.add_option("--impl", impl_name, "force a copy implementation")
      ->check(CLI::IsMember({"sync", "cp_async", "tma"}));
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  fj_copy_impl impl = FJ_COPY_IMPL_AUTO;
  if (!impl_name.empty()) impl = *CopyImplNamed(impl_name);
  uint32_t v = fj_version();
  std::vector<std::string> env = EnvironmentOverrides();

  // Named targets: the plan alone.
  if (!targets.empty()) {
    const std::vector<std::string> target_list = SplitComma(targets);
    if (!TargetsAreValid(target_list, "fleetjit info")) return kExitUsage;
    nlohmann::ordered_json plans = nlohmann::ordered_json::array();
    for (const std::string& t : target_list) {
      fj_copy_plan plan{};
      plan.struct_size = sizeof(plan);
      if (Failed(fj_copy_plan_for_target(Str(t), impl, &plan), t.c_str())) {
        return kExitFailure;
      }
      if (json) {
        plans.push_back(PlanJson(plan));
      } else {
        PrintPlanText(plan, "");
      }
    }
    if (json) {
      std::printf("%s\n", DumpJson({{"targets", std::move(plans)}}).c_str());
    }
    return kExitOk;
  }

  int rc = kExitOk;
  fj_runtime* rt = CreateRuntime(&rc);
  if (rt == nullptr) return rc;
  int32_t count = 0;
  if (Failed(fj_device_count(rt, &count), "counting devices")) {
    return kExitFailure;
  }
  nlohmann::ordered_json out = {
      {"version", std::to_string(v >> 16) + "." + std::to_string(v & 0xffff)},
      {"floor", LibraryFloor()},
      {"driver_error", fj_runtime_driver_error(rt)},
      {"environment", env},
      {"include_folders", IncludeFolders(rt)},
      {"cache_tiers", CacheTiers()},
      {"devices", nlohmann::ordered_json::array()}};
  if (!json) {
    std::printf("fleetjit %u.%u\n", v >> 16, v & 0xffff);
    std::printf("needs %s\n", LibraryFloor());
    for (const std::string& e : env) {
      std::printf("environment override: %s\n", e.c_str());
    }
    for (const auto& t : out["cache_tiers"]) {
      std::printf("cache tier %s: %s (%s)\n",
                  t["tier"].get<std::string>().c_str(),
                  t["on"].get<bool>() ? "on" : "off",
                  t["detail"].get<std::string>().c_str());
    }
    if (out["include_folders"].empty()) {
      std::printf(
          "CUDA headers: not found (set CUDA_HOME, or pass include folders)\n");
    }
    for (const auto& d : out["include_folders"]) {
      std::printf("CUDA headers: %s (%s)\n",
                  d["path"].get<std::string>().c_str(),
                  d["origin"].get<std::string>().c_str());
    }
    if (count == 0) {
      std::printf("devices: none (%s)\n", fj_runtime_driver_error(rt));
      std::printf(
          "builds for named targets still work: fleetjit info --target "
          "sm_80,sm_90\n");
    }
  }
  for (int32_t d = 0; d < count; ++d) {
    fj_device_info info{};
    info.struct_size = sizeof(info);
    if (Failed(fj_device_info_get(rt, d, &info), "reading device info")) {
      rc = kExitFailure;
      continue;
    }
    if (json) {
      out["devices"].push_back(
          {{"ordinal", info.ordinal},
           {"name", info.name},
           {"cc", std::to_string(info.cc_major) + "." +
                      std::to_string(info.cc_minor)},
           {"sm_count", info.sm_count},
           {"total_memory_bytes", info.total_memory_bytes},
           {"shared_memory_per_block", info.shared_memory_per_block},
           {"shared_memory_per_block_optin",
            info.shared_memory_per_block_optin},
           {"shared_memory_per_sm", info.shared_memory_per_sm},
           {"l2_cache_bytes", info.l2_cache_bytes},
           {"cluster_launch", info.cluster_launch},
           {"driver_version", info.driver_version},
           {"plan", PlanJson(info.plan)}});
    } else {
      std::printf("device %d: %s\n", info.ordinal, info.name);
      std::printf(
          "  compute capability %d.%d, %d SMs, %.1f GiB, L2 %d KiB, driver "
          "%d\n",
          info.cc_major, info.cc_minor, info.sm_count,
          info.total_memory_bytes / 1073741824.0, info.l2_cache_bytes / 1024,
          info.driver_version);
      std::printf(
          "  shared memory: %d B/block default, %d B/block opt-in, %d B/SM; "
          "clusters: %s\n",
          info.shared_memory_per_block, info.shared_memory_per_block_optin,
          info.shared_memory_per_sm, info.cluster_launch ? "yes" : "no");
      PrintPlanText(info.plan, "  ");
    }
  }
  if (json) std::printf("%s\n", DumpJson(out).c_str());
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  return rc;
}

}  // namespace fleetjit::cli
