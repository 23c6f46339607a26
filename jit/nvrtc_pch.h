// Precompiled headers for NVRTC builds (NVRTC 12.8+), kept across processes.
//
// A build whose source starts with #include lines can reuse the parsed
// headers of an earlier build with the same include lines and options:
// the first such build creates the PCH (--create-pch), later ones use it
// (--use-pch). The PCH never changes a build's PTX, cubin or log (the
// tests check), only how long the front end takes.
//
// Across processes (measured with NVRTC 13.0, bench/results/
// 2026-12-01-build-pch.txt): NVRTC maps a PCH at the address of its
// process-wide PCH heap, which it allocates with mmap(NULL, size) at the
// first PCH build, so under ASLR every process gets its own address and a
// PCH written by another process is rejected (warning 20282). So the first
// PCH build of a process places the heap at one fixed address
// (kPchHeapAddress): it reserves, PROT_NONE, every free range above
// kPchHeapAddress + size (but the main stack's room to grow, which mmap
// never uses), runs a trivial PCH build (NVRTC allocates the heap in the
// one gap left, at kPchHeapAddress), releases the reservations and checks
// /proc/self/maps (about 50 ms, once per process). Another thread's mmap
// during those 50 ms may take the gap: the check then fails and PCHs stay
// in-process. When that worked, PCHs go to and come from a
// PchFileStore (the module cache's disk tier), keyed by the heap's address
// and size, the embedded headers' digest, the options and the include
// lines; the store adds the compiler identity. A stored PCH that NVRTC
// does not take (corrupt, foreign) is seen in the log it is asked to write
// (--pch-messages: the lines are removed from the build's log), logged at
// info, and replaced by the next build of its key; the build itself never
// fails because of it. When placement did not work (another mapping there,
// a bottom-up mmap layout, a sanitizer's reservations), PCHs stay
// in-process, as before, and the reason is logged once.
//
// In-process, each PCH lives in an unlinked file (or memfd) kept open and
// used through /proc/self/fd/N: no name is shared between processes.
//
// Why one PCH build at a time: a PCH is mapped over the one PCH heap, so
// two builds that create or use a PCH at once would share it. A build that
// finds another PCH build running compiles without a PCH (same outputs)
// instead of waiting. Builds that do not use a PCH are never serialised.
//
// Usage, around nvrtcCompileProgram:
//   std::unique_ptr<PchBuild> pch = StartPchBuild(api, options, source, store);
//   if (pch) options += pch->options();
//   nvrtcResult r = api.nvrtcCompileProgram(...);
//   std::string log = <the program's log>;
//   if (pch) pch->Finish(program, r == NVRTC_SUCCESS, &log);
#ifndef FLEETJIT_JIT_NVRTC_PCH_H_
#define FLEETJIT_JIT_NVRTC_PCH_H_

#include <nvrtc.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleetjit {
struct NvrtcApi;
}

namespace fleetjit::jit {

// The source's leading #include lines of embedded headers and one-line
// #define/#undef lines (blank and // comment lines skipped), one per line,
// or "" when a PCH cannot be keyed safely: no #include, an include of
// another header, a block comment, a line continuation or another
// directive (#if, #pragma, ...) before the first line of code.
std::string PchIncludePrefix(absl::string_view source);

// Whether `api` can build with PCHs (NVRTC 12.8+ with its PCH entry points).
bool NvrtcHasPch(const NvrtcApi& api);

// Where a process keeps PCHs for other processes (runtime/module_builder.cc
// puts them in the module cache's disk tier). `key` is full key material
// (jit's part: see the file comment); the store verifies what it returns
// was stored under exactly that key. Called with the PCH slot held.
class PchFileStore {
 public:
  virtual ~PchFileStore() = default;
  // The PCH stored under `key`, or nullopt (absent, unreadable, rejected).
  virtual std::optional<std::string> Load(const std::string& key) = 0;
  // Publishes `pch` under `key` (atomically: temp file + rename).
  virtual void Store(const std::string& key, absl::string_view pch) = 0;
  // Marks the PCH under `key` bad (NVRTC did not take it): later Loads
  // miss, and the next creation replaces it.
  virtual void Drop(const std::string& key) = 0;
  // One info-level line about PCH files (why one was not used, ...).
  virtual void Log(absl::string_view message) = 0;
};

// Where the first PCH build of a process puts NVRTC's PCH heap.
inline constexpr uintptr_t kPchHeapAddress = 0x7e8000000000;
// PCHs larger than this are not stored (about 10 MB for <fleetjit/copy.cuh>).
inline constexpr size_t kMaxPchFileBytes = size_t{64} << 20;

// One build's use of the process's PCHs; holds the one-at-a-time slot
// until destroyed.
class PchBuild {
 public:
  virtual ~PchBuild() = default;
  // Options to append to the build's own (--use-pch or --create-pch, and
  // the switches that keep the log identical).
  virtual const std::vector<std::string>& options() const = 0;
  // After nvrtcCompileProgram, with the program's log: removes the PCH
  // messages from `log`; a build that created the PCH publishes it (or
  // records that it could not, so the key is not tried again), one that
  // used a stored PCH records whether NVRTC took it.
  virtual void Finish(nvrtcProgram program, bool compiled,
                      std::string* log) = 0;
};

// A PchBuild when this build should create or use a PCH, else nullptr
// (NVRTC without PCH, no usable include prefix, another PCH build running,
// or the PCH for this key failed before). `options` is the build's full
// option list; it and `api`'s library form the key with the prefix.
// `files` (may be null: in-process only) keeps PCHs across processes.
std::unique_ptr<PchBuild> StartPchBuild(const NvrtcApi& api,
                                        const std::vector<std::string>& options,
                                        absl::string_view source,
                                        PchFileStore* files = nullptr);

// Counters for tests and benchmarks (process-wide, since start).
struct PchStats {
  int created = 0;        // PCHs published
  int used = 0;           // builds given --use-pch
  int create_failed = 0;  // creations NVRTC did not complete
  int busy = 0;           // builds that went without: another PCH build ran
  int skipped = 0;        // builds that went without: key failed, or full
  // Across processes (a PchFileStore given):
  int heap_placed = 0;    // 1 once the heap is at kPchHeapAddress
  int heap_unplaced = 0;  // 1 if placing it failed (PCHs stay in-process)
  int file_loaded = 0;    // PCHs read from the store
  int file_used = 0;      // builds NVRTC ran with a PCH read from the store
  int file_rejected = 0;  // stored PCHs NVRTC did not take
  int file_stored = 0;    // PCHs handed to the store
};
PchStats GetPchStats();

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_NVRTC_PCH_H_
