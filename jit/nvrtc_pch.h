// Precompiled headers for NVRTC builds (NVRTC 12.8+), private to a process.
//
// A build whose source starts with #include lines can reuse the parsed
// headers of an earlier build with the same include lines and options:
// the first such build creates the PCH (--create-pch), later ones use it
// (--use-pch). The PCH never changes a build's PTX, cubin or log (the
// tests check), only how long the front end takes.
//
// Why in-process only (measured with NVRTC 13.0): NVRTC maps a PCH at the
// address of its process-wide PCH heap, so a PCH written by another process
// (or before a heap resize) is rejected with warning 20282 and the build
// pays for the attempt. Each PCH is therefore created in a fresh mkdtemp
// directory, opened, unlinked at once and used through /proc/self/fd/N: no
// name is shared between processes and nothing outlives the process.
//
// Why one PCH build at a time: a PCH is mapped over the one PCH heap, so
// two builds that create or use a PCH at once would share it. A build that
// finds another PCH build running compiles without a PCH (same outputs)
// instead of waiting. Builds that do not use a PCH are never serialised.
//
// Usage, around nvrtcCompileProgram:
//   std::unique_ptr<PchBuild> pch = StartPchBuild(api, options, source);
//   if (pch) options += pch->options();
//   nvrtcResult r = api.nvrtcCompileProgram(...);
//   if (pch) pch->Finish(program, r == NVRTC_SUCCESS);
#ifndef FLEETJIT_JIT_NVRTC_PCH_H_
#define FLEETJIT_JIT_NVRTC_PCH_H_

#include <nvrtc.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleetjit {
struct NvrtcApi;
}

namespace fleetjit::jit {

// The source's leading #include lines (blank and // comment lines skipped),
// one per line, or "" when a PCH cannot be keyed safely: no #include, a
// block comment, a line continuation or another directive before the
// first line of code.
std::string PchIncludePrefix(absl::string_view source);

// Whether `api` can build with PCHs (NVRTC 12.8+ with its PCH entry points).
bool NvrtcHasPch(const NvrtcApi& api);

// One build's use of the process's PCHs; holds the one-at-a-time slot
// until destroyed.
class PchBuild {
 public:
  virtual ~PchBuild() = default;
  // Options to append to the build's own (--use-pch or --create-pch, and
  // the switches that keep the log identical).
  virtual const std::vector<std::string>& options() const = 0;
  // After nvrtcCompileProgram: a build that created the PCH publishes it
  // (or records that it could not, so the key is not tried again).
  virtual void Finish(nvrtcProgram program, bool compiled) = 0;
};

// A PchBuild when this build should create or use a PCH, else nullptr
// (NVRTC without PCH, no usable include prefix, another PCH build running,
// or the PCH for this key failed before). `options` is the build's full
// option list; it and `api`'s library form the key with the prefix.
std::unique_ptr<PchBuild> StartPchBuild(const NvrtcApi& api,
                                        const std::vector<std::string>& options,
                                        absl::string_view source);

// Counters for tests and benchmarks (process-wide, since start).
struct PchStats {
  int created = 0;        // PCHs published
  int used = 0;           // builds given --use-pch
  int create_failed = 0;  // creations NVRTC did not complete
  int busy = 0;           // builds that went without: another PCH build ran
  int skipped = 0;        // builds that went without: key failed, or full
};
PchStats GetPchStats();

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_NVRTC_PCH_H_
