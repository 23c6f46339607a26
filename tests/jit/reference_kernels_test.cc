// The reference kernels (reference/reference_kernels.h: examples/rmsnorm.cu,
// softmax.cu, transpose.cu, ...) build for every named target and copy
// implementation CI cares about, without a GPU: sm_75 sync, sm_80
// cp_async, sm_90 tma / cp_async / sync and compute_80 PTX (cp_async).
// Each builds to a cubin (ptxas checks the PTX) and, for the PTX check,
// to PTX holding the instructions its implementation promises (the span
// and tile loads of the kernel become bulk copies under tma, cp.async
// under cp_async, neither under sync).
#include "reference/reference_kernels.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace fleetjit::refk {
namespace {

struct Target {
  const char* target;
  fj_copy_impl impl;
};

class ReferenceKernelsBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(fj_runtime_create(nullptr, &rt_), nullptr);
  }
  void TearDown() override { fj_status_free(fj_runtime_destroy(rt_)); }
  fj_runtime* rt_ = nullptr;
};

// The PTX of `m`, or "" (with a test failure) when there is none.
std::string Ptx(fj_module* m) {
  const void* data = nullptr;
  size_t size = 0;
  fj_status* st = fj_module_image(m, &data, &size);
  EXPECT_EQ(st, nullptr) << (st ? fj_status_message(st, nullptr) : "");
  fj_status_free(st);
  return data == nullptr ? ""
                         : std::string(static_cast<const char*>(data), size);
}

TEST_F(ReferenceKernelsBuild, EveryKernelForEveryNamedTarget) {
  const std::vector<Target> targets = {
      {"sm_75", FJ_COPY_IMPL_SYNC}, {"sm_80", FJ_COPY_IMPL_CP_ASYNC},
      {"sm_90", FJ_COPY_IMPL_TMA},  {"sm_90", FJ_COPY_IMPL_CP_ASYNC},
      {"sm_90", FJ_COPY_IMPL_SYNC}, {"compute_80", FJ_COPY_IMPL_CP_ASYNC},
  };
  int built = 0;
  for (const KernelCase& c : Cases()) {
    for (const Target& t : targets) {
      const Variant v{fj_copy_impl_name(t.impl), t.impl, t.target};
      // The first pipeline depth the benchmark tries on every target; the
      // others on sm_90 (their code differs only in the unrolled stages).
      std::vector<int> depths;
      for (const Shape& s : c.shapes) {
        bool seen = false;
        for (int d : depths) seen = seen || d == s.stages;
        if (!seen && (depths.empty() || std::string(t.target) == "sm_90")) {
          depths.push_back(s.stages);
        }
      }
      for (int stages : depths) {
        SCOPED_TRACE(c.name + " " + v.name + " " + t.target + " stages " +
                     std::to_string(stages));
        absl::StatusOr<fj_module*> m = Build(rt_, c, v, stages);
        if (!m.ok() &&
            m.status().message().find("NVRTC") != std::string::npos &&
            m.status().message().find("UNAVAILABLE") != std::string::npos) {
          GTEST_SKIP() << "no NVRTC: " << m.status();
        }
        ASSERT_TRUE(m.ok()) << m.status();
        fj_module_info info{};
        info.struct_size = sizeof(info);
        ASSERT_EQ(fj_module_info_get(*m, &info), nullptr);
        EXPECT_STREQ(info.target, t.target);
        EXPECT_EQ(info.copy_impl, t.impl);
        EXPECT_GT(info.image_bytes, 0u);
        fj_status_free(fj_module_destroy(*m));
        ++built;
      }
    }
  }
  EXPECT_GT(built, 0);
}

// Every build option of the tuned spaces (Shape::define: "PRODUCER=2",
// "TR_BOX=32 FJ_NARROW_INLINE=1", ...) builds, so a benchmark's sweep on
// the GPU never meets a candidate that does not compile. Each distinct set
// once, for sm_90, the implementations taken in turn.
TEST_F(ReferenceKernelsBuild, EveryShapesBuildOptionsBuild) {
  const fj_copy_impl impls[] = {FJ_COPY_IMPL_TMA, FJ_COPY_IMPL_CP_ASYNC,
                                FJ_COPY_IMPL_SYNC};
  int built = 0;
  for (const KernelCase& c : Cases()) {
    std::vector<std::string> seen;
    for (const Shape& s : c.shapes) {
      if (s.define == nullptr) continue;
      bool again = false;
      for (const std::string& d : seen) again = again || d == s.define;
      if (again) continue;
      seen.push_back(s.define);
      const fj_copy_impl impl = impls[built % 3];
      const Variant v{fj_copy_impl_name(impl), impl, "sm_90"};
      SCOPED_TRACE(c.name + " " + v.name + " " + ShapeName(s));
      absl::StatusOr<fj_module*> m =
          Build(rt_, c, v, s.stages, "", FJ_OUTPUT_CUBIN, s.define);
      if (!m.ok() && m.status().message().find("NVRTC") != std::string::npos &&
          m.status().message().find("UNAVAILABLE") != std::string::npos) {
        GTEST_SKIP() << "no NVRTC: " << m.status();
      }
      ASSERT_TRUE(m.ok()) << m.status();
      fj_status_free(fj_module_destroy(*m));
      ++built;
    }
  }
  EXPECT_GT(built, 5);  // the transpose, softmax and decode have several
}

// The kernels whose warps have roles (consumers, then producers) trap on
// a block of another size: every shape of their tuned spaces launches
// 32 x (consumer warps + PRODUCER) threads, PRODUCER as its define sets it
// (the examples' defaults: 2 in the GEMM, 4 in the decode).
TEST_F(ReferenceKernelsBuild, ProducerShapesLaunchTheBlockTheirRolesNeed) {
  int checked = 0;
  for (const KernelCase& c : Cases()) {
    int consumers = 0, default_producers = 0;
    if (c.kernel == "gemm_mma") consumers = 8, default_producers = 2;
    if (c.kernel == "paged_decode") consumers = 4, default_producers = 4;
    if (consumers == 0) continue;
    for (const Shape& s : c.shapes) {
      int producers = default_producers;
      for (int p : {0, 1, 2, 4}) {
        if (ShapeHasDefine(s, "PRODUCER=" + std::to_string(p))) producers = p;
      }
      EXPECT_EQ(s.threads, 32 * (consumers + producers))
          << c.name << " " << ShapeName(s);
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

// The copies each implementation promises, in the kernels' PTX.
TEST_F(ReferenceKernelsBuild, PtxHoldsEachImplementationsCopies) {
  struct Want {
    fj_copy_impl impl;
    const char* row;   // RMSNorm / softmax: span loads
    const char* tile;  // transpose: tile loads
  };
  const std::vector<Want> wants = {
      {FJ_COPY_IMPL_TMA, "cp.async.bulk.shared::cluster.global",
       "cp.async.bulk.tensor"},
      {FJ_COPY_IMPL_CP_ASYNC, "cp.async.cg.shared.global", "cp.async"},
      {FJ_COPY_IMPL_SYNC, nullptr, nullptr},
  };
  for (const KernelCase& c : Cases()) {
    for (const Want& w : wants) {
      const Variant v{fj_copy_impl_name(w.impl), w.impl, "sm_90"};
      SCOPED_TRACE(c.name + " " + v.name);
      absl::StatusOr<fj_module*> m =
          Build(rt_, c, v, c.shapes[0].stages, "", FJ_OUTPUT_PTX);
      if (!m.ok() && m.status().message().find("NVRTC") != std::string::npos &&
          m.status().message().find("UNAVAILABLE") != std::string::npos) {
        GTEST_SKIP() << "no NVRTC: " << m.status();
      }
      ASSERT_TRUE(m.ok()) << m.status();
      const std::string ptx = Ptx(*m);
      EXPECT_NE(ptx.find(".entry " + c.entry), std::string::npos);
      const bool tiles = c.kernel == "transpose" ||
                         c.kernel == "paged_decode" || c.kernel == "gemm_mma";
      const char* want = tiles ? w.tile : w.row;
      if (want != nullptr) {
        EXPECT_NE(ptx.find(want), std::string::npos) << "no " << want;
      } else {
        EXPECT_EQ(ptx.find("cp.async"), std::string::npos)
            << "sync issued a cp.async";
      }
      fj_status_free(fj_module_destroy(*m));
    }
  }
}

}  // namespace
}  // namespace fleetjit::refk
