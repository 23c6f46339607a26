#include "runtime/copy/copy_kernels.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/launch/launch.h"

namespace fleetjit::copy {

namespace {

constexpr int kPrefetchCtasPerSm = 4;
constexpr uint64_t kPrefetchPiece = 64 * 1024;

// A tensor of the copy kernel: `d`'s geometry at `address`, tiled by
// `tiles`' box, read (or clipped) under `oob`.
TensorDesc KernelTensor(const TensorDesc& d, uint64_t address,
                        const TileShape& tiles, fj::oob_mode oob) {
  TensorDesc t = d;
  t.address = address;
  for (int dim = 0; dim < d.rank; ++dim) t.box[dim] = tiles.box[dim];
  t.oob = oob;
  t.swizzle = fj::swizzle_none;
  return t;
}

uint32_t FloorPow2(uint32_t v) {
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

}  // namespace

absl::StatusOr<absl::string_view> CopyKernelSource(absl::string_view file) {
  for (size_t i = 0; i < kCopyKernelsCount; ++i) {
    if (kCopyKernels[i].path == file) return kCopyKernels[i].content;
  }
  return absl::InternalError(
      absl::StrCat("copy kernel '", file, "' is not embedded"));
}

absl::StatusOr<BuildSpec> TileCopyBuild(int elem_bytes, int rank, int device,
                                        std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target) {
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 &&
      elem_bytes != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("element of ", elem_bytes, " bytes"));
  }
  if (rank < 1 || rank > 5) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank));
  }
  BuildSpec spec;
  absl::string_view source;
  auto found = CopyKernelSource("tile_copy.cu");
  if (!found.ok()) return found.status();
  source = *found;
  spec.source = std::string(source);
  spec.name = "fleetjit/copy/tile_copy.cu";
  spec.options = {absl::StrCat("-DFJ_EB=", elem_bytes),
                  absl::StrCat("-DFJ_RANK=", rank),
                  absl::StrCat("-DFJ_STAGES=", kCopyStages)};
  spec.device = device;
  spec.copy_impl = impl;
  spec.target = target;
  spec.checkable = false;  // the runtime's own kernel: never checked
  return spec;
}

absl::StatusOr<BuildSpec> PrefetchBuild(int device,
                                        std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target) {
  auto found = CopyKernelSource("prefetch.cu");
  if (!found.ok()) return found.status();
  BuildSpec spec;
  spec.source = std::string(*found);
  spec.name = "fleetjit/copy/prefetch.cu";
  spec.device = device;
  spec.copy_impl = impl;
  spec.target = target;
  spec.checkable = false;  // the runtime's own kernel: never checked
  return spec;
}

// ------------------------------------------------------------ launches

absl::StatusOr<LoadedKernel*> CopyKernels::Kernel(int device,
                                                  jit::CopyImpl impl,
                                                  int elem_bytes, int rank) {
  const auto key =
      std::make_tuple(device, static_cast<int>(impl), elem_bytes, rank);
  {
    absl::MutexLock lock(&mu_);
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second;
  }
  // Built outside the lock: the source is thread-safe and compiles a key
  // once; a racing thread gets the same LoadedKernel.
  absl::StatusOr<BuildSpec> spec =
      rank == 0 ? PrefetchBuild(device, impl)
                : TileCopyBuild(elem_bytes, rank, device, impl);
  if (!spec.ok()) return spec.status();
  FJ_ASSIGN_OR_RETURN(
      LoadedKernel * k,
      source_.KernelFor(*spec, rank == 0 ? kPrefetchKernel : kTileCopyKernel));
  absl::MutexLock lock(&mu_);
  kernels_[key] = k;
  return k;
}

CopyLaunchShape CopyKernels::ShapeFor(int device, jit::CopyImpl impl) {
  const std::pair<int, int> key(device, static_cast<int>(impl));
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = shapes_.try_emplace(key, CopyShapeFor(impl));
    if (!inserted) return it->second;
  }
  source_.ShapeWanted(device, impl);  // outside the lock: it may post work
  return CopyShapeFor(impl);
}

void CopyKernels::SetShape(int device, jit::CopyImpl impl,
                           const CopyLaunchShape& shape) {
  absl::MutexLock lock(&mu_);
  shapes_[{device, static_cast<int>(impl)}] = shape;
}

absl::Status CopyKernels::LaunchCopy(const ValidatedCopy& v,
                                     uint64_t src_address, bool host_operand,
                                     int device, CUstream stream,
                                     std::optional<CopyLaunchShape> shape) {
  FJ_ASSIGN_OR_RETURN(Device * dev, devices_.at(device));
  const DeviceFacts& f = dev->facts();

  // The implementation: the caller's, else the device's plan.
  jit::CopyImpl impl;
  if (v.impl.has_value()) {
    impl = *v.impl;
  } else {
    FJ_ASSIGN_OR_RETURN(impl, source_.DefaultImpl(device));
  }

  // The kernel's tensors: src whole (the window is a coordinate offset),
  // dst whole, both tiled by the same box. promise_in_bounds is read with
  // zero fill: the window is in bounds (checked), but a tile's box may
  // overhang it and must not read outside src. dst is only stored to
  // (stores clip at its edges in every mode), so its tiles may run past it.
  const fj::oob_mode src_oob =
      v.oob == fj::oob_nan ? fj::oob_nan : fj::oob_zeros;
  TileShape tiles;
  TensorDesc src_t, dst_t;
  const jit::CopyImpl asked = impl;
  CopyLaunchShape launch_shape;
  auto tile_for = [&](jit::CopyImpl i) {
    launch_shape =
        shape.has_value() && i == asked ? *shape : ShapeFor(device, i);
    const uint32_t budget = static_cast<uint32_t>(
        std::max(1024, (f.shared_per_block_optin - 256) / kCopyStages));
    tiles = ChooseTiles(
        WindowDesc(v), v.gather.has_value() || v.scatter.has_value(),
        launch_shape.max_row_bytes,
        FloorPow2(std::min(launch_shape.max_tile_bytes, budget)));
    src_t = KernelTensor(v.src, src_address, tiles, src_oob);
    dst_t = KernelTensor(v.dst, v.dst.address, tiles, fj::oob_zeros);
  };
  tile_for(impl);

  // tma needs a tensor map for both tensors to be worth it, and device
  // memory; otherwise cp.async, with its own tiles.
  if (impl == jit::CopyImpl::kTma) {
    // A gathered row outside src is a box wholly outside the tensor. On the
    // H200 such a TMA load under the NaN fill mode did not produce the NaN
    // fill (CopyGpuTest.PagedGatherWithBadIndicesFills, 2026-11-30), so NaN
    // gathers take cp.async, whose fill is the layer's own.
    const bool nan_gather = v.gather.has_value() && v.oob == fj::oob_nan;
    if (host_operand || nan_gather || !TmaRejection(src_t).empty() ||
        !TmaRejection(dst_t).empty()) {
      impl = jit::CopyImpl::kCpAsync;
      tile_for(impl);
    }
  }
  FJ_ASSIGN_OR_RETURN(LoadedKernel * k,
                      Kernel(device, impl, v.dst.elem_bytes, v.dst.rank));

  // The parameters, encoded here (tensor maps under tma): what the kernel
  // reads, with no wire struct on the way.
  TensorEncoder encoder(k->api, k->display_name, &k->tma_fallbacks,
                        &k->tma_fallback_reported, k->logger);
  fj::tensor_param params[2];  // 64-byte aligned, as tensor maps need
  FJ_RETURN_IF_ERROR(
      encoder.EncodeDescribed(0, src_t, k->copy_impl, &params[0]),
      "copy kernel src");
  FJ_RETURN_IF_ERROR(
      encoder.EncodeDescribed(1, dst_t, k->copy_impl, &params[1]),
      "copy kernel dst");
  CopyKernelArgs a{};
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
  if (v.scatter.has_value()) {
    a.scatter_bytes = v.scatter->elem_bytes;
    a.scatter = v.scatter->address;
    a.scatter_stride = v.scatter->stride;
  }
  a.dst_rows = v.dst.shape[v.dst.rank - 1];
  const EncodedParam encoded[3] = {{&params[0], sizeof(params[0])},
                                   {&params[1], sizeof(params[1])},
                                   {&a, sizeof(a)}};
  LaunchConfig cfg;
  cfg.block[0] = static_cast<uint32_t>(launch_shape.threads);
  cfg.shared_bytes = kCopyStages * tiles.tile_bytes + 128;
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status());
  // Persistent CTAs: no more per SM than fit at once (registers, SMEM), or
  // the excess runs as a second wave behind the first (on the H200, 6 CTAs
  // of a shape where 5 fit took a window from 0.90 to 0.67 of a copy).
  FJ_ASSIGN_OR_RETURN(
      int resident, ResidentPerSm(*k, launch_shape.threads, cfg.shared_bytes));
  const int per_sm = resident > 0 ? std::min(launch_shape.ctas_per_sm, resident)
                                  : launch_shape.ctas_per_sm;
  cfg.grid[0] = static_cast<uint32_t>(std::min<int64_t>(
      tiles.total, int64_t{per_sm} * std::max(1, f.sm_count)));
  FJ_RETURN_IF_ERROR(LaunchEncoded(*k, cfg, stream, encoded));
  n_copies_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<int> CopyKernels::ResidentPerSm(LoadedKernel& k, int threads,
                                               uint32_t shared_bytes) {
  const auto key = std::make_tuple(&k, threads, shared_bytes);
  {
    absl::MutexLock lock(&mu_);
    auto it = resident_.find(key);
    if (it != resident_.end()) return it->second;
  }
  int per_sm = 0;  // 0: the driver cannot say (the shape's count stands)
  if (shared_bytes > 0 &&
      !k.dynamic_shared_raised.load(std::memory_order_acquire)) {
    FJ_RETURN_IF_ERROR(RaiseDynamicSharedLimit(k, k.device->facts()));
  }
  if (k.api->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags != nullptr) {
    FJ_RETURN_IF_ERROR(CheckCu(
        *k.api,
        k.api->cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            &per_sm, k.function, threads, shared_bytes, CU_OCCUPANCY_DEFAULT),
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags (copy kernel)"));
  }
  absl::MutexLock lock(&mu_);
  resident_[key] = per_sm;
  return per_sm;
}

absl::Status CopyKernels::LaunchPrefetch(const PrefetchRows& rows, int device,
                                         CUstream stream) {
  if (rows.row_bytes == 0 || rows.rows() == 0) return absl::OkStatus();
  FJ_ASSIGN_OR_RETURN(jit::CopyImpl impl, source_.DefaultImpl(device));
  FJ_ASSIGN_OR_RETURN(LoadedKernel * k, Kernel(device, impl, 1, 0));
  FJ_ASSIGN_OR_RETURN(Device * dev, devices_.at(device));
  PrefetchKernelArgs a{};
  a.base = rows.base;
  a.row_bytes = rows.row_bytes;
  for (int i = 0; i < 4; ++i) {
    a.count[i] = std::max<int64_t>(rows.count[i], 1);
    a.stride[i] = rows.stride[i];
  }
  a.piece = kPrefetchPiece;
  a.pieces_per_row = static_cast<int64_t>(
      (rows.row_bytes + kPrefetchPiece - 1) / kPrefetchPiece);
  a.total = a.pieces_per_row * rows.rows();
  const EncodedParam encoded[1] = {{&a, sizeof(a)}};
  LaunchConfig cfg;
  cfg.grid[0] = static_cast<uint32_t>(std::min<int64_t>(
      a.total,
      int64_t{kPrefetchCtasPerSm} * std::max(1, dev->facts().sm_count)));
  cfg.block[0] = 128;
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status());
  FJ_RETURN_IF_ERROR(LaunchEncoded(*k, cfg, stream, encoded));
  return absl::OkStatus();
}

}  // namespace fleetjit::copy
