// TMA tile loads of every rank through the copy layer, in the simplest
// kernels that can use them, against a host reference: the kernel itself
// calls load_tile (direct), or a noinline device function does it with the
// tensor passed by reference (as the conformance kernels do). Each variant
// runs in its own forked child, so one fault cannot hide the others.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance/c_abi.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

namespace ct = ::fleetjit::selftest::internal;  // the fj_arg builders

constexpr const char* kSource = R"(
#include <fleetjit/copy.cuh>
template <class T, int R>
__device__ __forceinline__ void inline_body(const fj::tensor<T, R>& t, T* out, int c) {
  extern __shared__ unsigned char smem_raw[];
  T* tile = (T*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(tile, t, fj::at(c, c, c, c, c), bar);
  bar.arrive();
  bar.wait(0);
  for (unsigned i = threadIdx.x; i < t.box_elems(); i += blockDim.x) out[i] = tile[i];
}
template <class T, int R>
__device__ __noinline__ void through_function(const fj::tensor<T, R>& t, T* out, int c) {
  inline_body<T, R>(t, out, c);  // the tensor reaches it as a reference
}
#define FJ_PROBE(R)                                                                  \
  extern "C" __global__ void direct_r##R(FJ_TENSOR(float, R) t, float* out, int c) { \
    inline_body<float, R>(t, out, c);                                                \
  }                                                                                  \
  extern "C" __global__ void function_r##R(FJ_TENSOR(unsigned, R) t, unsigned* out,    \
                                           int c) {                                  \
    through_function<unsigned, R>(t, out, c);                                        \
  }
FJ_PROBE(1) FJ_PROBE(2) FJ_PROBE(3) FJ_PROBE(4) FJ_PROBE(5)
// The tile at (c, ...) stored back into `o` (same shape as t) at the same
// place: a store that leaves the tensor when the tile straddles its end.
#define FJ_STORE_PROBE(R)                                                          \
  extern "C" __global__ void store_r##R(FJ_TENSOR(float, R) t, FJ_TENSOR(float, R) o, \
                                        int c) {                                   \
    extern __shared__ unsigned char smem_raw[];                                    \
    float* tile = (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127)); \
    __shared__ fj::barrier bar;                                                    \
    if (threadIdx.x == 0) bar.init(fj::block_threads());                           \
    __syncthreads();                                                               \
    fj::load_tile(tile, t, fj::at(c, c, c, c, c), bar);                            \
    bar.arrive();                                                                  \
    bar.wait(0);                                                                   \
    fj::store_tile(o, fj::at(c, c, c, c, c), tile);                                \
    fj::commit_group();                                                            \
    fj::wait_group<0>();                                                           \
  }
FJ_STORE_PROBE(1) FJ_STORE_PROBE(2) FJ_STORE_PROBE(3)
)";

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

// Runs one kernel on a random rank-R f32 tensor (extent `extent` per dim,
// box `bx` per dim) and compares the tile at (c, ..., c). Returns 0 on
// success, 77 when there is no TMA-capable GPU.
// `option` (e.g. "-DFJ_TMA_ANY_START=1") goes to NVRTC; "store_r*" kernels
// store the tile back and the whole output tensor is compared.
int RunProbe(const std::string& kernel, int rank, int extent, int bx, int c,
             const std::string& option = "") {
  fj_runtime* rt = nullptr;
  if (fj_runtime_create(nullptr, &rt) != nullptr) return 10;
  int32_t count = 0;
  fj_device_count(rt, &count);
  fj_device_info info{};
  info.struct_size = sizeof(info);
  if (count == 0 || fj_device_info_get(rt, 0, &info) != nullptr ||
      info.cc_major < 9)
    return 77;
  fj_build_options o{};
  o.struct_size = sizeof(o);
  std::string src = kSource;
  o.source = S(src);
  o.copy_impl = FJ_COPY_IMPL_TMA;
  const fj_str opt = S(option);
  if (!option.empty()) {
    o.nvrtc_options = &opt;
    o.num_nvrtc_options = 1;
  }
  const bool store = kernel.rfind("store_", 0) == 0;
  fj_module* m = nullptr;
  if (fj_module_build(rt, &o, &m) != nullptr) return 11;
  fj_kernel* k = nullptr;
  if (fj_module_get_kernel(m, S(kernel), 0, &k) != nullptr) return 12;
  int64_t shape[5], n = 1;
  uint32_t box[5];
  for (int d = 0; d < rank; ++d) {
    shape[d] = extent;
    box[d] = static_cast<uint32_t>(bx);
    n *= extent;
  }
  std::vector<float> host(n);
  std::mt19937 rng(std::random_device{}());
  for (float& v : host) v = static_cast<float>(rng() % 100000) + 0.5f;
  uint64_t data = 0, out = 0;
  size_t box_elems = 1;
  for (int d = 0; d < rank; ++d) box_elems *= bx;
  if (fj_mem_alloc(rt, 0, n * 4, &data) ||
      fj_mem_alloc(rt, 0, box_elems * 4, &out))
    return 13;
  fj_memcpy_htod(rt, data, host.data(), n * 4, nullptr);
  fj_memset_d8(rt, out, 0xCD, box_elems * 4, nullptr);
  fj_tensor t{reinterpret_cast<void*>(data),
              {2, 0},
              rank,
              {2, 32, 1},
              shape,
              nullptr,
              0};
  fj_tensor_arg ta{};
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  for (int d = 0; d < rank; ++d) ta.box[d] = box[d];
  fj_launch_config cfg =
      ct::LaunchConfig(1, 128, static_cast<uint32_t>(box_elems * 4 + 128));
  if (store) {
    // A poisoned output tensor: only the tile's in-bounds part changes.
    ta.oob = FJ_OOB_ZEROS;
    uint64_t odata = 0;
    if (fj_mem_alloc(rt, 0, n * 4, &odata)) return 13;
    fj_memset_d8(rt, odata, 0xCD, n * 4, nullptr);
    fj_tensor ot = t;
    ot.data = reinterpret_cast<void*>(odata);
    fj_tensor_arg oa = ta;
    oa.tensor = &ot;
    fj_arg sargs[3] = {ct::TensorArg(&ta), ct::TensorArg(&oa), ct::I32Arg(c)};
    fj_status* st = fj_launch(k, &cfg, sargs, 3);
    if (st != nullptr) {
      std::fprintf(stderr, "%s: %s\n", kernel.c_str(),
                   fj_status_message(st, nullptr));
      return 14;
    }
    std::vector<float> got(n);
    st = fj_memcpy_dtoh(rt, got.data(), odata, n * 4, nullptr);
    if (st != nullptr) {
      std::fprintf(stderr, "%s: %s\n", kernel.c_str(),
                   fj_status_message(st, nullptr));
      return 15;
    }
    float poison;
    std::memset(&poison, 0xCD, 4);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i;
      bool in = true;
      for (int d = 0; d < rank; ++d) {
        const int64_t x = rem % extent;
        rem /= extent;
        in = in && x >= c && x < c + bx;
      }
      if (std::memcmp(&got[i], in ? &host[i] : &poison, 4) != 0) return 16;
    }
    return 0;
  }
  fj_arg args[3] = {ct::TensorArg(&ta), ct::PtrArg(out), ct::I32Arg(c)};
  fj_status* st = fj_launch(k, &cfg, args, 3);
  if (st != nullptr) {
    std::fprintf(stderr, "%s: %s\n", kernel.c_str(),
                 fj_status_message(st, nullptr));
    return 14;
  }
  std::vector<float> got(box_elems);
  st = fj_memcpy_dtoh(rt, got.data(), out, box_elems * 4, nullptr);
  if (st != nullptr) {
    std::fprintf(stderr, "%s: %s\n", kernel.c_str(),
                 fj_status_message(st, nullptr));
    return 15;
  }
  for (size_t i = 0; i < box_elems; ++i) {
    // Element i of the box, dim 0 fastest, at tensor coordinates 1 + index.
    size_t rem = i, off = 0, stride = 1;
    for (int d = 0; d < rank; ++d) {
      off += (c + rem % bx) * stride;
      rem /= bx;
      stride *= extent;
    }
    if (std::memcmp(&got[i], &host[off], 4) != 0) return 16;
  }
  return 0;
}

// (kernel family, rank, extent, box, coordinate), the same in every dim.
using Shape = std::tuple<int, int, int>;
class TmaTileTest
    : public ::testing::TestWithParam<std::tuple<const char*, int, Shape>> {};

// CUDA is not fork-safe: the parent never touches it, each child does all.
TEST_P(TmaTileTest, LoadsTheTileAtEveryRank) {
  const auto [family, rank, shape] = GetParam();
  const auto [extent, bx, c] = shape;
  const std::string kernel = std::string(family) + "_r" + std::to_string(rank);
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(RunProbe(kernel, rank, extent, bx, c));
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << kernel << " crashed";
  if (WEXITSTATUS(status) == 77)
    GTEST_SKIP() << "needs a GPU with TMA (sm_90+)";
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << kernel << " extent " << extent << " box " << bx << " at " << c;
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, TmaTileTest,
    ::testing::Combine(::testing::Values("direct", "function"),
                       ::testing::Values(1, 2, 3),
                       ::testing::Values(Shape{8, 4, 1}, Shape{8, 4, 0},
                                         Shape{8, 4, 4}, Shape{8, 8, 0},
                                         Shape{64, 16, 16}, Shape{41, 4, 1})));

// The two emulations tma.cuh keeps from November's H200 runs, forced off:
// a tile whose innermost start is not 16-byte aligned through TMA
// (-DFJ_TMA_ANY_START=1), and a tile store that leaves the tensor through
// TMA (-DFJ_TMA_EDGE_STORE=1). The PTX ISA allows both. The probe must
// either copy right or fail loudly (a CUDA error, exit 15): never return
// wrong data. Which one it is, is printed: that is the measurement that
// decides whether the emulations can go (tma.cuh, FJ_TMA_ANY_START).
struct Cliff {
  const char* kernel;
  int rank, extent, bx, c;
  const char* option;
};
class TmaCliffTest : public ::testing::TestWithParam<Cliff> {};
TEST_P(TmaCliffTest, ForcedTmaCopiesRightOrFailsLoudly) {
  const Cliff k = GetParam();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0)
    _exit(RunProbe(k.kernel, k.rank, k.extent, k.bx, k.c, k.option));
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << k.kernel << " crashed the process";
  const int rc = WEXITSTATUS(status);
  if (rc == 77) GTEST_SKIP() << "needs a GPU with TMA (sm_90+)";
  std::printf("[ cliff    ] %s %s rank %d extent %d box %d at %d: %s\n",
              k.option, k.kernel, k.rank, k.extent, k.bx, k.c,
              rc == 0    ? "TMA copies it right"
              : rc == 15 ? "faults"
                         : "other");
  EXPECT_TRUE(rc == 0 || rc == 15) << "exit " << rc << " (16: wrong data)";
}
INSTANTIATE_TEST_SUITE_P(
    Forced, TmaCliffTest,
    ::testing::Values(Cliff{"direct_r1", 1, 41, 4, 1, "-DFJ_TMA_ANY_START=1"},
                      Cliff{"direct_r2", 2, 41, 4, 1, "-DFJ_TMA_ANY_START=1"},
                      Cliff{"function_r2", 2, 41, 8, 3, "-DFJ_TMA_ANY_START=1"},
                      Cliff{"direct_r3", 3, 8, 4, 1, "-DFJ_TMA_ANY_START=1"},
                      Cliff{"store_r1", 1, 41, 16, 32, "-DFJ_TMA_EDGE_STORE=1"},
                      Cliff{"store_r2", 2, 41, 16, 32, "-DFJ_TMA_EDGE_STORE=1"},
                      Cliff{"store_r3", 3, 9, 8, 4, "-DFJ_TMA_EDGE_STORE=1"},
                      // The defaults (emulated) on the same tiles: right.
                      Cliff{"store_r2", 2, 41, 16, 32, ""},
                      Cliff{"direct_r2", 2, 41, 4, 1, ""}));

}  // namespace
