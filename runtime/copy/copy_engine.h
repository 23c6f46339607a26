// CopyEngine: strided tensor copies, L2 prefetches and peer access for one
// runtime (fj_copy, fj_prefetch, fj_peer_*). Reached through
// Runtime::copy(); thread-safe. It sees the runtime through three narrow
// interfaces the runtime hands in: the driver and the devices (DeviceList),
// a kernel source (copy_kernels.h: a launchable kernel for an embedded
// source on a device), and the launcher (LaunchEncoded, launch/launch.h).
// It takes C++ types only: capi/convert_copy.cc turns the C descriptors
// into CopySpec / PrefetchSpec.
//
// A copy is validated without the driver (copy_request.h), its memory is
// classified by the driver and its route planned (placement.h), then:
//   - dense, in-bounds copies call the driver's copy engine
//     (cuMemcpyAsync / cuMemcpyPeerAsync): as fast as cuMemcpy, since an SM
//     copy tops out near 0.93x of it on an H200 (docs/measurements.md);
//   - everything else launches fj_tile_copy (kernels/tile_copy.cu), built
//     through the kernel source for the executing GPU with the device's copy
//     implementation (or the runtime's override), cached like any module.
//     Pinned host operands use cp_async instead of tma (a tensor map over
//     PCIe-mapped host memory is not something we measured), as do tensors
//     TMA cannot describe (same result, no fallback notice).
//
//   CopySpec spec;
//   spec.src = src; spec.dst = dst;       // DlTensor (launch/dl_tensor.h)
//   spec.oob = fj::oob_zeros;
//   spec.start = {-1, 3};                 // outermost-first
//   FJ_RETURN_IF_ERROR(rt.copy().CopyTensorWindow(spec, {0, stream}),
//                      "padding a tile");
//
// Streams: the work is ordered on the caller's stream, whose GPU runs the
// kernel; without one, on the legacy default stream of dst's GPU (else
// src's). Host memory must stay live until the stream passes the copy.
// Between GPUs with no P2P path the copy completes before CopyTensorWindow
// returns.
#ifndef FLEETJIT_RUNTIME_COPY_COPY_ENGINE_H_
#define FLEETJIT_RUNTIME_COPY_COPY_ENGINE_H_

#include <cuda.h>

#include <atomic>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "platform/driver_api.h"
#include "runtime/copy/copy_kernels.h"
#include "runtime/copy/copy_request.h"
#include "runtime/copy/placement.h"
#include "runtime/device/device.h"

namespace fleetjit {

class CopyEngine {
 public:
  // A caller's stream: the GPU it belongs to and the CUstream of that GPU's
  // primary context; {-1, nullptr} for none.
  struct Stream {
    int device = -1;
    CUstream stream = nullptr;
  };
  // What ran, counted since creation (tests and benchmarks read these).
  struct Counters {
    uint64_t driver = 0;       // cuMemcpyAsync
    uint64_t driver_peer = 0;  // cuMemcpyPeerAsync
    uint64_t kernel = 0;       // fj_tile_copy launches
    uint64_t staged = 0;       // kernel copies staged through pinned host
    uint64_t prefetch_local = 0;
    uint64_t prefetch_warm_owner = 0;
    uint64_t prefetch_stage = 0;
  };

  // `api` (null without a driver), `devices` and `kernels` outlive the
  // engine; `logger` is where its notes and warnings go.
  CopyEngine(const DriverApi* api, const DeviceList& devices,
             copy::KernelSource& kernels, Logger logger);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // Copies spec.src's window into spec.dst (see copy_request.h for the
  // semantics). Every bad input is a status before anything is enqueued.
  absl::Status CopyTensorWindow(const copy::CopySpec& spec, Stream stream);

  // Warms L2 for a range or a tile, or stages it on the reader, per the
  // mode (placement.h: PlanPrefetchRoute). Asynchronous on the stream; a
  // warm-owner prefetch runs on the owner's stream, ordered after the
  // caller's stream's earlier work and before its later work.
  absl::Status Prefetch(const copy::PrefetchSpec& spec, Stream stream);

  // Peer access, reader -> owner (one direction; call twice for both).
  // CanAccessPeer: the hardware has a path (true for reader == owner).
  absl::StatusOr<bool> CanAccessPeer(int reader, int owner);
  // Enables (idempotent: already enabled is fine) / disables (idempotent)
  // the reader's access to the owner's memory. Enabling without a path is
  // FAILED_PRECONDITION; copies between such GPUs are staged instead.
  absl::Status EnablePeer(int reader, int owner);
  absl::Status DisablePeer(int reader, int owner);
  bool PeerEnabled(int reader, int owner) const;

  Counters counters() const;
  // The copy kernels, for the runtime's tuning of their launch shapes
  // (runtime/tuning/copy_window_tune.cc).
  copy::CopyKernels& kernels() { return kernels_; }
  // Notes (staging through host memory) go to the runtime's logger (the
  // caller's sink; stderr when FLEETJIT_LOG is set).
  // A warning through the same sink: a failed release or query that the
  // copy survives (the object is left to the driver, or the copy is staged).
  void Warn(absl::string_view message);

 private:
  absl::Status CheckDriver() const;
  copy::PeerState Peers();
  absl::StatusOr<CUstream> OwnStream(int device);
  // FAILED_PRECONDITION when `stream` (of `caller`, current) is capturing
  // a graph: a staged copy synchronises it, which no capture allows.
  absl::Status RefuseIfCapturing(Device& caller, CUstream stream,
                                 const copy::CopyRoute& route);
  absl::Status RunKernelRoute(const copy::CopySpec& spec,
                              const copy::ValidatedCopy& v,
                              const copy::CopyRoute& route,
                              const copy::Placement& src,
                              const copy::Placement& dst, Stream stream);
  void Note(absl::string_view message);
  // Both go through here: the logger copied under the lock, used outside it.
  void Log(LogLevel level, absl::string_view message);

  const DriverApi* api_;
  const DeviceList& devices_;
  copy::CopyKernels kernels_;

  mutable absl::Mutex mu_;
  std::map<int, CUstream> streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, int>, bool> paths_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int, int>> enabled_ ABSL_GUARDED_BY(mu_);
  Logger logger_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> n_driver_{0}, n_driver_peer_{0}, n_staged_{0};
  std::atomic<uint64_t> n_prefetch_local_{0}, n_prefetch_warm_{0},
      n_prefetch_stage_{0};
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_COPY_COPY_ENGINE_H_
