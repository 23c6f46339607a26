// The forced-target rule (fj_runtime_options.target_override and
// FLEETJIT_TARGET), the counterpart of the forced-implementation rule
// (forced_impl_test.cc): a forced target applies to the builds that name no
// target; one that names a copy implementation (fj_build_options.copy_impl)
// the forced target lacks is built for the device's own target instead,
// named by fj_module_info and a line at info, so rehearsing an older fleet
// (`fleetjit matrix`, cp_async@compute_80) does not fail a suite's explicit
// tma build. On the fake driver's sm_90 device; NVRTC compiles.
#include <stdlib.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/fake_cuda/fake_cuda.h"
#include "tests/common/fake_cuda/fake_runtime.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

struct Lines {
  std::mutex mu;
  std::vector<std::pair<int32_t, std::string>> lines;
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

void Keep(void* user, int32_t level, fj_str message) {
  auto* c = static_cast<Lines*>(user);
  std::lock_guard<std::mutex> lock(c->mu);
  c->lines.emplace_back(level, std::string(message.data, message.size));
}

std::string FreshSource(std::mt19937_64& rng) {
  return "#include <fleetjit/copy.cuh>\n"
         "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = " +
         std::to_string(rng() % 1000000) + "; }\n";
}

struct Result {
  fj_code code = FJ_INTERNAL;
  std::string message, target;
  std::optional<fj_copy_impl> impl;
};

Result Build(fj_runtime* rt, const std::string& source,
             const std::string& target, fj_copy_impl impl) {
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(source);
  b.target = S(target);
  b.copy_impl = impl;
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &b, &m);
  Result out;
  out.code = fj_status_code(st);
  out.message = fj_status_message(st, nullptr);
  fj_status_free(st);
  if (m != nullptr) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    if (Code(fj_module_info_get(m, &info)) == FJ_OK) {
      out.impl = info.copy_impl;
      out.target = info.target;
    }
    fj_status_free(fj_module_destroy(m));
  }
  return out;
}

class ForcedTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"FLEETJIT_TARGET", "FLEETJIT_COPY_IMPL"}) {
      if (const char* value = std::getenv(v)) saved_.emplace_back(v, value);
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      setenv(name.c_str(), value.c_str(), 1);
    }
  }
  // A runtime forcing `target`, on the fake sm_90 device or (`driver`
  // empty) on none.
  fj_runtime* Create(const std::string& target, const std::string& driver) {
    fjfake_reset(1);
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.target_override = S(target);
    o.libcuda_path = S(driver);
    o.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    o.log_fn = Keep;
    o.log_user = &lines_;
    o.log_level = FJ_LOG_INFO;
    fj_runtime* rt = nullptr;
    EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
    return rt;
  }
  std::vector<std::pair<std::string, std::string>> saved_;
  Lines lines_;
};

TEST_F(ForcedTargetTest, YieldsToAnExplicitImplementationItLacks) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string driver = fleetjit::testing::FakeDriverPath();
  fj_runtime* rt = Create("compute_80", driver);
  ASSERT_NE(rt, nullptr);
  // No implementation named: the forced target, with its best.
  Result plain = Build(rt, FreshSource(rng), "", FJ_COPY_IMPL_AUTO);
  if (plain.code == FJ_UNAVAILABLE) {
    fj_status_free(fj_runtime_destroy(rt));
    GTEST_SKIP() << "no NVRTC here: " << plain.message;
  }
  ASSERT_EQ(plain.code, FJ_OK) << plain.message;
  EXPECT_EQ(plain.target, "compute_80");
  EXPECT_EQ(plain.impl, FJ_COPY_IMPL_CP_ASYNC);
  // An implementation the forced target has: the forced target.
  Result has = Build(rt, FreshSource(rng), "", FJ_COPY_IMPL_SYNC);
  ASSERT_EQ(has.code, FJ_OK) << has.message;
  EXPECT_EQ(has.target, "compute_80");
  EXPECT_EQ(has.impl, FJ_COPY_IMPL_SYNC);
  EXPECT_FALSE(lines_.Has(FJ_LOG_INFO, {"the forced target"}));
  // One it lacks: the device's target (sm_90), the implementation as asked,
  // said at info.
  Result tma = Build(rt, FreshSource(rng), "", FJ_COPY_IMPL_TMA);
  ASSERT_EQ(tma.code, FJ_OK) << tma.message;
  EXPECT_EQ(tma.target, "sm_90");
  EXPECT_EQ(tma.impl, FJ_COPY_IMPL_TMA);
  EXPECT_TRUE(lines_.Has(FJ_LOG_INFO, {"for sm_90", "compute_80", "tma"}));
  // A target named by the build is not the override's: refused as before.
  Result named = Build(rt, FreshSource(rng), "sm_80", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(named.code, FJ_FAILED_PRECONDITION) << named.message;
  EXPECT_FALSE(named.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

TEST_F(ForcedTargetTest, WithoutADeviceTheLackingImplementationIsRefused) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create("compute_80", "/nonexistent/libcuda.so.1");
  ASSERT_NE(rt, nullptr);
  Result tma = Build(rt, FreshSource(rng), "", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(tma.code, FJ_FAILED_PRECONDITION) << tma.message;
  EXPECT_NE(tma.message.find("compute_80"), std::string::npos) << tma.message;
  EXPECT_FALSE(tma.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

}  // namespace
