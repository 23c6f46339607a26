#include "tests/runtime/copy/copy_gpu_util.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/launch/launch.h"

namespace fleetjit::copy::testutil {

const Dtype kF32{{2, 32, 1}, 4, 0x7FC00000u, true, "f32"};
const Dtype kF16{{2, 16, 1}, 2, 0x7E00u, true, "f16"};
const Dtype kBF16{{4, 16, 1}, 2, 0x7FC0u, true, "bf16"};
const Dtype kF64{{2, 64, 1}, 8, 0x7FF8000000000000ull, true, "f64"};
const Dtype kE4M3{{FJ_DL_FLOAT8_E4M3, 8, 1}, 1, 0x7Fu, true, "f8e4m3"};
const Dtype kU8{{1, 8, 1}, 1, 0, false, "u8"};
const Dtype kI16{{0, 16, 1}, 2, 0, false, "i16"};
const Dtype kI32{{0, 32, 1}, 4, 0, false, "i32"};
const Dtype kI64{{0, 64, 1}, 8, 0, false, "i64"};

std::unique_ptr<Runtime> GpuFixture::runtime_;
std::map<int, CUstream> GpuFixture::streams_;

namespace {

std::vector<int64_t> Compact(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t n = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = n;
    n *= std::max<int64_t>(shape[i], 1);
  }
  return s;
}

// Elements from the first to one past the last (positive strides).
int64_t SpanElements(const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * strides[i];
  }
  return last + 1;
}

// Strides with random padding (and sometimes a non-unit inner stride).
std::vector<int64_t> Padded(std::mt19937_64& rng,
                            const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t n = rng() % 5 == 0 ? 2 : 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = n;
    n = n * std::max<int64_t>(shape[i], 1) + static_cast<int64_t>(rng() % 4);
  }
  return s;
}

// Calls f(index) for every multi-index of `shape`, outermost first.
template <typename F>
void ForEach(const std::vector<int64_t>& shape, F&& f) {
  for (int64_t e : shape) {
    if (e == 0) return;
  }
  std::vector<int64_t> i(shape.size(), 0);
  for (;;) {
    f(i);
    size_t k = shape.size();
    while (k-- > 0) {
      if (++i[k] < shape[k]) break;
      i[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  std::swap(rt, o.rt);
  std::swap(device, o.device);
  std::swap(host, o.host);
  std::swap(address, o.address);
  std::swap(bytes, o.bytes);
  return *this;
}

Buffer::~Buffer() {
  if (rt == nullptr || address == 0) return;
  if (host) {
    (void)(*rt->device(0))->MakeCurrent();
    rt->driver()->cuMemFreeHost(reinterpret_cast<void*>(address));
  } else {
    (void)rt->Free(address);
  }
}

void Buffer::Upload(const std::vector<uint8_t>& data) {
  ASSERT_LE(data.size(), bytes);
  if (host) {
    std::memcpy(reinterpret_cast<void*>(address), data.data(), data.size());
    return;
  }
  ASSERT_TRUE((*rt->device(device))->MakeCurrent().ok());
  ASSERT_EQ(rt->driver()->cuMemcpyHtoD(address, data.data(), data.size()),
            CUDA_SUCCESS);
  // From pageable memory cuMemcpyHtoD may return before its DMA lands, and
  // a copy on a non-blocking stream does not wait for it: the poison could
  // land after the copy under test (seen once on the H200: every element of
  // CopyGpuTest.PinnedHostSourceAndDestination's first case read 0xCD).
  ASSERT_EQ(rt->driver()->cuCtxSynchronize(), CUDA_SUCCESS);
}

std::vector<uint8_t> Buffer::Download() const {
  std::vector<uint8_t> out(bytes);
  if (host) {
    std::memcpy(out.data(), reinterpret_cast<const void*>(address), bytes);
  } else {
    EXPECT_TRUE((*rt->device(device))->MakeCurrent().ok());
    EXPECT_EQ(rt->driver()->cuMemcpyDtoH(out.data(), address, bytes),
              CUDA_SUCCESS);
  }
  return out;
}

CopyCase CopyCase::Dense(std::vector<int64_t> shape, const Dtype& dtype) {
  CopyCase c;
  c.dtype = dtype;
  c.src_shape = shape;
  c.dst_shape = std::move(shape);
  return c;
}

CopyCase CopyCase::Random(std::mt19937_64& rng, bool gather) {
  static const Dtype* kAll[] = {&kF32, &kF16, &kBF16, &kF64, &kE4M3,
                                &kU8,  &kI16, &kI32,  &kI64};
  CopyCase c;
  c.dtype = *kAll[rng() % 9];
  const int rank = 1 + static_cast<int>(rng() % 5);
  int64_t budget = 200000;
  for (int k = 0; k < rank; ++k) {
    const bool inner = k == rank - 1;
    int64_t e = inner ? 1 + static_cast<int64_t>(rng() % 300)
                      : 1 + static_cast<int64_t>(rng() % 7);
    e = std::max<int64_t>(1, std::min(e, budget));
    budget = std::max<int64_t>(1, budget / e);
    c.dst_shape.push_back(e);
    c.src_shape.push_back(
        std::max<int64_t>(1, e + static_cast<int64_t>(rng() % 7) - 2));
  }
  const int modes = c.dtype.is_float ? 3 : 2;
  c.oob = static_cast<int>(rng() % modes);
  c.gather = gather;
  for (int k = 0; k < rank; ++k) {
    if (c.oob == FJ_OOB_PROMISE_IN_BOUNDS) {
      if (gather && k == 0) continue;
      c.src_shape[k] = std::max(c.src_shape[k], c.dst_shape[k]);
      c.start[k] =
          static_cast<int64_t>(rng() % (c.src_shape[k] - c.dst_shape[k] + 1));
    } else {
      c.start[k] = static_cast<int64_t>(rng() % (c.src_shape[k] + 5)) - 3;
    }
  }
  if (gather) {
    c.index_bits = rng() % 2 ? 32 : 64;
    for (int64_t r = 0; r < c.dst_shape[0]; ++r) {
      const uint64_t pick = rng() % 10;
      c.index.push_back(pick == 0 ? -1
                        : pick == 1
                            ? c.src_shape[0] + 3
                            : static_cast<int64_t>(rng() % c.src_shape[0]));
    }
  }
  if (rng() % 2) c.src_strides = Padded(rng, c.src_shape);
  if (rng() % 4 == 0) c.dst_strides = Padded(rng, c.dst_shape);
  return c;
}

std::string CopyCase::Describe() const {
  return absl::StrCat(
      dtype.name, " src [", absl::StrJoin(src_shape, ","), "] strides [",
      absl::StrJoin(src_strides, ","), "] dst [", absl::StrJoin(dst_shape, ","),
      "] strides [", absl::StrJoin(dst_strides, ","), "] start [",
      absl::StrJoin(start, ","), "] oob ", oob,
      gather ? absl::StrCat(" gather [", absl::StrJoin(index, ","), "]") : "",
      scatter
          ? absl::StrCat(" scatter [", absl::StrJoin(scatter_index, ","), "]")
          : "");
}

// --------------------------------------------------------------- fixture

void GpuFixture::SetUpTestSuite() {
  RuntimeOptions options;
  if (!ApplyEnvironment(options).ok()) return;
  auto rt = Runtime::Create(options);
  if (rt.ok()) runtime_ = std::move(rt).value();
}

void GpuFixture::TearDownTestSuite() {
  if (runtime_ != nullptr) {
    for (auto& [d, s] : streams_) {
      if ((*runtime_->device(d))->MakeCurrent().ok())
        runtime_->driver()->cuStreamDestroy(s);
    }
  }
  streams_.clear();
  runtime_.reset();
}

void GpuFixture::SetUp() {
  if (runtime_ == nullptr || runtime_->device_count() == 0) {
    GTEST_SKIP() << "no GPU: "
                 << (runtime_ == nullptr ? "no runtime"
                                         : runtime_->driver_status().message());
  }
}

std::vector<jit::CopyImpl> GpuFixture::Impls(int d) {
  const int arch = (*rt().device(d))->facts().arch();
  std::vector<jit::CopyImpl> impls = {jit::CopyImpl::kSync};
  if (arch >= 80) impls.push_back(jit::CopyImpl::kCpAsync);
  if (arch >= 90) impls.push_back(jit::CopyImpl::kTma);
  return impls;
}

Buffer GpuFixture::Device(int d, uint64_t bytes) {
  Buffer b;
  auto a = rt().Allocate(d, std::max<uint64_t>(bytes, 1));
  EXPECT_TRUE(a.ok()) << a.status();
  b.rt = &rt();
  b.device = d;
  b.address = a.ok() ? *a : 0;
  b.bytes = bytes;
  return b;
}

Buffer GpuFixture::PinnedHost(uint64_t bytes) {
  Buffer b;
  void* p = nullptr;
  EXPECT_TRUE((*rt().device(0))->MakeCurrent().ok());
  EXPECT_EQ(rt().driver()->cuMemHostAlloc(
                &p, std::max<uint64_t>(bytes, 1),
                CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
            CUDA_SUCCESS);
  b.rt = &rt();
  b.host = true;
  b.address = reinterpret_cast<uint64_t>(p);
  b.bytes = bytes;
  return b;
}

CUstream GpuFixture::stream(int d) {
  auto it = streams_.find(d);
  if (it != streams_.end()) return it->second;
  CUstream s = nullptr;
  EXPECT_TRUE((*rt().device(d))->MakeCurrent().ok());
  EXPECT_EQ(rt().driver()->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING),
            CUDA_SUCCESS);
  streams_[d] = s;
  return s;
}

void GpuFixture::Sync(int d) {
  ASSERT_TRUE((*rt().device(d))->MakeCurrent().ok());
  ASSERT_EQ(rt().driver()->cuStreamSynchronize(stream(d)), CUDA_SUCCESS);
}

absl::Status GpuFixture::Run(const CopyCase& c,
                             std::optional<jit::CopyImpl> impl,
                             bool force_kernel) {
  std::vector<uint8_t> src, dst;
  return RunInto(c, impl, force_kernel, &src, &dst);
}

absl::Status GpuFixture::RunInto(const CopyCase& c,
                                 std::optional<jit::CopyImpl> impl,
                                 bool force_kernel,
                                 std::vector<uint8_t>* src_bytes,
                                 std::vector<uint8_t>* dst_bytes) {
  const int eb = c.dtype.bytes;
  std::vector<int64_t> ss =
      c.src_strides.empty() ? Compact(c.src_shape) : c.src_strides;
  std::vector<int64_t> ds =
      c.dst_strides.empty() ? Compact(c.dst_shape) : c.dst_strides;
  const uint64_t src_n = SpanElements(c.src_shape, ss) * eb;
  const uint64_t dst_n = SpanElements(c.dst_shape, ds) * eb;
  Buffer src = c.src_place == Place::kDevice ? Device(c.src_device, src_n)
                                             : PinnedHost(src_n);
  Buffer dst = c.dst_place == Place::kDevice ? Device(c.dst_device, dst_n)
                                             : PinnedHost(dst_n);
  *src_bytes = RandomBytes(src_n, src_n * 31 + 7);
  src.Upload(*src_bytes);
  dst.Upload(std::vector<uint8_t>(dst_n, 0xCD));  // poison
  const int exec = c.dst_place == Place::kDevice ? c.dst_device : c.src_device;
  // An index in device memory, as int32 or int64.
  auto upload_index = [&](const std::vector<int64_t>& values) {
    std::vector<uint8_t> raw(values.size() * (c.index_bits / 8));
    for (size_t i = 0; i < values.size(); ++i) {
      if (c.index_bits == 32) {
        const int32_t v = static_cast<int32_t>(values[i]);
        std::memcpy(&raw[i * 4], &v, 4);
      } else {
        std::memcpy(&raw[i * 8], &values[i], 8);
      }
    }
    Buffer b = Device(exec, std::max<size_t>(raw.size(), 8));
    b.Upload(raw);
    return b;
  };
  Buffer index, scatter;
  std::vector<int64_t> index_shape = {static_cast<int64_t>(c.index.size())};
  std::vector<int64_t> scatter_shape = {
      static_cast<int64_t>(c.scatter_index.size())};
  if (c.gather) index = upload_index(c.index);
  if (c.scatter) scatter = upload_index(c.scatter_index);
  auto place = [](Place p, int d) {
    return p == Place::kDevice ? fj_dl_device{2, d} : fj_dl_device{3, 0};
  };
  std::vector<int64_t> src_shape = c.src_shape, dst_shape = c.dst_shape;
  fj_tensor s{reinterpret_cast<void*>(src.address),
              place(c.src_place, c.src_device),
              static_cast<int32_t>(src_shape.size()),
              c.dtype.dl,
              src_shape.data(),
              ss.data(),
              0};
  fj_tensor d{reinterpret_cast<void*>(dst.address),
              place(c.dst_place, c.dst_device),
              static_cast<int32_t>(dst_shape.size()),
              c.dtype.dl,
              dst_shape.data(),
              ds.data(),
              0};
  fj_tensor ix{reinterpret_cast<void*>(index.address),
               {2, exec},
               1,
               {0, static_cast<uint8_t>(c.index_bits), 1},
               index_shape.data(),
               nullptr,
               0};
  fj_tensor sx{reinterpret_cast<void*>(scatter.address),
               {2, exec},
               1,
               {0, static_cast<uint8_t>(c.index_bits), 1},
               scatter_shape.data(),
               nullptr,
               0};
  CopySpec spec;
  spec.src = DlTensorOf(s);
  spec.dst = DlTensorOf(d);
  spec.start = c.start;
  spec.oob = c.oob;
  spec.index = c.gather ? DlTensorOf(&ix) : std::nullopt;
  spec.scatter = c.scatter ? DlTensorOf(&sx) : std::nullopt;
  spec.impl = impl;
  spec.force_kernel = force_kernel;
  absl::Status st = rt().copy().CopyTensorWindow(spec, {exec, stream(exec)});
  Sync(exec);
  *dst_bytes = dst.Download();
  return st;
}

void GpuFixture::RunAndCheck(const CopyCase& c,
                             std::optional<jit::CopyImpl> impl,
                             bool force_kernel) {
  std::vector<uint8_t> src, got;
  absl::Status st = RunInto(c, impl, force_kernel, &src, &got);
  ASSERT_TRUE(st.ok()) << st;
  const int eb = c.dtype.bytes;
  const int rank = static_cast<int>(c.dst_shape.size());
  std::vector<int64_t> ss =
      c.src_strides.empty() ? Compact(c.src_shape) : c.src_strides;
  std::vector<int64_t> ds =
      c.dst_strides.empty() ? Compact(c.dst_shape) : c.dst_strides;
  const uint64_t fill =
      c.oob == FJ_OOB_NAN && c.dtype.is_float ? c.dtype.nan : 0;
  std::vector<bool> written(got.size() / eb, false);
  int mismatches = 0;
  // The window: dst's shape, or one row per scatter index entry.
  std::vector<int64_t> window = c.dst_shape;
  if (c.scatter) window[0] = static_cast<int64_t>(c.scatter_index.size());
  ForEach(window, [&](const std::vector<int64_t>& i) {
    bool inside = true;
    int64_t src_off = 0, dst_off = 0;
    for (int k = 0; k < rank; ++k) {
      int64_t at = c.start[k] + i[k];
      if (c.gather && k == 0) at = c.index[i[0]] + c.start[0];
      inside = inside && at >= 0 && at < c.src_shape[k];
      src_off += at * ss[k];
      int64_t to = i[k];
      if (c.scatter && k == 0) {
        to = c.scatter_index[i[0]];
        if (to < 0 || to >= c.dst_shape[0]) return;  // not written
      }
      dst_off += to * ds[k];
    }
    written[dst_off] = true;
    const uint8_t* want =
        inside ? &src[src_off * eb] : reinterpret_cast<const uint8_t*>(&fill);
    if (std::memcmp(&got[dst_off * eb], want, eb) != 0 && ++mismatches <= 5) {
      auto hex = [eb](const uint8_t* p) {
        std::string h;
        for (int b = eb - 1; b >= 0; --b)
          absl::StrAppend(&h, absl::Hex(p[b], absl::kZeroPad2));
        return h;
      };
      ADD_FAILURE() << "dst element [" << absl::StrJoin(i, ",") << "] "
                    << (inside ? "from src" : "fill") << " differs: 0x"
                    << hex(&got[dst_off * eb]) << ", want 0x" << hex(want);
    }
  });
  EXPECT_EQ(mismatches, 0);
  for (size_t e = 0; e < written.size(); ++e) {
    if (written[e]) continue;
    for (int b = 0; b < eb; ++b) {
      if (got[e * eb + b] != 0xCD) {
        ADD_FAILURE() << "byte " << e * eb + b
                      << " between dst's elements was written";
        return;
      }
    }
  }
}

// ------------------------------------------------------ TMA over a peer

void ReadPeerTensorThroughTma(GpuFixture& f) {
  Runtime& rt = GpuFixture::rt();
  if ((*rt.device(0))->facts().arch() < 90) GTEST_SKIP() << "GPU 0 has no TMA";
  auto can = rt.copy().CanAccessPeer(0, 1);
  ASSERT_TRUE(can.ok());
  if (!*can) GTEST_SKIP() << "no P2P path from GPU 0 to GPU 1";
  ASSERT_TRUE(rt.copy().EnablePeer(0, 1).ok());
  BuildSpec spec;
  spec.source = R"(
#include <fleetjit/copy.cuh>
extern "C" __global__ void tiled_copy(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out) {
  extern __shared__ unsigned char smem_raw[];
  float* tile = (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  __shared__ fj::barrier loaded;
  if (threadIdx.x == 0) loaded.init(fj::block_threads());
  __syncthreads();
  const fj::coords at = fj::at(blockIdx.x * in.box(0), blockIdx.y * in.box(1));
  fj::load_tile(tile, in, at, loaded);
  loaded.arrive();
  loaded.wait(0);
  fj::store_tile(out, at, tile);
  fj::commit_group();
  fj::wait_group<0>();
}
)";
  spec.name = "peer_tma_read.cu";
  spec.device = 0;
  spec.copy_impl = jit::CopyImpl::kTma;
  auto record = rt.BuildRecord(spec);
  ASSERT_TRUE(record.ok()) << record.status();
  auto k = rt.LoadKernel(*record, "tiled_copy", 0);
  ASSERT_TRUE(k.ok()) << k.status();
  const int64_t rows = 100, cols = 256;
  Buffer in = f.Device(1, rows * cols * 4), out = f.Device(0, rows * cols * 4);
  std::vector<uint8_t> data = RandomBytes(rows * cols * 4, 5);
  in.Upload(data);
  out.Upload(std::vector<uint8_t>(data.size(), 0xCD));
  int64_t shape[2] = {rows, cols};
  fj_tensor ti{reinterpret_cast<void*>(in.address),
               {2, 1},
               2,
               {2, 32, 1},
               shape,
               nullptr,
               0};
  fj_tensor to{reinterpret_cast<void*>(out.address),
               {2, 0},
               2,
               {2, 32, 1},
               shape,
               nullptr,
               0};
  fj_tensor_arg ai{}, ao{};
  ai.struct_size = ao.struct_size = sizeof(fj_tensor_arg);
  ai.tensor = &ti;
  ao.tensor = &to;
  ai.box[0] = ao.box[0] = 32;
  ai.box[1] = ao.box[1] = 64;
  ai.oob = FJ_OOB_ZEROS;
  fj_arg args[2] = {};
  for (int i = 0; i < 2; ++i) {
    args[i].struct_size = sizeof(fj_arg);
    args[i].kind = FJ_ARG_TENSOR;
  }
  args[0].v.tensor = &ai;
  args[1].v.tensor = &ao;
  LaunchConfig cfg;
  cfg.grid[0] = cols / 64;
  cfg.grid[1] = (rows + 31) / 32;
  cfg.block[0] = 128;
  cfg.shared_bytes = 32 * 64 * 4 + 128;
  ASSERT_TRUE((*rt.device(0))->MakeCurrent().ok());
  absl::Status st = Launch(**k, cfg, f.stream(0), args, 2, sizeof(fj_arg));
  ASSERT_TRUE(st.ok()) << st;
  f.Sync(0);
  EXPECT_EQ((*k)->tma_fallbacks.load(), 0u)
      << "the peer tensor had no tensor map";
  EXPECT_EQ(out.Download(), data);
}

}  // namespace fleetjit::copy::testutil
