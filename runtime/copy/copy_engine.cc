#include "runtime/copy/copy_engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/copy/copy_kernels.h"
#include "runtime/launch/launch.h"

namespace fleetjit {

using copy::CopyPath;
using copy::CopyRoute;
using copy::CopySpec;
using copy::MemoryKind;
using copy::Placement;
using copy::PrefetchMode;
using copy::ValidatedCopy;

namespace {

constexpr int32_t kDLCUDA = 2;
constexpr int kPrefetchCtasPerSm = 4;
constexpr uint64_t kPrefetchPiece = 64 * 1024;

// An fj_tensor (DLPack order) for a kernel argument: `like`'s dtype, the
// desc's geometry at `address`. The arrays live in `shape`/`strides`.
fj_tensor KernelTensor(const fj_tensor& like, const TensorDesc& d, uint64_t address,
                       int64_t* shape, int64_t* strides) {
  fj_tensor t = like;
  t.data = reinterpret_cast<void*>(address);
  t.byte_offset = 0;
  t.device.device_type = kDLCUDA;  // the encoder's check; the kernel sees an address
  for (int i = 0; i < d.rank; ++i) {
    shape[i] = d.shape[d.rank - 1 - i];
    strides[i] = d.stride[d.rank - 1 - i];
  }
  t.shape = shape;
  t.strides = strides;
  return t;
}

fj_arg TensorArgOf(const fj_tensor_arg* a) {
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = FJ_ARG_TENSOR;
  arg.v.tensor = a;
  return arg;
}

fj_arg BytesArg(const void* p, uint32_t size) {
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = FJ_ARG_BYTES;
  arg.size = size;
  arg.v.bytes = p;
  return arg;
}

uint32_t FloorPow2(uint32_t v) {
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

}  // namespace

// ----------------------------------------------------------- the accessor
// Runtime::copy() lives here, beside what it creates (runtime.h declares it).
CopyEngine& Runtime::copy() {
  absl::MutexLock lock(&copy_mu_);
  if (copy_ == nullptr) copy_ = std::make_shared<CopyEngine>(*this);
  return *copy_;
}

CopyEngine::CopyEngine(Runtime& runtime)
    : runtime_(runtime), api_(runtime.driver()), logger_(runtime.logger()) {}

CopyEngine::~CopyEngine() {
  if (api_ == nullptr || IsForkedChild(*api_)) return;
  absl::MutexLock lock(&mu_);
  for (auto& [device, stream] : streams_) {
    auto dev = runtime_.device(device);
    absl::Status status = dev.ok() ? (*dev)->MakeCurrent().status() : dev.status();
    if (status.ok()) status = CheckCu(*api_, api_->cuStreamDestroy(stream), "cuStreamDestroy");
    if (!status.ok()) {
      logger_.Log(LogLevel::kWarn,
                  absl::StrCat("fj_copy: GPU ", device, "'s copy stream is left to the driver: ",
                               status.message()));
    }
  }
}

void CopyEngine::set_logger(Logger logger) {
  absl::MutexLock lock(&mu_);
  logger_ = std::move(logger);
}

void CopyEngine::Note(absl::string_view message) { Log(LogLevel::kInfo, message); }

void CopyEngine::Warn(absl::string_view message) { Log(LogLevel::kWarn, message); }

void CopyEngine::Log(LogLevel level, absl::string_view message) {
  Logger logger;
  {
    absl::MutexLock lock(&mu_);
    logger = logger_;
  }
  logger.Log(level, absl::StrCat("fj_copy: ", message));
}

CopyEngine::Counters CopyEngine::counters() const {
  Counters c;
  c.driver = n_driver_.load();
  c.driver_peer = n_driver_peer_.load();
  c.kernel = n_kernel_.load();
  c.staged = n_staged_.load();
  c.prefetch_local = n_prefetch_local_.load();
  c.prefetch_warm_owner = n_prefetch_warm_.load();
  c.prefetch_stage = n_prefetch_stage_.load();
  return c;
}

absl::Status CopyEngine::CheckDriver() const {
  if (api_ == nullptr || runtime_.device_count() == 0) {
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device: ", runtime_.driver_status().message()));
  }
  if (IsForkedChild(*api_)) {
    return absl::FailedPreconditionError(
        "CUDA was initialised by the parent process; a fork() child cannot use it");
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- peer access

absl::StatusOr<bool> CopyEngine::CanAccessPeer(int reader, int owner) {
  FJ_RETURN_IF_ERROR(CheckDriver(), "querying peer access");
  FJ_ASSIGN_OR_RETURN(Device * r, runtime_.device(reader), "querying peer access");
  FJ_ASSIGN_OR_RETURN(Device * o, runtime_.device(owner), "querying peer access");
  if (reader == owner) return true;
  {
    absl::MutexLock lock(&mu_);
    auto it = paths_.find({reader, owner});
    if (it != paths_.end()) return it->second;
  }
  int can = 0;
  FJ_RETURN_IF_ERROR(
      CheckCu(*api_, api_->cuDeviceCanAccessPeer(&can, r->handle(), o->handle()),
              "cuDeviceCanAccessPeer"),
      absl::StrCat("GPU ", reader, " -> GPU ", owner));
  absl::MutexLock lock(&mu_);
  paths_[{reader, owner}] = can != 0;
  return can != 0;
}

absl::Status CopyEngine::EnablePeer(int reader, int owner) {
  FJ_ASSIGN_OR_RETURN(bool can, CanAccessPeer(reader, owner), "enabling peer access");
  if (reader == owner) return absl::OkStatus();
  if (!can) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", reader, " has no P2P path to GPU ", owner,
        "; copies between them are staged through pinned host memory"));
  }
  FJ_ASSIGN_OR_RETURN(Device * o, runtime_.device(owner), "");
  FJ_ASSIGN_OR_RETURN(Device * r, runtime_.device(reader), "");
  FJ_ASSIGN_OR_RETURN(CUcontext owner_ctx, o->MakeCurrent(), "enabling peer access");
  FJ_RETURN_IF_ERROR(r->MakeCurrent().status(), "enabling peer access");
  CUresult result = api_->cuCtxEnablePeerAccess(owner_ctx, 0);
  if (result != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    FJ_RETURN_IF_ERROR(CheckCu(*api_, result, "cuCtxEnablePeerAccess"),
                       absl::StrCat("GPU ", reader, " -> GPU ", owner));
  }
  absl::MutexLock lock(&mu_);
  enabled_.insert({reader, owner});
  return absl::OkStatus();
}

absl::Status CopyEngine::DisablePeer(int reader, int owner) {
  FJ_RETURN_IF_ERROR(CheckDriver(), "disabling peer access");
  FJ_ASSIGN_OR_RETURN(Device * o, runtime_.device(owner), "disabling peer access");
  FJ_ASSIGN_OR_RETURN(Device * r, runtime_.device(reader), "disabling peer access");
  if (reader == owner) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(CUcontext owner_ctx, o->MakeCurrent(), "disabling peer access");
  FJ_RETURN_IF_ERROR(r->MakeCurrent().status(), "disabling peer access");
  CUresult result = api_->cuCtxDisablePeerAccess(owner_ctx);
  if (result != CUDA_ERROR_PEER_ACCESS_NOT_ENABLED) {
    FJ_RETURN_IF_ERROR(CheckCu(*api_, result, "cuCtxDisablePeerAccess"),
                       absl::StrCat("GPU ", reader, " -> GPU ", owner));
  }
  absl::MutexLock lock(&mu_);
  enabled_.erase({reader, owner});
  return absl::OkStatus();
}

bool CopyEngine::PeerEnabled(int reader, int owner) const {
  absl::MutexLock lock(&mu_);
  return reader == owner || enabled_.count({reader, owner}) > 0;
}

copy::PeerState CopyEngine::Peers() {
  copy::PeerState peers;
  peers.has_path = [this](int a, int b) {
    auto can = CanAccessPeer(a, b);
    if (!can.ok()) {
      // The copy still runs, staged through the host; the log says why.
      Warn(absl::StrCat("no P2P path assumed: ", can.status().message()));
      return false;
    }
    return *can;
  };
  peers.enabled = [this](int a, int b) { return PeerEnabled(a, b); };
  return peers;
}

// ------------------------------------------------------- kernels, streams

absl::StatusOr<LoadedKernel*> CopyEngine::Kernel(int device, jit::CopyImpl impl,
                                                 int elem_bytes, int rank) {
  const auto key = std::make_tuple(device, static_cast<int>(impl), elem_bytes, rank);
  {
    absl::MutexLock lock(&mu_);
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second;
  }
  // Built outside the lock: Runtime::Build is thread-safe and compiles a
  // key once; a racing thread gets the same LoadedKernel.
  absl::StatusOr<BuildSpec> spec = rank == 0 ? copy::PrefetchBuild(device, impl)
                                             : copy::TileCopyBuild(elem_bytes, rank, device, impl);
  if (!spec.ok()) return spec.status();
  FJ_ASSIGN_OR_RETURN(ModuleRecord record, runtime_.Build(*spec), "building the copy kernel");
  FJ_ASSIGN_OR_RETURN(
      LoadedKernel * k,
      runtime_.GetKernel(record, rank == 0 ? copy::kPrefetchKernel : copy::kTileCopyKernel,
                         device),
      "loading the copy kernel");
  absl::MutexLock lock(&mu_);
  kernels_[key] = k;
  return k;
}

absl::StatusOr<CUstream> CopyEngine::OwnStream(int device) {
  FJ_ASSIGN_OR_RETURN(Device * dev, runtime_.device(device), "");
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  CUstream s = nullptr;
  FJ_RETURN_IF_ERROR(
      CheckCu(*api_, api_->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"),
      absl::StrCat("creating the copy stream of GPU ", device));
  streams_[device] = s;
  return s;
}

absl::Status CopyEngine::LaunchCopyKernel(const CopySpec& spec, const ValidatedCopy& v,
                                          uint64_t src_address, bool host_operand,
                                          int device, CUstream stream) {
  FJ_ASSIGN_OR_RETURN(Device * dev, runtime_.device(device), "");
  const DeviceFacts& f = dev->facts();

  // The implementation: the caller's, else the device's plan.
  jit::CopyImpl impl;
  if (v.impl.has_value()) {
    impl = *v.impl;
  } else {
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, runtime_.PlanForDevice(device), "");
    impl = plan.impl;
  }

  // The kernel's tensors: src whole (the window is a coordinate offset),
  // dst whole, both tiled by the same box. promise_in_bounds is read with
  // zero fill: the window is in bounds (checked), but a tile's box may
  // overhang it and must not read outside src.
  int64_t s_shape[5], s_strides[5], d_shape[5], d_strides[5];
  fj_tensor src_t = KernelTensor(*spec.src, v.src, src_address, s_shape, s_strides);
  fj_tensor dst_t = KernelTensor(*spec.dst, v.dst, v.dst.address, d_shape, d_strides);
  fj_tensor_arg src_a{}, dst_a{};
  src_a.struct_size = dst_a.struct_size = sizeof(fj_tensor_arg);
  src_a.tensor = &src_t;
  dst_a.tensor = &dst_t;
  src_a.oob = v.oob == fj::oob_nan ? FJ_OOB_NAN : FJ_OOB_ZEROS;
  dst_a.oob = FJ_OOB_PROMISE_IN_BOUNDS;
  copy::TileShape tiles;
  auto tile_for = [&](jit::CopyImpl i) {
    const copy::CopyLaunchShape shape = copy::CopyShapeFor(i);
    const uint32_t budget = static_cast<uint32_t>(
        std::max(1024, (f.shared_per_block_optin - 256) / copy::kCopyStages));
    tiles = copy::ChooseTiles(v.dst, v.gather.has_value(), shape.max_row_bytes,
                              FloorPow2(std::min(shape.max_tile_bytes, budget)));
    for (int d = 0; d < v.dst.rank; ++d) {
      src_a.box[d] = dst_a.box[d] = static_cast<uint32_t>(tiles.box[v.dst.rank - 1 - d]);
    }
  };
  tile_for(impl);

  // tma needs a tensor map for both tensors to be worth it, and device
  // memory; otherwise cp.async, with its own tiles.
  if (impl == jit::CopyImpl::kTma) {
    FJ_ASSIGN_OR_RETURN(TensorDesc sd, DescribeTensor(&src_a, 0), "copy kernel src");
    FJ_ASSIGN_OR_RETURN(TensorDesc dd, DescribeTensor(&dst_a, 1), "copy kernel dst");
    // A gathered row outside src is a box wholly outside the tensor. On the
    // H200 such a TMA load under the NaN fill mode did not produce the NaN
    // fill (CopyGpuTest.PagedGatherWithBadIndicesFills, 2026-11-30), so NaN
    // gathers take cp.async, whose fill is the layer's own.
    const bool nan_gather = v.gather.has_value() && v.oob == fj::oob_nan;
    if (host_operand || nan_gather || !TmaRejection(sd).empty() ||
        !TmaRejection(dd).empty()) {
      impl = jit::CopyImpl::kCpAsync;
      tile_for(impl);
    }
  }
  FJ_ASSIGN_OR_RETURN(LoadedKernel * k, Kernel(device, impl, v.dst.elem_bytes, v.dst.rank),
                      "");

  copy::CopyKernelArgs a{};
  for (int d = 0; d < 5; ++d) {
    a.tiles[d] = tiles.tiles[d];
    a.start[d] = static_cast<int32_t>(d < v.dst.rank ? v.start[d] : 0);
  }
  a.total = tiles.total;
  if (v.gather.has_value()) {
    a.index_bytes = v.gather->elem_bytes;
    a.index = v.gather->address;
    a.index_stride = v.gather->stride;
  }
  a.src_rows = v.src.shape[v.src.rank - 1];
  const fj_arg args[3] = {TensorArgOf(&src_a), TensorArgOf(&dst_a),
                          BytesArg(&a, sizeof(a))};
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  const copy::CopyLaunchShape shape = copy::CopyShapeFor(impl);
  cfg.grid[0] = static_cast<uint32_t>(
      std::min<int64_t>(tiles.total, int64_t{shape.ctas_per_sm} * std::max(1, f.sm_count)));
  cfg.block[0] = static_cast<uint32_t>(shape.threads);
  cfg.shared_bytes = copy::kCopyStages * tiles.tile_bytes + 128;
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
  FJ_RETURN_IF_ERROR(Launch(*k, cfg, stream, args, 3, sizeof(fj_arg)), "");
  dev->NoteLaunch(&k->display_name);
  n_kernel_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status CopyEngine::LaunchPrefetchKernel(const copy::PrefetchRows& rows, int device,
                                              CUstream stream) {
  if (rows.row_bytes == 0 || rows.rows() == 0) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, runtime_.PlanForDevice(device), "");
  FJ_ASSIGN_OR_RETURN(LoadedKernel * k, Kernel(device, plan.impl, 1, 0), "");
  FJ_ASSIGN_OR_RETURN(Device * dev, runtime_.device(device), "");
  copy::PrefetchKernelArgs a{};
  a.base = rows.base;
  a.row_bytes = rows.row_bytes;
  for (int i = 0; i < 4; ++i) {
    a.count[i] = std::max<int64_t>(rows.count[i], 1);
    a.stride[i] = rows.stride[i];
  }
  a.piece = kPrefetchPiece;
  a.pieces_per_row = static_cast<int64_t>((rows.row_bytes + kPrefetchPiece - 1) / kPrefetchPiece);
  a.total = a.pieces_per_row * rows.rows();
  const fj_arg args[1] = {BytesArg(&a, sizeof(a))};
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = static_cast<uint32_t>(std::min<int64_t>(
      a.total, int64_t{kPrefetchCtasPerSm} * std::max(1, dev->facts().sm_count)));
  cfg.block[0] = 128;
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "");
  FJ_RETURN_IF_ERROR(Launch(*k, cfg, stream, args, 1, sizeof(fj_arg)), "");
  dev->NoteLaunch(&k->display_name);
  return absl::OkStatus();
}

}  // namespace fleetjit
