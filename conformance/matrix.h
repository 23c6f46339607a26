// Internal to the conformance runner: the Matrix runs the conformance
// kernels of every row (an implementation, optionally on a PTX target) on
// one device. It builds each row's module, owns the device arenas (input,
// output, auxiliary), and runs a variant's launches: each one generates its
// cases (case_gen.h), launches, downloads, and compares with the host
// reference (reference.h), tallying failures per cell.
//
// The per-kind launch functions live beside this file: span_cells.cc
// (barrier, span loads and stores, groups) and tile_cells.cc (tile loads and
// stores, pipeline, scatters and gathers by index); matrix.cc holds the
// rest.
#ifndef FLEETJIT_CONFORMANCE_MATRIX_H_
#define FLEETJIT_CONFORMANCE_MATRIX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "conformance/c_abi.h"
#include "conformance/case_gen.h"
#include "conformance/watchdog.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::selftest::internal {

inline constexpr const char* kKernelFile = "conformance/conformance_kernels.cu";
inline constexpr uint64_t kArenaBytes = 16ull << 20;  // tensors / outputs
inline constexpr uint64_t kAuxBytes = 1ull << 20;  // cases, coords, predicates
inline constexpr uint64_t kAuxPredsOffset = kAuxBytes / 2;
inline constexpr int kMaxSamples = 3;

// Rows: an implementation, optionally on a named (PTX) target.
struct RowSpec {
  std::string name;  // "tma", "cp_async@compute_80"
  fj_copy_impl impl;
  std::string target;  // "" = the live device
  int target_cc = 0;   // e.g. 90, 80, 75
};

// ---------------------------------------------------------------------------
// One row's module and kernels.

struct Row {
  RowSpec spec;
  bool clusters = false;  // cluster launches reach the kernel's cluster code
  fj_module* module = nullptr;
  std::string built_for;  // module target
  std::string build_note;
  std::string build_error;
  std::map<std::string, fj_kernel*> kernels;
  std::map<std::string, int> max_threads;
};

// How a launch's output compares with the reference: the failures to
// tally and what follows "<launch>: " in the sample ("2 of 5 blocks wrong;
// first: ...").
struct Verdict {
  int bad = 0;
  std::string text;
};

// Failures of one cell.
struct Tally {
  int cases = 0, failures = 0, launches = 0, maps = 0, fallbacks = 0;
  std::vector<std::string> samples;
  void Fail(int n, std::string what) {
    failures += n;
    if (static_cast<int>(samples.size()) < kMaxSamples)
      samples.push_back(std::move(what));
  }
};

// A launch of a tile-load kernel (TileLoad, Pipeline) as it is set up:
// the tiles of the tensor and their predicates, the predicate mode, the
// kernel and block size, the poison, and the expected and received
// output (one box per output tile). Not moved once launched (the launch
// points at tensor and targ).
struct TileLoads {
  std::vector<int32_t> coords;
  std::vector<uint8_t> preds;
  int pred_mode = 0;
  std::string kernel;
  int threads = 0;
  uint8_t poison = 0;
  std::vector<uint8_t> want, got;
  fj_tensor tensor{};
  fj_tensor_arg targ{};
};

class Matrix {
 public:
  Matrix(fj_runtime* rt, int device, uint64_t seed, int scale)
      : rt_(rt), device_(device), seed_(seed), scale_(scale) {}
  ~Matrix();

  absl::Status Init(const fj_device_info& info);

  void AddRow(RowSpec spec);
  std::vector<std::unique_ptr<Row>>& rows() { return rows_; }

  // Builds every row's module in parallel (NVRTC, then the driver's load
  // and, for PTX rows, its JIT).
  void BuildAll(const std::function<void(const std::string&)>& log);

  // Runs `launches` launches of variant `v` on `row` into `t`. A non-OK
  // status means the device is unusable (poisoned by a fault).
  absl::Status RunVariant(Row& row, const Variant& v,
                          const std::string& feature, Tally& t);

 private:
  struct Ctx {
    Row& row;
    const Variant& v;
    const std::string& feature;
    int index;
    Rng& rng;
    Tally& t;
  };
  struct Shape {
    uint32_t grid = 1, block = 1, smem = 0, cluster = 0;
  };

  void Build(Row& row, const std::string& source);
  absl::StatusOr<fj_kernel*> Kernel(Row& row, const std::string& name);
  // A block size: any 1-D size works; favour the common ones.
  int PickThreads(Rng& rng, Row& row, const std::string& kernel);
  // `t` rounded down to whole warps (at least one) within kernel's limit.
  int WholeWarps(Row& row, const std::string& kernel, int t);
  std::string Label(const Ctx& c) const;
  std::string Repro(const Ctx& c) const;

  absl::Status Upload(uint64_t dst, const void* src, size_t bytes);
  absl::Status Download(void* dst, uint64_t src, size_t bytes);
  absl::Status Poison(uint64_t dst, uint8_t value, size_t bytes);

  // One launch of a cell: what to stage, how to launch, what to read back.
  struct Staged {
    uint64_t dst;
    const void* src;
    size_t bytes;
  };
  struct CellLaunch {
    std::vector<Staged> inputs;  // copied to the device first
    uint64_t poison_at = 0;      // then poison_bytes set to poison
    uint8_t poison = 0;
    size_t poison_bytes = 0;
    std::string kernel;
    Shape shape;
    std::vector<fj_arg> args;
    int cases = 0;        // what a failed launch fails
    std::string what;     // the launch, for messages
    void* got = nullptr;  // got_bytes read back from got_from
    uint64_t got_from = 0;
    size_t got_bytes = 0;
  };

  // The pipeline of every cell: stages the inputs, poisons the output,
  // launches, reads back, synchronises, and tallies `compare`'s verdict
  // (not called when the launch failed: its cases are failed instead). A
  // non-OK status means the device no longer works, or staging failed.
  absl::Status RunCell(Ctx& c, CellLaunch& l,
                       const std::function<Verdict()>& compare);
  // Launches, downloads (`after` queues the copies back) and synchronises.
  // A launch or run error is a failure of all `cases` of the launch; false
  // is returned and the caller skips the comparison. A non-OK status means
  // the device no longer works.
  absl::StatusOr<bool> LaunchAndWait(
      Ctx& c, const CellLaunch& l, const std::function<absl::Status()>& after);
  // Whether the device still works after `error` (a fault poisons it).
  absl::Status Healthy(const Ctx& c, const absl::Status& error);
  // For the tile kernels: fills the tensor argument for `g` at `base` (an
  // arena) and counts it as a map or a fallback; returns the inputs to
  // stage: `data` (the elements), then the coordinates and predicates.
  std::vector<Staged> StageTiles(Ctx& c, const GenTensor& g, uint64_t base,
                                 Staged data,
                                 const std::vector<int32_t>& coords,
                                 const std::vector<uint8_t>& preds,
                                 fj_tensor* tensor, fj_tensor_arg* targ);
  // Draws `tiles` tiles of g (predicates true with `pred_chance`) and the
  // rest of `t` for kernel `family`_e<bytes>_r<rank> writing `boxes` boxes.
  absl::Status DrawTileLoads(Ctx& c, const GenTensor& g, bool in_bounds,
                             int tiles, int boxes, double pred_chance,
                             absl::string_view family, TileLoads& t);
  // The launch of `t` on `grid` blocks with `smem` bytes of shared memory,
  // failing `cases` cases if it fails: the tensor in the input arena with
  // its coordinates and predicates staged, t.got.size() bytes of the output
  // poisoned and read back into t.got. The tile-load kernels all take
  // (tensor, coords, preds, pred_mode, `arg`, out).
  CellLaunch TileLoadLaunch(Ctx& c, const GenTensor& g, TileLoads& t,
                            int32_t arg, uint32_t grid, uint32_t smem,
                            int cases);
  // Counts tensor maps vs fallbacks on tma rows (the runtime's own rules).
  void CountTma(Ctx& c, const fj_tensor_arg& a);
  std::string TensorText(const Ctx& c, const GenTensor& g,
                         const fj_tensor_arg& a, int threads) const;

  // The cells (span_cells.cc, tile_cells.cc): one launch of a variant.
  absl::Status Barrier(Ctx& c);
  absl::Status SpanLoad(Ctx& c);
  absl::Status SpanStore(Ctx& c);
  absl::Status Groups(Ctx& c);
  absl::Status TileLoad(Ctx& c);
  absl::Status TileStore(Ctx& c);
  absl::Status Pipeline(Ctx& c);
  absl::Status Scatter(Ctx& c);
  absl::Status GatherIndex(Ctx& c);

  fj_runtime* rt_;
  int device_;
  uint64_t seed_;
  int scale_;
  fj_device_info info_{};
  fj_stream* stream_ = nullptr;
  uint64_t in_ = 0, out_ = 0, aux_ = 0;
  std::vector<std::unique_ptr<Row>> rows_;
  std::mutex kernels_mu_;
  Watchdog watchdog_;
};

}  // namespace fleetjit::selftest::internal

#endif  // FLEETJIT_CONFORMANCE_MATRIX_H_
