// The forced-implementation rule (fj_runtime_options.copy_impl_override and
// FLEETJIT_COPY_IMPL): a runtime-wide forced implementation applies to the
// builds whose target has it; a build for a target that lacks it gets that
// target's best implementation, named by fj_module_info and a line at info;
// an implementation forced for one build (fj_build_options.copy_impl) that
// its target lacks is refused. Named targets: no GPU needed, NVRTC is.
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

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

struct Captured {
  std::mutex mu;
  std::vector<std::pair<int32_t, std::string>> lines;
  bool Has(int32_t level, const std::string& a, const std::string& b) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [l, line] : lines) {
      if (l == level && line.find(a) != std::string::npos &&
          line.find(b) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
};

void Capture(void* user, int32_t level, fj_str message) {
  auto* c = static_cast<Captured*>(user);
  std::lock_guard<std::mutex> lock(c->mu);
  c->lines.emplace_back(level, std::string(message.data, message.size));
}

// The source of a fresh kernel that includes the copy layer (so the copy
// implementation matters to the build).
std::string FreshSource(std::mt19937_64& rng) {
  return "#include <fleetjit/copy.cuh>\n"
         "extern \"C\" __global__ void k(int* p) { p[threadIdx.x] = " +
         std::to_string(rng() % 1000000) + "; }\n";
}

struct Built {
  fj_code code = FJ_INTERNAL;
  std::string message;
  std::optional<fj_copy_impl> impl;
};

Built Build(fj_runtime* rt, const std::string& source,
            const std::string& target, fj_copy_impl impl) {
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(source);
  b.target = S(target);
  b.copy_impl = impl;
  b.output = FJ_OUTPUT_PTX;
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &b, &m);
  Built out;
  out.code = fj_status_code(st);
  out.message = fj_status_message(st, nullptr);
  fj_status_free(st);
  if (m != nullptr) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    info.copy_impl = static_cast<fj_copy_impl>(-1);  // poisoned
    if (Code(fj_module_info_get(m, &info)) == FJ_OK) out.impl = info.copy_impl;
    fj_module_destroy(m);
  }
  return out;
}

class ForcedImplTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The rule is the same whether the option or the variable forces it;
    // the test uses the option and keeps the variable out.
    if (const char* v = std::getenv("FLEETJIT_COPY_IMPL")) saved_ = v;
    unsetenv("FLEETJIT_COPY_IMPL");
  }
  void TearDown() override {
    if (saved_) setenv("FLEETJIT_COPY_IMPL", saved_->c_str(), 1);
  }
  fj_runtime* Create(fj_copy_impl forced) {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.copy_impl_override = forced;
    o.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    o.log_fn = Capture;
    o.log_user = &captured_;
    o.log_level = FJ_LOG_INFO;
    fj_runtime* rt = nullptr;
    EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
    return rt;
  }
  std::optional<std::string> saved_;
  Captured captured_;
};

TEST_F(ForcedImplTest, ARuntimeWideForcedImplYieldsToATargetThatLacksIt) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create(FJ_COPY_IMPL_TMA);
  ASSERT_NE(rt, nullptr);
  // The target that has it: forced.
  Built sm90 = Build(rt, FreshSource(rng), "sm_90", FJ_COPY_IMPL_AUTO);
  if (sm90.code == FJ_UNAVAILABLE) {
    fj_runtime_destroy(rt);
    GTEST_SKIP() << "no NVRTC here: " << sm90.message;
  }
  ASSERT_EQ(sm90.code, FJ_OK) << sm90.message;
  EXPECT_EQ(sm90.impl, FJ_COPY_IMPL_TMA);
  // Targets that lack it: their best, said at info.
  const struct {
    const char* target;
    fj_copy_impl best;
  } older[] = {{"sm_80", FJ_COPY_IMPL_CP_ASYNC},
               {"compute_75", FJ_COPY_IMPL_SYNC}};
  for (const auto& o : older) {
    SCOPED_TRACE(o.target);
    Built b = Build(rt, FreshSource(rng), o.target, FJ_COPY_IMPL_AUTO);
    ASSERT_EQ(b.code, FJ_OK) << b.message;
    EXPECT_EQ(b.impl, o.best);
    EXPECT_TRUE(captured_.Has(FJ_LOG_INFO, std::string("for ") + o.target,
                              std::string("with ") + fj_copy_impl_name(o.best)))
        << "no info line for " << o.target;
  }
  // An implementation forced for the one build is not softened.
  Built explicit_tma = Build(rt, FreshSource(rng), "sm_80", FJ_COPY_IMPL_TMA);
  EXPECT_EQ(explicit_tma.code, FJ_FAILED_PRECONDITION) << explicit_tma.message;
  EXPECT_NE(explicit_tma.message.find("tma"), std::string::npos)
      << explicit_tma.message;
  EXPECT_FALSE(explicit_tma.impl.has_value());
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

TEST_F(ForcedImplTest, AForcedImplTheTargetHasIsUsedAsBefore) {
  std::mt19937_64 rng(std::random_device{}());
  fj_runtime* rt = Create(FJ_COPY_IMPL_SYNC);
  ASSERT_NE(rt, nullptr);
  for (const char* target : {"sm_90", "sm_80", "compute_75"}) {
    SCOPED_TRACE(target);
    Built b = Build(rt, FreshSource(rng), target, FJ_COPY_IMPL_AUTO);
    if (b.code == FJ_UNAVAILABLE) {
      fj_runtime_destroy(rt);
      GTEST_SKIP() << "no NVRTC here: " << b.message;
    }
    ASSERT_EQ(b.code, FJ_OK) << b.message;
    EXPECT_EQ(b.impl, FJ_COPY_IMPL_SYNC);
  }
  // No yielding happened, so nothing was said about it.
  EXPECT_FALSE(captured_.Has(FJ_LOG_INFO, "forced copy implementation", ""));
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

}  // namespace
