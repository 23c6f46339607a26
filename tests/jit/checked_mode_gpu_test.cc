// The copy layer's mistakes, caught on a real GPU (each test skips without
// one), through the C ABI:
//  - a checked build (FJ_CHECK=1) traps on a tile load outside a tensor
//    passed with oob_promise_in_bounds, printing the call (the fj::
//    function, the calling function and line, coordinates, box, shape),
//    under each implementation; an fj::gather_tiles dimension the tensor
//    lacks, given
//    as an int, traps with its message in any build. Each runs in a forked
//    child (a trap poisons the process's context), its device printf in a
//    file.
//  - a checked tma build logs, at debug level, each call site whose tiles
//    left TMA, once (the device's notes, read after the launch), and a
//    correct kernel runs unchanged when checked.
//  - examples/kv_append.cu (fj::scatter_tiles) appends rows at their slots
//    under every implementation, skipping -1 slots and the rows past the
//    last token.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/capi/capi_gpu_util.h"
#include "tests/common/corpus.h"

// Inside fleetjit::testing: capi_gpu_util.h's builders and S unqualified.
namespace fleetjit::testing {
namespace {

struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
};
void Collect(void* user, int32_t level, fj_str message) {
  auto* log = static_cast<LogLines*>(user);
  std::lock_guard<std::mutex> lock(log->mu);
  if (level == FJ_LOG_DEBUG)
    log->lines.emplace_back(message.data, message.size);
}

// A runtime on device 0 (null without a GPU), logging at `level` into
// `log` when it is given.
fj_runtime* OpenRuntime(LogLines* log = nullptr, int32_t level = FJ_LOG_WARN) {
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.log_fn = log != nullptr ? Collect : nullptr;
  ro.log_user = log;
  ro.log_level = level;
  fj_runtime* rt = nullptr;
  if (fj_runtime_create(&ro, &rt) != nullptr) return nullptr;
  int32_t n = 0;
  fj_status_free(fj_device_count(rt, &n));
  if (n == 0) {
    fj_status_free(fj_runtime_destroy(rt));
    return nullptr;
  }
  return rt;
}

int DeviceCc(fj_runtime* rt) {
  fj_device_info info{};
  info.struct_size = sizeof(info);
  fj_status_free(fj_device_info_get(rt, 0, &info));
  return info.cc_major * 10 + info.cc_minor;
}

// The implementations device 0 runs.
std::vector<fj_copy_impl> Impls(int cc) {
  std::vector<fj_copy_impl> out = {FJ_COPY_IMPL_SYNC};
  if (cc >= 80) out.push_back(FJ_COPY_IMPL_CP_ASYNC);
  if (cc >= 90) out.push_back(FJ_COPY_IMPL_TMA);
  return out;
}

fj_status* Build(fj_runtime* rt, const std::string& source,
                 const std::string& name, fj_copy_impl impl,
                 const std::vector<std::string>& options, fj_module** m) {
  std::vector<fj_str> opts;
  for (const std::string& o : options) opts.push_back(S(o));
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(source);
  o.name = S(name);
  o.copy_impl = impl;
  o.nvrtc_options = opts.data();
  o.num_nvrtc_options = opts.size();
  return fj_module_build(rt, &o, m);
}

// A 2-D f32 tensor [rows][cols] at `address`, box (box_rows, box_cols).
struct Tensor2d {
  int64_t shape[2];
  fj_tensor t{};
  fj_tensor_arg arg{};
  Tensor2d(uint64_t address, int64_t rows, int64_t cols, uint32_t box_rows,
           uint32_t box_cols, fj_oob oob, fj_dl_dtype dtype = {2, 32, 1}) {
    shape[0] = rows;
    shape[1] = cols;
    t = fj_tensor{reinterpret_cast<void*>(static_cast<uintptr_t>(address)),
                  {2, 0},
                  2,
                  dtype,
                  shape,
                  nullptr,
                  0};
    arg.struct_size = sizeof(arg);
    arg.tensor = &t;
    arg.box[0] = box_rows;
    arg.box[1] = box_cols;
    arg.oob = oob;
  }
};

// ------------------------------------------------- traps, in a child
// A tile load at (x, y) of a 64 x 64 tensor with a 32 x 32 box; the host
// passes y = -1 under promise_in_bounds: outside the tensor.
constexpr char kOutside[] = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void outside(FJ_TENSOR(float, 2) t, int x, int y,
                                   float* out) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(tile, t, fj::at(x, y), bar);
  bar.arrive_and_wait(0);
  out[threadIdx.x] = tile[threadIdx.x];
}
)";
// A gather whose dimension comes at run time: 7 on a rank-2 tensor.
constexpr char kBadDim[] = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void bad_dim(FJ_TENSOR(float, 2) t, const int* idx,
                                   int dim, float* out) {
  __shared__ __align__(128) float tile[2 * 32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::gather_tiles(tile, t, fj::at(0, 0), dim, idx, 2, bar);
  bar.arrive_and_wait(0);
  out[threadIdx.x] = tile[threadIdx.x];
}
)";

// The child: builds `source` under `impl` with `options`, launches kernel
// `kernel` (args: the tensor, then `a`, `b` as the kernel takes them, then
// an output) with its printf going to `log`, and expects the sync to fail.
// 0: as expected; 77: no GPU or no such implementation.
int TrapChild(const char* source, const char* kernel, fj_copy_impl impl,
              std::vector<std::string> options, bool ints, int a, int b,
              const char* log) {
  const int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, 1) < 0) return 20;
  fj_runtime* rt = OpenRuntime();
  if (rt == nullptr) return 77;
  const int cc = DeviceCc(rt);
  if ((impl == FJ_COPY_IMPL_TMA && cc < 90) ||
      (impl == FJ_COPY_IMPL_CP_ASYNC && cc < 80)) {
    return 77;
  }
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  fj_stream* s = nullptr;
  if (fj_status* st = Build(rt, source, "checked.cu", impl, options, &m)) {
    std::fprintf(stderr, "build: %s\n", fj_status_message(st, nullptr));
    return 21;
  }
  if (fj_module_get_kernel(m, S(std::string(kernel)), 0, &k) ||
      fj_stream_create(rt, 0, &s)) {
    return 22;
  }
  uint64_t src = 0, out = 0, idx = 0;
  if (fj_mem_alloc(rt, 0, 64 * 64 * 4, &src) ||
      fj_mem_alloc(rt, 0, 64 * 64 * 4, &out) || fj_mem_alloc(rt, 0, 64, &idx) ||
      fj_memset_d8(rt, idx, 0, 64, nullptr)) {
    return 23;
  }
  Tensor2d t(src, 64, 64, 32, 32, FJ_OOB_PROMISE_IN_BOUNDS);
  std::vector<fj_arg> args = {TensorArg(&t.arg)};
  if (ints) {
    args.push_back(I32Arg(a));
    args.push_back(I32Arg(b));
  } else {
    args.push_back(PtrArg(idx));
    args.push_back(I32Arg(a));
  }
  args.push_back(PtrArg(out));
  fj_launch_config cfg = LaunchOn(1, 128);
  cfg.stream = s;
  if (fj_status* st = fj_launch(k, &cfg, args.data(), args.size())) {
    std::fprintf(stderr, "launch: %s\n", fj_status_message(st, nullptr));
    return 24;
  }
  fj_status* st = fj_stream_synchronize(s);
  std::fflush(stdout);
  if (fj_status_code(st) != FJ_CUDA_ERROR) return 25;
  std::fprintf(stderr, "sync: %s\n", fj_status_message(st, nullptr));
  return 0;
}

// Runs TrapChild in a child under each implementation; `want` must be in
// what the device printed.
void ExpectTrap(const char* source, const char* kernel,
                std::vector<std::string> options, bool ints, int a, int b,
                const std::string& want) {
  bool ran = false;
  for (fj_copy_impl impl :
       {FJ_COPY_IMPL_SYNC, FJ_COPY_IMPL_CP_ASYNC, FJ_COPY_IMPL_TMA}) {
    SCOPED_TRACE(fj_copy_impl_name(impl));
    char log[] = "/tmp/fj_checked_XXXXXX";
    const int fd = mkstemp(log);
    ASSERT_GE(fd, 0);
    close(fd);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0)
      _exit(TrapChild(source, kernel, impl, options, ints, a, b, log));
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream in(log);
    std::stringstream printed;
    printed << in.rdbuf();
    unlink(log);
    ASSERT_TRUE(WIFEXITED(status)) << "the child crashed";
    if (WEXITSTATUS(status) == 77) continue;
    ran = true;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the launch did not fail";
    EXPECT_TRUE(absl::StrContains(printed.str(), want))
        << "device output: '" << printed.str() << "'";
  }
  if (!ran) GTEST_SKIP() << "no GPU";
}

TEST(CheckedModeGpu, ATileOutsideAPromiseInBoundsTensorTrapsNamingTheCall) {
  ExpectTrap(kOutside, "outside", {"-DFJ_CHECK=1"}, true, 0, -1,
             "fleetjit check: fj::load_tile in outside, line 9: the tile "
             "at(0, -1) with box {32, 32} leaves the tensor of shape "
             "{64, 64}, which promised its tiles in bounds");
}

TEST(CheckedModeGpu, AGatherDimensionTheTensorLacksTraps) {
  ExpectTrap(kBadDim, "bad_dim", {}, false, 7, 0,
             "fj::gather_tiles in bad_dim, line 9: dimension 7 is not a "
             "dimension of this rank-2 tensor");
}

// ------------------------------------------ notes and correct kernels
// A halo load (at(x - 1, y): an innermost start off 16 bytes) and an edge
// store in a checked tma build: both leave TMA; the debug log says so once
// per call site, however many launches. The copy is still right.
constexpr char kHalo[] = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void halo(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out,
                                int x) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(tile, in, fj::at(x - 1, blockIdx.x * 32), bar);
  bar.arrive_and_wait(0);
  fj::store_tile(out, fj::at(x + 48, blockIdx.x * 32), tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";

TEST(CheckedModeGpu, TilesThatLeaveTmaAreLoggedOncePerCallSite) {
  LogLines log;
  fj_runtime* rt = OpenRuntime(&log, FJ_LOG_DEBUG);
  if (rt == nullptr) GTEST_SKIP() << "no GPU";
  if (DeviceCc(rt) < 90) {
    fj_status_free(fj_runtime_destroy(rt));
    GTEST_SKIP() << "tma needs sm_90";
  }
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  ASSERT_EQ(Build(rt, kHalo, "halo.cu", FJ_COPY_IMPL_TMA, {"-DFJ_CHECK=1"}, &m),
            nullptr);
  ASSERT_EQ(fj_module_get_kernel(m, S(std::string("halo")), 0, &k), nullptr);
  uint64_t in = 0, out = 0;
  ASSERT_EQ(fj_mem_alloc(rt, 0, 64 * 64 * 4, &in), nullptr);
  ASSERT_EQ(fj_mem_alloc(rt, 0, 64 * 64 * 4, &out), nullptr);
  std::vector<float> host(64 * 64);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  ASSERT_EQ(fj_memcpy_htod(rt, in, host.data(), host.size() * 4, nullptr),
            nullptr);
  ASSERT_EQ(fj_memset_d8(rt, out, 0, 64 * 64 * 4, nullptr), nullptr);
  Tensor2d a(in, 64, 64, 32, 32, FJ_OOB_ZEROS),
      b(out, 64, 64, 32, 32, FJ_OOB_ZEROS);
  for (int launch = 0; launch < 3; ++launch) {
    fj_arg args[3] = {TensorArg(&a.arg), TensorArg(&b.arg), I32Arg(0)};
    fj_launch_config cfg = LaunchOn(2, 128);
    fj_status* st = fj_launch(k, &cfg, args, 3);
    ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
  }
  std::vector<float> got(64 * 64);
  ASSERT_EQ(fj_memcpy_dtoh(rt, got.data(), out, got.size() * 4, nullptr),
            nullptr);
  // Column c of the tile is input column c - 1 (0 for c = 0), stored at
  // columns 48..63 (the rest clipped).
  for (int r = 0; r < 64; ++r) {
    for (int c = 48; c < 64; ++c) {
      const int src = c - 48 - 1;
      const float want = src < 0 ? 0.f : host[r * 64 + src];
      ASSERT_EQ(got[r * 64 + c], want) << r << "," << c;
    }
  }
  std::vector<std::string> notes;
  {
    std::lock_guard<std::mutex> lock(log.mu);
    for (const std::string& l : log.lines)
      if (absl::StrContains(l, "checked build")) notes.push_back(l);
  }
  ASSERT_EQ(notes.size(), 2u) << "one line per call site";
  bool load = false, store = false;
  for (const std::string& l : notes) {
    load = load || (absl::StrContains(l, "fj::load_tile at line 9") &&
                    absl::StrContains(l, "start coordinate -1 (x 4 bytes)"));
    store = store || (absl::StrContains(l, "fj::store_tile at line 11") &&
                      absl::StrContains(l, "crossing the tensor's edge"));
  }
  EXPECT_TRUE(load) << notes[0] << "\n" << notes[1];
  EXPECT_TRUE(store) << notes[0] << "\n" << notes[1];
  fj_status_free(fj_mem_free(rt, in));
  fj_status_free(fj_mem_free(rt, out));
  fj_status_free(fj_module_destroy(m));
  fj_status_free(fj_runtime_destroy(rt));
}

// ------------------------------------------------ examples/kv_append.cu
// Appends `tokens` rows of f16 [tokens][d] into a cache of `rows` rows at
// their slots (some -1), under each implementation, checked and not; the
// cache rows no slot names keep their poison.
TEST(KvAppendGpu, RowsLandAtTheirSlotsAndOnlyThere) {
  fj_runtime* rt = OpenRuntime();
  if (rt == nullptr) GTEST_SKIP() << "no GPU";
  const std::string source = CorpusKernel("kv_append.cu");
  ASSERT_FALSE(source.empty());
  std::mt19937 rng(49);
  for (fj_copy_impl impl : Impls(DeviceCc(rt))) {
    for (const char* checked : {"-DFJ_CHECK=0", "-DFJ_CHECK=1"}) {
      SCOPED_TRACE(std::string(fj_copy_impl_name(impl)) + " " + checked);
      fj_module* m = nullptr;
      fj_kernel* k = nullptr;
      fj_status* st = Build(rt, source, "kv_append.cu", impl, {checked}, &m);
      ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
      ASSERT_EQ(fj_module_get_kernel(m, S(std::string("kv_append")), 0, &k),
                nullptr);
      for (auto [tokens, d, rows] : {std::tuple<int, int, int>{37, 1024, 256},
                                     {8, 640, 64},
                                     {1, 128, 16},
                                     {100, 256, 512}}) {
        SCOPED_TRACE(absl::StrCat(tokens, " tokens of ", d, " into ", rows));
        std::vector<uint16_t> knew(static_cast<size_t>(tokens) * d);
        for (auto& v : knew) v = static_cast<uint16_t>(rng());
        std::vector<int> slots(rows);
        for (int i = 0; i < rows; ++i) slots[i] = i;
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(tokens);
        for (int t = 0; t < tokens; t += 5) slots[t] = -1;  // padding
        uint64_t kbuf = 0, cache = 0, sbuf = 0;
        ASSERT_EQ(fj_mem_alloc(rt, 0, knew.size() * 2, &kbuf), nullptr);
        ASSERT_EQ(fj_mem_alloc(rt, 0, size_t{2} * rows * d, &cache), nullptr);
        ASSERT_EQ(fj_mem_alloc(rt, 0, slots.size() * 4, &sbuf), nullptr);
        ASSERT_EQ(
            fj_memcpy_htod(rt, kbuf, knew.data(), knew.size() * 2, nullptr),
            nullptr);
        ASSERT_EQ(
            fj_memcpy_htod(rt, sbuf, slots.data(), slots.size() * 4, nullptr),
            nullptr);
        ASSERT_EQ(fj_memset_d8(rt, cache, 0xA5, size_t{2} * rows * d, nullptr),
                  nullptr);
        constexpr int kRows = 8;  // the example's ROWS
        Tensor2d kt(kbuf, tokens, d, kRows, d, FJ_OOB_ZEROS, {2, 16, 1});
        Tensor2d ct(cache, rows, d, 1, d, FJ_OOB_PROMISE_IN_BOUNDS, {2, 16, 1});
        fj_arg args[4] = {TensorArg(&kt.arg), TensorArg(&ct.arg), PtrArg(sbuf),
                          I32Arg(tokens)};
        const int groups = (tokens + kRows - 1) / kRows;
        fj_launch_config cfg = LaunchOn(std::min(groups, 3), 128, nullptr,
                                        2 * kRows * d * 2 + 128);
        st = fj_launch(k, &cfg, args, 4);
        ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
        std::vector<uint16_t> got(static_cast<size_t>(rows) * d);
        ASSERT_EQ(
            fj_memcpy_dtoh(rt, got.data(), cache, got.size() * 2, nullptr),
            nullptr);
        std::vector<int> owner(rows, -1);
        for (int t = 0; t < tokens; ++t)
          if (slots[t] >= 0) owner[slots[t]] = t;
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < d; ++c) {
            const uint16_t want =
                owner[r] < 0 ? 0xA5A5
                             : knew[static_cast<size_t>(owner[r]) * d + c];
            ASSERT_EQ(got[static_cast<size_t>(r) * d + c], want)
                << "cache row " << r << " (token " << owner[r] << ") col " << c;
          }
        }
        fj_status_free(fj_mem_free(rt, kbuf));
        fj_status_free(fj_mem_free(rt, cache));
        fj_status_free(fj_mem_free(rt, sbuf));
      }
      fj_status_free(fj_module_destroy(m));
    }
  }
  fj_status_free(fj_runtime_destroy(rt));
}

}  // namespace
}  // namespace fleetjit::testing
