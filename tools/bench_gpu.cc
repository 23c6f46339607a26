// `fleetjit bench copy` and `fleetjit bench launch` (tools/bench.h): the
// anchors through the driver table, fleetjit through the C ABI, on one
// raw CUstream per GPU that fleetjit also uses (fj_stream_wrap).
#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "platform/driver_api.h"
#include "reference/measure.h"
#include "runtime/config.h"
#include "tools/bench.h"

namespace fleetjit::cli {
namespace {

using Json = nlohmann::ordered_json;

// fleetjit's runtime and the anchors' driver, in the same primary contexts,
// with a raw stream per GPU wrapped as an fj_stream. Frees what it made.
class GpuBench {
 public:
  // Devices `device` and, when `second` and the host has one, another.
  static absl::StatusOr<std::unique_ptr<GpuBench>> Open(int device,
                                                        bool second) {
    auto b = std::unique_ptr<GpuBench>(new GpuBench);
    FJ_RETURN_IF_ERROR(
        FromFj(fj_runtime_create(nullptr, &b->rt_), "fj_runtime_create"));
    int32_t count = 0;
    FJ_RETURN_IF_ERROR(
        FromFj(fj_device_count(b->rt_, &count), "fj_device_count"));
    if (count == 0) {
      return absl::UnavailableError(
          absl::StrCat("no GPU (", fj_runtime_driver_error(b->rt_),
                       "); this bench measures the live device (`fleetjit "
                       "bench build --target sm_XX` "
                       "runs without one)"));
    }
    if (device < 0 || device >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--device ", device, ": this host has ", count, " GPU(s)"));
    }
    RuntimeOptions options;  // the runtime's libcuda, FLEETJIT_LIBCUDA included
    FJ_RETURN_IF_ERROR(ApplyEnvironment(options),
                       "reading FLEETJIT_* variables");
    FJ_ASSIGN_OR_RETURN(b->api_, LoadDriverApi(options.libcuda_path),
                        "loading the driver");
    b->devices_.push_back(device);
    if (second && count > 1) b->devices_.push_back(device == 0 ? 1 : 0);
    for (int d : b->devices_)
      FJ_RETURN_IF_ERROR(b->OpenDevice(d), absl::StrCat("GPU ", d));
    return b;
  }

  ~GpuBench() {
    for (uint64_t a : allocations_) fj_status_free(fj_mem_free(rt_, a));
    for (size_t i = 0; i < wrapped_.size(); ++i) {
      fj_status_free(fj_stream_destroy(wrapped_[i]));
      if (Enter(i).ok()) api_->cuStreamDestroy(streams_[i]);
      CUdevice dev;
      if (api_->cuDeviceGet(&dev, devices_[i]) == CUDA_SUCCESS) {
        api_->cuDevicePrimaryCtxRelease(dev);
      }
    }
    fj_status_free(fj_runtime_destroy(rt_));
  }

  fj_runtime* rt() const { return rt_; }
  const DriverApi& api() const { return *api_; }
  // The GPUs opened: [0] the one asked for, [1] the other (if any).
  const std::vector<int>& devices() const { return devices_; }
  absl::Status Enter(size_t i) const {
    return FJ_CU_CALL(*api_, cuCtxSetCurrent, contexts_[i]);
  }
  CUcontext context(size_t i) const { return contexts_[i]; }
  CUstream stream(size_t i) const { return streams_[i]; }
  fj_stream* wrapped(size_t i) const { return wrapped_[i]; }
  absl::Status Sync(size_t i) const {
    FJ_RETURN_IF_ERROR(Enter(i));
    return FJ_CU_CALL(*api_, cuStreamSynchronize, streams_[i]);
  }
  // fj_mem_alloc on opened device i, freed with the bench.
  absl::StatusOr<uint64_t> Alloc(size_t i, uint64_t bytes) {
    uint64_t a = 0;
    FJ_RETURN_IF_ERROR(
        FromFj(fj_mem_alloc(rt_, devices_[i], bytes, &a), "fj_mem_alloc"));
    allocations_.push_back(a);
    return a;
  }

 private:
  GpuBench() = default;
  absl::Status OpenDevice(int ordinal) {
    CUdevice dev;
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    FJ_CU_RETURN_IF_ERROR(*api_, cuDeviceGet, &dev, ordinal);
    FJ_CU_RETURN_IF_ERROR(*api_, cuDevicePrimaryCtxRetain, &ctx, dev);
    FJ_CU_RETURN_IF_ERROR(*api_, cuCtxSetCurrent, ctx);
    FJ_CU_RETURN_IF_ERROR(*api_, cuStreamCreate, &stream,
                          CU_STREAM_NON_BLOCKING);
    fj_stream* wrapped = nullptr;
    absl::Status st =
        FromFj(fj_stream_wrap(rt_, ordinal, reinterpret_cast<uint64_t>(stream),
                              &wrapped),
               "wrap");
    if (!st.ok()) api_->cuStreamDestroy(stream);
    FJ_RETURN_IF_ERROR(st);
    contexts_.push_back(ctx);
    streams_.push_back(stream);
    wrapped_.push_back(wrapped);
    return absl::OkStatus();
  }

  fj_runtime* rt_ = nullptr;
  DriverApiPtr api_;
  std::vector<int> devices_;
  std::vector<CUcontext> contexts_;
  std::vector<CUstream> streams_;
  std::vector<fj_stream*> wrapped_;
  std::vector<uint64_t> allocations_;
};

// Keeps the first failure of calls made inside a timed loop (which cannot
// return one); the loop's caller checks it afterwards.
struct FirstError {
  absl::Status status;
  void Keep(absl::Status s) {
    if (status.ok()) status = std::move(s);
  }
  void Keep(fj_status* s, const char* what) { Keep(FromFj(s, what)); }
};

fj_tensor Tensor2(uint64_t address, int device, int64_t* shape) {
  return fj_tensor{reinterpret_cast<void*>(address),
                   {2, device},
                   2,
                   {2, 32, 1},
                   shape,
                   nullptr,
                   0};
}

// Bytes of `bytes` at device address `at`, read back (stream-ordered).
absl::StatusOr<std::vector<uint8_t>> ReadBack(GpuBench& b, uint64_t at,
                                              size_t bytes) {
  std::vector<uint8_t> out(bytes);
  FJ_RETURN_IF_ERROR(FromFj(
      fj_memcpy_dtoh(b.rt(), out.data(), at, bytes, b.wrapped(0)), "dtoh"));
  FJ_RETURN_IF_ERROR(b.Sync(0));
  return out;
}

BenchRow CopyRow(std::string name, std::string anchor, double anchor_ms,
                 std::string fleetjit, double ms, double bytes_counted) {
  BenchRow r{std::move(name),
             "GB/s",
             true,
             std::move(anchor),
             bytes_counted / (anchor_ms * 1e6),
             std::move(fleetjit),
             bytes_counted / (ms * 1e6)};
  r.notes = {{"anchor_ms", anchor_ms}, {"fleetjit_ms", ms}};
  return r;
}

}  // namespace

absl::StatusOr<BenchReport> BenchCopy(const BenchOptions& o) {
  FJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuBench> b,
                      GpuBench::Open(o.device, true));
  const DriverApi& api = b->api();
  const int dev = b->devices()[0];
  const int samples = o.reps > 0 ? o.reps : 10;
  // f32 rows of 64 KiB; src has 64 more columns, so a full-width window is
  // strided.
  const int64_t cols = 16384, src_cols = cols + 64;
  const int64_t rows =
      std::max<int64_t>(2, (int64_t{o.mib} << 20) / (cols * 4));
  const uint64_t bytes = uint64_t(rows * cols * 4),
                 src_bytes = uint64_t(rows * src_cols * 4);
  FJ_ASSIGN_OR_RETURN(uint64_t src, b->Alloc(0, src_bytes));
  FJ_ASSIGN_OR_RETURN(uint64_t dst, b->Alloc(0, bytes));
  // Random first two rows (what the checks read), a pattern elsewhere.
  std::vector<uint8_t> head(size_t(2 * src_cols * 4));
  std::mt19937_64 rng(std::random_device{}());
  for (uint8_t& x : head) x = static_cast<uint8_t>(rng());
  FJ_RETURN_IF_ERROR(FromFj(
      fj_memset_d8(b->rt(), src, 0x3C, src_bytes, b->wrapped(0)), "memset"));
  FJ_RETURN_IF_ERROR(FromFj(
      fj_memcpy_htod(b->rt(), src, head.data(), head.size(), b->wrapped(0)),
      "htod"));
  BenchReport report;
  FJ_ASSIGN_OR_RETURN(report.context["device"], DeviceJson(b->rt(), dev));
  report.context["mib"] = bytes >> 20;
  report.context["timing"] =
      absl::StrCat("median of ", samples, " samples of 5 runs");
  FirstError err;
  auto sync0 = [&] { err.Keep(b->Sync(0)); };
  const double anchor_ms = measure::TimeMs(
      [&] {
        err.Keep(CheckCu(
            api, api.cuMemcpyDtoDAsync(dst, src, bytes, b->stream(0)), "DtoD"));
      },
      sync0, samples);
  int64_t shape[2] = {rows, cols}, src_shape[2] = {rows, src_cols};
  fj_tensor s = Tensor2(src, dev, shape), d = Tensor2(dst, dev, shape);
  fj_copy_desc desc{};
  desc.struct_size = sizeof(desc);
  desc.src = &s;
  desc.dst = &d;
  auto copy = [&] {
    err.Keep(fj_copy(b->rt(), &desc, b->wrapped(0)), "fj_copy");
  };
  FJ_RETURN_IF_ERROR(
      FromFj(fj_memset_d8(b->rt(), dst, 0xEE, bytes, b->wrapped(0)), "poison"));
  const double dense_ms = measure::TimeMs(copy, sync0, samples);
  FJ_RETURN_IF_ERROR(err.status, "contiguous copies");
  FJ_ASSIGN_OR_RETURN(std::vector<uint8_t> got, ReadBack(*b, dst, head.size()));
  if (std::memcmp(got.data(), head.data(), got.size()) != 0) {
    return absl::InternalError("fj_copy (contiguous) copied wrong data");
  }
  report.rows.push_back(CopyRow(
      absl::StrCat("contiguous ", bytes >> 20, " MiB (read + written)"),
      "cuMemcpyDtoDAsync", anchor_ms, "fj_copy", dense_ms, 2.0 * bytes));

  // A window one row above src and 32 columns in: its first row is fill.
  fj_tensor ws = Tensor2(src, dev, src_shape);
  desc.src = &ws;
  desc.src_start[0] = -1;
  desc.src_start[1] = 32;
  desc.oob = FJ_OOB_ZEROS;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_memset_d8(b->rt(), dst, 0xEE, bytes, b->wrapped(0)), "poison"));
  const double window_ms = measure::TimeMs(copy, sync0, samples);
  FJ_RETURN_IF_ERROR(err.status, "window copies");
  FJ_ASSIGN_OR_RETURN(got, ReadBack(*b, dst, size_t(2 * cols * 4)));
  bool ok = std::all_of(got.begin(), got.begin() + cols * 4,
                        [](uint8_t x) { return x == 0; });
  ok = ok &&
       std::memcmp(got.data() + cols * 4, head.data() + 32 * 4, cols * 4) == 0;
  if (!ok)
    return absl::InternalError("fj_copy (window, zero fill) copied wrong data");
  BenchRow window = CopyRow(
      "2-D window at (-1, 32), zero fill, vs the same bytes contiguous",
      "cuMemcpyDtoDAsync", anchor_ms, "fj_copy", window_ms, 2.0 * bytes);
  window.notes["window"] = {
      {"rows", rows}, {"cols", cols}, {"src_cols", src_cols}};
  report.rows.push_back(std::move(window));

  if (b->devices().size() < 2) {
    report.skipped.push_back(
        {"peer copy", "needs two GPUs; this host has one"});
    return report;
  }
  const int other = b->devices()[1];
  int32_t can = 0;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_peer_query(b->rt(), dev, other, &can), "fj_peer_query"));
  if (!can) {
    report.skipped.push_back(
        {"peer copy",
         absl::StrCat("no P2P path from GPU ", other, " to GPU ", dev)});
    return report;
  }
  FJ_RETURN_IF_ERROR(
      FromFj(fj_peer_enable(b->rt(), dev, other), "fj_peer_enable"));
  FJ_ASSIGN_OR_RETURN(uint64_t peer, b->Alloc(1, bytes));
  FJ_RETURN_IF_ERROR(FromFj(
      fj_memcpy_htod(b->rt(), peer, head.data(), head.size(), b->wrapped(1)),
      "htod"));
  FJ_RETURN_IF_ERROR(b->Sync(1));
  const double peer_anchor_ms = measure::TimeMs(
      [&] {
        err.Keep(FJ_CU_CALL(api, cuMemcpyPeerAsync, dst, b->context(0), peer,
                            b->context(1), bytes, b->stream(0)));
      },
      sync0, samples);
  fj_tensor ps = Tensor2(peer, other, shape);
  desc = fj_copy_desc{};
  desc.struct_size = sizeof(desc);
  desc.src = &ps;
  desc.dst = &d;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_memset_d8(b->rt(), dst, 0xEE, bytes, b->wrapped(0)), "poison"));
  const double peer_ms = measure::TimeMs(copy, sync0, samples);
  FJ_RETURN_IF_ERROR(err.status, "peer copies");
  FJ_ASSIGN_OR_RETURN(got, ReadBack(*b, dst, head.size()));
  if (std::memcmp(got.data(), head.data(), got.size()) != 0) {
    return absl::InternalError("fj_copy (peer) copied wrong data");
  }
  report.rows.push_back(CopyRow(
      absl::StrCat("peer GPU ", other, " -> GPU ", dev, ", ", bytes >> 20,
                   " MiB (bytes moved)"),
      "cuMemcpyPeerAsync", peer_anchor_ms, "fj_copy", peer_ms, double(bytes)));
  return report;
}

absl::StatusOr<BenchReport> BenchLaunch(const BenchOptions& o) {
  FJ_ASSIGN_OR_RETURN(std::unique_ptr<GpuBench> b,
                      GpuBench::Open(o.device, false));
  const DriverApi& api = b->api();
  const int dev = b->devices()[0];
  // 1. One kernel, built by fleetjit for this GPU; the anchor loads the
  // same cubin itself.
  static constexpr char kEmpty[] =
      "extern \"C\" __global__ void empty_args(float* a, const float* b, float "
      "c, int n) {}\n";
  fj_build_options bo{};
  bo.struct_size = sizeof(bo);
  bo.source = fj_str{kEmpty, sizeof(kEmpty) - 1};
  bo.name = fj_str{"bench_launch.cu", 15};
  bo.device = dev;
  bo.output = FJ_OUTPUT_CUBIN;
  fj_module* module = nullptr;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_module_build(b->rt(), &bo, &module), "fj_module_build"));
  absl::Cleanup destroy_module = [&] {
    fj_status_free(fj_module_destroy(module));
  };
  fj_kernel* kernel = nullptr;
  FJ_RETURN_IF_ERROR(FromFj(
      fj_module_get_kernel(module, fj_str{"empty_args", 10}, dev, &kernel),
      "kernel"));
  // Launch thunks are made in the background after a build: measure once
  // the kernel has one (or after 5 s, on the generic path).
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  for (const double start = measure::NowMs();
       measure::NowMs() - start < 5000;) {
    FJ_RETURN_IF_ERROR(
        FromFj(fj_kernel_info_get(kernel, &info), "fj_kernel_info_get"));
    if (info.uses_thunk) break;
  }
  const void* image = nullptr;
  size_t image_size = 0;
  FJ_RETURN_IF_ERROR(
      FromFj(fj_module_image(module, &image, &image_size), "image"));
  FJ_RETURN_IF_ERROR(b->Enter(0));
  CUmodule raw_module = nullptr;
  CUfunction function = nullptr;
  FJ_CU_RETURN_IF_ERROR(api, cuModuleLoadData, &raw_module, image);
  absl::Cleanup unload = [&] { api.cuModuleUnload(raw_module); };
  FJ_RETURN_IF_ERROR(
      CheckCu(api, api.cuModuleGetFunction(&function, raw_module, "empty_args"),
              "GetFunction"));

  // 2. The same arguments both ways, on the same stream.
  FJ_ASSIGN_OR_RETURN(uint64_t buffer, b->Alloc(0, 8192));
  CUdeviceptr p0 = buffer, p1 = buffer + 4096;
  float c = 2.0f;
  int n = 1024;
  void* params[] = {&p0, &p1, &c, &n};
  fj_arg args[4] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = args[1].kind = FJ_ARG_POINTER;
  args[0].v.pointer = p0;
  args[1].v.pointer = p1;
  args[2].kind = FJ_ARG_F32;
  args[2].v.f32 = c;
  args[3].kind = FJ_ARG_I32;
  args[3].v.i32 = n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  cfg.stream = b->wrapped(0);
  FirstError err;
  const int rounds = o.reps > 0 ? o.reps : 200, batch = 64;
  std::vector<double> us = measure::InterleavedMedians(
      {[&] {
         err.Keep(FJ_CU_CALL(api, cuLaunchKernel, function, 1, 1, 1, 32, 1, 1,
                             0, b->stream(0), params, nullptr));
       },
       [&] { err.Keep(fj_launch(kernel, &cfg, args, 4), "fj_launch"); }},
      [&] { err.Keep(b->Sync(0)); }, rounds, /*warmup=*/rounds / 10 + 1, batch);
  FJ_RETURN_IF_ERROR(err.status, "launching");

  BenchReport report;
  FJ_ASSIGN_OR_RETURN(report.context["device"], DeviceJson(b->rt(), dev));
  report.context["timing"] = absl::StrCat(
      "median of ", rounds, " interleaved batches of ", batch, " launches");
  BenchRow per{"host time per launch, empty kernel, 4 arguments",
               "us",
               false,
               "cuLaunchKernel",
               us[0],
               "fj_launch",
               us[1]};
  per.notes["uses_thunk"] = info.uses_thunk != 0;
  report.rows.push_back(per);
  report.rows.push_back({"host launch rate", "launches/s", true,
                         "cuLaunchKernel", 1e6 / us[0], "fj_launch",
                         1e6 / us[1]});
  return report;
}

absl::Status FromFj(fj_status* status, const char* what) {
  if (status == nullptr) return absl::OkStatus();
  absl::Status out(
      fj_status_code(status) == FJ_UNAVAILABLE ? absl::StatusCode::kUnavailable
                                               : absl::StatusCode::kInternal,
      absl::StrCat(what, ": ", fj_code_name(fj_status_code(status)), ": ",
                   fj_status_message(status, nullptr)));
  fj_status_free(status);
  return out;
}

absl::StatusOr<Json> DeviceJson(fj_runtime* rt, int device) {
  fj_device_info info{};
  info.struct_size = sizeof(info);
  FJ_RETURN_IF_ERROR(
      FromFj(fj_device_info_get(rt, device, &info), "fj_device_info_get"));
  return Json{{"ordinal", info.ordinal},
              {"name", info.name},
              {"cc", absl::StrCat(info.cc_major, ".", info.cc_minor)},
              {"sm_count", info.sm_count},
              {"driver_version", info.driver_version},
              {"target", info.plan.target},
              {"copy_impl", fj_copy_impl_name(info.plan.impl)}};
}

}  // namespace fleetjit::cli
