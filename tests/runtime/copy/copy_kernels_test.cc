// fj_copy's and fj_prefetch's kernels on the CPU: built by NVRTC for named
// targets (sm_75, sm_80, sm_90) under every implementation each has, to a
// cubin (ptxas checks the PTX), with the instructions that implementation
// promises. No GPU needed.
#include "runtime/copy/copy_kernels.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "jit/nvrtc_build.h"
#include "platform/nvrtc_library.h"
#include "runtime/launch/launch.h"
#include "tests/common/seed.h"

namespace fleetjit::copy {
namespace {

struct Combo {
  const char* target;
  jit::CopyImpl impl;
};

std::vector<Combo> Combos() {
  return {{"sm_75", jit::CopyImpl::kSync},    {"sm_80", jit::CopyImpl::kSync},
          {"sm_80", jit::CopyImpl::kCpAsync}, {"sm_90", jit::CopyImpl::kSync},
          {"sm_90", jit::CopyImpl::kCpAsync}, {"sm_90", jit::CopyImpl::kTma}};
}

std::string Name(const ::testing::TestParamInfo<Combo>& info) {
  return absl::StrCat(info.param.target, "_",
                      jit::CopyImplName(info.param.impl));
}

absl::StatusOr<jit::Artifact> Build(const BuildSpec& spec, const Combo& c) {
  jit::BuildRequest r;
  r.source = spec.source;
  r.name = spec.name;
  r.target = *jit::ParseTarget(c.target);
  r.copy_impl = c.impl;
  r.options = spec.options;
  return jit::BuildModule(r);
}

bool Has(const std::string& ptx, const std::string& needle) {
  return ptx.find(needle) != std::string::npos;
}

class CopyKernelsTest : public ::testing::TestWithParam<Combo> {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
  }
};

TEST_P(CopyKernelsTest, TileCopyBuildsWithTheImplementationsInstructions) {
  const Combo c = GetParam();
  // Every element width at rank 2, and ranks 1, 3, 5 at 4 bytes.
  std::vector<std::pair<int, int>> shapes = {{1, 2}, {2, 2}, {4, 2}, {8, 2},
                                             {4, 1}, {4, 3}, {4, 5}};
  for (auto [eb, rank] : shapes) {
    SCOPED_TRACE(absl::StrCat("elem_bytes ", eb, " rank ", rank));
    auto spec = TileCopyBuild(eb, rank, 0, c.impl);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto a = Build(*spec, c);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_FALSE(a->is_ptx);  // a cubin: ptxas accepted the PTX
    const jit::KernelEntry* k = a->FindKernel(kTileCopyKernel);
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->params.size(), 3u);
    EXPECT_EQ(k->params[0].size, 320u);
    EXPECT_EQ(k->params[1].size, 320u);
    EXPECT_EQ(k->params[2].size, sizeof(CopyKernelArgs));
    const std::string& ptx = a->ptx;
    switch (c.impl) {
      case jit::CopyImpl::kSync:
        EXPECT_FALSE(Has(ptx, "cp.async")) << "sync issues no async copies";
        EXPECT_TRUE(Has(ptx, "ld.global")) << "thread loads";
        EXPECT_TRUE(Has(ptx, "st.shared"));
        break;
      case jit::CopyImpl::kCpAsync:
        EXPECT_TRUE(Has(ptx, "cp.async.ca.shared.global") ||
                    Has(ptx, "cp.async.cg.shared.global"));
        EXPECT_TRUE(Has(ptx, "cp.async.mbarrier.arrive"));
        EXPECT_FALSE(Has(ptx, "cp.async.bulk"));
        break;
      case jit::CopyImpl::kTma:
        EXPECT_TRUE(Has(ptx, absl::StrCat("cp.async.bulk.tensor.", rank,
                                          "d.shared::cluster.global.tile."
                                          "mbarrier::complete_tx::bytes")))
            << "tensor load";
        EXPECT_TRUE(
            Has(ptx, absl::StrCat("cp.async.bulk.tensor.", rank,
                                  "d.global.shared::cta.tile.bulk_group")))
            << "tensor store";
        EXPECT_TRUE(Has(ptx, "mbarrier.expect_tx"));
        EXPECT_TRUE(Has(ptx, "cp.async.bulk.wait_group.read 1"))
            << "the pipeline";
        // Tensors without a map fall back to cp.async in the same kernel.
        EXPECT_TRUE(Has(ptx, "cp.async.cg.shared.global") ||
                    Has(ptx, "cp.async.ca.shared.global"));
        break;
    }
    // Every implementation stores tiles back with 16-byte thread stores
    // on its fast path, and reads the gather index with plain loads.
    EXPECT_TRUE(Has(ptx, "st.global")) << "tile stores";
  }
}

TEST_P(CopyKernelsTest, PrefetchBuildsWithL2Prefetches) {
  const Combo c = GetParam();
  auto spec = PrefetchBuild(0, c.impl);
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto a = Build(*spec, c);
  ASSERT_TRUE(a.ok()) << a.status();
  const jit::KernelEntry* k = a->FindKernel(kPrefetchKernel);
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->params.size(), 1u);
  EXPECT_EQ(k->params[0].size, sizeof(PrefetchKernelArgs));
  EXPECT_TRUE(Has(a->ptx, "prefetch.global.L2")) << "line prefetches";
  EXPECT_EQ(Has(a->ptx, "cp.async.bulk.prefetch.L2.global"),
            c.impl == jit::CopyImpl::kTma)
      << "bulk prefetch exactly under tma";
  EXPECT_FALSE(Has(a->ptx, "ld.global.u8")) << "a prefetch loads nothing";
}

INSTANTIATE_TEST_SUITE_P(Targets, CopyKernelsTest,
                         ::testing::ValuesIn(Combos()), Name);

// The arguments CopyEngine passes (two tensors, the 96-byte block) pack
// against the built kernel's parameters, as a launch would check them.
TEST(CopyKernelArgs, PackAgainstTheBuiltKernel) {
  auto api = NvrtcLibrary::Default().Get();
  if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
  auto spec = TileCopyBuild(2, 3, 0, jit::CopyImpl::kCpAsync);
  ASSERT_TRUE(spec.ok());
  auto a = Build(*spec, {"sm_90", jit::CopyImpl::kCpAsync});
  ASSERT_TRUE(a.ok()) << a.status();
  const jit::KernelEntry* k = a->FindKernel(kTileCopyKernel);
  ASSERT_NE(k, nullptr);
  int64_t shape[3] = {4, 8, 64};
  fj_tensor t{reinterpret_cast<void*>(0x7f0000000000ull),
              {2, 0},
              3,
              {4, 16, 1},
              shape,
              nullptr,
              0};
  fj_tensor_arg ta{};
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  ta.box[0] = 1;
  ta.box[1] = 8;
  ta.box[2] = 64;
  CopyKernelArgs block{};
  fj_arg args[3] = {};
  for (auto& x : args) x.struct_size = sizeof(fj_arg);
  args[0].kind = args[1].kind = FJ_ARG_TENSOR;
  args[0].v.tensor = args[1].v.tensor = &ta;
  args[2].kind = FJ_ARG_BYTES;
  args[2].size = sizeof(block);
  args[2].v.bytes = &block;
  std::mt19937_64 rng = ::fleetjit::testing::SeededRng("PackAgainstTheKernel");
  for (int64_t& x : block.tiles) x = static_cast<int64_t>(rng() >> 20);
  block.total = static_cast<int64_t>(rng() >> 20);
  block.index = rng();
  block.src_rows = static_cast<int64_t>(rng() >> 20);
  TensorEncoder encoder(nullptr, "tile_copy", nullptr, nullptr);
  std::vector<uint8_t> buffer(k->param_bytes, 0xA5);
  absl::Status st =
      PackParams(*k, jit::CopyImpl::kCpAsync, args, 3, sizeof(fj_arg), &encoder,
                 buffer.data(), buffer.size());
  EXPECT_TRUE(st.ok()) << st;

  // What CopyKernels::LaunchCopy passes (the tensors described and encoded,
  // no fj_arg) packs to the same bytes.
  auto desc = DescribeTensor(&ta, 0);
  ASSERT_TRUE(desc.ok()) << desc.status();
  fj::tensor_param p[2];
  ASSERT_TRUE(
      encoder.EncodeDescribed(0, *desc, jit::CopyImpl::kCpAsync, &p[0]).ok());
  ASSERT_TRUE(
      encoder.EncodeDescribed(1, *desc, jit::CopyImpl::kCpAsync, &p[1]).ok());
  const EncodedParam encoded[3] = {
      {&p[0], sizeof(p[0])}, {&p[1], sizeof(p[1])}, {&block, sizeof(block)}};
  std::vector<uint8_t> direct(k->param_bytes, 0x5A);
  st = PackEncoded(*k, encoded, direct.data(), direct.size());
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(direct, buffer);

  args[2].size = 88;  // a block of the wrong size is refused
  st = PackParams(*k, jit::CopyImpl::kCpAsync, args, 3, sizeof(fj_arg),
                  &encoder, buffer.data(), buffer.size());
  EXPECT_FALSE(st.ok());
  const EncodedParam short_block[3] = {encoded[0], encoded[1], {&block, 88}};
  st = PackEncoded(*k, short_block, direct.data(), direct.size());
  EXPECT_FALSE(st.ok());
}

TEST(CopyKernelSource, BothKernelsAreEmbedded) {
  EXPECT_TRUE(CopyKernelSource("tile_copy.cu").ok());
  EXPECT_TRUE(CopyKernelSource("prefetch.cu").ok());
  EXPECT_FALSE(CopyKernelSource("nope.cu").ok());
  EXPECT_FALSE(TileCopyBuild(3, 2, 0, std::nullopt).ok());
  EXPECT_FALSE(TileCopyBuild(4, 6, 0, std::nullopt).ok());
}

}  // namespace
}  // namespace fleetjit::copy
