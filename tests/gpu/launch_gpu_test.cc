// The launch path on a real GPU: launches through the JIT-built thunk and
// through the generic path with results checked on fresh random data, many
// threads launching concurrently on their own streams, every kind of bad
// launch as a status, dynamic shared memory above 48 KiB, clusters, CUDA
// graph capture + replay, and a faulting kernel that poisons its device.
// Without a GPU every test skips and says why.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "jit/thunk/thunk_codegen.h"
#include "runtime/launch.h"
#include "runtime/launch_thunks.h"
#include "runtime/runtime.h"
#include "base/status_macros.h"
#include "runtime/tensor_encoder.h"

namespace fleetjit {
namespace {

constexpr char kSource[] = R"CUDA(
#include <fleetjit/copy.cuh>

struct S12 { int a, b, c; };
struct S24 { long long a; long long b; int c; };

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}

#define SCALARS_BODY                                                     \
  out[0] = (unsigned long long)(long long)i8;                            \
  out[1] = (unsigned long long)(long long)i16;                           \
  out[2] = (unsigned long long)(long long)i32;                           \
  out[3] = (unsigned long long)i64;                                      \
  out[4] = u8; out[5] = u16; out[6] = u32; out[7] = u64;                 \
  out[8] = f16; out[9] = bf16;                                           \
  out[10] = __float_as_uint(f32);                                        \
  out[11] = (unsigned long long)__double_as_longlong(f64);               \
  out[12] = (unsigned)s12.a; out[13] = (unsigned)s12.b;                  \
  out[14] = (unsigned)s12.c;                                             \
  out[15] = (unsigned long long)s24.a; out[16] = (unsigned long long)s24.b; \
  out[17] = (unsigned)s24.c;

#define SCALARS_PARAMS                                                   \
  unsigned long long* out, signed char i8, short i16, int i32,           \
  long long i64, unsigned char u8, unsigned short u16, unsigned int u32, \
  unsigned long long u64, unsigned short f16, unsigned short bf16,       \
  float f32, double f64, S12 s12, S24 s24

extern "C" __global__ void scalars(SCALARS_PARAMS) { SCALARS_BODY }
__global__ void typed_scalars(SCALARS_PARAMS) { SCALARS_BODY }

// Echoes the parameter's bytes and gathers the tensor in logical order.
extern "C" __global__ void tensor_echo(const __grid_constant__ fj::tensor_param t,
                                       unsigned char* raw, float* gathered) {
  const unsigned char* p = (const unsigned char*)&t;
  if (blockIdx.x == 0) {
    for (int i = threadIdx.x; i < 320; i += blockDim.x) raw[i] = p[i];
  }
  long long total = 1;
  for (int d = 0; d < t.rank; ++d) total *= t.shape[d];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    long long rem = i, off = 0;
    for (int d = 0; d < t.rank; ++d) {
      off += (rem % t.shape[d]) * t.stride[d];
      rem /= t.shape[d];
    }
    gathered[i] = ((const float*)t.data)[off];
  }
}

// A C++ kernel: its tensor's rank (2) and dtype (f32) are declared.
__global__ void tensor_sum(FJ_TENSOR(float, 2) t, float* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float s = 0;
  for (long long y = 0; y < t.shape(1); ++y)
    for (long long x = 0; x < t.shape(0); ++x) s += t.data()[y * t.stride(1) + x];
  *out = s;
}

// out = in + k, tile by tile through the copy layer (TMA when the tensor
// has a map). Both boxes are {16, 32} (rows, columns).
extern "C" __global__ void tile_add(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out,
                                    float k) {
  __shared__ __align__(128) float tile[16 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  const fj::coords at = fj::at(blockIdx.x * 32, blockIdx.y * 16);
  fj::load_tile(tile, in, at, bar);
  bar.arrive();
  bar.wait(0);
  for (int i = threadIdx.x; i < 16 * 32; i += blockDim.x) tile[i] += k;
  fj::store_tile(out, at, tile);
  fj::commit_group();
  fj::wait_group<0>();
}

extern "C" __global__ void smem_sum(float* out, int n) {
  extern __shared__ float s[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = (float)(i % 7);
  __syncthreads();
  if (threadIdx.x == 0) {
    float acc = 0;
    for (int i = 0; i < n; ++i) acc += s[i];
    *out = acc;
  }
}

extern "C" __global__ void cluster_ranks(unsigned* out) {
  unsigned r = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  if (threadIdx.x == 0) out[blockIdx.x] = r;
}

extern "C" __global__ void fault(int* p) { *(volatile int*)p = 1; }
)CUDA";

// ---------------------------------------------------------------------------
// The shared GPU environment: one runtime, one thunk JIT.

struct Gpu {
  std::unique_ptr<Runtime> runtime;
  const DriverApi* api = nullptr;
  Device* device = nullptr;
  LaunchThunks thunks{true};
  std::string skip;  // why there is no GPU
  std::mutex mu;
  std::vector<ModuleRecord> modules;  // kept alive: kernels point into them
};

Gpu& GetGpu() {
  static Gpu* gpu = [] {
    auto* g = new Gpu;
    RuntimeOptions options;
    auto rt = Runtime::Create(options);
    if (!rt.ok()) {
      g->skip = absl::StrCat("no runtime: ", rt.status().ToString());
      return g;
    }
    g->runtime = std::move(*rt);
    if (g->runtime->device_count() == 0) {
      g->skip = absl::StrCat("no CUDA device (",
                             g->runtime->driver_status().ok()
                                 ? std::string("the driver reports 0 devices")
                                 : g->runtime->driver_status().ToString(),
                             ")");
      return g;
    }
    g->api = g->runtime->driver();
    g->device = *g->runtime->device(0);
    return g;
  }();
  return *gpu;
}

#define REQUIRE_GPU()                                          \
  do {                                                         \
    if (!GetGpu().skip.empty()) GTEST_SKIP() << GetGpu().skip; \
    ASSERT_TRUE(GetGpu().device->MakeCurrent().ok());          \
  } while (0)

#define ASSIGN_OR_FAIL(lhs, expr)                        \
  auto FJ_STATUS_CONCAT_(result_, __LINE__) = (expr);    \
  ASSERT_TRUE(FJ_STATUS_CONCAT_(result_, __LINE__).ok()) \
      << FJ_STATUS_CONCAT_(result_, __LINE__).status();  \
  lhs = *FJ_STATUS_CONCAT_(result_, __LINE__)

struct KernelSpec {
  std::string name;
  std::vector<std::string> name_expressions = {};
  std::optional<jit::CopyImpl> impl = std::nullopt;
  bool thunk = true;
};

// Builds kSource (uncached: each call gets its own image and LoadedKernel)
// and loads `spec.name`; with spec.thunk the kernel gets its launch thunk.
absl::StatusOr<LoadedKernel*> LoadKernel(const KernelSpec& spec) {
  Gpu& g = GetGpu();
  BuildSpec build;
  build.source = kSource;
  build.name = "launch_gpu_test.cu";
  build.name_expressions = spec.name_expressions;
  build.copy_impl = spec.impl;
  build.use_cache = false;
  auto record = g.runtime->Build(build);
  if (!record.ok()) return record.status();
  // The runtime generates thunks in the background after a build and
  // attaches them to loaded kernels when ready: let that finish first, so
  // a kernel this test puts on the generic path stays there.
  g.runtime->WaitForBackgroundWork();
  std::lock_guard<std::mutex> lock(g.mu);
  g.modules.push_back(*record);
  const ModuleRecord& kept = g.modules.back();
  auto k = g.runtime->GetKernel(kept, spec.name, 0);
  if (!k.ok()) return k.status();
  // The runtime attaches thunks at load; this build is the kernel's own
  // (uncached), so detaching it affects no other test.
  if (spec.thunk) {
    absl::Status attached =
        g.thunks.Attach(*kept.artifact, **k);  // no-op if attached
    if (!attached.ok()) return attached;
    if ((*k)->thunk.load() == nullptr)
      return absl::InternalError("no thunk attached");
  } else {
    (*k)->thunk.store(nullptr);
  }
  return *k;
}

// Device memory owned by the test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    auto a = GetGpu().runtime->Allocate(0, bytes);
    EXPECT_TRUE(a.ok()) << a.status();
    if (a.ok()) address_ = *a;
  }
  ~DeviceBuffer() {
    if (address_) (void)GetGpu().runtime->Free(address_);
  }
  uint64_t address() const { return address_; }
  template <typename T>
  void Upload(const std::vector<T>& host) {
    ASSERT_EQ(GetGpu().api->cuMemcpyHtoD(address_, host.data(),
                                         host.size() * sizeof(T)),
              CUDA_SUCCESS);
  }
  template <typename T>
  std::vector<T> Download(size_t count) {
    std::vector<T> host(count);
    EXPECT_EQ(
        GetGpu().api->cuMemcpyDtoH(host.data(), address_, count * sizeof(T)),
        CUDA_SUCCESS);
    return host;
  }
  void Poison(uint8_t byte) {
    ASSERT_EQ(GetGpu().api->cuMemsetD8(address_, byte, bytes_), CUDA_SUCCESS);
  }

 private:
  size_t bytes_;
  uint64_t address_ = 0;
};

fj_arg Arg(fj_arg_kind kind) {
  fj_arg a{};
  a.struct_size = sizeof(fj_arg);
  a.kind = kind;
  return a;
}
fj_arg PtrArg(uint64_t p) {
  fj_arg a = Arg(FJ_ARG_POINTER);
  a.v.pointer = p;
  return a;
}
fj_arg F32Arg(float f) {
  fj_arg a = Arg(FJ_ARG_F32);
  a.v.f32 = f;
  return a;
}
fj_arg I32Arg(int32_t i) {
  fj_arg a = Arg(FJ_ARG_I32);
  a.v.i32 = i;
  return a;
}
fj_arg TensorArg(const fj_tensor_arg* t) {
  fj_arg a = Arg(FJ_ARG_TENSOR);
  a.v.tensor = t;
  return a;
}

fj_launch_config Config(uint32_t grid, uint32_t block, uint32_t shared = 0) {
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = grid;
  c.block[0] = block;
  c.shared_bytes = shared;
  return c;
}

absl::Status LaunchArgs(LoadedKernel* k, const fj_launch_config& cfg,
                        CUstream stream, const std::vector<fj_arg>& args) {
  return Launch(*k, cfg, stream, args.data(), args.size(), sizeof(fj_arg));
}

absl::Status Sync(CUstream stream, absl::string_view what) {
  Gpu& g = GetGpu();
  return CheckStickyError(*g.device, *g.api, g.api->cuStreamSynchronize(stream),
                          what);
}

std::mt19937_64 Rng(const char* name) {
  uint64_t seed =
      std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  if (const char* s = std::getenv("FLEETJIT_TEST_SEED"))
    seed = std::strtoull(s, nullptr, 0);
  std::printf("[ seed     ] %s: FLEETJIT_TEST_SEED=%llu\n", name,
              static_cast<unsigned long long>(seed));
  return std::mt19937_64(seed);
}

// Small integers as floats: sums stay exact.
std::vector<float> RandomInts(std::mt19937_64& rng, size_t n, int range = 8) {
  std::vector<float> v(n);
  for (float& f : v)
    f = static_cast<float>(static_cast<int>(rng() % (2 * range + 1)) - range);
  return v;
}

// A DLPack tensor description the test owns.
struct HostTensor {
  std::vector<int64_t> shape, strides;
  fj_tensor tensor{};
  fj_tensor_arg arg{};
  void Set(uint64_t data, std::vector<int64_t> dims,
           std::vector<int64_t> elem_strides, std::vector<uint32_t> box,
           fj_oob oob = FJ_OOB_ZEROS, fj_dl_dtype dtype = {2, 32, 1}) {
    shape = std::move(dims);
    strides = std::move(elem_strides);
    tensor = fj_tensor{};
    tensor.data = reinterpret_cast<void*>(static_cast<uintptr_t>(data));
    tensor.device = {2, 0};
    tensor.ndim = static_cast<int32_t>(shape.size());
    tensor.dtype = dtype;
    tensor.shape = shape.data();
    tensor.strides = strides.empty() ? nullptr : strides.data();
    arg = fj_tensor_arg{};
    arg.struct_size = sizeof(arg);
    arg.tensor = &tensor;
    for (size_t i = 0; i < box.size(); ++i) arg.box[i] = box[i];
    arg.oob = oob;
  }
};

// ---------------------------------------------------------------------------
// Needs NVRTC but no GPU: the kernels above build for sm_90 under every copy
// implementation, their layouts are what the launch tests assume, and every
// kernel gets a thunk. Catches source mistakes before a GPU run.

TEST(LaunchGpuSource, BuildsForSm90UnderEveryImplementationWithThunks) {
  RuntimeOptions options;
  auto rt = Runtime::Create(options);
  ASSERT_TRUE(rt.ok()) << rt.status();
  for (jit::CopyImpl impl :
       {jit::CopyImpl::kSync, jit::CopyImpl::kCpAsync, jit::CopyImpl::kTma}) {
    SCOPED_TRACE(jit::CopyImplName(impl));
    BuildSpec build;
    build.source = kSource;
    build.name = "launch_gpu_test.cu";
    build.name_expressions = {"typed_scalars", "tensor_sum"};
    build.target = *jit::ParseTarget("sm_90");
    build.copy_impl = impl;
    build.use_cache = false;
    auto record = (*rt)->Build(build);
    if (!record.ok() && absl::StrContains(record.status().message(), "NVRTC")) {
      GTEST_SKIP() << "no NVRTC: " << record.status();
    }
    ASSERT_TRUE(record.ok()) << record.status();
    const jit::Artifact& a = *record->artifact;
    const jit::KernelEntry* sum = a.FindKernel("tensor_sum");
    ASSERT_NE(sum, nullptr);
    ASSERT_EQ(sum->params.size(), 2u);
    EXPECT_EQ(sum->params[0].kind, jit::ParamKind::kTensor);
    EXPECT_EQ(sum->params[0].tensor_rank, 2);
    EXPECT_EQ(sum->params[0].tensor_dtype, fj::dtype_f32);
    for (const char* name : {"scalars", "typed_scalars"}) {
      const jit::KernelEntry* k = a.FindKernel(name);
      ASSERT_NE(k, nullptr) << name;
      EXPECT_EQ(k->params.size(), 15u) << name;
    }
    const jit::KernelEntry* echo = a.FindKernel("tensor_echo");
    ASSERT_NE(echo, nullptr);
    EXPECT_EQ(echo->params[0].kind, jit::ParamKind::kTensor);
    EXPECT_EQ(echo->params[0].size, 320u);
    jit::ThunkCodegenStats stats;
    auto object = jit::EmitThunkObject(a.kernels, a.copy_impl, &stats);
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_EQ(stats.skipped, 0);
    std::printf("[ info     ] %s: %zu kernels, NVRTC %.1f ms, thunks %.2f ms\n",
                std::string(jit::CopyImplName(impl)).c_str(), a.kernels.size(),
                a.compile_ms, stats.ir_ms + stats.codegen_ms);
  }
}

// ---------------------------------------------------------------------------

TEST(LaunchGpu, AxpyThroughBothPaths) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic,
                 LoadKernel({"axpy", {}, {}, /*thunk=*/false}));
  ASSERT_EQ(generic->thunk.load(), nullptr);
  std::mt19937_64 rng = Rng("AxpyThroughBothPaths");
  for (LoadedKernel* k : {thunked, generic}) {
    const int n = 1000 + static_cast<int>(rng() % 5000);
    std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
    const float a = static_cast<float>(1 + rng() % 4);
    DeviceBuffer dx(n * 4), dy(n * 4);
    dx.Upload(x);
    dy.Upload(y);
    ASSERT_TRUE(LaunchArgs(k, Config((n + 255) / 256, 256), nullptr,
                           {PtrArg(dy.address()), PtrArg(dx.address()),
                            F32Arg(a), I32Arg(n)})
                    .ok());
    ASSERT_TRUE(Sync(nullptr, "axpy").ok());
    std::vector<float> got = dy.Download<float>(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], y[i] + a * x[i]) << i;
  }
}

TEST(LaunchGpu, ScalarsOfEverySizeArriveIntact) {
  REQUIRE_GPU();
  std::mt19937_64 rng = Rng("ScalarsOfEverySizeArriveIntact");
  struct S12 {
    int32_t a, b, c;
  };
  struct S24 {
    int64_t a, b;
    int32_t c;
  };
  static_assert(sizeof(S24) == 24);
  for (const KernelSpec& spec :
       {KernelSpec{"scalars"}, KernelSpec{"scalars", {}, {}, false},
        KernelSpec{"typed_scalars", {"typed_scalars"}},
        KernelSpec{"typed_scalars", {"typed_scalars"}, {}, false}}) {
    SCOPED_TRACE(
        absl::StrCat(spec.name, spec.thunk ? " (thunk)" : " (generic)"));
    ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel(spec));
    const bool typed = spec.name == "typed_scalars";
    DeviceBuffer out(18 * 8);
    out.Poison(0xCD);
    S12 s12{static_cast<int32_t>(rng()), static_cast<int32_t>(rng()),
            static_cast<int32_t>(rng())};
    S24 s24{static_cast<int64_t>(rng()), static_cast<int64_t>(rng()),
            static_cast<int32_t>(rng())};
    std::vector<fj_arg> args(15);
    args[0] = PtrArg(out.address());
    args[1] = Arg(FJ_ARG_I8);
    args[1].v.i8 = static_cast<int8_t>(rng());
    args[2] = Arg(FJ_ARG_I16);
    args[2].v.i16 = static_cast<int16_t>(rng());
    args[3] = Arg(FJ_ARG_I32);
    args[3].v.i32 = static_cast<int32_t>(rng());
    args[4] = Arg(FJ_ARG_I64);
    args[4].v.i64 = static_cast<int64_t>(rng());
    args[5] = Arg(FJ_ARG_U8);
    args[5].v.u8 = static_cast<uint8_t>(rng());
    args[6] = Arg(FJ_ARG_U16);
    args[6].v.u16 = static_cast<uint16_t>(rng());
    args[7] = Arg(FJ_ARG_U32);
    args[7].v.u32 = static_cast<uint32_t>(rng());
    args[8] = Arg(FJ_ARG_U64);
    args[8].v.u64 = rng();
    // unsigned short parameters: F16/BF16 bits where the kind is unknown
    // (extern "C"), U16 where the C++ type says unsigned.
    args[9] = Arg(typed ? FJ_ARG_U16 : FJ_ARG_F16);
    args[9].v.u16 = static_cast<uint16_t>(rng());
    args[10] = Arg(typed ? FJ_ARG_U16 : FJ_ARG_BF16);
    args[10].v.u16 = static_cast<uint16_t>(rng());
    args[11] = F32Arg(static_cast<float>(static_cast<int32_t>(rng())) / 7.0f);
    args[12] = Arg(FJ_ARG_F64);
    args[12].v.f64 = static_cast<double>(static_cast<int64_t>(rng())) / 3.0;
    args[13] = Arg(FJ_ARG_BYTES);
    args[13].size = sizeof(s12);
    args[13].v.bytes = &s12;
    args[14] = Arg(FJ_ARG_BYTES);
    args[14].size = sizeof(s24);
    args[14].v.bytes = &s24;
    absl::Status launched = LaunchArgs(k, Config(1, 1), nullptr, args);
    ASSERT_TRUE(launched.ok()) << launched;
    ASSERT_TRUE(Sync(nullptr, "scalars").ok());
    std::vector<uint64_t> got = out.Download<uint64_t>(18);
    uint32_t f32_bits;
    std::memcpy(&f32_bits, &args[11].v.f32, 4);
    uint64_t f64_bits;
    std::memcpy(&f64_bits, &args[12].v.f64, 8);
    const uint64_t want[18] = {
        static_cast<uint64_t>(static_cast<int64_t>(args[1].v.i8)),
        static_cast<uint64_t>(static_cast<int64_t>(args[2].v.i16)),
        static_cast<uint64_t>(static_cast<int64_t>(args[3].v.i32)),
        static_cast<uint64_t>(args[4].v.i64),
        args[5].v.u8,
        args[6].v.u16,
        args[7].v.u32,
        args[8].v.u64,
        args[9].v.u16,
        args[10].v.u16,
        f32_bits,
        f64_bits,
        static_cast<uint32_t>(s12.a),
        static_cast<uint32_t>(s12.b),
        static_cast<uint32_t>(s12.c),
        static_cast<uint64_t>(s24.a),
        static_cast<uint64_t>(s24.b),
        static_cast<uint32_t>(s24.c)};
    for (int i = 0; i < 18; ++i) EXPECT_EQ(got[i], want[i]) << "field " << i;
  }
}

// Launches tensor_echo on `t` and checks the parameter the kernel received
// and the elements it gathered against the host's view.
void CheckTensorEcho(LoadedKernel* k, HostTensor& t,
                     const std::vector<float>& storage, bool expect_tmap,
                     CUstream stream = nullptr) {
  int64_t total = 1;
  for (int64_t d : t.shape) total *= d;
  DeviceBuffer raw(320), gathered(total * 4);
  raw.Poison(0xEE);
  gathered.Poison(0xEE);
  absl::Status s = LaunchArgs(
      k, Config(4, 128), stream,
      {TensorArg(&t.arg), PtrArg(raw.address()), PtrArg(gathered.address())});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(Sync(stream, "tensor_echo").ok());
  std::vector<uint8_t> got_raw = raw.Download<uint8_t>(320);
  fj::tensor_param got;
  std::memcpy(&got, got_raw.data(), 320);
  // What the host encodes for the same tensor (uncached).
  TensorEncoder reference(GetGpu().api, "reference", nullptr, nullptr);
  reference.set_cache_enabled(false);
  fj::tensor_param want;
  ASSERT_TRUE(reference.Encode(0, &t.arg, 0, -1, k->copy_impl, &want).ok());
  EXPECT_EQ(got.data, want.data);
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.flags, want.flags);
  EXPECT_EQ(got.flags == FJ_TP_HAS_TMAP, expect_tmap);
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(got.shape[d], want.shape[d]) << d;
    EXPECT_EQ(got.stride[d], want.stride[d]) << d;
    EXPECT_EQ(got.box[d], want.box[d]) << d;
  }
  EXPECT_EQ(std::memcmp(got.tmap, want.tmap, 128), 0)
      << "the tensor map the kernel received differs from a fresh host "
         "encoding";
  // Logical element i, dimension 0 (DLPack's last) fastest.
  std::vector<float> g = gathered.Download<float>(total);
  const uint64_t base =
      reinterpret_cast<uintptr_t>(t.tensor.data) + t.tensor.byte_offset;
  const uint64_t storage_base = reinterpret_cast<uintptr_t>(t.tensor.data);
  const int n = static_cast<int>(t.shape.size());
  // NULL strides (an empty vector here) mean compact row-major.
  std::vector<int64_t> strides = t.strides;
  if (strides.empty()) {
    strides.assign(n, 1);
    for (int d = n - 2; d >= 0; --d) strides[d] = strides[d + 1] * t.shape[d + 1];
  }
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    for (int d = n - 1; d >= 0; --d) {
      off += (rem % t.shape[d]) * strides[d];
      rem /= t.shape[d];
    }
    const int64_t index = static_cast<int64_t>((base - storage_base) / 4) + off;
    ASSERT_EQ(g[i], storage[index]) << "element " << i;
  }
}

TEST(LaunchGpu, TensorParametersAndFallbacks) {
  REQUIRE_GPU();
  std::mt19937_64 rng = Rng("TensorParametersAndFallbacks");
  for (bool thunk : {true, false}) {
    SCOPED_TRACE(thunk ? "thunk" : "generic");
    ASSIGN_OR_FAIL(LoadedKernel * k,
                   LoadKernel({"tensor_echo", {}, {}, thunk}));
    const bool tma = k->copy_impl == jit::CopyImpl::kTma;
    const size_t elems = 5 * 6 * 8 + 64;
    std::vector<float> storage = RandomInts(rng, elems, 1000);
    DeviceBuffer d(elems * 4);
    d.Upload(storage);
    HostTensor t;
    // [5, 6, 7] f32 with rows padded to 8 (32 B): TMA can describe it
    // with a {1, 2, 4} box.
    t.Set(d.address(), {5, 6, 7}, {48, 8, 1}, {1, 2, 4});
    CheckTensorEcho(k, t, storage, tma);
    // The whole extent as the box: 7 x 4 = 28 bytes is no multiple of 16.
    const uint64_t before = k->tma_fallbacks.load();
    t.Set(d.address(), {5, 6, 7}, {48, 8, 1}, {0, 0, 0});
    CheckTensorEcho(k, t, storage, false);
    // A transposed view: the innermost stride is not 1.
    t.Set(d.address(), {7, 6}, {1, 8}, {4, 4});
    CheckTensorEcho(k, t, storage, false);
    // Compact strides (NULL) and an offset of one row.
    t.Set(d.address(), {4, 8}, {}, {2, 8});
    t.tensor.byte_offset = 32;
    CheckTensorEcho(k, t, storage, tma);
    if (tma) {
      EXPECT_EQ(k->tma_fallbacks.load(), before + 2);
    }
  }
}

TEST(LaunchGpu, TileCopyThroughTheLayerUnderEachImplementation) {
  REQUIRE_GPU();
  std::mt19937_64 rng = Rng("TileCopyThroughTheLayer");
  const int arch = GetGpu().device->facts().arch();
  std::vector<jit::CopyImpl> impls = {jit::CopyImpl::kSync};
  if (arch >= 80) impls.push_back(jit::CopyImpl::kCpAsync);
  if (arch >= 90) impls.push_back(jit::CopyImpl::kTma);
  for (jit::CopyImpl impl : impls) {
    for (bool thunk : {true, false}) {
      ASSIGN_OR_FAIL(LoadedKernel * k,
                     LoadKernel({"tile_add", {}, impl, thunk}));
      // 72 columns: 288-byte rows (TMA); 70 columns: 280-byte rows (cp.async).
      for (int cols : {72, 70}) {
        SCOPED_TRACE(absl::StrCat(jit::CopyImplName(impl),
                                  thunk ? " thunk" : " generic",
                                  " cols=", cols));
        const int rows = 50 + static_cast<int>(rng() % 60);
        std::vector<float> in = RandomInts(rng, rows * cols, 100);
        DeviceBuffer din(rows * cols * 4), dout(rows * cols * 4);
        din.Upload(in);
        dout.Poison(0x7F);
        HostTensor tin, tout;
        tin.Set(din.address(), {rows, cols}, {}, {16, 32});
        tout.Set(dout.address(), {rows, cols}, {}, {16, 32});
        const float add = static_cast<float>(1 + rng() % 9);
        fj_launch_config cfg = Config((cols + 31) / 32, 128);
        cfg.grid[1] = (rows + 15) / 16;
        absl::Status s = LaunchArgs(
            k, cfg, nullptr,
            {TensorArg(&tin.arg), TensorArg(&tout.arg), F32Arg(add)});
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(Sync(nullptr, "tile_add").ok());
        std::vector<float> got = dout.Download<float>(rows * cols);
        for (int i = 0; i < rows * cols; ++i)
          ASSERT_EQ(got[i], in[i] + add) << i;
      }
    }
  }
}

TEST(LaunchGpu, ManyThreadsLaunchConcurrentlyOnTheirOwnStreams) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic, LoadKernel({"axpy", {}, {}, false}));
  ASSIGN_OR_FAIL(LoadedKernel * echo, LoadKernel({"tensor_echo"}));
  std::mt19937_64 seeds = Rng("ManyThreadsLaunchConcurrently");
  constexpr int kThreads = 16;
  constexpr int kLaunches = 300;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    const uint64_t seed = seeds();
    threads.emplace_back([&, t, seed] {
      auto fail = [&](const std::string& why) {
        ++failures;
        if (errors[t].empty()) errors[t] = why;
      };
      std::mt19937_64 rng(seed);
      if (!GetGpu().device->MakeCurrent().ok()) return fail("MakeCurrent");
      const DriverApi& api = *GetGpu().api;
      CUstream stream = nullptr;
      if (api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        return fail("cuStreamCreate");
      }
      if (t % 4 == 3) {
        // Tensor launches: a small pool of tensors, reused and changed.
        const size_t elems = 4096;
        std::vector<float> storage = RandomInts(rng, elems, 1000);
        DeviceBuffer d(elems * 4);
        d.Upload(storage);
        HostTensor pool[3];
        for (int i = 0; i < 3; ++i) {
          pool[i].Set(d.address() + 64 * i, {8, 16 + 8 * i}, {}, {4, 8});
        }
        DeviceBuffer raw(320), gathered(elems * 4);
        for (int i = 0; i < kLaunches / 10; ++i) {
          HostTensor& ht = pool[rng() % 3];
          absl::Status s =
              LaunchArgs(echo, Config(2, 128), stream,
                         {TensorArg(&ht.arg), PtrArg(raw.address()),
                          PtrArg(gathered.address())});
          if (!s.ok()) return fail(s.ToString());
          if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS)
            return fail("sync");
          std::vector<float> g =
              gathered.Download<float>(ht.shape[0] * ht.shape[1]);
          const int64_t first =
              (reinterpret_cast<uintptr_t>(ht.tensor.data) - d.address()) / 4;
          for (size_t e = 0; e < g.size(); ++e) {
            if (g[e] != storage[first + e])
              return fail(absl::StrCat("tensor element ", e));
          }
        }
      } else {
        LoadedKernel* k = t % 2 ? thunked : generic;
        const int n = 4096 + static_cast<int>(rng() % 4096);
        std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
        DeviceBuffer dx(n * 4), dy(n * 4);
        dx.Upload(x);
        dy.Upload(y);
        for (int i = 0; i < kLaunches; ++i) {
          absl::Status s =
              LaunchArgs(k, Config((n + 127) / 128, 128), stream,
                         {PtrArg(dy.address()), PtrArg(dx.address()),
                          F32Arg(1.0f), I32Arg(n)});
          if (!s.ok()) return fail(s.ToString());
        }
        if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS)
          return fail("sync");
        std::vector<float> got = dy.Download<float>(n);
        for (int i = 0; i < n; ++i) {
          if (got[i] != y[i] + kLaunches * x[i])
            return fail(absl::StrCat("element ", i));
        }
      }
      api.cuStreamDestroy(stream);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(failures.load(), 0);
}

TEST(LaunchGpu, BadLaunchesAreStatusesBeforeTheDriver) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * axpy, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * sum,
                 LoadKernel({"tensor_sum", {"tensor_sum"}}));
  ASSIGN_OR_FAIL(LoadedKernel * empty, LoadKernel({"empty_kernel"}));
  const DeviceFacts& f = GetGpu().device->facts();
  DeviceBuffer dx(4096), dy(4096);
  const std::vector<fj_arg> good = {PtrArg(dy.address()), PtrArg(dx.address()),
                                    F32Arg(1), I32Arg(16)};
  struct Bad {
    const char* name;
    LoadedKernel* kernel;
    fj_launch_config cfg;
    std::vector<fj_arg> args;
    absl::StatusCode code;
    const char* message;
  };
  const absl::StatusCode range = absl::StatusCode::kOutOfRange;
  const absl::StatusCode invalid = absl::StatusCode::kInvalidArgument;
  fj_launch_config tall = Config(1, 1);
  tall.grid[1] = static_cast<uint32_t>(f.max_grid_dim[1]) + 1;
  fj_launch_config deep = Config(1, 1);
  deep.block[2] = static_cast<uint32_t>(f.max_block_dim[2]) + 1;
  fj_launch_config wide =
      Config(1, static_cast<uint32_t>(f.max_threads_per_block) * 2);
  wide.block[0] = static_cast<uint32_t>(f.max_block_dim[0]);
  wide.block[1] = 2;
  fj_launch_config shared =
      Config(1, 32, static_cast<uint32_t>(f.shared_per_block_optin) + 1);
  fj_launch_config big_cluster = Config(32, 32);
  big_cluster.cluster[0] = 4;
  big_cluster.cluster[1] = 8;
  big_cluster.grid[1] = 8;
  fj_launch_config ragged_cluster = Config(6, 32);
  ragged_cluster.cluster[0] = 4;
  HostTensor rank3, half;
  rank3.Set(dx.address(), {2, 2, 2}, {}, {});
  half.Set(dx.address(), {4, 4}, {}, {}, FJ_OOB_ZEROS, {2, 16, 1});
  std::vector<fj_arg> wrong_kind = good;
  wrong_kind[0] = F32Arg(1);
  std::vector<fj_arg> wrong_size = good;
  wrong_size[3] = Arg(FJ_ARG_I64);
  std::vector<Bad> bads = {
      {"grid.y over the limit", empty, tall, {}, range, "grid.y"},
      {"block.z over the limit", empty, deep, {}, range, "block.z"},
      {"too many threads", empty, wide, {}, range, "threads exceeds"},
      {"shared memory over opt-in", empty, shared, {}, range, "opt-in limit"},
      {"too few arguments",
       axpy,
       Config(1, 32),
       {good[0], good[1]},
       invalid,
       "takes 4"},
      {"wrong kind", axpy, Config(1, 32), wrong_kind, invalid, "argument 0"},
      {"wrong size", axpy, Config(1, 32), wrong_size, invalid, "argument 3"},
      {"tensor rank",
       sum,
       Config(1, 1),
       {TensorArg(&rank3.arg), PtrArg(dy.address())},
       invalid,
       "rank-2"},
      {"tensor dtype",
       sum,
       Config(1, 1),
       {TensorArg(&half.arg), PtrArg(dy.address())},
       invalid,
       "dtype f32"},
      {"null tensor",
       sum,
       Config(1, 1),
       {TensorArg(nullptr), PtrArg(dy.address())},
       invalid,
       "NULL"},
  };
  if (f.cluster_launch) {
    bads.push_back(
        {"cluster of 32", empty, big_cluster, {}, range, "exceeds 16"});
    bads.push_back({"grid not a multiple of the cluster",
                    empty,
                    ragged_cluster,
                    {},
                    range,
                    "not a multiple"});
  } else {
    fj_launch_config c = Config(2, 32);
    c.cluster[0] = 2;
    bads.push_back({"cluster on a device without clusters",
                    empty,
                    c,
                    {},
                    absl::StatusCode::kFailedPrecondition,
                    "cannot launch"});
  }
  for (const Bad& b : bads) {
    absl::Status s = LaunchArgs(b.kernel, b.cfg, nullptr, b.args);
    EXPECT_EQ(s.code(), b.code) << b.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), b.message))
        << b.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "launching '"))
        << b.name << ": " << s;
  }
  // None of them reached the driver or hurt the device: a good launch works.
  EXPECT_FALSE(GetGpu().device->is_poisoned());
  std::vector<float> ones(16, 1.0f);
  dx.Upload(ones);
  dy.Upload(ones);
  ASSERT_TRUE(LaunchArgs(axpy, Config(1, 32), nullptr, good).ok());
  ASSERT_TRUE(Sync(nullptr, "axpy").ok());
  EXPECT_EQ(dy.Download<float>(16)[15], 2.0f);
  // A declared tensor that matches is summed correctly.
  HostTensor m;
  m.Set(dx.address(), {4, 4}, {}, {});
  DeviceBuffer out(4);
  ASSERT_TRUE(LaunchArgs(sum, Config(1, 1), nullptr,
                         {TensorArg(&m.arg), PtrArg(out.address())})
                  .ok());
  ASSERT_TRUE(Sync(nullptr, "tensor_sum").ok());
  EXPECT_EQ(out.Download<float>(1)[0], 16.0f);
}

TEST(LaunchGpu, DynamicSharedMemoryAbove48KiB) {
  REQUIRE_GPU();
  const DeviceFacts& f = GetGpu().device->facts();
  for (bool thunk : {true, false}) {
    ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel({"smem_sum", {}, {}, thunk}));
    const uint32_t bytes = static_cast<uint32_t>(f.shared_per_block_optin -
                                                 k->static_shared_bytes);
    ASSERT_GT(bytes, 48u * 1024) << "the device cannot opt in above 48 KiB";
    const int n = static_cast<int>(bytes / 4);
    DeviceBuffer out(4);
    absl::Status s = LaunchArgs(k, Config(1, 256, bytes), nullptr,
                                {PtrArg(out.address()), I32Arg(n)});
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(Sync(nullptr, "smem_sum").ok());
    double want = 0;
    for (int i = 0; i < n; ++i) want += i % 7;
    EXPECT_EQ(out.Download<float>(1)[0], static_cast<float>(want));
    EXPECT_TRUE(k->dynamic_shared_raised.load());
    // One byte more than the device allows is refused before the driver.
    s = LaunchArgs(k, Config(1, 256, bytes + 1), nullptr,
                   {PtrArg(out.address()), I32Arg(n)});
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  }
}

TEST(LaunchGpu, ClusterLaunches) {
  REQUIRE_GPU();
  if (!GetGpu().device->facts().cluster_launch) {
    GTEST_SKIP() << "device cannot launch clusters (sm_90+)";
  }
  ASSIGN_OR_FAIL(LoadedKernel * k, LoadKernel({"cluster_ranks"}));
  for (uint32_t cluster : {2u, 8u, 16u}) {
    const uint32_t grid = 32;
    DeviceBuffer out(grid * 4);
    out.Poison(0xFF);
    fj_launch_config cfg = Config(grid, 32);
    cfg.cluster[0] = cluster;
    absl::Status s = LaunchArgs(k, cfg, nullptr, {PtrArg(out.address())});
    if (cluster == 16 && !s.ok()) {
      // Non-portable sizes depend on the device and the kernel's resources.
      std::printf("[ info     ] cluster of 16 refused: %s\n",
                  s.ToString().c_str());
      continue;
    }
    ASSERT_TRUE(s.ok()) << "cluster " << cluster << ": " << s;
    ASSERT_TRUE(Sync(nullptr, "cluster_ranks").ok());
    std::vector<uint32_t> got = out.Download<uint32_t>(grid);
    for (uint32_t b = 0; b < grid; ++b)
      EXPECT_EQ(got[b], b % cluster) << "block " << b;
    if (cluster == 16) {
      EXPECT_TRUE(k->non_portable_cluster_allowed.load());
      std::printf("[ info     ] cluster of 16 (non-portable) ran\n");
    }
  }
}

TEST(LaunchGpu, GraphCaptureAndReplay) {
  REQUIRE_GPU();
  ASSIGN_OR_FAIL(LoadedKernel * thunked, LoadKernel({"axpy"}));
  ASSIGN_OR_FAIL(LoadedKernel * generic, LoadKernel({"axpy", {}, {}, false}));
  ASSIGN_OR_FAIL(LoadedKernel * tile, LoadKernel({"tile_add"}));
  std::mt19937_64 rng = Rng("GraphCaptureAndReplay");
  const DriverApi& api = *GetGpu().api;
  const int n = 5000;
  std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
  DeviceBuffer dx(n * 4), dy(n * 4);
  dx.Upload(x);
  dy.Upload(y);
  const int rows = 40, cols = 64;
  std::vector<float> tin_host = RandomInts(rng, rows * cols, 50);
  DeviceBuffer din(rows * cols * 4), dout(rows * cols * 4);
  din.Upload(tin_host);
  dout.Poison(0x7F);
  HostTensor tin, tout;
  tin.Set(din.address(), {rows, cols}, {}, {16, 32});
  tout.Set(dout.address(), {rows, cols}, {}, {16, 32});
  fj_launch_config tile_cfg = Config(cols / 32, 128);
  tile_cfg.grid[1] = (rows + 15) / 16;

  CUstream stream = nullptr;
  ASSERT_EQ(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // Global mode: any unsafe call (a sync, an allocation) during capture,
  // from any thread, fails the capture.
  ASSERT_EQ(api.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_SUCCESS);
  constexpr int kPerGraph = 4;
  for (int i = 0; i < kPerGraph; ++i) {
    LoadedKernel* k = i % 2 ? generic : thunked;
    absl::Status s = LaunchArgs(
        k, Config((n + 255) / 256, 256), stream,
        {PtrArg(dy.address()), PtrArg(dx.address()), F32Arg(2.0f), I32Arg(n)});
    ASSERT_TRUE(s.ok()) << "captured launch " << i << ": " << s;
  }
  absl::Status s =
      LaunchArgs(tile, tile_cfg, stream,
                 {TensorArg(&tin.arg), TensorArg(&tout.arg), F32Arg(3.0f)});
  ASSERT_TRUE(s.ok()) << s;
  CUgraph graph = nullptr;
  ASSERT_EQ(api.cuStreamEndCapture(stream, &graph), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(api.cuGraphInstantiateWithFlags(&exec, graph, 0), CUDA_SUCCESS);
  // Nothing ran during capture.
  EXPECT_EQ(dy.Download<float>(n), y);
  constexpr int kReplays = 3;
  for (int r = 0; r < kReplays; ++r) {
    ASSERT_EQ(api.cuGraphLaunch(exec, stream), CUDA_SUCCESS);
  }
  ASSERT_TRUE(Sync(stream, "graph replay").ok());
  std::vector<float> got = dy.Download<float>(n);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(got[i], y[i] + kReplays * kPerGraph * 2.0f * x[i]) << i;
  }
  std::vector<float> tiles = dout.Download<float>(rows * cols);
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(tiles[i], tin_host[i] + 3.0f) << i;
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuStreamDestroy(stream);
}

// Two runtimes in one process, each with its own thunk JIT, plus one with
// thunks off (what FLEETJIT_THUNKS=0 / FJ_RUNTIME_DISABLE_THUNKS give):
// every kernel computes the same result.
TEST(LaunchGpu, TwoRuntimesAndThunksOff) {
  REQUIRE_GPU();
  std::mt19937_64 rng = Rng("TwoRuntimesAndThunksOff");
  for (bool thunks : {true, false}) {
    SCOPED_TRACE(thunks ? "second runtime, thunks on"
                        : "third runtime, thunks off");
    RuntimeOptions options;
    options.thunks = thunks;
    auto rt = Runtime::Create(options);
    ASSERT_TRUE(rt.ok()) << rt.status();
    BuildSpec build;
    build.source = kSource;
    build.name = "launch_gpu_test.cu";
    build.use_cache = false;
    auto record = (*rt)->Build(build);
    ASSERT_TRUE(record.ok()) << record.status();
    // The thunk object is generated after Build returns (never with
    // thunks off); kernels loaded after that get it at load.
    EXPECT_TRUE(record->artifact->thunk_object.empty());
    (*rt)->WaitForBackgroundWork();
    EXPECT_EQ((*rt)->thunks().stats().objects_generated, thunks ? 1u : 0u);
    auto k = (*rt)->GetKernel(*record, "axpy", 0);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ((*k)->thunk.load() != nullptr, thunks);
    ASSIGN_OR_FAIL(LoadedKernel * ours,
                   LoadKernel({"axpy"}));  // the first runtime's
    const int n = 3000;
    std::vector<float> x = RandomInts(rng, n), y = RandomInts(rng, n);
    DeviceBuffer dx(n * 4), dy(n * 4);
    dx.Upload(x);
    dy.Upload(y);
    for (LoadedKernel* kernel : {*k, ours}) {
      ASSERT_TRUE((*(*rt)->device(0))->MakeCurrent().ok());
      absl::Status s = LaunchArgs(kernel, Config((n + 255) / 256, 256), nullptr,
                                  {PtrArg(dy.address()), PtrArg(dx.address()),
                                   F32Arg(1.0f), I32Arg(n)});
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_TRUE(Sync(nullptr, "axpy").ok());
    std::vector<float> got = dy.Download<float>(n);
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], y[i] + 2 * x[i]) << i;
  }
}

// Runs in a fresh process (death-test style "threadsafe" re-executes the
// binary): a faulting kernel leaves its context unusable for good.
void FaultInAFreshProcess() {
  auto die = [](const std::string& why) {
    std::fprintf(stderr, "fault-child: FAILED: %s\n", why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  };
  Gpu& g = GetGpu();
  if (!g.skip.empty() || !g.device->MakeCurrent().ok())
    die("no GPU in the child");
  auto fault = LoadKernel({"fault"});
  auto axpy = LoadKernel({"axpy"});
  if (!fault.ok() || !axpy.ok()) die("cannot load kernels");
  absl::Status s = LaunchArgs(*fault, Config(1, 1), nullptr, {PtrArg(0x10)});
  if (s.ok())
    s = Sync(nullptr, absl::StrCat("kernel '", (*fault)->display_name,
                                   "': cuStreamSynchronize"));
  if (s.ok()) die("the faulting kernel reported no error");
  if (!absl::StrContains(s.message(), "fault"))
    die("status does not name the kernel: " + s.ToString());
  if (!g.device->is_poisoned()) die("device not poisoned: " + s.ToString());
  absl::Status later = LaunchArgs(*axpy, Config(1, 32), nullptr,
                                  {PtrArg(0), PtrArg(0), F32Arg(1), I32Arg(0)});
  if (later.code() != absl::StatusCode::kFailedPrecondition ||
      !absl::StrContains(later.message(), "fault")) {
    die("a later launch was not refused naming the faulting kernel: " +
        later.ToString());
  }
  std::fprintf(stderr, "fault-child: poisoned: %s\n", later.ToString().c_str());
  // Other devices keep working.
  if (g.runtime->device_count() > 1) {
    auto d1 = g.runtime->device(1);
    if (!d1.ok() || !(*d1)->MakeCurrent().ok()) die("device 1 unusable");
    BuildSpec build;
    build.source = kSource;
    build.name = "launch_gpu_test.cu";
    build.device = 1;
    build.use_cache = false;
    auto record = g.runtime->Build(build);
    if (!record.ok()) die("build for device 1: " + record.status().ToString());
    auto k = g.runtime->GetKernel(*record, "empty_kernel", 1);
    if (!k.ok()) die("load on device 1: " + k.status().ToString());
    absl::Status ok = LaunchArgs(*k, Config(1, 1), nullptr, {});
    if (ok.ok())
      ok =
          CheckStickyError(**d1, *g.api, g.api->cuCtxSynchronize(), "device 1");
    if (!ok.ok()) die("device 1 after device 0's fault: " + ok.ToString());
    std::fprintf(stderr, "fault-child: device 1 still works\n");
  }
  std::fprintf(stderr, "fault-child: ok\n");
  std::fflush(stderr);
  std::_Exit(0);
}

TEST(LaunchGpuDeathTest, AFaultingKernelPoisonsItsDeviceAndIsNamed) {
  if (!GetGpu().skip.empty()) GTEST_SKIP() << GetGpu().skip;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(FaultInAFreshProcess(), ::testing::ExitedWithCode(0),
              "fault-child: ok");
}

}  // namespace
}  // namespace fleetjit
