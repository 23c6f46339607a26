// Where a copy's memory lives, and the route the copy takes because of it.
//
// ClassifyAddress asks the driver (cuPointerGetAttributes) what an address
// is: device memory of some GPU, pinned host memory, managed memory, or
// host memory CUDA does not know (pageable: refused, since a kernel cannot
// read it and the driver's async copy would silently become synchronous).
//
// PlanCopyRoute and PlanPrefetchRoute then decide, without touching the
// driver (so tests feed them placements), how the work runs:
//   - a dense, in-bounds, same-layout copy goes to the driver's copy engine
//     (cuMemcpyAsync, or cuMemcpyPeerAsync between GPUs), adding nothing;
//   - anything else runs the copy kernel on one GPU (the stream's), which
//     must reach every operand: its own memory, pinned host memory, or a
//     peer's memory once peer access is enabled (FAILED_PRECONDITION naming
//     fj_peer_enable otherwise). Between GPUs with no P2P path at all the
//     source is staged through pinned host memory and the route says so.
#ifndef FLEETJIT_RUNTIME_COPY_PLACEMENT_H_
#define FLEETJIT_RUNTIME_COPY_PLACEMENT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "platform/driver_api.h"
#include "runtime/copy/copy_request.h"

namespace fleetjit::copy {

enum class MemoryKind {
  kDevice = 0,        // device memory of GPU `device`
  kPinnedHost = 1,    // page-locked host memory (cuMemHostAlloc/Register)
  kManaged = 2,       // managed (unified) memory: any GPU reaches it
  kPageableHost = 3,  // host memory CUDA does not know: refused
};
const char* MemoryKindName(MemoryKind kind);

struct Placement {
  MemoryKind kind = MemoryKind::kPageableHost;
  int device = -1;  // owner, for kDevice
  Span allocation;  // the allocation holding the address; empty = unknown
};

// The driver's view of `address`. Needs a current context (any). A driver
// failure is its status; an unknown address is kPageableHost, not an error.
absl::StatusOr<Placement> ClassifyAddress(const DriverApi& api,
                                          uint64_t address);

// Which GPU pairs can reach each other. `has_path(reader, owner)`: the
// hardware has a P2P path (cuDeviceCanAccessPeer); `enabled(reader,
// owner)`: peer access is on for the reader's context.
struct PeerState {
  std::function<bool(int reader, int owner)> has_path;
  std::function<bool(int reader, int owner)> enabled;
};

enum class CopyPath {
  kNothing = 0,     // no elements
  kDriver = 1,      // cuMemcpyAsync
  kDriverPeer = 2,  // cuMemcpyPeerAsync (both on GPUs, different ones)
  kKernel = 3,      // the copy kernel on exec_device
};
const char* CopyPathName(CopyPath path);

struct CopyRoute {
  CopyPath path = CopyPath::kNothing;
  int exec_device = 0;
  // No P2P path: src is first copied to pinned host memory, and the whole
  // copy completes before the call returns (it also runs on exec_device's
  // own stream when that is not the caller's).
  bool stage_src = false;
  bool synchronous = false;
  // Why the route is not the plain one (staging through host memory), for
  // the log; empty otherwise.
  std::string note;
};

// Checks placements against the copy (pinned, the caller's device_type,
// inside the allocation) and picks the route. `stream_device` is the
// caller's stream's GPU, or -1 for none. `device_count` bounds the
// fallback choice of a GPU for host-to-host copies. Pure.
// `index` / `scatter`: where the gather / scatter index lives (each set
// exactly when the copy has one).
absl::StatusOr<CopyRoute> PlanCopyRoute(
    const ValidatedCopy& v, const Placement& src, const Placement& dst,
    const Placement* index, int stream_device, int device_count,
    bool force_kernel, const PeerState& peers,
    const Placement* scatter = nullptr);

struct PrefetchRoute {
  PrefetchMode mode = PrefetchMode::kLocalL2;  // never kAuto
  int run_device = 0;  // where the prefetch kernel or the copy runs
  int reader = 0;
  int owner = -1;  // -1 for host memory
};

// Resolves kAuto and checks the mode against where the data lives. Never
// a reader-side prefetch of a peer address: measured on two H200s it warms
// neither L2 (docs/measurements.md), so kLocalL2 on a peer's memory is refused
// and kAuto picks kWarmOwnerL2. `stage` is the stage buffer's placement
// (kStageLocal only). Pure.
absl::StatusOr<PrefetchRoute> PlanPrefetchRoute(const ValidatedPrefetch& v,
                                                const Placement& data,
                                                const Placement* stage,
                                                int stream_device);

}  // namespace fleetjit::copy

#endif  // FLEETJIT_RUNTIME_COPY_PLACEMENT_H_
