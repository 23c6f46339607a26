// Builds CUDA C++ source with NVRTC for one target and copy implementation.
//
// Every build sees the embedded device headers (<fleetjit/copy.cuh> and its
// parts) and gets -DFJ_COPY_IMPL=<n>. A compile error is INVALID_ARGUMENT
// carrying the details "build_log", "options", "target" and "copy_impl";
// when NVRTC could not open a header, the message names it and every folder
// searched (details "missing_header" and "searched").
#ifndef FLEETJIT_JIT_NVRTC_BUILD_H_
#define FLEETJIT_JIT_NVRTC_BUILD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/target.h"

namespace fleetjit {
class NvrtcLibrary;
struct NvrtcApi;
}  // namespace fleetjit

namespace fleetjit::jit {

class PchFileStore;

// A folder NVRTC searches for #include, and why it is searched (for error
// messages and `fleetjit info`): "include_dirs", "CUDA_HOME", ...
struct IncludeDir {
  std::string path;
  std::string origin;
};

// What NVRTC makes of a source: a whole program (the default), or an
// object for the device linker (jit/link_build.h): relocatable device code
// (-dc: PTX and a relocatable cubin) or LTO-IR (-dlto, no PTX).
enum class DeviceCode { kWhole, kRelocatable, kLtoIr };

struct BuildRequest {
  std::string source;
  std::string name = "kernel.cu";  // for logs
  Target target;
  CopyImpl copy_impl = CopyImpl::kSync;
  bool emit_ptx = false;                      // PTX even for an sm_XX target
  std::vector<std::string> options;           // extra NVRTC options
  std::vector<std::string> name_expressions;  // e.g. "scale<float>"
  // Searched in this order after any -I in `options` (the caller's folders,
  // then CUDA's). Not part of BuildOptions(): paths differ between machines,
  // so the cache key covers the content of the headers found instead
  // (jit/include_scan.h).
  std::vector<IncludeDir> include_dirs;
  // Reuse the parsed #include prefix of earlier builds in this process
  // (NVRTC 12.8+ precompiled headers, jit/nvrtc_pch.h). Never changes the
  // artifact, so it is not part of BuildOptions() or the cache key. Off by
  // default: on the machines measured so far mapping the ~10 MB PCH cost
  // more than parsing <fleetjit/copy.cuh> (bench/build_bench.cc).
  bool use_pch = false;
  // With use_pch: where PCHs are kept for other processes (the module
  // cache's disk tier), or null to keep them in this process.
  PchFileStore* pch_files = nullptr;
  // A link input (since 1.3): adds -dc or -dlto to BuildOptions(); with
  // kLtoIr the artifact's image is the LTO-IR and it has no PTX.
  DeviceCode device_code = DeviceCode::kWhole;
};

// What a build's caller may not say, checked before anything compiles
// (INVALID_ARGUMENT naming `field`, e.g. "nvrtc_options"): a NUL byte in the
// source (NVRTC stops reading there) or in an option; an option that sets
// the target (-arch, --gpu-architecture: the build's target says it, and
// the module's info must describe its image); a last option that takes its
// value from the next one (-D, -I...: it would take fleetjit's own); a
// define of FJ_COPY_IMPL (the build's copy implementation says it).
absl::Status CheckBuildInputs(absl::string_view source,
                              const std::vector<std::string>& options,
                              absl::string_view field);

// The exact option list a request compiles with (part of the cache key).
std::vector<std::string> BuildOptions(const BuildRequest& request);

// Whether NVRTC options ask for relocatable device code (an input to a
// device link, not a loadable image): -dc, -rdc=true, -dlto and their long
// forms.
bool IsRelocatableBuild(const std::vector<std::string>& options);

// The folders of `request` in NVRTC's search order: the -I of `options`
// (origin "nvrtc_options"), then `include_dirs`.
std::vector<IncludeDir> SearchedDirs(const BuildRequest& request);

// The header NVRTC's log says it could not open ("" if none).
std::string MissingHeader(absl::string_view log);

// "sm_75, sm_80, ..., sm_121": the architectures `api` builds
// (nvrtcGetSupportedArchs), as sm_XX names.
std::string SupportedTargetsText(const NvrtcApi& api);

// OK when `api` builds `target`'s architecture (any suffix and output kind:
// NVRTC lists plain architectures), else INVALID_ARGUMENT naming the NVRTC
// and the targets it builds. An NVRTC that cannot list them accepts all.
// BuildModule checks this before compiling: NVRTC's own refusal says only
// "invalid value for --gpu-architecture".
absl::Status CheckTargetSupported(const NvrtcApi& api, const Target& target);

// Compiles with `nvrtc` (loaded on first use by the caller).
absl::StatusOr<Artifact> BuildModule(NvrtcLibrary& nvrtc,
                                     const BuildRequest& request);

// Convenience for tests and tools: uses the process's default NVRTC
// library (libnvrtc.so.13, then .12, then /usr/local/cuda).
absl::StatusOr<Artifact> BuildModule(const BuildRequest& request);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_NVRTC_BUILD_H_
