// Reading images built elsewhere (fj_module_load): which kind an image is,
// and what can be learned from it without a GPU.
//
// PTX carries everything: kernel names and parameter layouts come from the
// text (param_layout.h), as for a build. A cubin carries no PTX: its kernel
// names come from the ELF symbol table here, and its parameter sizes and
// offsets from the driver at load (runtime/builder/image_import.cc). A fatbin's
// names come from the uncompressed cubins embedded in it.
//
// Every reader is bounds-checked: a malformed or hostile image is a status
// (INVALID_ARGUMENT: the image is the caller's), never a read outside it.
#ifndef FLEETJIT_JIT_IMAGE_READER_H_
#define FLEETJIT_JIT_IMAGE_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"
#include "jit/target.h"

namespace fleetjit::jit {

enum class ImageKind { kAuto, kCubin, kPtx, kFatbin };

// Sniffs `image`: ELF magic = cubin, 0xBA55ED50 (little-endian) = fatbin,
// text starting (after blanks) with "//" or ".version" = PTX. Anything else
// is INVALID_ARGUMENT.
absl::StatusOr<ImageKind> SniffImageKind(absl::string_view image);

// The kernels of an ELF64 little-endian cubin: defined global STT_FUNC
// symbols that have a `.nv.info.<name>` section or the CUDA entry bit
// (STO_CUDA_ENTRY) set, in symbol-table order. INVALID_ARGUMENT when
// malformed.
absl::StatusOr<std::vector<std::string>> CubinKernelNames(
    absl::string_view elf);

// The kernels of a cubin nvJitLink made (jit/link_build.h): only symbols
// with the CUDA entry bit, since a linked cubin also gives its non-inlined
// __device__ functions a `.nv.info.<name>` section.
absl::StatusOr<std::vector<std::string>> CubinEntryNames(absl::string_view elf);

// The registers per thread of each function of a cubin that records them
// (EIATTR_REGCOUNT in its `.nv.info` section), by symbol name. A kernel's
// count in a linked cubin covers the functions it calls. INVALID_ARGUMENT
// when malformed.
absl::StatusOr<std::vector<std::pair<std::string, int>>> CubinRegisterCounts(
    absl::string_view elf);

// The architecture a cubin was built for, from its ELF header (e_flags).
absl::StatusOr<Target> CubinTarget(absl::string_view elf);

// The kernels of the uncompressed cubins embedded in a fatbin (union, in
// order of first appearance). INVALID_ARGUMENT when the container is
// malformed (no fatbin header, sizes past its end, no entries, an
// uncompressed cubin entry that does not parse); FAILED_PRECONDITION when a
// well-formed one holds no uncompressed cubin (e.g. compressed entries
// only).
absl::StatusOr<std::vector<std::string>> FatbinKernelNames(
    absl::string_view fatbin);

// One entry of a fatbin container: a cubin or PTX for an architecture.
struct FatbinEntry {
  enum class Kind { kCubin, kPtx, kOther };
  Kind kind = Kind::kOther;
  int arch = 0;             // e.g. 90 (sm_90 for a cubin, compute_90 for PTX)
  bool compressed = false;  // LZ4 or zstd payload
  uint64_t payload_bytes = 0;
};

// The entries of `fatbin`, in order. INVALID_ARGUMENT as FatbinKernelNames.
absl::StatusOr<std::vector<FatbinEntry>> FatbinEntries(
    absl::string_view fatbin);

// An artifact for `image` of `kind` (kAuto: sniffed). `target` overrides
// what the image says (PTX: its `.target`; cubin: its header; a fatbin
// needs it or is taken as sm_<none>, loaded on any device). PTX kernels get
// their full layouts; cubin and fatbin kernels get names only, with
// `params` left for the driver to fill at load.
absl::StatusOr<Artifact> ArtifactFromImage(absl::string_view image,
                                           ImageKind kind,
                                           std::optional<Target> target);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_IMAGE_READER_H_
