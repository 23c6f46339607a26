#include "runtime/copy/placement.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/dlpack_codes.h"
#include "base/status_macros.h"

namespace fleetjit::copy {
namespace {

using dlpack::kDLCUDA;
using dlpack::kDLCUDAHost;
using dlpack::kDLCUDAManaged;
// The copy kernel's tile coordinates are 32-bit (fj::coords, TMA).
constexpr int64_t kMaxKernelCoord = (int64_t{1} << 31) - 512;

std::string SpanText(const Span& s) {
  return absl::StrFormat("[0x%x, 0x%x)", s.lo, s.hi);
}

// Checks one operand's placement against what the caller said and the
// bytes it covers.
absl::Status CheckOperand(absl::string_view name, const Placement& p,
                          int32_t device_type, int32_t device_id,
                          const Span& span) {
  if (p.kind == MemoryKind::kPageableHost) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: 0x%x is host memory that is not pinned (the driver does not "
        "know it); pin it (cuMemHostRegister / cudaHostRegister) or allocate "
        "it with cuMemHostAlloc",
        name, span.lo));
  }
  if (p.kind == MemoryKind::kDevice && device_type != kDLCUDA &&
      device_type != kDLCUDAManaged) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": device_type is ", device_type,
        " (host) but the address is device memory of GPU ", p.device));
  }
  if (p.kind == MemoryKind::kDevice && device_type == kDLCUDA &&
      device_id != p.device) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": device_id is ", device_id,
                     " but the memory belongs to GPU ", p.device));
  }
  if (p.kind == MemoryKind::kPinnedHost && device_type == kDLCUDA) {
    return absl::InvalidArgumentError(absl::StrCat(
        name,
        ": device_type is kDLCUDA but the address is pinned host memory; "
        "say kDLCUDAHost (3)"));
  }
  if (p.allocation.size() > 0 && span.size() > 0 &&
      (span.lo < p.allocation.lo || span.hi > p.allocation.hi)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": its elements cover ", SpanText(span),
        ", which runs outside its allocation ", SpanText(p.allocation)));
  }
  return absl::OkStatus();
}

// Can `device` read and write `p` from a kernel? OK, or why not:
// FAILED_PRECONDITION when peer access is merely off, NOT_FOUND (a marker,
// turned into staging or an error by the caller) when there is no path.
absl::Status Reach(int device, const Placement& p, const PeerState& peers,
                   absl::string_view name) {
  if (p.kind != MemoryKind::kDevice || p.device == device)
    return absl::OkStatus();
  if (!peers.has_path(device, p.device)) {
    return absl::NotFoundError(absl::StrCat(name, " is on GPU ", p.device,
                                            ", which has no P2P path from GPU ",
                                            device));
  }
  if (!peers.enabled(device, p.device)) {
    return absl::FailedPreconditionError(absl::StrCat(
        name, " is on GPU ", p.device, ", and peer access from GPU ", device,
        " to it is not enabled: call fj_peer_enable(runtime, ", device, ", ",
        p.device, ") first"));
  }
  return absl::OkStatus();
}

}  // namespace

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kDevice:
      return "device";
    case MemoryKind::kPinnedHost:
      return "pinned host";
    case MemoryKind::kManaged:
      return "managed";
    case MemoryKind::kPageableHost:
      return "pageable host";
  }
  return "unknown";
}

const char* CopyPathName(CopyPath path) {
  switch (path) {
    case CopyPath::kNothing:
      return "nothing";
    case CopyPath::kDriver:
      return "driver";
    case CopyPath::kDriverPeer:
      return "driver_peer";
    case CopyPath::kKernel:
      return "kernel";
  }
  return "unknown";
}

absl::StatusOr<Placement> ClassifyAddress(const DriverApi& api,
                                          uint64_t address) {
  unsigned int memory_type = 0;
  int ordinal = -1;
  unsigned int managed = 0;
  CUdeviceptr range_start = 0;
  size_t range_size = 0;
  CUpointer_attribute attrs[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
      CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&memory_type, &ordinal, &managed, &range_start, &range_size};
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuPointerGetAttributes, 5, attrs, data,
                                static_cast<CUdeviceptr>(address)),
                     absl::StrFormat("classifying address 0x%x", address));
  Placement p;
  if (managed != 0) {
    p.kind = MemoryKind::kManaged;
  } else if (memory_type == CU_MEMORYTYPE_DEVICE) {
    p.kind = MemoryKind::kDevice;
    p.device = ordinal;
  } else if (memory_type == CU_MEMORYTYPE_HOST) {
    p.kind = MemoryKind::kPinnedHost;
  } else {
    p.kind = MemoryKind::kPageableHost;  // 0: not a CUDA pointer
  }
  if (range_size > 0)
    p.allocation = Span{range_start, range_start + range_size};
  return p;
}

absl::StatusOr<CopyRoute> PlanCopyRoute(
    const ValidatedCopy& v, const Placement& src, const Placement& dst,
    const Placement* index, int stream_device, int device_count,
    bool force_kernel, const PeerState& peers, const Placement* scatter) {
  // Every operand: pinned if host, what the caller said, inside its allocation.
  FJ_RETURN_IF_ERROR(
      CheckOperand("src", src, v.src_device_type, v.src_device_id, v.src_span));
  FJ_RETURN_IF_ERROR(
      CheckOperand("dst", dst, v.dst_device_type, v.dst_device_id, v.dst_span));
  if (v.gather.has_value()) {
    if (index == nullptr)
      return absl::InternalError("gather without the index's placement");
    FJ_RETURN_IF_ERROR(CheckOperand("index", *index, v.gather->device_type,
                                    v.gather->device_id, v.gather->span));
  }
  if (v.scatter.has_value()) {
    if (scatter == nullptr)
      return absl::InternalError("scatter without the index's placement");
    FJ_RETURN_IF_ERROR(CheckOperand("scatter_index", *scatter,
                                    v.scatter->device_type,
                                    v.scatter->device_id, v.scatter->span));
  }
  CopyRoute route;
  if (stream_device >= 0) {
    route.exec_device = stream_device;
  } else if (dst.kind == MemoryKind::kDevice) {
    route.exec_device = dst.device;
  } else if (src.kind == MemoryKind::kDevice) {
    route.exec_device = src.device;
  } else if (index != nullptr && index->kind == MemoryKind::kDevice) {
    route.exec_device = index->device;
  } else {
    route.exec_device = 0;
  }
  if (device_count <= 0 || route.exec_device >= device_count) {
    return absl::UnavailableError("no CUDA device to run the copy on");
  }
  if (v.elements == 0) return route;

  // The driver's copy engine: dense, in bounds, nothing to fill, gather or
  // scatter.
  if (!force_kernel && !v.gather.has_value() && !v.scatter.has_value() &&
      v.WindowInBounds() && IsDense(WindowView(v)) && IsDense(v.dst)) {
    const bool two_gpus = src.kind == MemoryKind::kDevice &&
                          dst.kind == MemoryKind::kDevice &&
                          src.device != dst.device;
    route.path = two_gpus ? CopyPath::kDriverPeer : CopyPath::kDriver;
    if (two_gpus && !peers.has_path(dst.device, src.device)) {
      route.note = absl::StrCat("no P2P path between GPU ", src.device,
                                " and GPU ", dst.device,
                                ": the driver stages the copy through "
                                "host memory");
    }
    return route;
  }

  // The copy kernel on one GPU that must reach every operand.
  route.path = CopyPath::kKernel;
  absl::Status dst_reach = Reach(route.exec_device, dst, peers, "dst");
  if (absl::IsNotFound(dst_reach)) {
    // Write locally: run on dst's GPU, after the caller's stream,
    // synchronously.
    route.exec_device = dst.device;
    route.synchronous = true;
    dst_reach = absl::OkStatus();
  }
  FJ_RETURN_IF_ERROR(dst_reach);
  absl::Status src_reach = Reach(route.exec_device, src, peers, "src");
  if (absl::IsNotFound(src_reach)) {
    route.stage_src = true;
    route.synchronous = true;
    route.note =
        absl::StrCat(src_reach.message(),
                     ": staged through pinned host memory (synchronous)");
    src_reach = absl::OkStatus();
  }
  FJ_RETURN_IF_ERROR(src_reach);
  struct Index {
    const Placement* where;
    const char* name;  // the operand, as ValidateCopy names it
    const char* what;  // in the advice
  };
  for (const Index& i : {Index{index, "index", "gather index"},
                         Index{scatter, "scatter_index", "scatter index"}}) {
    if (i.where == nullptr) continue;
    absl::Status index_reach =
        Reach(route.exec_device, *i.where, peers, i.name);
    if (absl::IsNotFound(index_reach)) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_reach.message(), "; put the ", i.what, " on GPU ",
                       route.exec_device, " or in pinned host memory"));
    }
    FJ_RETURN_IF_ERROR(index_reach);
  }
  for (int d = 0; d < v.dst.rank; ++d) {
    const int64_t reach = std::max(
        {std::abs(v.start[d]) + v.window[d], v.src.shape[d], v.dst.shape[d]});
    if (reach > kMaxKernelCoord) {
      return absl::OutOfRangeError(absl::StrCat(
          "dimension ", v.dst.rank - 1 - d, " reaches element ", reach,
          "; the copy kernel addresses up to 2^31 - 512 per dimension (a dense "
          "in-bounds copy has no limit): split the copy"));
    }
  }
  return route;
}

absl::StatusOr<PrefetchRoute> PlanPrefetchRoute(const ValidatedPrefetch& v,
                                                const Placement& data,
                                                const Placement* stage,
                                                int stream_device) {
  FJ_RETURN_IF_ERROR(CheckOperand(
      "data", data, data.kind == MemoryKind::kDevice ? kDLCUDA : kDLCUDAHost,
      data.device, v.rows.span));
  if (v.reader_device >= 0 && stream_device >= 0 &&
      v.reader_device != stream_device) {
    return absl::InvalidArgumentError(
        absl::StrCat("reader_device is ", v.reader_device,
                     " but the stream is on GPU ", stream_device));
  }
  PrefetchRoute r;
  r.owner = data.kind == MemoryKind::kDevice ? data.device : -1;
  r.reader = v.reader_device >= 0 ? v.reader_device
             : stream_device >= 0 ? stream_device
             : r.owner >= 0       ? r.owner
                                  : 0;
  const bool peer = r.owner >= 0 && r.owner != r.reader;
  const bool host = data.kind == MemoryKind::kPinnedHost;
  r.mode = v.mode;
  if (r.mode == PrefetchMode::kAuto) {
    r.mode = peer   ? PrefetchMode::kWarmOwnerL2
             : host ? PrefetchMode::kStageLocal
                    : PrefetchMode::kLocalL2;
    if (host && v.stage_address == 0) {
      return absl::InvalidArgumentError(
          "the data is pinned host memory, which has no GPU L2 to warm: use "
          "FJ_PREFETCH_STAGE_LOCAL with a stage buffer on the reader");
    }
  }
  switch (r.mode) {
    case PrefetchMode::kLocalL2:
      if (peer) {
        return absl::InvalidArgumentError(absl::StrCat(
            "FJ_PREFETCH_LOCAL_L2 of GPU ", r.owner, "'s memory from GPU ",
            r.reader,
            ": a reader-side prefetch of a peer address warms neither L2 "
            "(measured on H200s); use FJ_PREFETCH_WARM_OWNER_L2 or "
            "FJ_PREFETCH_STAGE_LOCAL"));
      }
      if (host) {
        return absl::InvalidArgumentError(
            "FJ_PREFETCH_LOCAL_L2 of pinned host memory: use "
            "FJ_PREFETCH_STAGE_LOCAL");
      }
      r.run_device = r.reader;
      break;
    case PrefetchMode::kWarmOwnerL2:
      if (host) {
        return absl::InvalidArgumentError(
            "FJ_PREFETCH_WARM_OWNER_L2 of pinned host memory: no GPU owns it");
      }
      r.run_device = r.owner;
      break;
    case PrefetchMode::kStageLocal: {
      if (stage == nullptr)
        return absl::InternalError("stage placement missing");
      if (stage->kind != MemoryKind::kDevice || stage->device != r.reader) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the stage buffer must be device memory of the reader, GPU ",
            r.reader, "; it is ", MemoryKindName(stage->kind),
            stage->kind == MemoryKind::kDevice
                ? absl::StrCat(" of GPU ", stage->device)
                : std::string()));
      }
      const Span s{v.stage_address, v.stage_address + v.stage_bytes};
      if (stage->allocation.size() > 0 &&
          (s.lo < stage->allocation.lo || s.hi > stage->allocation.hi)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the stage buffer ", SpanText(s), " runs outside its allocation ",
            SpanText(stage->allocation)));
      }
      r.run_device = r.reader;
      break;
    }
    case PrefetchMode::kAuto:
      return absl::InternalError("unresolved prefetch mode");
  }
  return r;
}

}  // namespace fleetjit::copy
