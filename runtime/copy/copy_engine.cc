// CopyEngine: construction, peer access, the copy streams, and the routes
// of CopyTensorWindow and Prefetch: validate, classify, route, run
// (copy_engine.h explains the routes; copy_kernels.cc launches the kernels).
#include "runtime/copy/copy_engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/dlpack_codes.h"
#include "base/status_macros.h"
#include "runtime/launch/launch.h"

namespace fleetjit {

using copy::CopyPath;
using copy::CopyRoute;
using copy::CopySpec;
using copy::MemoryKind;
using copy::Placement;
using copy::PrefetchMode;
using copy::ValidatedCopy;

CopyEngine::CopyEngine(const DriverApi* api, const DeviceList& devices,
                       copy::KernelSource& kernels, Logger logger)
    : api_(api),
      devices_(devices),
      kernels_(devices, kernels),
      logger_(std::move(logger)) {}

CopyEngine::~CopyEngine() {
  if (api_ == nullptr || IsForkedChild(*api_)) return;
  absl::MutexLock lock(&mu_);
  for (auto& [device, stream] : streams_) {
    auto dev = devices_.at(device);
    absl::Status status =
        dev.ok() ? (*dev)->MakeCurrent().status() : dev.status();
    if (status.ok()) status = FJ_CU_CALL(*api_, cuStreamDestroy, stream);
    if (!status.ok()) {
      logger_.Log(LogLevel::kWarn,
                  absl::StrCat("fj_copy: GPU ", device,
                               "'s copy stream is left to the driver: ",
                               status.message()));
    }
  }
}

void CopyEngine::Note(absl::string_view message) {
  Log(LogLevel::kInfo, message);
}

void CopyEngine::Warn(absl::string_view message) {
  Log(LogLevel::kWarn, message);
}

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
  c.kernel = kernels_.copies_launched();
  c.staged = n_staged_.load();
  c.prefetch_local = n_prefetch_local_.load();
  c.prefetch_warm_owner = n_prefetch_warm_.load();
  c.prefetch_stage = n_prefetch_stage_.load();
  return c;
}

absl::Status CopyEngine::CheckDriver() const {
  if (api_ == nullptr || devices_.count() == 0) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", devices_.driver_status().message()));
  }
  if (IsForkedChild(*api_)) {
    return absl::FailedPreconditionError(
        "CUDA was initialised by the parent process; a fork() child cannot use "
        "it");
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------- peer access

absl::StatusOr<bool> CopyEngine::CanAccessPeer(int reader, int owner) {
  FJ_RETURN_IF_ERROR(CheckDriver(), "querying peer access");
  FJ_ASSIGN_OR_RETURN(Device * r, devices_.at(reader), "querying peer access");
  FJ_ASSIGN_OR_RETURN(Device * o, devices_.at(owner), "querying peer access");
  if (reader == owner) return true;
  {
    absl::MutexLock lock(&mu_);
    auto it = paths_.find({reader, owner});
    if (it != paths_.end()) return it->second;
  }
  int can = 0;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(*api_, cuDeviceCanAccessPeer, &can, r->handle(), o->handle()),
      absl::StrCat("GPU ", reader, " -> GPU ", owner));
  absl::MutexLock lock(&mu_);
  paths_[{reader, owner}] = can != 0;
  return can != 0;
}

absl::Status CopyEngine::EnablePeer(int reader, int owner) {
  FJ_ASSIGN_OR_RETURN(bool can, CanAccessPeer(reader, owner),
                      "enabling peer access");
  if (reader == owner) return absl::OkStatus();
  if (!can) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU ", reader, " has no P2P path to GPU ", owner,
        "; copies between them are staged through pinned host memory"));
  }
  FJ_ASSIGN_OR_RETURN(Device * o, devices_.at(owner));
  FJ_ASSIGN_OR_RETURN(Device * r, devices_.at(reader));
  FJ_ASSIGN_OR_RETURN(CUcontext owner_ctx, o->MakeCurrent(),
                      "enabling peer access");
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
  FJ_ASSIGN_OR_RETURN(Device * o, devices_.at(owner), "disabling peer access");
  FJ_ASSIGN_OR_RETURN(Device * r, devices_.at(reader), "disabling peer access");
  if (reader == owner) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(CUcontext owner_ctx, o->MakeCurrent(),
                      "disabling peer access");
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

absl::StatusOr<CUstream> CopyEngine::OwnStream(int device) {
  FJ_ASSIGN_OR_RETURN(Device * dev, devices_.at(device));
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status());
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(device);
  if (it != streams_.end()) return it->second;
  CUstream s = nullptr;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(*api_, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING),
      absl::StrCat("creating the copy stream of GPU ", device));
  streams_[device] = s;
  return s;
}

namespace {

// Pinned host memory for staging, freed on every path out.
class HostStage {
 public:
  HostStage(const DriverApi& api, CopyEngine& engine)
      : api_(api), engine_(engine) {}
  ~HostStage() {
    if (ptr_ == nullptr) return;
    const absl::Status freed = FJ_CU_CALL(api_, cuMemFreeHost, ptr_);
    if (!freed.ok()) {
      engine_.Warn(absl::StrCat(
          "the host staging buffer is left to the driver: ", freed.message()));
    }
  }
  absl::Status Allocate(uint64_t bytes) {
    return FJ_CU_CALL(api_, cuMemHostAlloc, &ptr_, bytes,
                      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  }
  uint64_t address() const { return reinterpret_cast<uint64_t>(ptr_); }

 private:
  const DriverApi& api_;
  CopyEngine& engine_;
  void* ptr_ = nullptr;
};

}  // namespace

absl::Status CopyEngine::CopyTensorWindow(const CopySpec& spec, Stream stream) {
  // 1. Everything the caller's structs alone can refuse, before any driver
  // call.
  FJ_ASSIGN_OR_RETURN(ValidatedCopy v, copy::ValidateCopy(spec), "fj_copy");
  FJ_RETURN_IF_ERROR(CheckDriver(), "fj_copy");
  if (stream.device >= devices_.count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fj_copy: stream GPU ", stream.device));
  }
  if (v.elements == 0) return absl::OkStatus();

  // 2. Where each operand lives (any context will do for the query).
  FJ_ASSIGN_OR_RETURN(Device * any, devices_.at(std::max(stream.device, 0)),
                      "fj_copy");
  FJ_RETURN_IF_ERROR(any->MakeCurrent().status(), "fj_copy");
  FJ_ASSIGN_OR_RETURN(Placement src,
                      copy::ClassifyAddress(*api_, v.src_span.lo),
                      "fj_copy: src");
  FJ_ASSIGN_OR_RETURN(Placement dst,
                      copy::ClassifyAddress(*api_, v.dst_span.lo),
                      "fj_copy: dst");
  Placement index, scatter;
  if (v.gather.has_value()) {
    FJ_ASSIGN_OR_RETURN(index, copy::ClassifyAddress(*api_, v.gather->span.lo),
                        "fj_copy: index");
  }
  if (v.scatter.has_value()) {
    FJ_ASSIGN_OR_RETURN(scatter,
                        copy::ClassifyAddress(*api_, v.scatter->span.lo),
                        "fj_copy: scatter_index");
  }
  // 3. The route.
  FJ_ASSIGN_OR_RETURN(
      CopyRoute route,
      copy::PlanCopyRoute(v, src, dst, v.gather.has_value() ? &index : nullptr,
                          stream.device, devices_.count(), spec.force_kernel,
                          Peers(), v.scatter.has_value() ? &scatter : nullptr),
      "fj_copy");
  if (!route.note.empty()) Note(route.note);

  // 4. Run it.
  FJ_ASSIGN_OR_RETURN(Device * exec, devices_.at(route.exec_device), "fj_copy");
  const uint64_t src_at = copy::WindowView(v).address;
  switch (route.path) {
    case CopyPath::kNothing:
      return absl::OkStatus();
    case CopyPath::kDriver: {
      FJ_RETURN_IF_ERROR(exec->MakeCurrent().status(), "fj_copy");
      FJ_RETURN_IF_ERROR(FJ_CU_CALL(*api_, cuMemcpyAsync, v.dst.address, src_at,
                                    v.bytes(), stream.stream),
                         absl::StrCat("fj_copy of ", v.bytes(), " bytes"));
      n_driver_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    case CopyPath::kDriverPeer: {
      FJ_ASSIGN_OR_RETURN(Device * s, devices_.at(src.device), "fj_copy");
      FJ_ASSIGN_OR_RETURN(Device * d, devices_.at(dst.device), "fj_copy");
      FJ_ASSIGN_OR_RETURN(CUcontext src_ctx, s->MakeCurrent(), "fj_copy");
      FJ_ASSIGN_OR_RETURN(CUcontext dst_ctx, d->MakeCurrent(), "fj_copy");
      FJ_RETURN_IF_ERROR(exec->MakeCurrent().status(), "fj_copy");
      FJ_RETURN_IF_ERROR(
          FJ_CU_CALL(*api_, cuMemcpyPeerAsync, v.dst.address, dst_ctx, src_at,
                     src_ctx, v.bytes(), stream.stream),
          absl::StrCat("fj_copy of ", v.bytes(), " bytes from GPU ", src.device,
                       " to GPU ", dst.device));
      n_driver_peer_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    case CopyPath::kKernel:
      return Annotate(RunKernelRoute(spec, v, route, src, dst, stream),
                      "fj_copy");
  }
  return absl::InternalError("fj_copy: unknown route");
}

absl::Status CopyEngine::RefuseIfCapturing(Device& caller, CUstream stream,
                                           const copy::CopyRoute& route) {
  if (api_->cuStreamIsCapturing == nullptr) return absl::OkStatus();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = api_->cuStreamIsCapturing(stream, &capture);
  // IMPLICIT: the legacy stream, while a blocking stream captures.
  if (r != CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    FJ_RETURN_IF_ERROR(
        CheckStickyError(caller, *api_, r, "cuStreamIsCapturing"),
        "asking whether the caller's stream captures, before a staged copy");
    if (capture == CU_STREAM_CAPTURE_STATUS_NONE) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the caller's stream is capturing a CUDA graph (",
      r == CUDA_SUCCESS
          ? "cuStreamIsCapturing"
          : "the legacy stream: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
      "), but this copy has no P2P path: it is staged through host memory "
      "and runs on GPU ",
      route.exec_device,
      " after waiting for the caller's stream, and a synchronisation cannot "
      "be captured (the driver would invalidate the capture). Make this copy "
      "outside the capture"));
}

absl::Status CopyEngine::RunKernelRoute(const CopySpec& spec,
                                        const ValidatedCopy& v,
                                        const CopyRoute& route,
                                        const Placement& src,
                                        const Placement& dst, Stream stream) {
  FJ_ASSIGN_OR_RETURN(Device * exec, devices_.at(route.exec_device));
  const bool host_operand = src.kind != MemoryKind::kDevice ||
                            dst.kind != MemoryKind::kDevice || route.stage_src;
  if (!route.synchronous) {
    return kernels_.LaunchCopy(v, v.src.address, host_operand,
                               route.exec_device, stream.stream);
  }
  // Synchronous: after the caller's earlier work, on the executing GPU's
  // stream, finished before returning.
  if (stream.device >= 0) {
    FJ_ASSIGN_OR_RETURN(Device * caller, devices_.at(stream.device));
    FJ_RETURN_IF_ERROR(caller->MakeCurrent().status());
    FJ_RETURN_IF_ERROR(RefuseIfCapturing(*caller, stream.stream, route));
    FJ_RETURN_IF_ERROR(FJ_CU_CALL(*api_, cuStreamSynchronize, stream.stream),
                       "waiting for the caller's stream before a staged copy");
  }
  CUstream run = stream.stream;
  if (stream.device != route.exec_device) {
    FJ_ASSIGN_OR_RETURN(run, OwnStream(route.exec_device));
  }
  HostStage stage(*api_, *this);
  uint64_t src_address = v.src.address;
  if (route.stage_src) {
    // src's bytes, as they are now, into pinned memory the kernel reads.
    FJ_ASSIGN_OR_RETURN(Device * owner, devices_.at(src.device));
    FJ_RETURN_IF_ERROR(owner->MakeCurrent().status());
    FJ_RETURN_IF_ERROR(stage.Allocate(v.src_span.size()),
                       absl::StrCat("staging ", v.src_span.size(), " bytes"));
    FJ_RETURN_IF_ERROR(FJ_CU_CALL(*api_, cuMemcpyDtoH,
                                  reinterpret_cast<void*>(stage.address()),
                                  v.src_span.lo, v.src_span.size()),
                       absl::StrCat("staging src from GPU ", src.device));
    src_address = stage.address() + (v.src.address - v.src_span.lo);
    n_staged_.fetch_add(1, std::memory_order_relaxed);
  }
  FJ_RETURN_IF_ERROR(kernels_.LaunchCopy(v, src_address, host_operand,
                                         route.exec_device, run));
  FJ_RETURN_IF_ERROR(exec->MakeCurrent().status());
  return CheckStickyError(*exec, *api_, api_->cuStreamSynchronize(run),
                          "staged copy: cuStreamSynchronize");
}

absl::Status CopyEngine::Prefetch(const copy::PrefetchSpec& spec,
                                  Stream stream) {
  FJ_ASSIGN_OR_RETURN(copy::ValidatedPrefetch v, copy::ValidatePrefetch(spec),
                      "fj_prefetch");
  FJ_RETURN_IF_ERROR(CheckDriver(), "fj_prefetch");
  if (stream.device >= devices_.count() ||
      v.reader_device >= devices_.count()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fj_prefetch: GPU ", std::max(stream.device, v.reader_device),
        " does not exist"));
  }
  if (v.bytes() == 0) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(Device * any, devices_.at(std::max(stream.device, 0)),
                      "fj_prefetch");
  FJ_RETURN_IF_ERROR(any->MakeCurrent().status(), "fj_prefetch");
  FJ_ASSIGN_OR_RETURN(Placement data,
                      copy::ClassifyAddress(*api_, v.rows.span.lo),
                      "fj_prefetch");
  Placement stage;
  if (v.stage_address != 0) {
    FJ_ASSIGN_OR_RETURN(stage, copy::ClassifyAddress(*api_, v.stage_address),
                        "fj_prefetch");
  }
  FJ_ASSIGN_OR_RETURN(copy::PrefetchRoute route,
                      copy::PlanPrefetchRoute(v, data, &stage, stream.device),
                      "fj_prefetch");
  // The caller's stream, or the reader's legacy default stream.
  FJ_ASSIGN_OR_RETURN(Device * reader, devices_.at(route.reader),
                      "fj_prefetch");

  switch (route.mode) {
    case PrefetchMode::kLocalL2:
      FJ_RETURN_IF_ERROR(
          kernels_.LaunchPrefetch(v.rows, route.reader, stream.stream),
          "fj_prefetch");
      n_prefetch_local_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    case PrefetchMode::kWarmOwnerL2: {
      if (route.owner == route.reader) {
        FJ_RETURN_IF_ERROR(
            kernels_.LaunchPrefetch(v.rows, route.reader, stream.stream),
            "fj_prefetch");
        n_prefetch_warm_.fetch_add(1, std::memory_order_relaxed);
        return absl::OkStatus();
      }
      // On the owner's stream, between the caller's earlier and later work.
      FJ_ASSIGN_OR_RETURN(Device * owner, devices_.at(route.owner),
                          "fj_prefetch");
      FJ_ASSIGN_OR_RETURN(CUstream owner_stream, OwnStream(route.owner),
                          "fj_prefetch");
      CUevent before = nullptr, after = nullptr;
      FJ_RETURN_IF_ERROR(reader->MakeCurrent().status(), "fj_prefetch");
      FJ_RETURN_IF_ERROR(
          FJ_CU_CALL(*api_, cuEventCreate, &before, CU_EVENT_DISABLE_TIMING),
          "fj_prefetch");
      absl::Status status =
          FJ_CU_CALL(*api_, cuEventRecord, before, stream.stream);
      if (status.ok()) status = owner->MakeCurrent().status();
      if (status.ok()) {
        status = FJ_CU_CALL(*api_, cuStreamWaitEvent, owner_stream, before, 0);
      }
      if (status.ok())
        status = kernels_.LaunchPrefetch(v.rows, route.owner, owner_stream);
      if (status.ok()) {
        status =
            FJ_CU_CALL(*api_, cuEventCreate, &after, CU_EVENT_DISABLE_TIMING);
      }
      if (status.ok()) {
        status = FJ_CU_CALL(*api_, cuEventRecord, after, owner_stream);
      }
      if (status.ok()) status = reader->MakeCurrent().status();
      if (status.ok()) {
        status = FJ_CU_CALL(*api_, cuStreamWaitEvent, stream.stream, after, 0);
      }
      // Destroying a recorded event is fine: the driver frees it once done.
      for (CUevent event : {before, after}) {
        if (event == nullptr) continue;
        const absl::Status destroyed = FJ_CU_CALL(*api_, cuEventDestroy, event);
        if (!destroyed.ok()) {
          Warn(absl::StrCat("fj_prefetch: an event is left to the driver: ",
                            destroyed.message()));
        }
      }
      FJ_RETURN_IF_ERROR(status,
                         absl::StrCat("fj_prefetch: warming GPU ", route.owner,
                                      "'s L2 for GPU ", route.reader));
      n_prefetch_warm_.fetch_add(1, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    case PrefetchMode::kStageLocal: {
      n_prefetch_stage_.fetch_add(1, std::memory_order_relaxed);
      if (v.tile.has_value()) {
        // The tile, densely, into the stage buffer: an fj_copy.
        int64_t shape[5], strides[5];
        const TensorDesc& t = *v.tile;
        DlTensor src_t = *spec.tensor;
        src_t.data = t.address;
        src_t.byte_offset = 0;
        for (int i = 0; i < t.rank; ++i) {
          shape[i] = t.shape[t.rank - 1 - i];
          strides[i] = t.stride[t.rank - 1 - i];
        }
        src_t.shape = shape;
        src_t.strides = strides;
        DlTensor dst_t = src_t;  // dense: the same shape, compact strides
        dst_t.data = v.stage_address;
        dst_t.device_type = dlpack::kDLCUDA;
        dst_t.device_id = route.reader;
        dst_t.strides = nullptr;
        CopySpec c;
        c.src = src_t;
        c.dst = dst_t;
        return Annotate(
            CopyTensorWindow(c, Stream{route.reader, stream.stream}),
            "fj_prefetch (stage_local)");
      }
      FJ_RETURN_IF_ERROR(reader->MakeCurrent().status(), "fj_prefetch");
      if (route.owner >= 0 && route.owner != route.reader) {
        FJ_ASSIGN_OR_RETURN(Device * owner, devices_.at(route.owner),
                            "fj_prefetch");
        FJ_ASSIGN_OR_RETURN(CUcontext owner_ctx, owner->MakeCurrent(),
                            "fj_prefetch");
        FJ_ASSIGN_OR_RETURN(CUcontext reader_ctx, reader->MakeCurrent(),
                            "fj_prefetch");
        return Annotate(
            FJ_CU_CALL(*api_, cuMemcpyPeerAsync, v.stage_address, reader_ctx,
                       v.rows.base, owner_ctx, v.bytes(), stream.stream),
            "fj_prefetch (stage_local)");
      }
      return Annotate(FJ_CU_CALL(*api_, cuMemcpyAsync, v.stage_address,
                                 v.rows.base, v.bytes(), stream.stream),
                      "fj_prefetch (stage_local)");
    }
    case PrefetchMode::kAuto:
      break;
  }
  return absl::InternalError("fj_prefetch: unresolved mode");
}

}  // namespace fleetjit
