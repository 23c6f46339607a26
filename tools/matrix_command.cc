// fleetjit matrix [--variants impl@target,...] [--target T,...]
//                 [--junit FILE] [--json] [--quiet] -- CMD ARGS...
//
// Runs the user's own test command once per copy implementation and PTX
// target, through the variables the runtime reads (FLEETJIT_COPY_IMPL and
// FLEETJIT_TARGET; a native variant removes FLEETJIT_TARGET so the runtime
// targets the device), then prints the pass/fail matrix and optionally
// writes JUnit XML for CI. Every variant also runs in the copy layer's
// checked mode (FLEETJIT_CHECK=1: a tile load outside a promise-in-bounds
// tensor traps naming the call) unless --no-check leaves FLEETJIT_CHECK as
// the environment has it. The variants are, in this order of precedence:
//   --variants   exactly these, e.g. tma,sync@compute_75 (no @: native);
//   --target     each named target under every implementation it has;
//   the GPU      the rows `fleetjit selftest` runs on device 0, e.g. on
//                sm_90: tma, cp_async, sync (native), cp_async@compute_80,
//                sync@compute_75.
// Exit codes: 0 every variant passed, 1 one failed (or the report could
// not be written), 2 usage, 3 no GPU and no --variants or --target.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "conformance/runner.h"
#include "tools/child_process.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/junit_xml.h"

namespace fleetjit::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kTailBytes = 16 * 1024;
constexpr int kTailLines = 60;
constexpr const char* kImpls[] = {"tma", "cp_async", "sync"};

struct Variant {
  std::string impl;
  std::string target;  // shown; for a native variant, the device's
  bool native = false;
  std::string Name() const { return absl::StrCat(impl, "@", target); }
};

// Checks `impl` at `target` with the library's copy planner (no GPU
// needed); the error names both.
absl::Status CheckPlan(const std::string& impl, const std::string& target) {
  fj_copy_plan plan{};
  plan.struct_size = sizeof(plan);
  fj_status* st =
      fj_copy_plan_for_target(Str(target), *CopyImplNamed(impl), &plan);
  if (st == nullptr) return absl::OkStatus();
  const std::string message = fj_status_message(st, nullptr);
  fj_status_free(st);
  return absl::InvalidArgumentError(
      absl::StrCat("'", impl, "@", target, "': ", message));
}

absl::StatusOr<std::vector<Variant>> NamedVariants(
    const std::vector<std::string>& names) {
  std::vector<Variant> out;
  for (const std::string& name : names) {
    Variant v;
    const size_t at = name.find('@');
    v.impl = name.substr(0, at);
    v.native = at == std::string::npos;
    v.target = v.native ? "native" : name.substr(at + 1);
    if (!CopyImplNamed(v.impl)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown implementation in '", name, "': use tma, cp_async or sync"));
    }
    if (!v.native) {
      absl::Status s = CheckPlan(v.impl, v.target);
      if (!s.ok()) return s;
    }
    out.push_back(v);
  }
  return out;
}

// Each target under every implementation the planner accepts for it.
absl::StatusOr<std::vector<Variant>> TargetVariants(
    const std::vector<std::string>& targets) {
  std::vector<Variant> out;
  for (const std::string& t : targets) {
    fj_copy_plan plan{};
    plan.struct_size = sizeof(plan);
    if (fj_status* st =
            fj_copy_plan_for_target(Str(t), FJ_COPY_IMPL_AUTO, &plan)) {
      const std::string message = fj_status_message(st, nullptr);
      fj_status_free(st);
      return absl::InvalidArgumentError(message);
    }
    for (const char* impl : kImpls) {
      if (CheckPlan(impl, t).ok()) out.push_back({impl, t, false});
    }
  }
  return out;
}

// The selftest rows of device 0. UNAVAILABLE without a GPU.
absl::StatusOr<std::vector<Variant>> DeviceVariants() {
  int rc = kExitFailure;
  fj_runtime* rt = CreateRuntime(&rc);
  if (rt == nullptr) {  // said why on stderr
    return rc == kExitUsage
               ? absl::InvalidArgumentError(
                     "a FLEETJIT_* variable is malformed")
               : absl::InternalError("the runtime could not be created");
  }
  auto rows = selftest::DeviceImpls(rt, 0);
  fj_device_info info{};
  info.struct_size = sizeof(info);
  if (rows.ok()) fj_status_free(fj_device_info_get(rt, 0, &info));
  fj_status_free(fj_runtime_destroy(rt));
  if (!rows.ok()) return rows.status();
  std::vector<Variant> out;
  for (const std::string& row : *rows) {
    const size_t at = row.find('@');
    if (at == std::string::npos) {
      out.push_back({row, info.plan.target, true});
    } else {
      out.push_back({row.substr(0, at), row.substr(at + 1), false});
    }
  }
  return out;
}

struct Outcome {
  Variant variant;
  ChildResult result;
};

void PrintTable(const std::vector<Outcome>& outcomes, double seconds) {
  std::printf("%-9s %-20s %-6s %-10s %9s\n", "IMPL", "TARGET", "RESULT", "EXIT",
              "SECONDS");
  std::vector<std::string> failed;
  for (const Outcome& o : outcomes) {
    const bool device_target = o.variant.native && o.variant.target != "native";
    const std::string target =
        device_target ? o.variant.target + " (native)" : o.variant.target;
    std::printf("%-9s %-20s %-6s %-10s %9.2f\n", o.variant.impl.c_str(),
                target.c_str(), o.result.passed() ? "pass" : "FAIL",
                o.result.StatusText().c_str(), o.result.seconds);
    if (!o.result.passed()) failed.push_back(o.variant.Name());
  }
  std::printf(
      "matrix: %zu variants, %zu failed%s, %.1f s\n", outcomes.size(),
      failed.size(),
      failed.empty()
          ? ""
          : absl::StrCat(" (", absl::StrJoin(failed, ", "), ")").c_str(),
      seconds);
}

Json MatrixJson(const std::vector<std::string>& command,
                const std::vector<Outcome>& outcomes, double seconds) {
  Json variants = Json::array();
  int failures = 0;
  for (const Outcome& o : outcomes) {
    failures += !o.result.passed();
    variants.push_back(
        {{"impl", o.variant.impl},
         {"target", o.variant.target},
         {"native", o.variant.native},
         {"pass", o.result.passed()},
         {"exit_status", o.result.exit_code},
         {"signal", o.result.signal},
         {"seconds", o.result.seconds},
         {"output_tail", LastLines(o.result.output_tail, kTailLines)}});
  }
  return {{"command", command},
          {"tests", outcomes.size()},
          {"failures", failures},
          {"seconds", seconds},
          {"variants", std::move(variants)}};
}

bool WriteJUnit(const std::string& path, const std::vector<Outcome>& outcomes) {
  std::vector<JUnitCase> cases;
  for (const Outcome& o : outcomes) {
    JUnitCase c;
    c.name = o.variant.Name();
    c.classname = "fleetjit.matrix";
    c.seconds = o.result.seconds;
    c.failed = !o.result.passed();
    if (c.failed) {
      c.failure_message = "exit status " + o.result.StatusText();
      c.failure_text = LastLines(o.result.output_tail, kTailLines);
    }
    cases.push_back(std::move(c));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << JUnitXml("fleetjit matrix", cases);
  out.close();
  if (!out) {
    std::fprintf(stderr, "fleetjit matrix: cannot write '%s'\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace

int RunMatrix(std::vector<std::string> args) {
  std::string junit, variant_list, target_list;
  bool json = false, quiet = false, no_check = false;
  std::vector<std::string> command;
  CLI::App app(
      "Runs CMD once per copy implementation and PTX target (through "
      "FLEETJIT_COPY_IMPL and FLEETJIT_TARGET), in the copy layer's checked "
      "mode (FLEETJIT_CHECK=1; --no-check to leave it), prints the pass/fail "
      "matrix and writes JUnit XML. Default variants: those device 0 can "
      "execute "
      "(the rows of `fleetjit selftest`). Exit codes: 0 all passed, 1 any "
      "failed, 2 usage, 3 no GPU and no --variants/--target.",
      "fleetjit matrix");
  app.add_option("--variants", variant_list,
                 "exactly these, e.g. tma,cp_async@compute_80 (no @target: "
                 "the device's own)");
  app.add_option("--target", target_list,
                 "each named target under every implementation it has, e.g. "
                 "sm_80,sm_90 (no GPU needed)");
  app.add_option("--junit", junit, "write JUnit XML to FILE");
  app.add_flag("--json", json, "print one JSON object instead of the table");
  app.add_flag("--quiet", quiet, "do not echo the command's output");
  app.add_flag("--no-check", no_check,
               "do not set FLEETJIT_CHECK=1 (the copy layer's checked mode, "
               "on by default in every variant)");
  app.add_option("command", command, "the test command, after --");
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (command.empty()) {
    std::fprintf(stderr,
                 "fleetjit matrix: no test command: put it after --, e.g. "
                 "fleetjit matrix -- ctest --output-on-failure\n");
    return kExitUsage;
  }
  if (!variant_list.empty() && !target_list.empty()) {
    std::fprintf(stderr,
                 "fleetjit matrix: give --variants or --target, not both\n");
    return kExitUsage;
  }
  absl::StatusOr<std::vector<Variant>> variants =
      !variant_list.empty()  ? NamedVariants(SplitComma(variant_list))
      : !target_list.empty() ? TargetVariants(SplitComma(target_list))
                             : DeviceVariants();
  if (!variants.ok()) {
    const bool no_gpu =
        variants.status().code() == absl::StatusCode::kUnavailable;
    std::fprintf(stderr, "fleetjit matrix: %s\n",
                 std::string(variants.status().message()).c_str());
    if (no_gpu) {
      std::fprintf(stderr,
                   "fleetjit matrix: the variants come from the GPU's compute "
                   "capability; without one, name them: --target sm_80,sm_90 "
                   "or --variants sync@sm_75,cp_async@sm_80\n");
    }
    if (no_gpu) return kExitNoGpu;
    // A runtime that could not be created for another reason than a
    // malformed FLEETJIT_* variable is a failure, not a usage error.
    return variants.status().code() == absl::StatusCode::kInternal
               ? kExitFailure
               : kExitUsage;
  }
  if (variants->empty()) {
    std::fprintf(stderr, "fleetjit matrix: no variant to run\n");
    return kExitUsage;
  }
  std::vector<Outcome> outcomes;
  double seconds = 0;
  for (size_t i = 0; i < variants->size(); ++i) {
    const Variant& v = (*variants)[i];
    std::fprintf(stderr, "fleetjit matrix: [%zu/%zu] %s: %s\n", i + 1,
                 variants->size(), v.Name().c_str(),
                 absl::StrJoin(command, " ").c_str());
    std::vector<EnvChange> env = {{"FLEETJIT_COPY_IMPL", v.impl}};
    if (!no_check) env.emplace_back("FLEETJIT_CHECK", "1");
    env.emplace_back(
        "FLEETJIT_TARGET",
        v.native ? std::nullopt : std::optional<std::string>(v.target));
    absl::StatusOr<ChildResult> r =
        RunChild(command, env, quiet ? nullptr : stderr, kTailBytes);
    if (!r.ok()) {
      std::fprintf(stderr, "fleetjit matrix: %s\n",
                   std::string(r.status().message()).c_str());
      return kExitFailure;
    }
    seconds += r->seconds;
    outcomes.push_back({v, *std::move(r)});
  }
  bool ok = junit.empty() || WriteJUnit(junit, outcomes);
  if (json) {
    std::printf("%s\n",
                DumpJson(MatrixJson(command, outcomes, seconds)).c_str());
  } else {
    PrintTable(outcomes, seconds);
  }
  for (const Outcome& o : outcomes) ok &= o.result.passed();
  std::fflush(stdout);
  return ok ? kExitOk : kExitFailure;
}

}  // namespace fleetjit::cli
