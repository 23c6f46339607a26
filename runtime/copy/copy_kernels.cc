#include "runtime/copy/copy_kernels.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace fleetjit::copy {

absl::StatusOr<absl::string_view> CopyKernelSource(absl::string_view file) {
  for (size_t i = 0; i < kCopyKernelsCount; ++i) {
    if (kCopyKernels[i].path == file) return kCopyKernels[i].content;
  }
  return absl::InternalError(absl::StrCat("copy kernel '", file, "' is not embedded"));
}

absl::StatusOr<BuildSpec> TileCopyBuild(int elem_bytes, int rank, int device,
                                        std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target) {
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) {
    return absl::InvalidArgumentError(absl::StrCat("element of ", elem_bytes, " bytes"));
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
  spec.options = {absl::StrCat("-DFJ_EB=", elem_bytes), absl::StrCat("-DFJ_RANK=", rank),
                  absl::StrCat("-DFJ_STAGES=", kCopyStages)};
  spec.device = device;
  spec.copy_impl = impl;
  spec.target = target;
  return spec;
}

absl::StatusOr<BuildSpec> PrefetchBuild(int device, std::optional<jit::CopyImpl> impl,
                                        std::optional<jit::Target> target) {
  auto found = CopyKernelSource("prefetch.cu");
  if (!found.ok()) return found.status();
  BuildSpec spec;
  spec.source = std::string(*found);
  spec.name = "fleetjit/copy/prefetch.cu";
  spec.device = device;
  spec.copy_impl = impl;
  spec.target = target;
  return spec;
}

}  // namespace fleetjit::copy
