// What the forced-implementation and forced-target tests share
// (forced_impl_test.cc, forced_target_test.cc; header-only, link fleetjit):
// the runtime's log lines kept for a look, a fresh kernel that includes the
// copy layer, a build that reports its module's target and implementation,
// and a fixture that keeps the forcing variables out of the test and
// creates runtimes that log to it.
#ifndef FLEETJIT_TESTS_CAPI_FORCED_ENV_UTIL_H_
#define FLEETJIT_TESTS_CAPI_FORCED_ENV_UTIL_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/env.h"

namespace fleetjit::testing {

// The lines a runtime logged (through KeepLogLine).
struct LogLines {
  std::mutex mu;
  std::vector<std::pair<int32_t, std::string>> lines;
  // Whether a line at `level` holds every one of `words`.
  bool Has(int32_t level, const std::vector<std::string>& words) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [l, line] : lines) {
      bool all = l == level;
      for (const std::string& w : words) {
        all = all && line.find(w) != std::string::npos;
      }
      if (all) return true;
    }
    return false;
  }
};

// An fj_log_fn: `user` is a LogLines.
inline void KeepLogLine(void* user, int32_t level, fj_str message) {
  auto* c = static_cast<LogLines*>(user);
  std::lock_guard<std::mutex> lock(c->mu);
  c->lines.emplace_back(level, std::string(message.data, message.size));
}

// The source of a fresh kernel that includes the copy layer (so the copy
// implementation matters to the build, and no cache holds it).
inline std::string FreshCopySource(std::mt19937_64& rng) {
  return "#include <fleetjit/copy.cuh>\n"
         "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = " +
         std::to_string(rng() % 1000000) + "; }\n";
}

// A build's status and, when it built, its module's target and copy
// implementation (fj_module_info).
struct ForcedBuild {
  fj_code code = FJ_INTERNAL;
  std::string message, target;
  std::optional<fj_copy_impl> impl;
};

// Builds `source` for `target` ("" = none named) with `impl`, as `output`,
// and destroys the module after reading its info.
inline ForcedBuild BuildAndDescribe(fj_runtime* rt, const std::string& source,
                                    const std::string& target,
                                    fj_copy_impl impl,
                                    fj_output output = FJ_OUTPUT_AUTO) {
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(source);
  b.target = S(target);
  b.copy_impl = impl;
  b.output = output;
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &b, &m);
  ForcedBuild out;
  out.code = fj_status_code(st);
  out.message = fj_status_message(st, nullptr);
  fj_status_free(st);
  if (m != nullptr) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    info.copy_impl = static_cast<fj_copy_impl>(-1);  // poisoned
    if (Code(fj_module_info_get(m, &info)) == FJ_OK) {
      out.impl = info.copy_impl;
      out.target = info.target;
    }
    fj_status_free(fj_module_destroy(m));
  }
  return out;
}

// A fixture that unsets the variables `names` for each test (restoring
// them after it) and creates runtimes whose log lines at info land in
// lines_.
class ForcedEnvTest : public ::testing::Test {
 protected:
  explicit ForcedEnvTest(std::vector<const char*> names)
      : env_(std::move(names)) {}

  // fj_runtime_create of `o` (its struct_size, flags and log fields set
  // here: the disk cache off, logging at info to lines_); expects FJ_OK.
  fj_runtime* CreateLogged(fj_runtime_options o) {
    o.struct_size = sizeof(o);
    o.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    o.log_fn = KeepLogLine;
    o.log_user = &lines_;
    o.log_level = FJ_LOG_INFO;
    fj_runtime* rt = nullptr;
    EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
    return rt;
  }

  LogLines lines_;

 private:
  EnvGuard env_;
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_CAPI_FORCED_ENV_UTIL_H_
