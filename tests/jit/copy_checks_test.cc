// <fleetjit/copy.cuh>'s checks and its index lists, on the CPU (NVRTC, no
// GPU): what a kernel's mistakes turn into at build time (a compile error,
// a trap with a message in the PTX), what the checked build (FJ_CHECK=1)
// adds and what an ordinary build does not, and the instructions the
// scatter emits under each implementation. The traps themselves run on the
// GPU host (tests/jit/checked_mode_gpu_test.cc); the gather and scatter
// semantics run on the CPU in tests/jit/copy_emulation_test.cc.
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "jit/nvrtc_build.h"
#include "platform/cuda_headers.h"
#include "platform/nvrtc_library.h"
#include "reference/bundled_kernels.h"
#include "tests/jit/copy_build_util.h"

namespace fleetjit::jit {
namespace {

// The strings of a PTX module (its `$str` byte arrays), decoded.
std::vector<std::string> PtxStrings(const std::string& ptx) {
  std::vector<std::string> out;
  const std::regex re(R"(\$str[$\w]*\[\d+\]\s*=\s*\{([^}]*)\})");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), re), end; it != end;
       ++it) {
    std::string s, item;
    std::stringstream list((*it)[1].str());
    while (std::getline(list, item, ',')) {
      const int v = std::stoi(item);
      if (v == 0) break;
      s.push_back(static_cast<char>(v));
    }
    out.push_back(s);
  }
  return out;
}
bool HasString(const std::string& ptx, const std::string& needle) {
  for (const std::string& s : PtxStrings(ptx)) {
    if (Has(s, needle)) return true;
  }
  return false;
}

class CopyChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
  }
};

// ------------------------------------------- a dimension the tensor lacks
// Before, fj::gather_tiles with dim 7 on a rank-2 tensor compiled and
// ignored its index list (every tile was the base tile).
constexpr const char* kGatherDim = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void k(FJ_TENSOR(float, 2) t, const int* idx, int n,
                             int d) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::gather_tiles((float*)smem, t, fj::at(0, 0), DIM, idx, n, bar);
  bar.arrive_and_wait(0);
}
)";

std::string WithDim(const std::string& dim) {
  return absl::StrReplaceAll(kGatherDim, {{"DIM", dim}});
}

TEST_F(CopyChecksTest, AGatherDimensionTheTensorLacksDoesNotCompile) {
  for (const Combo& c : EveryImplOnce()) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    auto bad = Build(WithDim("fj::dim<7>"), c.target, c.impl);
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(Has(std::string(bad.status().message()),
                    "fj::dim<D> is not a dimension of this tensor"))
        << bad.status();
    auto good = Build(WithDim("fj::dim<1>"), c.target, c.impl);
    ASSERT_TRUE(good.ok()) << good.status();
    EXPECT_FALSE(Has(good->ptx, "trap;"));
    EXPECT_FALSE(Has(good->ptx, "vprintf"));
  }
  // The scatter checks its dimension the same way.
  const std::string scatter = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void k(FJ_TENSOR(float, 3) t, const int* idx, int n) {
  extern __shared__ __align__(1024) unsigned char smem[];
  fj::scatter_tiles(t, fj::at(0, 0, 0), fj::dim<3>, idx, n, (float*)smem);
}
)";
  auto bad = Build(scatter, "sm_90", CopyImpl::kTma);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(Has(std::string(bad.status().message()),
                  "fj::dim<D> is not a dimension of this tensor"));
}

TEST_F(CopyChecksTest, AnIntGatherDimensionTheTensorLacksTrapsWithAMessage) {
  for (const Combo& c : EveryImplOnce()) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    // A constant in range costs nothing.
    auto one = Build(WithDim("1"), c.target, c.impl);
    ASSERT_TRUE(one.ok()) << one.status();
    EXPECT_FALSE(Has(one->ptx, "trap;"));
    EXPECT_FALSE(Has(one->ptx, "vprintf"));
    // 7, or a dimension known only at run time: a message, then a trap.
    for (const char* dim : {"7", "d"}) {
      auto a = Build(WithDim(dim), c.target, c.impl);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_TRUE(Has(a->ptx, "trap;")) << dim;
      EXPECT_TRUE(Has(a->ptx, "vprintf")) << dim;
      EXPECT_TRUE(HasString(a->ptx, "is not a dimension of this rank-%d"))
          << dim;
      EXPECT_TRUE(HasString(a->ptx, "fj::gather_tiles")) << dim;
    }
  }
}

// ---------------------------------------------------- the checked build
// Every tile call a newcomer makes: a plain build keeps nothing of the
// checks; a checked one (FJ_CHECK=1) traps with a message naming the call
// (the fj:: function, the calling function and line, coordinates, box,
// shape) and, under tma, has the note table the runtime reads.
constexpr const char* kTileCalls = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void calls(FJ_TENSOR(float, 2) t, FJ_TENSOR(float, 2) o,
                                 const int* idx, int x, int y, int n) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  float* tile = (float*)smem;
  fj::load_tile(tile, t, fj::at(x - 1, y), bar);
  fj::load_tiles(tile, t, (const fj::coords*)idx, n, bar);
  fj::gather_tiles(tile, t, fj::at(x, 0), fj::dim<1>, idx, n, bar);
  bar.arrive_and_wait(0);
  fj::store_tile(o, fj::at(x, y), tile);
  fj::scatter_tiles(o, fj::at(x, 0), fj::dim<1>, idx, n, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

TEST_F(CopyChecksTest, ACheckedBuildTrapsNamingTheCallAndAPlainOneDoesNot) {
  for (const Combo& c : EveryImplOnce()) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    auto plain = Build(kTileCalls, c.target, c.impl);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_FALSE(Has(plain->ptx, "trap;"));
    EXPECT_FALSE(Has(plain->ptx, "vprintf"));
    EXPECT_FALSE(Has(plain->ptx, "isspacep"));
    EXPECT_FALSE(Has(plain->ptx, "fj_check_notes"));
    EXPECT_TRUE(PtxStrings(plain->ptx).empty())
        << "an unchecked build keeps the call sites' names";

    auto checked = Build(kTileCalls, c.target, c.impl, {"-DFJ_CHECK=1"});
    ASSERT_TRUE(checked.ok()) << checked.status();
    const std::string& ptx = checked->ptx;
    EXPECT_TRUE(Has(ptx, "trap;"));
    EXPECT_TRUE(Has(ptx, "vprintf"));
    EXPECT_TRUE(Has(ptx, "isspacep.local")) << "FJ_CHECK_TENSORS comes along";
    EXPECT_TRUE(
        HasString(ptx, "fleetjit check: %s in %s, line %u: the tile at("))
        << "the message names the call";
    EXPECT_TRUE(HasString(ptx, "leaves the tensor of shape {%lld, %lld}"));
    EXPECT_TRUE(HasString(ptx, "oob_promise_in_bounds"));
    for (const char* call : {"fj::load_tile", "fj::load_tiles",
                             "fj::gather_tiles", "fj::scatter_tiles"}) {
      EXPECT_TRUE(HasString(ptx, call)) << call;
    }
    EXPECT_TRUE(HasString(ptx, "calls")) << "the caller's function";
    EXPECT_TRUE(HasString(ptx, "-byte elements but the tensor passed has"));
    // The notes of tiles that leave TMA: a tma build's global.
    EXPECT_EQ(Has(ptx, "fj_check_notes[512]"), c.impl == CopyImpl::kTma);
  }
}

// ------------------------------------------- the line a message names
// A checked build's message names the line of the fj:: call (its defaulted
// detail::site). NVRTC 13 gave 0 for every call on an FJ_TENSOR parameter
// (a __grid_constant__ one) while the layer's signatures read
// `const tensor<T, R>&` (the element size B a default argument): the GPU
// host printed "fj::load_tile in outside, line 0". Each call here sits on
// a line set by #line; its number must reach the PTX as an immediate.
constexpr const char* kSiteLines = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void lines(FJ_TENSOR(float, 2) t, FJ_TENSOR(float, 2) o,
                                 const int* idx, int n, int x, int y) {
  __shared__ __align__(128) float tile[4 * 32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
#line 4321
  fj::load_tile(tile, t, fj::at(x, y), bar);
#line 5432
  fj::gather_tiles(tile, t, fj::at(x, 0), 1, idx, n, bar);
  bar.arrive_and_wait(0);
#line 6543
  fj::store_tile(o, fj::at(x, y), tile);
#line 7654
  fj::scatter_tiles(o, fj::at(x, 0), 1, idx, n, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

TEST_F(CopyChecksTest, ACheckedMessageNamesTheLineOfACallOnAnFjTensor) {
  for (const Combo& c : EveryImplOnce()) {
    SCOPED_TRACE(absl::StrCat(c.target, " ", CopyImplName(c.impl)));
    auto checked = Build(kSiteLines, c.target, c.impl, {"-DFJ_CHECK=1"});
    ASSERT_TRUE(checked.ok()) << checked.status();
    for (const char* line : {"4321", "5432", "6543", "7654"}) {
      const std::regex imm(absl::StrCat("[ ,]", line, "[;,]"));
      EXPECT_TRUE(std::regex_search(checked->ptx, imm))
          << "no immediate " << line << ": the call's line did not reach "
          << "its checks";
    }
  }
}

// ------------------------------------------------------------- scatter
// fj::scatter_tiles and fj::store_tiles build for every target CI cares
// about under each implementation it has (to a cubin: ptxas checks the
// PTX), with the implementation's stores: tensor stores under tma (thread
// stores for the tiles TMA cannot take), 16-byte thread stores otherwise.
constexpr const char* kScatter = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void append(FJ_TENSOR(unsigned short, 2) k,
                                  FJ_TENSOR(unsigned short, 2) cache,
                                  const int* slot, int n) {
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ fj::barrier bar;
  __shared__ int rows[8];
  unsigned short* buf = (unsigned short*)smem;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  if (threadIdx.x < 8) rows[threadIdx.x] = threadIdx.x < n ? slot[threadIdx.x] : -1;
  __syncthreads();
  fj::load_tile(buf, k, fj::at(0, blockIdx.x * 8), bar);
  bar.arrive_and_wait(0);
  fj::scatter_tiles(cache, fj::at(0, 0), fj::dim<1>, rows, 8, buf);
  if (threadIdx.x < 32)
    fj::scatter_tiles(fj::warp, cache, fj::at(0, 0), 1, rows, 8, buf, n > 1);
  fj::store_tiles(cache, (const fj::coords*)slot, n, buf);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

TEST_F(CopyChecksTest, ScatterBuildsWithEachImplementationsStores) {
  for (const char* target :
       {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"}) {
    const int arch = ParseTarget(target)->arch;
    std::vector<CopyImpl> impls = {CopyImpl::kSync};
    if (arch >= 80) impls.push_back(CopyImpl::kCpAsync);
    if (arch >= 90) impls.push_back(CopyImpl::kTma);
    for (CopyImpl impl : impls) {
      SCOPED_TRACE(absl::StrCat(target, " ", CopyImplName(impl)));
      auto a = Build(kScatter, target, impl);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_FALSE(a->is_ptx);  // a cubin: ptxas accepted it
      EXPECT_TRUE(Has(a->ptx, "st.global.v4.u32")) << "16-byte thread stores";
      const bool tensor_store =
          Has(a->ptx,
              "cp.async.bulk.tensor.2d.global.shared::cta.tile."
              "bulk_group");
      EXPECT_EQ(tensor_store, impl == CopyImpl::kTma);
      if (impl != CopyImpl::kTma) EXPECT_FALSE(Has(a->ptx, "cp.async.bulk"));
    }
  }
}

// -------------------------------------------------------------- tensors
// An fj::tensor tells what the host passed: dtype, element size, fill mode
// and rank (a constant), without the raw struct.
TEST_F(CopyChecksTest, ATensorTellsItsDtypeSizeFillAndRank) {
  const std::string src = R"(
#include <fleetjit/copy.cuh>
static_assert(fj::tensor<float, 3>::rank == 3, "rank is a constant");
extern "C" __global__ void k(FJ_TENSOR(float, 2) t, int* out) {
  static_assert(fj::tensor<float, 2>::rank == 2, "rank");
  const fj::dtype_code d = t.dtype();
  const fj::oob_mode m = t.oob();
  out[0] = d == fj::dtype_f32 && t.elem_bytes() == 4 && m == fj::oob_zeros;
  out[1] = t.rank;
}
)";
  for (const Combo& c : EveryImplOnce()) {
    auto a = Build(src, c.target, c.impl);
    ASSERT_TRUE(a.ok()) << a.status();
  }
}

// ------------------------------------------------------ the examples
// A newcomer copies examples/: at their defaults (their launch bounds
// included) none spills a byte, in the kernel or in the layer's functions
// it calls, under every implementation and on sm_75, sm_80 and sm_90
// (ptxas -v through NVRTC). Before, examples/paged_decode.cu's
// __launch_bounds__(256) alone let ptxas aim at 80 registers and spill
// 24-76 bytes at the layer's out-of-line calls.
TEST_F(CopyChecksTest, TheExamplesSpillNothing) {
  const std::regex spills(
      R"((\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex props(R"(Function properties for (\S+))");
  for (size_t i = 0; i < bundled::kBundledKernelsCount; ++i) {
    const bundled::BundledKernel& k = bundled::kBundledKernels[i];
    for (const Combo& c : EveryImplOnce()) {
      SCOPED_TRACE(
          absl::StrCat(k.path, " ", c.target, " ", CopyImplName(c.impl)));
      std::vector<std::string> options = {"--ptxas-options=-v"};
      // The GEMM's default tile does not fit sm_75's 64 KB of SMEM; its
      // comment gives the shape for it.
      if (absl::EndsWith(k.path, "gemm_mma.cu") &&
          std::string(c.target) == "sm_75") {
        options.push_back("-DBN=64");
        options.push_back("-DNSTAGES=2");
      }
      auto a = Build(std::string(k.content), c.target, c.impl, options);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(Has(a->log, "bytes spill stores")) << "no ptxas -v output";
      std::string function;
      std::istringstream lines(a->log);
      for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, props)) function = m[1];
        if (std::regex_search(line, m, spills)) {
          EXPECT_EQ(m[1], "0") << function << ": " << line;
          EXPECT_EQ(m[2], "0") << function << ": " << line;
        }
      }
    }
  }
}

}  // namespace
}  // namespace fleetjit::jit
