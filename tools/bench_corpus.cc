// `fleetjit bench kernels --corpus DIR`: the newcomer corpus
// (bench/corpus/README.md, read by tools/corpus.h) on this GPU. For every
// manifest, size and variant (each copy implementation the device plans
// natively, then cp_async@compute_80 past sm_80): the layer kernel and its
// plain twin, built by fleetjit (every build started at once on the
// runtime's build threads), run once on poisoned outputs and compared (the
// twin is the reference: each output within twice the manifest's
// tolerance), then timed against a cuMemcpyDtoDAsync of bytes / 2, in
// GB/s of the manifest's bytes. Inputs are filled on the GPU by a small
// kernel of this file, from a fresh seed each run. torch's op, the third
// anchor, is bench/corpus/run.py's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "platform/driver_api.h"
#include "reference/measure.h"
#include "runtime/config.h"
#include "tools/bench.h"
#include "tools/cli_util.h"
#include "tools/corpus.h"

namespace fleetjit::cli {
namespace corpus_bench {
namespace {

using corpus::Buffer;
using corpus::Launch;
using corpus::Manifest;
using corpus::Problem;

// Fills a buffer on the GPU: mode 0 normal, 1 uniform [0, 1), 2 integers in
// [lo, hi), 3 0, 1, 2, ...; dtype as corpus::Dtypes() orders them. A
// counter-based hash of (seed, index): any grid gives the same numbers.
constexpr char kFillSource[] = R"(
typedef unsigned long long u64;
__device__ u64 fjc_mix(u64 x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ unsigned short fjc_bf16(float f) {
  unsigned u = __float_as_uint(f);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ unsigned short fjc_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ unsigned char fjc_e4m3(float f) {
  unsigned u = __float_as_uint(f), s = (u >> 24) & 0x80u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return (unsigned char)(s | 0x7f);
  if (u >= 0x43e00000u) return (unsigned char)(s | 0x7e);  // 448 and up
  const int e = (int)(u >> 23) - 127;
  if (e < -6) return (unsigned char)(s | __float2int_rn(__uint_as_float(u) * 512.f));
  const unsigned m = u & 0x7fffffu;
  unsigned code = ((unsigned)(e + 7) << 3) + ((m + 0x7ffffu + ((m >> 20) & 1u)) >> 20);
  return (unsigned char)(s | (code > 0x7eu ? 0x7eu : code));
}
extern "C" __global__ void fjc_fill(void* out, u64 n, int dtype, int mode,
                                    u64 seed, long long lo, long long hi) {
  for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n;
       i += (u64)gridDim.x * blockDim.x) {
    const u64 r = fjc_mix(seed ^ fjc_mix(i));
    float v = 0.f;
    long long k = 0;
    if (mode == 0) {
      const float u1 = (float)((r >> 40) + 1) * (1.f / 16777216.f);
      const float u2 = (float)((r >> 16) & 0xffffffull) * (1.f / 16777216.f);
      v = sqrtf(-2.f * logf(u1)) * cosf(6.28318530718f * u2);
    } else if (mode == 1) {
      v = (float)(r >> 40) * (1.f / 16777216.f);
    } else if (mode == 2) {
      k = lo + (long long)(r % (u64)(hi - lo));
    } else {
      k = (long long)i;
      v = (float)i;
    }
    if (mode == 2) v = (float)k;
    switch (dtype) {
      case 0: ((float*)out)[i] = v; break;
      case 1: ((unsigned short*)out)[i] = fjc_f16(v); break;
      case 2: ((unsigned short*)out)[i] = fjc_bf16(v); break;
      case 3: ((unsigned char*)out)[i] = fjc_e4m3(v); break;
      case 4: ((signed char*)out)[i] = (signed char)k; break;
      case 5: ((unsigned char*)out)[i] = (unsigned char)k; break;
      case 6: ((int*)out)[i] = (int)k; break;
      default: ((long long*)out)[i] = k; break;
    }
  }
}
)";

absl::Status Fj(fj_status* st, absl::string_view what) {
  return FromFj(st, std::string(what).c_str());
}

int DtypeIndex(const corpus::Dtype* d) {
  return static_cast<int>(d - corpus::Dtypes().data());
}

// Host decoders of the outputs' element types.
double HalfToDouble(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0    ? std::ldexp(m, -24)
             : e == 31 ? (m ? NAN : INFINITY)
                       : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
double E4m3ToDouble(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -v : v;
}
double ElementAt(const std::vector<uint8_t>& bytes, const corpus::Dtype& d,
                 size_t i) {
  const uint8_t* p = bytes.data() + i * d.bytes;
  switch (DtypeIndex(&d)) {  // corpus::Dtypes()'s order
    case 0: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case 1:
    case 2: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      if (DtypeIndex(&d) == 1) return HalfToDouble(h);
      const uint32_t u = uint32_t{h} << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case 3:
      return E4m3ToDouble(*p);
    case 4:
      return static_cast<int8_t>(*p);
    case 5:
      return *p;
    case 6: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
  }
}

// The poison bytes of an output before the twin's run and before the layer
// kernel's: NaN and a large finite value for floating-point outputs, two
// integers for the others, so an element neither kernel writes differs.
uint8_t Poison(const corpus::Dtype& d, bool layer) {
  if (d.kind != 'f') return layer ? 0x81 : 0x7F;
  if (!layer) return 0xFF;
  const std::string name = d.name;
  return name == "f16" ? 0x7B : name == "fp8e4m3" ? 0x7E : 0x7F;
}

// "" when the layer kernel's `got` matches the twin's `want`: exactly for
// integer outputs with atol = rtol = 0, else |got - want| <= 2 (atol + rtol
// |want|) (each kernel may be off by the tolerance), NaN matching NaN.
std::string Compare(const Buffer& b, const std::vector<uint8_t>& got,
                    const std::vector<uint8_t>& want) {
  const double tol_a = 2 * b.atol, tol_r = 2 * b.rtol;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < b.numel; ++i) {
    bool ok;
    if (b.dtype->kind != 'f' && b.atol == 0 && b.rtol == 0) {
      ok = std::memcmp(got.data() + i * b.dtype->bytes,
                       want.data() + i * b.dtype->bytes, b.dtype->bytes) == 0;
    } else {
      const double g = ElementAt(got, *b.dtype, i);
      const double w = ElementAt(want, *b.dtype, i);
      ok = g == w || (std::isnan(g) && std::isnan(w)) ||
           std::fabs(g - w) <= tol_a + tol_r * std::fabs(w);
    }
    if (!ok && first < 0) first = i;
    bad += !ok;
  }
  if (bad == 0) return "";
  std::vector<int64_t> idx(b.shape.size());
  int64_t rest = first;
  for (size_t k = b.shape.size(); k-- > 0;) {
    idx[k] = rest % b.shape[k];
    rest /= b.shape[k];
  }
  return absl::StrFormat(
      "%s[%s] = %.9g, the plain twin %.9g (%d of %d differ; within 2 x "
      "(atol %g + rtol %g |twin|))",
      b.name, absl::StrJoin(idx, ","), ElementAt(got, *b.dtype, first),
      ElementAt(want, *b.dtype, first), bad, b.numel, b.atol, b.rtol);
}

struct Variant {
  std::string name;  // "tma", "cp_async@compute_80"
  fj_copy_impl impl;
  std::string target;  // "" = the device's
};

// The runtime (FLEETJIT_* applied), the driver for events and the anchor
// copy, a stream both use; frees what it made, buffers included.
class Gpu {
 public:
  static absl::StatusOr<std::unique_ptr<Gpu>> Open(int device) {
    auto g = std::unique_ptr<Gpu>(new Gpu());
    FJ_RETURN_IF_ERROR(Fj(fj_runtime_create(nullptr, &g->rt_), "runtime"));
    int32_t count = 0;
    FJ_RETURN_IF_ERROR(Fj(fj_device_count(g->rt_, &count), "device count"));
    if (count == 0) {
      return absl::UnavailableError(
          absl::StrCat("no GPU (", fj_runtime_driver_error(g->rt_), ")"));
    }
    if (device < 0 || device >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device ", device, ": this host has ", count, " GPU(s)"));
    }
    g->device_ = device;
    g->info_.struct_size = sizeof(g->info_);
    g->info_.plan.struct_size = sizeof(g->info_.plan);
    FJ_RETURN_IF_ERROR(
        Fj(fj_device_info_get(g->rt_, device, &g->info_), "device info"));
    RuntimeOptions options;  // FLEETJIT_LIBCUDA included
    FJ_RETURN_IF_ERROR(ApplyEnvironment(options), "reading FLEETJIT_*");
    FJ_ASSIGN_OR_RETURN(g->api_, LoadDriverApi(options.libcuda_path),
                        "loading the driver");
    const DriverApi& a = *g->api_;
    CUdevice dev;
    FJ_CU_RETURN_IF_ERROR(a, cuDeviceGet, &dev, device);
    FJ_CU_RETURN_IF_ERROR(a, cuDevicePrimaryCtxRetain, &g->ctx_, dev);
    FJ_CU_RETURN_IF_ERROR(a, cuCtxSetCurrent, g->ctx_);
    FJ_CU_RETURN_IF_ERROR(a, cuStreamCreate, &g->stream_,
                          CU_STREAM_NON_BLOCKING);
    FJ_CU_RETURN_IF_ERROR(a, cuEventCreate, &g->e0_, 0);
    FJ_CU_RETURN_IF_ERROR(a, cuEventCreate, &g->e1_, 0);
    FJ_RETURN_IF_ERROR(
        Fj(fj_stream_wrap(g->rt_, device,
                          reinterpret_cast<uint64_t>(g->stream_), &g->wrapped_),
           "fj_stream_wrap"));
    return g;
  }
  ~Gpu() {
    FreeAll();
    fj_status_free(fj_stream_destroy(wrapped_));
    if (api_ != nullptr) {
      if (e0_ != nullptr) api_->cuEventDestroy(e0_);
      if (e1_ != nullptr) api_->cuEventDestroy(e1_);
      if (stream_ != nullptr) api_->cuStreamDestroy(stream_);
      CUdevice dev;
      if (ctx_ != nullptr && api_->cuDeviceGet(&dev, device_) == CUDA_SUCCESS)
        api_->cuDevicePrimaryCtxRelease(dev);
    }
    fj_status_free(fj_runtime_destroy(rt_));
  }

  fj_runtime* rt() const { return rt_; }
  fj_stream* stream() const { return wrapped_; }
  int device() const { return device_; }
  const fj_device_info& info() const { return info_; }

  absl::StatusOr<uint64_t> Alloc(uint64_t bytes) {
    uint64_t a = 0;
    FJ_RETURN_IF_ERROR(
        Fj(fj_mem_alloc(rt_, device_, bytes, &a), "fj_mem_alloc"));
    allocations_.push_back(a);
    return a;
  }
  void FreeAll() {
    for (uint64_t a : allocations_) fj_status_free(fj_mem_free(rt_, a));
    allocations_.clear();
  }
  absl::Status Sync() { return Fj(fj_stream_synchronize(wrapped_), "sync"); }

  // GPU ms per call of `work` (enqueued on stream()): the median of
  // `samples` event timings of `batch` calls, after 3 warm-ups.
  absl::StatusOr<double> TimeMs(const std::function<absl::Status()>& work,
                                int samples, int batch) {
    const DriverApi& a = *api_;
    FJ_CU_RETURN_IF_ERROR(a, cuCtxSetCurrent, ctx_);
    for (int i = 0; i < 3; ++i) FJ_RETURN_IF_ERROR(work());
    std::vector<double> ms;
    for (int s = 0; s < samples; ++s) {
      FJ_RETURN_IF_ERROR(CheckCu(a, a.cuEventRecord(e0_, stream_), "record"));
      for (int i = 0; i < batch; ++i) FJ_RETURN_IF_ERROR(work());
      FJ_RETURN_IF_ERROR(CheckCu(a, a.cuEventRecord(e1_, stream_), "record"));
      FJ_CU_RETURN_IF_ERROR(a, cuEventSynchronize, e1_);
      float t = 0;
      FJ_CU_RETURN_IF_ERROR(a, cuEventElapsedTime, &t, e0_, e1_);
      ms.push_back(double(t) / batch);
    }
    return measure::Median(std::move(ms));
  }
  absl::Status CopyD2D(uint64_t dst, uint64_t src, uint64_t bytes) {
    return FJ_CU_CALL(*api_, cuMemcpyDtoDAsync, dst, src, bytes, stream_);
  }

 private:
  Gpu() = default;
  fj_runtime* rt_ = nullptr;
  fj_device_info info_{};
  DriverApiPtr api_;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent e0_ = nullptr, e1_ = nullptr;
  fj_stream* wrapped_ = nullptr;
  int device_ = 0;
  std::vector<uint64_t> allocations_;
};

// Every module the run needs, each started once (fj_module_build_async).
class Builds {
 public:
  explicit Builds(fj_runtime* rt) : rt_(rt) {}
  ~Builds() {
    for (auto& [_, e] : entries_) {
      fj_status_free(fj_build_destroy(e.build));
      fj_status_free(fj_module_destroy(e.module));
    }
  }
  absl::Status Start(const Launch& l, const std::string& target,
                     fj_copy_impl impl) {
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<corpus::BuildRequest> r,
                        corpus::BuildRequest::Make(l, target, impl));
    const std::string key = r->Key();
    if (entries_.count(key) != 0) return absl::OkStatus();
    Entry& e = entries_[key];
    e.request = std::move(r);
    return Fj(fj_module_build_async(rt_, &e.request->options(), &e.build),
              "fj_module_build_async");
  }
  // The kernel of `l` (built per `target`, `impl`), or the build's error.
  absl::StatusOr<fj_kernel*> Kernel(const Launch& l, const std::string& target,
                                    fj_copy_impl impl, int device) {
    FJ_RETURN_IF_ERROR(Start(l, target, impl));
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<corpus::BuildRequest> r,
                        corpus::BuildRequest::Make(l, target, impl));
    Entry& e = entries_[r->Key()];
    if (e.module == nullptr && e.error.ok()) {
      fj_status* st = fj_build_take(e.build, &e.module);
      if (st != nullptr) {
        std::string msg = fj_status_message(st, nullptr);
        size_t n = 0;
        const char* log = fj_status_detail(st, fj_str{"build_log", 9}, &n);
        if (log != nullptr) {
          for (absl::string_view line : absl::StrSplit(
                   absl::string_view(log, n), '\n', absl::SkipEmpty())) {
            if (absl::StrContains(line, "error")) {
              absl::StrAppend(&msg, " | ", line);
              break;
            }
          }
        }
        fj_status_free(st);
        e.error = absl::InternalError(msg);
      }
    }
    FJ_RETURN_IF_ERROR(e.error);
    fj_kernel* k = nullptr;
    FJ_RETURN_IF_ERROR(
        Fj(fj_module_get_kernel(e.module, Str(l.kernel), device, &k),
           absl::StrCat("kernel ", l.kernel)));
    return k;
  }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::unique_ptr<corpus::BuildRequest> request;
    fj_build* build = nullptr;
    fj_module* module = nullptr;
    absl::Status error;
  };
  fj_runtime* rt_;
  std::map<std::string, Entry> entries_;
};

// One size of one manifest on the GPU: buffers filled, pristine copies of
// in/out buffers, the anchor's buffers.
class Case {
 public:
  static absl::StatusOr<std::unique_ptr<Case>> Make(Gpu& gpu, fj_kernel* fill,
                                                    const Problem& p,
                                                    uint64_t seed) {
    auto c = std::unique_ptr<Case>(new Case(gpu, p));
    for (const Buffer& b : p.buffers) {
      FJ_ASSIGN_OR_RETURN(uint64_t a, gpu.Alloc(b.bytes));
      c->addresses_[b.name] = a;
      FJ_RETURN_IF_ERROR(c->Fill(fill, b, a, seed++));
      if (b.output && !b.init.empty()) {
        FJ_ASSIGN_OR_RETURN(uint64_t copy, gpu.Alloc(b.bytes));
        FJ_RETURN_IF_ERROR(Fj(
            fj_memcpy_dtod(gpu.rt(), copy, a, b.bytes, gpu.stream()), "dtod"));
        c->pristine_[b.name] = copy;
      }
    }
    FJ_ASSIGN_OR_RETURN(c->copy_src_, gpu.Alloc(p.bytes / 2));
    FJ_ASSIGN_OR_RETURN(c->copy_dst_, gpu.Alloc(p.bytes / 2));
    FJ_RETURN_IF_ERROR(Fj(
        fj_memset_d8(gpu.rt(), c->copy_src_, 0x5A, p.bytes / 2, gpu.stream()),
        "memset"));
    FJ_RETURN_IF_ERROR(gpu.Sync());
    return c;
  }

  const std::map<std::string, uint64_t>& addresses() const {
    return addresses_;
  }
  uint64_t copy_src() const { return copy_src_; }
  uint64_t copy_dst() const { return copy_dst_; }

  // Poisons the outputs (per Poison(layer)), restores in/out buffers,
  // re-zeroes zero-filled inputs, runs `launch` and reads every output.
  absl::StatusOr<std::vector<std::vector<uint8_t>>> Run(
      bool layer, const std::function<absl::Status()>& launch) {
    for (const Buffer& b : p_.buffers) {
      const uint64_t a = addresses_.at(b.name);
      if (b.output && b.init.empty()) {
        FJ_RETURN_IF_ERROR(
            Fj(fj_memset_d8(gpu_.rt(), a, Poison(*b.dtype, layer), b.bytes,
                            gpu_.stream()),
               "poison"));
      } else if (pristine_.count(b.name) != 0) {
        FJ_RETURN_IF_ERROR(Fj(fj_memcpy_dtod(gpu_.rt(), a, pristine_[b.name],
                                             b.bytes, gpu_.stream()),
                              "restore"));
      } else if (b.init == "zeros") {
        FJ_RETURN_IF_ERROR(
            Fj(fj_memset_d8(gpu_.rt(), a, 0, b.bytes, gpu_.stream()), "zero"));
      }
    }
    FJ_RETURN_IF_ERROR(launch());
    FJ_RETURN_IF_ERROR(gpu_.Sync());
    std::vector<std::vector<uint8_t>> out;
    for (const Buffer& b : p_.buffers) {
      if (!b.output) continue;
      out.emplace_back(b.bytes);
      FJ_RETURN_IF_ERROR(
          Fj(fj_memcpy_dtoh(gpu_.rt(), out.back().data(), addresses_.at(b.name),
                            b.bytes, nullptr),
             "read back"));
    }
    return out;
  }

 private:
  Case(Gpu& gpu, const Problem& p) : gpu_(gpu), p_(p) {}

  absl::Status Fill(fj_kernel* fill, const Buffer& b, uint64_t a,
                    uint64_t seed) {
    if (b.init.empty() || b.init == "zeros") {
      return Fj(fj_memset_d8(gpu_.rt(), a, 0, b.bytes, gpu_.stream()), "zero");
    }
    if (b.init == "perm") {  // on the host: the first numel of a shuffle
      std::vector<int64_t> v(b.init_args[0]);
      std::iota(v.begin(), v.end(), 0);
      std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
      std::vector<uint8_t> bytes(b.bytes);
      for (int64_t i = 0; i < b.numel; ++i) {
        const int64_t x = v[i];
        std::memcpy(bytes.data() + i * b.dtype->bytes, &x, b.dtype->bytes);
      }
      return Fj(fj_memcpy_htod(gpu_.rt(), a, bytes.data(), b.bytes, nullptr),
                "upload");
    }
    const int mode = b.init == "randn"     ? 0
                     : b.init == "rand"    ? 1
                     : b.init == "randint" ? 2
                                           : 3;
    void* out = reinterpret_cast<void*>(a);
    uint64_t n = static_cast<uint64_t>(b.numel);
    int32_t dtype = DtypeIndex(b.dtype);
    int64_t lo = mode == 2 ? b.init_args[0] : 0;
    int64_t hi = mode == 2 ? b.init_args[1] : 1;
    fj_arg args[7] = {};
    for (fj_arg& x : args) x.struct_size = sizeof(fj_arg);
    args[0].kind = FJ_ARG_POINTER;
    args[0].v.pointer = reinterpret_cast<uint64_t>(out);
    args[1].kind = FJ_ARG_U64;
    args[1].v.u64 = n;
    args[2].kind = FJ_ARG_I32;
    args[2].v.i32 = dtype;
    args[3].kind = FJ_ARG_I32;
    args[3].v.i32 = mode;
    args[4].kind = FJ_ARG_U64;
    args[4].v.u64 = seed * 0x2545F4914F6CDD1Dull;
    args[5].kind = FJ_ARG_I64;
    args[5].v.i64 = lo;
    args[6].kind = FJ_ARG_I64;
    args[6].v.i64 = hi;
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    cfg.grid[0] = static_cast<uint32_t>(
        std::min<uint64_t>((n + 255) / 256, 64ull * gpu_.info().sm_count));
    cfg.block[0] = 256;
    cfg.stream = gpu_.stream();
    return Fj(fj_launch(fill, &cfg, args, 7), "filling an input");
  }

  Gpu& gpu_;
  const Problem& p_;
  std::map<std::string, uint64_t> addresses_, pristine_;
  uint64_t copy_src_ = 0, copy_dst_ = 0;
};

double Gbps(uint64_t bytes, double ms) {
  return ms > 0 ? static_cast<double>(bytes) / (ms * 1e6) : 0;
}

std::vector<Variant> DeviceVariants(const fj_device_info& info) {
  std::vector<Variant> out;
  for (fj_copy_impl impl :
       {FJ_COPY_IMPL_TMA, FJ_COPY_IMPL_CP_ASYNC, FJ_COPY_IMPL_SYNC}) {
    fj_copy_plan plan{};
    plan.struct_size = sizeof(plan);
    fj_status* st = fj_copy_plan_for_target(Str(info.plan.target), impl, &plan);
    if (st == nullptr) out.push_back({fj_copy_impl_name(impl), impl, ""});
    fj_status_free(st);
  }
  if (info.cc_major * 10 + info.cc_minor > 80) {
    out.push_back({"cp_async@compute_80", FJ_COPY_IMPL_CP_ASYNC, "compute_80"});
  }
  return out;
}

fj_launch_config Config(const Launch& l, fj_stream* stream) {
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  for (int i = 0; i < 3; ++i) {
    cfg.grid[i] = l.grid[i];
    cfg.block[i] = l.block[i];
  }
  cfg.shared_bytes = l.smem;
  cfg.stream = stream;
  return cfg;
}

}  // namespace

absl::Status Run(const BenchOptions& options,
                 const std::vector<std::string>& sets, BenchReport* report,
                 const std::function<void(const std::string&)>& say) {
  const int samples = options.reps > 0 ? options.reps : 10, batch = 10;
  FJ_ASSIGN_OR_RETURN(std::vector<Manifest> all, corpus::LoadSets(sets));
  std::vector<Manifest> manifests;
  for (Manifest& m : all) {
    if (m.id().find(options.filter) != std::string::npos)
      manifests.push_back(std::move(m));
  }
  if (manifests.empty()) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(std::unique_ptr<Gpu> gpu, Gpu::Open(options.device));
  const fj_device_info& info = gpu->info();
  const int sms = info.sm_count;
  const std::vector<Variant> variants = DeviceVariants(info);
  std::vector<std::pair<const Manifest*, std::vector<Problem>>> problems;
  for (const Manifest& m : manifests) {
    std::vector<Problem> ps;
    for (size_t s = 0; s < m.sizes.size(); ++s) {
      FJ_ASSIGN_OR_RETURN(Problem p, corpus::Resolve(m, s, sms));
      ps.push_back(std::move(p));
    }
    problems.emplace_back(&m, std::move(ps));
  }
  // Every build at once; the fill kernel first.
  Builds builds(gpu->rt());
  const std::string fill_path = "fleetjit_corpus_fill.cu";
  fj_build_options fo{};
  fo.struct_size = sizeof(fo);
  fo.source = fj_str{kFillSource, sizeof(kFillSource) - 1};
  fo.name = Str(fill_path);
  fj_module* fill_module = nullptr;
  FJ_RETURN_IF_ERROR(Fj(fj_module_build(gpu->rt(), &fo, &fill_module),
                        "building the input filler"));
  fj_kernel* fill_kernel = nullptr;
  absl::Status fst = Fj(fj_module_get_kernel(fill_module, Str("fjc_fill"),
                                             gpu->device(), &fill_kernel),
                        "the input filler");
  if (!fst.ok()) fj_status_free(fj_module_destroy(fill_module));
  FJ_RETURN_IF_ERROR(fst);
  absl::Cleanup free_fill = [&] {
    fj_status_free(fj_module_destroy(fill_module));
  };
  size_t total = 0;
  for (const auto& [m, ps] : problems) {
    for (const Problem& p : ps) {
      for (const Variant& v : variants) {
        FJ_RETURN_IF_ERROR(builds.Start(p.layer, v.target, v.impl));
        FJ_RETURN_IF_ERROR(builds.Start(p.plain, v.target, FJ_COPY_IMPL_AUTO));
        ++total;
      }
    }
  }
  std::vector<std::string> names;
  for (const Variant& v : variants) names.push_back(v.name);
  say(absl::StrCat("corpus: ", manifests.size(), " kernel(s) of ", sets.size(),
                   " set(s), ", total, " case(s) (", absl::StrJoin(names, ", "),
                   "); ", builds.size(),
                   " module(s) building in the background"));
  report->context["corpus_sets"] = sets;
  report->context["corpus_timing"] = absl::StrCat(
      "corpus rows: GPU time (CUDA events), median of ", samples,
      " timings of ", batch,
      " launches; GB/s = the manifest's bytes / time; the anchor copies "
      "bytes / 2; outputs compared with the plain twin's");
  const uint64_t seed0 = std::random_device{}() * 0x100000001ull;
  size_t done = 0;
  for (const auto& [m, ps] : problems) {
    for (size_t s = 0; s < ps.size(); ++s) {
      const Problem& p = ps[s];
      absl::StatusOr<std::unique_ptr<Case>> made =
          Case::Make(*gpu, fill_kernel, p, seed0 + 1000 * s);
      if (!made.ok()) {  // out of memory, say: this size's cases fail
        for (const Variant& v : variants) {
          const std::string name =
              absl::StrCat(m->id(), " [", p.label, "], ", v.name);
          report->skipped.emplace_back(
              name, absl::StrCat("inputs: ", made.status().message()));
          say(absl::StrCat("corpus [", ++done, "/", total, "] ", name,
                           ": FAILED: inputs: ", made.status().message()));
        }
        report->failed = true;
        gpu->FreeAll();
        continue;
      }
      std::unique_ptr<Case> c = std::move(*made);
      for (const Variant& v : variants) {
        ++done;
        const std::string name =
            absl::StrCat(m->id(), " [", p.label, "], ", v.name);
        std::string verdict;
        std::function<absl::Status()> run[2];
        int regs[2] = {0, 0};
        std::vector<std::vector<uint8_t>> outs[2];
        std::unique_ptr<corpus::LaunchArgs> args[2];
        fj_launch_config cfg[2];
        for (int side = 0; side < 2 && verdict.empty(); ++side) {  // plain 0
          const Launch& l = side == 0 ? p.plain : p.layer;
          absl::StatusOr<fj_kernel*> k =
              builds.Kernel(l, v.target, side == 0 ? FJ_COPY_IMPL_AUTO : v.impl,
                            gpu->device());
          absl::StatusOr<std::unique_ptr<corpus::LaunchArgs>> a =
              k.ok() ? corpus::LaunchArgs::Make(p, l, c->addresses(),
                                                gpu->device())
                     : k.status();
          if (!a.ok()) {
            verdict = absl::StrCat(side == 0 ? "plain" : "layer", ": ",
                                   a.status().message());
            break;
          }
          args[side] = std::move(*a);
          cfg[side] = Config(l, gpu->stream());
          fj_kernel* kern = *k;
          const corpus::LaunchArgs* la = args[side].get();
          const fj_launch_config* cf = &cfg[side];
          run[side] = [kern, la, cf] {
            return Fj(fj_launch(kern, cf, la->args().data(), la->args().size()),
                      "fj_launch");
          };
          fj_kernel_info ki{};
          ki.struct_size = sizeof(ki);
          if (fj_status* st = fj_kernel_info_get(kern, &ki)) {
            fj_status_free(st);
          } else {
            regs[side] = ki.num_regs;
          }
          absl::StatusOr<std::vector<std::vector<uint8_t>>> o =
              c->Run(side == 1, run[side]);
          if (!o.ok()) {
            verdict = absl::StrCat(side == 0 ? "plain" : "layer", ": ",
                                   o.status().message());
            break;
          }
          outs[side] = std::move(*o);
        }
        if (verdict.empty()) {
          size_t k = 0;
          std::vector<std::string> wrong;
          for (const Buffer& b : p.buffers) {
            if (!b.output) continue;
            std::string d = Compare(b, outs[1][k], outs[0][k]);
            if (!d.empty()) wrong.push_back(d);
            ++k;
          }
          verdict = wrong.empty() ? "ok" : absl::StrJoin(wrong, "; ");
        }
        const bool ok = verdict == "ok";
        if (!ok) report->failed = true;
        if (!run[0] || !run[1]) {  // not built or not launched
          report->skipped.emplace_back(name, verdict);
          say(absl::StrCat("corpus [", done, "/", total, "] ", name,
                           ": FAILED: ", verdict));
          continue;
        }
        const uint64_t half = p.bytes / 2;
        Gpu* g = gpu.get();
        const uint64_t src = c->copy_src(), dst = c->copy_dst();
        FJ_ASSIGN_OR_RETURN(
            double copy_ms,
            g->TimeMs([&] { return g->CopyD2D(dst, src, half); }, samples,
                      batch));
        FJ_ASSIGN_OR_RETURN(double plain_ms, g->TimeMs(run[0], samples, batch));
        FJ_ASSIGN_OR_RETURN(double layer_ms, g->TimeMs(run[1], samples, batch));
        BenchRow row;
        row.name = name;
        row.unit = "GB/s";
        row.higher_is_better = true;
        row.anchor = "cuMemcpyDtoDAsync, bytes / 2";
        row.anchor_value = Gbps(p.bytes, copy_ms);
        row.fleetjit = absl::StrCat("layer kernel, ", v.name);
        row.fleetjit_value = Gbps(p.bytes, layer_ms);
        const double plain = Gbps(p.bytes, plain_ms);
        row.notes["corpus"] = m->id();
        row.notes["size"] = p.label;
        row.notes["impl"] = v.name;
        row.notes["bytes"] = p.bytes;
        row.notes["plain_gbps"] = plain;
        row.notes["layer_over_plain"] =
            plain > 0 ? row.fleetjit_value / plain : 0;
        row.notes["plain_over_copy"] =
            row.anchor_value > 0 ? plain / row.anchor_value : 0;
        row.notes["layer_us"] = layer_ms * 1e3;
        row.notes["plain_us"] = plain_ms * 1e3;
        row.notes["copy_us"] = copy_ms * 1e3;
        row.notes["layer_regs"] = regs[1];
        row.notes["plain_regs"] = regs[0];
        row.notes["verified"] = verdict;
        say(absl::StrFormat(
            "corpus [%d/%d] %s: layer %.1f, plain %.1f, copy %.1f GB/s; "
            "layer/plain %.3f, layer/copy %.3f; %s",
            done, total, name, row.fleetjit_value, plain, row.anchor_value,
            row.notes["layer_over_plain"].get<double>(),
            row.anchor_value > 0 ? row.fleetjit_value / row.anchor_value : 0,
            ok ? "verified" : "WRONG: " + verdict));
        report->rows.push_back(std::move(row));
      }
      c.reset();
      gpu->FreeAll();
    }
  }
  return absl::OkStatus();
}

}  // namespace corpus_bench

absl::Status BenchCorpus(const BenchOptions& options,
                         const std::vector<std::string>& sets,
                         BenchReport* report,
                         const std::function<void(const std::string&)>& say) {
  return corpus_bench::Run(options, sets, report, say);
}

}  // namespace fleetjit::cli
