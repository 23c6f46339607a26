// Links device objects into one module with nvJitLink (since 1.3).
//
// A link's objects are what NVRTC made of its sources with -dc (PTX and a
// relocatable cubin) or -dlto (LTO-IR), and the caller's prebuilt cubins,
// PTX, fatbins, LTO-IR and device libraries (libcudadevrt.a for dynamic
// parallelism). The result is one executable cubin for an sm_XX target.
//
// A linked cubin carries no PTX, so its kernels and their layouts are put
// together here:
//  - the kernel names come from the cubin's ELF symbol table, each under the
//    C++ name a source's name expression gave it where one did;
//  - each kernel's parameters come from the PTX that declares its .entry: a
//    -dc source's PTX or a PTX input; for kernels of LTO-IR, from a second
//    nvJitLink pass over the LTO-IR inputs alone with -ptx (only run when a
//    kernel still lacks its layout);
//  - a kernel no PTX describes (one of a prebuilt cubin or fatbin) is listed
//    in `unresolved_kernels` for the runtime to ask the driver.
// A link error (an undefined symbol, a bad input) is INVALID_ARGUMENT with
// the public code of a build error and nvJitLink's log in the details
// "link_log" and "build_log".
#ifndef FLEETJIT_JIT_LINK_BUILD_H_
#define FLEETJIT_JIT_LINK_BUILD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/target.h"

namespace fleetjit {
class NvJitLinkLibrary;
}

namespace fleetjit::jit {

struct LinkObject {
  enum class Kind { kCubin, kPtx, kFatbin, kLtoIr, kLibrary };
  Kind kind = Kind::kCubin;
  std::string name;   // for nvJitLink's messages
  std::string bytes;  // PTX without its NUL
  // PTX that describes the kernels of this object (a -dc source's, or the
  // PTX input itself); "" if none.
  std::string ptx;
  // Kernels a source named by C++ expression ("scale<float>" -> mangled).
  std::vector<KernelEntry> named_kernels;
};

struct LinkRequest {
  std::string name = "link";  // for messages
  Target target;              // an sm_XX target: a link produces a cubin
  CopyImpl copy_impl = CopyImpl::kSync;
  std::vector<LinkObject> objects;
  std::vector<std::string> options;  // extra nvJitLink options ("-O3")
  bool lto = false;                  // link-time optimization (-lto)
};

// The exact nvJitLink option list (part of the cache key): -arch=sm_XX,
// -lto when asked, then the caller's options.
std::vector<std::string> LinkOptions(const LinkRequest& request);

struct LinkResult {
  Artifact artifact;  // image: the linked cubin; ptx empty
  // Lowered names of kernels whose parameters no PTX gave.
  std::vector<std::string> unresolved_kernels;
  std::string info_log;  // nvJitLink's info log (may be empty)
};

absl::StatusOr<LinkResult> LinkModule(NvJitLinkLibrary& linker,
                                      const LinkRequest& request);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_LINK_BUILD_H_
