// <fleetjit/copy.cuh> on the CPU: for every target CI cares about and every
// copy implementation the target has, NVRTC builds a kernel that uses every
// feature of the layer (to a cubin, so ptxas checks the PTX too) and the
// PTX holds the instructions that implementation promises. No GPU needed.
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "conformance/embedded_kernels.h"
#include "gtest/gtest.h"
#include "jit/embedded.h"
#include "jit/nvrtc_build.h"
#include "platform/cuda_headers.h"
#include "platform/nvrtc_library.h"
#include "reference/bundled_kernels.h"
#include "tests/jit/copy_build_util.h"

namespace fleetjit::jit {
namespace {

// Every feature: barriers (init/arrive/wait/test), group waits, spans both
// ways (aligned, unaligned), predicates (skip/zero), tiles of rank 1..5
// (load on a barrier and in a group, store), multicast, L2 prefetch.
constexpr const char* kEveryFeature = R"(
#include <fleetjit/copy.cuh>

extern "C" __global__ void every_feature(
    FJ_TENSOR(float, 2) t2, FJ_TENSOR(unsigned short, 3) t3,
    FJ_TENSOR(float, 2) o2, const unsigned char* g, unsigned char* go,
    int n, int p) {
  __shared__ __align__(128) unsigned char sm[4 * 8192];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  fj::cluster_sync();
  float* tile = (float*)sm;
  fj::prefetch_l2(g, n);
  fj::prefetch_tile(t2, fj::at(-3, 5));
  fj::prefetch_tensormap(t2);
  fj::load_tile(tile, t2, fj::at(-3, blockIdx.x), bar, p & 1, fj::pred_zero);
  fj::load_tile((unsigned short*)(sm + 8192), t3, fj::at(1, 2, -1), bar, p & 2);
  fj::load(sm + 16384, g + 16, n, bar, p & 4, fj::pred_zero);
  bar.arrive();
  bar.wait(0);
  fj::load_tile_multicast(tile, t2, fj::at(0, 0), bar, 0x3, p & 8);
  fj::load_multicast(sm + 16384, g, 256, bar, 0x3, true);
  bar.arrive();
  bar.wait(1);
  if (bar.test(1)) go[threadIdx.x] = 1;
  fj::load(sm + 24576, g + 3, n, fj::in_group, p & 16);
  fj::load_tile(tile, t2, fj::at(7, 7), fj::in_group, true, fj::pred_skip);
  fj::commit_group();
  fj::wait_group<1>();
  // A run-time start: a constant edge tile would fold the tma store away.
  fj::store_tile(o2, fj::at(n - 1, 3), tile, p & 32);
  fj::store(go + 32, sm + 16, n, p & 64);
  fj::commit_group();
  fj::wait_group_read<0>();
  fj::wait_group<0>();
  fj::cluster_sync();
}

template <int R>
__device__ void rank_tile(const fj::tensor<float, R>& in,
                          const fj::tensor<float, R>& out) {
  __shared__ __align__(128) float tile[2048];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  const fj::coords c = fj::at(-1, 1, -1, 1, -1);
  fj::load_tile(tile, in, c, bar);
  bar.arrive_and_wait(0);
  // The store at a run-time start, so each impl keeps every path of it.
  fj::store_tile(out, fj::at(blockIdx.x * 4, 1, 1, 1, 1), tile);
  fj::commit_group();
  fj::wait_group<0>();
}
extern "C" __global__ void rank1(FJ_TENSOR(float, 1) a, FJ_TENSOR(float, 1) b) { rank_tile(a, b); }
extern "C" __global__ void rank3(FJ_TENSOR(float, 3) a, FJ_TENSOR(float, 3) b) { rank_tile(a, b); }
extern "C" __global__ void rank4(FJ_TENSOR(float, 4) a, FJ_TENSOR(float, 4) b) { rank_tile(a, b); }
extern "C" __global__ void rank5(FJ_TENSOR(float, 5) a, FJ_TENSOR(float, 5) b) { rank_tile(a, b); }
)";

std::string ComboName(const ::testing::TestParamInfo<Combo>& info) {
  return absl::StrCat(info.param.target, "_", CopyImplName(info.param.impl));
}

// The targets of the CPU matrix, each with every implementation it has.
std::vector<Combo> AllCombos() {
  std::vector<Combo> combos;
  for (const char* target : {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90",
                             "sm_90a", "sm_100", "sm_120"}) {
    const int arch = ParseTarget(target)->arch;
    combos.push_back({target, CopyImpl::kSync});
    if (arch >= 80) combos.push_back({target, CopyImpl::kCpAsync});
    if (arch >= 90) combos.push_back({target, CopyImpl::kTma});
  }
  return combos;
}

void SkipWithoutNvrtc() {
  auto api = NvrtcLibrary::Default().Get();
  if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
}

class CopyPtxTest : public ::testing::TestWithParam<Combo> {
 protected:
  void SetUp() override { SkipWithoutNvrtc(); }
};

TEST_P(CopyPtxTest, EveryFeatureBuildsWithTheExpectedInstructions) {
  const Combo c = GetParam();
  auto a = Build(kEveryFeature, c.target, c.impl);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->is_ptx);  // a cubin: ptxas accepted the PTX
  const std::string& ptx = a->ptx;
  const int arch = ParseTarget(c.target)->arch;
  for (const char* k : {"every_feature", "rank1", "rank3", "rank4", "rank5"}) {
    EXPECT_NE(a->FindKernel(k), nullptr) << k;
  }
  // Every implementation prefetches into L2 somewhere.
  EXPECT_TRUE(Has(ptx, "prefetch.global.L2")) << "line prefetch";
  // The in-bounds tile store fast path: 16-byte SMEM reads, GMEM writes.
  EXPECT_TRUE(Has(ptx, "ld.shared.v4.u32")) << "fast tile store";
  EXPECT_TRUE(Has(ptx, "st.global.v4.u32")) << "fast tile store";

  switch (c.impl) {
    case CopyImpl::kSync:
      EXPECT_FALSE(Has(ptx, "cp.async")) << "sync issues no async copies";
      EXPECT_FALSE(Has(ptx, "mbarrier")) << "sync emulates barriers";
      EXPECT_FALSE(Has(ptx, "multicast::cluster"));
      // (atom.shared.cas, or atom.relaxed.shared.cas on newer targets)
      EXPECT_TRUE(Has(ptx, "shared.cas.b32") || Has(ptx, "atom.cas"))
          << "the emulated barrier counts a warp's arrivals with one CAS";
      // The in-bounds tile load fast path: 16-byte loads, then SMEM stores.
      EXPECT_TRUE(Has(ptx, "ld.global.v4.u32")) << "fast tile load";
      EXPECT_TRUE(Has(ptx, "st.shared.v4.u32")) << "fast tile load";
      break;
    case CopyImpl::kCpAsync:
      // Zero fill comes from the src-size operand (a register).
      EXPECT_TRUE(std::regex_search(
          ptx,
          std::regex(
              R"(cp\.async\.cg\.shared\.global\s+\[%r\d+\],\s*\[%rd\d+\],\s*16,\s*%r\d+;)")))
          << "cp.async with a src-size operand";
      EXPECT_TRUE(Has(ptx, "cp.async.ca.shared.global"));
      EXPECT_TRUE(Has(ptx, "cp.async.mbarrier.arrive.shared.b64"));
      EXPECT_TRUE(Has(ptx, "cp.async.commit_group"));
      EXPECT_TRUE(Has(ptx, "cp.async.wait_group 1"));
      EXPECT_TRUE(Has(ptx, "mbarrier.init.shared.b64"));
      EXPECT_FALSE(Has(ptx, "cp.async.bulk"));
      EXPECT_FALSE(Has(ptx, "multicast::cluster"));
      break;
    case CopyImpl::kTma:
      for (const char* d : {"1d", "2d", "3d", "4d", "5d"}) {
        EXPECT_TRUE(Has(ptx, absl::StrCat("cp.async.bulk.tensor.", d,
                                          ".shared::cluster.global.tile."
                                          "mbarrier::complete_tx::bytes")))
            << d << " tensor load";
        EXPECT_TRUE(Has(ptx, absl::StrCat("cp.async.bulk.tensor.", d,
                                          ".global.shared::cta.tile."
                                          "bulk_group")))
            << d << " tensor store";
      }
      EXPECT_TRUE(Has(ptx,
                      "cp.async.bulk.shared::cluster.global.mbarrier::"
                      "complete_tx::bytes"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.global.shared::cta.bulk_group"));
      EXPECT_TRUE(Has(ptx, "mbarrier.expect_tx"));
      EXPECT_TRUE(Has(ptx, "fence.proxy.async.shared::cta"));
      EXPECT_TRUE(Has(ptx, "fence.mbarrier_init.release.cluster"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.commit_group"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.wait_group 0"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.wait_group.read 0"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.prefetch.L2.global"));
      EXPECT_TRUE(Has(ptx, "cp.async.bulk.prefetch.tensor.2d.L2.global"));
      EXPECT_TRUE(Has(ptx, "prefetch.tensormap"));
      // Group waits on Hopper: barrier-less loads are cp.async.
      EXPECT_TRUE(Has(ptx, "cp.async.wait_group 1"));
      // Hardware multicast where it is native (see tma.cuh).
      EXPECT_EQ(Has(ptx, "multicast::cluster"), arch == 90)
          << "multicast only on sm_90/sm_90a among these targets";
      break;
  }
  // mbarrier.try_wait is sm_90+; sm_80 polls test_wait.
  if (c.impl != CopyImpl::kSync) {
    EXPECT_EQ(Has(ptx, "mbarrier.try_wait.parity"), arch >= 90);
    if (arch < 90) EXPECT_TRUE(Has(ptx, "mbarrier.test_wait.parity"));
  }
  // Clusters exist from sm_90 on.
  EXPECT_EQ(Has(ptx, "barrier.cluster.arrive"), arch >= 90);
}

INSTANTIATE_TEST_SUITE_P(AllTargets, CopyPtxTest,
                         ::testing::ValuesIn(AllCombos()), ComboName);

class CopyBuildTest : public ::testing::Test {
 protected:
  void SetUp() override { SkipWithoutNvrtc(); }
};

TEST_F(CopyBuildTest, ForcingAnImplementationTheTargetLacksFailsClearly) {
  auto tma = Build(kEveryFeature, "sm_80", CopyImpl::kTma);
  ASSERT_FALSE(tma.ok());
  EXPECT_NE(std::string(tma.status().message())
                .find("FJ_COPY_IMPL=2 (tma) needs sm_90 or newer"),
            std::string::npos)
      << tma.status();
  auto cpa = Build(kEveryFeature, "sm_75", CopyImpl::kCpAsync);
  ASSERT_FALSE(cpa.ok());
  EXPECT_NE(std::string(cpa.status().message())
                .find("FJ_COPY_IMPL=1 (cp_async) needs sm_80 or newer"),
            std::string::npos)
      << cpa.status();
}

TEST_F(CopyBuildTest, WithoutFjCopyImplTheArchitectureChooses) {
  // BuildModule always passes -DFJ_COPY_IMPL; an explicit -U shows what a
  // plain nvcc/NVRTC build of the header picks.
  const std::string probe = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void probe(int* o) { *o = fj::copy_impl; }
)";
  for (auto [target, want] : std::vector<std::pair<const char*, int>>{
           {"sm_75", 0}, {"sm_86", 1}, {"sm_90", 2}, {"sm_120", 2}}) {
    auto a = Build(probe, target, CopyImpl::kSync, {"-UFJ_COPY_IMPL"});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_TRUE(std::regex_search(
        a->ptx,
        std::regex(absl::StrCat(R"(mov\.(u32|b32)\s+%r\d+,\s*)", want, ";"))))
        << target << " should choose impl " << want;
  }
}

TEST_F(CopyBuildTest, Sm70NeedsNvrtc12) {
  auto api = NvrtcLibrary::Default().Get();
  ASSERT_TRUE(api.ok());
  if ((*api)->major >= 13) {
    GTEST_SKIP() << "sm_70 needs NVRTC 12; the NVRTC here is " << (*api)->major
                 << "." << (*api)->minor << ", which cannot target it";
  }
  auto a = Build(kEveryFeature, "sm_70", CopyImpl::kSync);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(Has(a->ptx, "cp.async"));
}

// Multicast is emitted where it is native (tma.cuh's FJ_COPY_MULTICAST):
// arch/family-specific datacenter Blackwell yes, consumer Blackwell no.
TEST_F(CopyBuildTest, MulticastFollowsTheTarget) {
  for (auto [target, want] : std::vector<std::pair<const char*, bool>>{
           {"sm_100a", true}, {"sm_100f", true}, {"sm_120a", false}}) {
    auto a = Build(kEveryFeature, target, CopyImpl::kTma);
    ASSERT_TRUE(a.ok()) << target << ": " << a.status();
    EXPECT_EQ(Has(a->ptx, "multicast::cluster"), want) << target;
  }
}

TEST_F(CopyBuildTest, HeadersAreEmbeddedUnderTheirIncludeNames) {
  for (const char* name :
       {"fleetjit/copy.cuh", "fleetjit/copy/common.cuh",
        "fleetjit/copy/sync.cuh", "fleetjit/copy/cp_async.cuh",
        "fleetjit/copy/tma.cuh", "fleetjit/copy/tensor_param.h"}) {
    bool found = false;
    for (size_t i = 0; i < kEmbeddedHeadersCount; ++i) {
      found = found || kEmbeddedHeaders[i].path == name;
    }
    EXPECT_TRUE(found) << name;
  }
}

// The bundled examples and conformance kernels build under every
// implementation (on the oldest target that has it, and on sm_90).
TEST_F(CopyBuildTest, ExamplesAndConformanceKernelsBuild) {
  const std::vector<Combo> combos = EveryImplOnce();
  std::vector<std::pair<absl::string_view, absl::string_view>> files;
  for (size_t i = 0; i < bundled::kBundledKernelsCount; ++i) {
    files.emplace_back(bundled::kBundledKernels[i].path,
                       bundled::kBundledKernels[i].content);
  }
  for (size_t i = 0; i < selftest::kConformanceKernelsCount; ++i) {
    files.emplace_back(selftest::kConformanceKernels[i].path,
                       selftest::kConformanceKernels[i].content);
  }
  ASSERT_GE(files.size(), 4u)
      << "examples and conformance kernels are embedded";
  for (const auto& [path, content] : files) {
    for (const Combo& c : combos) {
      // One element size and rank keeps this test quick; the selftest
      // builds them all.
      auto a = Build(std::string(content), c.target, c.impl,
                     {"-DFJ_CT_ELEM=4", "-DFJ_CT_RANK=2"});
      ASSERT_TRUE(a.ok()) << path << " " << c.target << " "
                          << CopyImplName(c.impl) << ": " << a.status();
    }
  }
}

// A pipelined tile copy (loads in a prologue and in the loop, a store per
// tile), the shape of bench/copy_bench's kernel.
constexpr const char* kPipelinedCopy = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void tile_copy(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out,
                                     int tiles_x, int tiles) {
  extern __shared__ __align__(128) float buf[];
  __shared__ fj::barrier bars[2];
  const int bx = in.box(0), by = in.box(1);
  if (threadIdx.x == 0) for (int s = 0; s < 2; ++s) bars[s].init(fj::block_threads());
  __syncthreads();
  for (int s = 0; s < 2; ++s) {
    int t = blockIdx.x + s * gridDim.x;
    fj::load_tile(buf + s * bx * by, in, fj::at(t % tiles_x * bx, t / tiles_x * by), bars[s],
                  t < tiles);
    bars[s].arrive();
  }
  for (int k = 0;; ++k) {
    int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    bars[k % 2].wait((k / 2) & 1);
    fj::store_tile(out, fj::at(t % tiles_x * bx, t / tiles_x * by), buf + k % 2 * bx * by);
    fj::commit_group();
    fj::wait_group_read<0>();
    int tn = t + 2 * gridDim.x;
    fj::load_tile(buf + k % 2 * bx * by, in, fj::at(tn % tiles_x * bx, tn / tiles_x * by),
                  bars[k % 2], tn < tiles);
    bars[k % 2].arrive();
  }
  fj::wait_group<0>();
}
)";

// The PTX of entry `name`, from its .entry line to its closing brace.
std::string EntryBody(const std::string& ptx, const std::string& name) {
  const size_t begin = ptx.find(".entry " + name);
  if (begin == std::string::npos) return "";
  const size_t end = ptx.find("\n}", begin);
  return ptx.substr(begin,
                    end == std::string::npos ? std::string::npos : end - begin);
}

// The common tile paths (the row walks of the software loads and stores)
// are inlined into the kernel, and the kernel keeps nothing in local
// memory. Called, they took the coords by reference and saved registers in
// a stack frame: per tile, per thread, local stores that the streaming
// loads evicted to L2 (+16% L2 write sectors in Nsight Compute) and 10% of
// the copy's bandwidth on the H200 (bench/copy_bench, sync 0.85x -> 0.93x).
TEST_F(CopyBuildTest, TileFastPathsAreInlinedWithoutLocalMemory) {
  const std::vector<Combo> combos = EveryImplOnce();
  for (const Combo& c : combos) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    auto a = Build(kPipelinedCopy, c.target, c.impl);
    ASSERT_TRUE(a.ok()) << a.status();
    const std::string body = EntryBody(a->ptx, "tile_copy");
    ASSERT_FALSE(body.empty()) << "no tile_copy entry in the PTX";
    EXPECT_FALSE(Has(body, "st.local") || Has(body, "ld.local"))
        << "the tile copy's kernel uses local memory";
    // The software store's row walk (the tma store's fallback too).
    EXPECT_TRUE(Has(body, "ld.shared.v4.u32") && Has(body, "st.global.v4.u32"))
        << "the tile store's row walk is not inlined";
    if (c.impl == CopyImpl::kSync) {
      EXPECT_TRUE(Has(body, "ld.global.v4.u32") &&
                  Has(body, "st.shared.v4.u32"))
          << "the sync tile load's row walk is not inlined";
    } else if (c.impl == CopyImpl::kCpAsync) {
      EXPECT_TRUE(Has(body, "cp.async.cg.shared.global"))
          << "the cp_async tile load's row walk is not inlined";
    }
  }
}

// A producer warp on its own: a one-warp block initialises the barriers,
// then issues every warp-scope call (spans, tiles, a gather, stores,
// groups, arrivals). Nothing in it may be a block barrier.
constexpr const char* kWarpScope = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void producer(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out,
                                    FJ_TENSOR(unsigned short, 3) kv, const int* pages,
                                    const unsigned char* g, unsigned char* go, int n,
                                    int k) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ fj::barrier full[2];
  if (threadIdx.x == 0) { full[0].init(1); full[1].init(1); }
  __syncwarp();
  fj::pipeline<2> p;
  for (int t = 0; t < n; ++t) {
    fj::load_tile(fj::warp, (float*)smem, in, fj::at(0, t), full[p.stage()], t & 1,
                  fj::pred_zero);
    full[p.stage()].arrive(fj::warp);
    full[p.stage()].wait(p.phase());
    p.advance();
  }
  fj::gather_tiles(fj::warp, (unsigned short*)(smem + 65536), kv, fj::at(0, 0, 0), 2,
                   pages, k, full[0]);
  fj::load(fj::warp, smem + 131072, g + 3, n, full[0]);
  full[0].arrive(fj::warp);
  full[0].wait(0);
  fj::store_tile(fj::warp, out, fj::at(n - 1, 3), (const float*)smem);
  fj::store(fj::warp, go + 32, smem + 16, n);
  fj::commit_group(fj::warp);
  fj::wait_group_read<0>(fj::warp);
  fj::wait_group<0>(fj::warp);
}
)";

// A single warp-scope tile load (a box of any size): one expect_tx.
constexpr const char* kOneWarpTile = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void one_tile(FJ_TENSOR(unsigned short, 2) in, int y) {
  extern __shared__ __align__(1024) unsigned short tile[];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(1);
  __syncwarp();
  fj::load_tile(fj::warp, tile, in, fj::at(0, y), bar);
  bar.arrive(fj::warp);
  bar.wait(0);
}
)";

// The guide's idiom (docs/copy-guide.md, 1.), with a swizzled
// read for the consumers' work: it builds everywhere, and its only block
// barrier is the one after the barriers' init.
constexpr const char* kGuideIdiom = R"(
#include <fleetjit/copy.cuh>
constexpr int S = 3;                           // stages: see 4.
extern "C" __global__ void __launch_bounds__(288)
rows(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out, int tiles) {
  extern __shared__ __align__(1024) unsigned char smem[];  // S tiles
  __shared__ fj::barrier full[S], empty[S];
  const unsigned warp = threadIdx.x / 32, consumers = blockDim.x / 32 - 1;
  if (threadIdx.x == 0)
    for (int i = 0; i < S; ++i) {
      full[i].init(1);              // the producer's one arrival
      empty[i].init(consumers);     // one arrival per consumer warp
    }
  __syncthreads();                  // the only block barrier
  fj::pipeline<S> p;                // stage() and phase(), per thread
  for (int t = blockIdx.x; t < tiles; t += gridDim.x, p.advance()) {
    float* buf = (float*)(smem + p.stage() * in.box_bytes());
    const fj::coords at = fj::at(0, t * in.box(1));
    if (warp == 0) {                // producer: all 32 lanes
      empty[p.stage()].wait(p.phase() ^ 1);  // consumers freed it
      fj::load_tile(fj::warp, buf, in, at, full[p.stage()]);
      full[p.stage()].arrive(fj::warp);      // attach, then arrive
    } else {                        // consumers
      full[p.stage()].wait(p.phase());
      fj::tile_ref<float, fj::swz128> tr(buf, in.box(0)); if (tr(1, threadIdx.x % 32) == 1.5f) out.data()[t] = 1.f;
      empty[p.stage()].arrive(fj::warp);
    }
  }
}
)";

int Count(const std::string& ptx, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), re),
                    std::sregex_iterator()));
}

// Warp-scope calls contain no block barrier (bar.sync / barrier.sync /
// bar.cta), under every implementation, on sm_75 to sm_90.
TEST_F(CopyBuildTest, WarpScopeCallsHaveNoBlockBarrier) {
  const std::regex block_barrier(
      R"(\b(bar\.sync|barrier\.sync|bar\.cta|barrier\.cta|bar\.red|bar\.arrive)\b)");
  const std::vector<Combo> combos = EveryImplOnce();
  for (const Combo& c : combos) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    auto a = Build(kWarpScope, c.target, c.impl);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(Count(a->ptx, block_barrier), 0)
        << "a warp-scope call synchronises the block";
    EXPECT_TRUE(Has(a->ptx, "bar.warp.sync")) << "the warp's own sync";
    auto g = Build(kGuideIdiom, c.target, c.impl);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(Count(g->ptx, block_barrier), 1) << "the guide's idiom";
    if (c.impl == CopyImpl::kCpAsync) {
      // Each lane's copies attach without counting (the non-.noinc form).
      EXPECT_TRUE(Has(a->ptx, "cp.async.mbarrier.arrive.shared.b64"));
      EXPECT_FALSE(Has(a->ptx, "cp.async.mbarrier.arrive.noinc"));
    }
    if (c.impl == CopyImpl::kTma) {
      EXPECT_TRUE(Has(a->ptx, "cp.async.bulk.tensor.2d.shared::cluster"));
      EXPECT_TRUE(Has(a->ptx, "cp.async.bulk.tensor.3d.shared::cluster"));
      EXPECT_TRUE(Has(a->ptx, "cp.async.bulk.tensor.2d.global.shared::cta"));
    }
  }
}

// Under tma a tile load of any box size raises the transaction count once:
// the pieces of a split box share one expect_tx (tests/jit/
// copy_emulation_test.cc runs the split and counts the copies).
TEST_F(CopyBuildTest, AWarpTileLoadHasOneExpectTx) {
  auto a = Build(kOneWarpTile, "sm_90", CopyImpl::kTma);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Count(a->ptx, std::regex(R"(mbarrier\.expect_tx)")), 1);
  EXPECT_GE(Count(a->ptx, std::regex(R"(cp\.async\.bulk\.tensor\.2d)")), 1);
}

// A tensor parameter declared without FJ_TENSOR is copied to local memory,
// where TMA cannot read its tensor map. With FJ_CHECK_TENSORS=1 a copy call
// given a tensor that is not the kernel's grid-constant parameter traps
// with a message; by default nothing of the check is in the PTX. Either way
// a tensor may reach a __noinline__ function by reference (NVRTC 13.0's
// address-space builtins broke its IR verifier there, so the check is
// written in PTX).
TEST_F(CopyBuildTest, TheTensorCheckTrapsWithAMessageOnlyWhenAsked) {
  const std::string good = R"(
#include <fleetjit/copy.cuh>
__device__ __noinline__ void through(const fj::tensor<float, 2>& t, float* buf,
                                     fj::barrier& bar) {
  fj::load_tile(buf, t, fj::at(0, blockIdx.x), bar);
}
extern "C" __global__ void k(FJ_TENSOR(float, 2) t, float* out) {
  __shared__ __align__(128) float buf[64 * 64];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(buf, t, fj::at(0, blockIdx.x), bar);
  bar.arrive_and_wait(0);
  through(t, buf, bar);
  bar.arrive_and_wait(1);
  out[threadIdx.x] = buf[threadIdx.x];
}
)";
  std::string bad = good;
  const std::string param = "FJ_TENSOR(float, 2) t";
  bad.replace(bad.find(param), param.size(), "fj::tensor<float, 2> t");
  const std::string checked = "#define FJ_CHECK_TENSORS 1\n";
  const std::vector<Combo> combos = EveryImplOnce();
  for (const Combo& c : combos) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    for (const std::string& src : {good, bad}) {
      auto plain = Build(src, c.target, c.impl);
      ASSERT_TRUE(plain.ok()) << plain.status();
      EXPECT_FALSE(Has(plain->ptx, "isspacep")) << "no check by default";
      EXPECT_FALSE(Has(plain->ptx, "vprintf"));
    }
    auto g = Build(checked + good, c.target, c.impl);
    ASSERT_TRUE(g.ok()) << g.status();
    auto b = Build(checked + bad, c.target, c.impl);
    ASSERT_TRUE(b.ok()) << b.status();
    for (const auto* built : {&*g, &*b}) {
      EXPECT_TRUE(Has(built->ptx, "isspacep.local"));
      EXPECT_TRUE(Has(built->ptx, "trap;"));
      EXPECT_TRUE(Has(built->ptx, "vprintf")) << "the message before the trap";
    }
  }
}

}  // namespace
}  // namespace fleetjit::jit
