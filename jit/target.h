// Build targets: what NVRTC compiles for.
//
// "sm_90" / "sm_90a" / "sm_100f" build a cubin for exactly that architecture;
// "compute_80" builds PTX that the driver JIT-compiles for any device of
// compute capability >= 8.0 (how pre-Hopper paths run on an H200).
#ifndef FLEETJIT_JIT_TARGET_H_
#define FLEETJIT_JIT_TARGET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit::jit {

struct Target {
  int arch = 0;        // compute capability * 10 + minor, e.g. 90
  char suffix = '\0';  // '\0', 'a' (arch-specific) or 'f' (family)
  bool ptx = false;    // compute_XX: PTX output

  // "sm_90a" or "compute_80".
  std::string Name() const;
  // "-arch=sm_90a" / "-arch=compute_80" for NVRTC.
  std::string NvrtcArchOption() const;
  int major() const { return arch / 10; }
  bool operator==(const Target&) const = default;
};

// Parses "sm_XX[a|f]" / "compute_XX[a|f]" (also "XX" as sm_XX), XX two or
// three digits. Syntax only: which architectures build is the loaded
// NVRTC's list (nvrtcGetSupportedArchs), checked when a build compiles
// (jit/nvrtc_build.h, CheckTargetSupported), so a host without NVRTC still
// names any target a cache entry may have been built for.
absl::StatusOr<Target> ParseTarget(absl::string_view name);

// The cubin target for a live device of compute capability major.minor.
Target TargetForDevice(int cc_major, int cc_minor);

// True when an image built for `target` can load on a device of compute
// capability `device_arch` (e.g. 90): cubins need the same major and a
// minor <= the device's (arch-specific 'a' cubins need the exact arch);
// PTX needs target arch <= device arch.
bool TargetRunsOn(const Target& target, int device_arch);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_TARGET_H_
