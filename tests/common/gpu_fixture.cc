#include "tests/common/gpu_fixture.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fleetjit::testing {

const char kLaunchSource[] = R"CUDA(
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

Gpu& GetGpu() {
  static Gpu* gpu = [] {
    auto* g = new Gpu;
    RuntimeOptions options;
    // Only the cache's location from the environment (the test cache dir).
    (void)ApplyCacheEnvironment(options.cache, options.env_overrides);
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

absl::StatusOr<LoadedKernel*> LoadKernel(const KernelSpec& spec) {
  Gpu& g = GetGpu();
  BuildSpec build;
  build.source = kLaunchSource;
  build.name = kLaunchSourceName;
  build.name_expressions = spec.name_expressions;
  build.copy_impl = spec.impl;
  build.use_cache = false;
  auto record = g.runtime->BuildRecord(build);
  if (!record.ok()) return record.status();
  // The runtime generates thunks in the background after a build and
  // attaches them to loaded kernels when ready: let that finish first, so
  // a kernel this test puts on the generic path stays there.
  g.runtime->WaitForBackgroundWork();
  std::lock_guard<std::mutex> lock(g.mu);
  g.modules.push_back(*record);
  const ModuleRecord& kept = g.modules.back();
  auto k = g.runtime->LoadKernel(kept, spec.name, 0);
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

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  auto a = GetGpu().runtime->Allocate(0, bytes);
  EXPECT_TRUE(a.ok()) << a.status();
  if (a.ok()) address_ = *a;
}

DeviceBuffer::~DeviceBuffer() {
  if (address_) (void)GetGpu().runtime->Free(address_);
}

void DeviceBuffer::Poison(uint8_t byte) {
  ASSERT_EQ(GetGpu().api->cuMemsetD8(address_, byte, bytes_), CUDA_SUCCESS);
}

absl::Status LaunchArgs(LoadedKernel* k, const fj_launch_config& cfg,
                        CUstream stream, const std::vector<fj_arg>& args) {
  // The geometry of `cfg`, as the C shim converts it (capi/convert.cc).
  LaunchConfig c;
  std::copy(std::begin(cfg.grid), std::end(cfg.grid), c.grid);
  std::copy(std::begin(cfg.block), std::end(cfg.block), c.block);
  c.shared_bytes = cfg.shared_bytes;
  std::copy(std::begin(cfg.cluster), std::end(cfg.cluster), c.cluster);
  return Launch(*k, c, stream, args.data(), args.size(), sizeof(fj_arg));
}

absl::Status Sync(CUstream stream, absl::string_view what) {
  Gpu& g = GetGpu();
  return CheckStickyError(*g.device, *g.api, g.api->cuStreamSynchronize(stream),
                          what);
}

std::vector<float> RandomInts(std::mt19937_64& rng, size_t n, int range) {
  std::vector<float> v(n);
  for (float& f : v)
    f = static_cast<float>(static_cast<int>(rng() % (2 * range + 1)) - range);
  return v;
}

void HostTensor::Set(uint64_t data, std::vector<int64_t> dims,
                     std::vector<int64_t> elem_strides,
                     std::vector<uint32_t> box, fj_oob oob, fj_dl_dtype dtype) {
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

TileOperands::TileOperands(const std::vector<float>& in, int rows, int cols)
    : din(in.size() * 4), dout(in.size() * 4) {
  din.Upload(in);
  dout.Poison(0x7F);
  tin.Set(din.address(), {rows, cols}, {}, {16, 32});
  tout.Set(dout.address(), {rows, cols}, {}, {16, 32});
}

}  // namespace fleetjit::testing
