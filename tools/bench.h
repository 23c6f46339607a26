// `fleetjit bench copy|launch|build`: what this node gets from fleetjit next
// to what a user would call instead (the anchor), both measured in the
// same run (reference/measure.h says how). Each Bench* returns the table; the
// command (bench_command.cc) prints it as text or JSON.
//
//   copy    cuMemcpyDtoDAsync vs fj_copy of the same contiguous bytes; a
//           2-D window with zero fill (fj_copy's kernel route) vs the same
//           bytes contiguous; with two GPUs joined by P2P, cuMemcpyPeerAsync
//           vs fj_copy between them.
//   launch  host time per launch of an empty 4-argument kernel: raw
//           cuLaunchKernel vs fj_launch of the same CUfunction's module, on
//           the same stream, and the launch rates they give.
//   build   a plain NVRTC compile of a kernel with no includes vs fleetjit's
//           cold build of it, a disk hit (a fresh runtime) and a memory hit.
//
// The anchors call the driver (platform/driver_api.h) and NVRTC
// (platform/nvrtc_library.h) directly, in the same primary contexts and
// on the same streams as fleetjit, which is driven through the C ABI.
#ifndef FLEETJIT_TOOLS_BENCH_H_
#define FLEETJIT_TOOLS_BENCH_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::cli {

struct BenchOptions {
  int device = 0;
  std::string target;  // build: the target ("" = the device's)
  int mib = 1024;      // copy: bytes per contiguous copy
  int reps = 0;  // samples (copy), rounds (launch), builds (build); 0 = default
  std::string cache_dir;  // build: "" = a scratch directory, removed after
  bool tune = false;  // kernels: the shapes through fj_tune (cached per fleet)
  // kernels: the corpus's folders (sets, or roots of set*/ folders); empty:
  // ./bench/corpus when it exists.
  std::vector<std::string> corpus;
  std::string only;    // kernels: "corpus" or "reference" ("" = both)
  std::string filter;  // kernels: only names containing it
};

// One line of the table: the anchor and fleetjit, in one unit.
struct BenchRow {
  std::string name;
  std::string unit;  // "GB/s", "us", "launches/s", "ms"
  bool higher_is_better = false;
  std::string anchor;
  double anchor_value = 0;
  std::string fleetjit;
  double fleetjit_value = 0;
  nlohmann::ordered_json notes = nlohmann::ordered_json::object();
  // fleetjit relative to the anchor (1.0 = the same).
  double ratio() const { return fleetjit_value / anchor_value; }
};

struct BenchReport {
  nlohmann::ordered_json context =
      nlohmann::ordered_json::object();  // device, sizes
  std::vector<BenchRow> rows;
  std::vector<std::pair<std::string, std::string>> skipped;  // case, why
  bool failed = false;  // a case ran wrong (the command exits 1)
};

// UNAVAILABLE when the bench needs a GPU and there is none (build: without
// --target); FAILED_PRECONDITION without NVRTC (build).
absl::StatusOr<BenchReport> BenchCopy(const BenchOptions& options);
absl::StatusOr<BenchReport> BenchLaunch(const BenchOptions& options);
absl::StatusOr<BenchReport> BenchBuild(const BenchOptions& options);
// kernels: the reference kernels x copy implementations vs the D2D copy
// of the same bytes (tools/bench_kernels.cc).
absl::StatusOr<BenchReport> BenchKernels(const BenchOptions& options);
// The newcomer corpus's sets (bench/corpus/README.md) x the GPU's variants:
// layer kernel and plain twin vs the D2D copy, appended to `report`
// (failed when an output differs); `say` gets a progress line per case
// (tools/bench_corpus.cc).
absl::Status BenchCorpus(const BenchOptions& options,
                         const std::vector<std::string>& sets,
                         BenchReport* report,
                         const std::function<void(const std::string&)>& say);

// An fj_status as an absl::Status ("what: CODE: message"), freeing it.
absl::Status FromFj(fj_status* status, const char* what);
// The C ABI's device description as JSON (name, cc, SMs, driver, target).
absl::StatusOr<nlohmann::ordered_json> DeviceJson(fj_runtime* rt, int device);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_BENCH_H_
