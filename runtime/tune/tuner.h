// The tuning loop, over a backend that builds, launches and times
// (runtime/tuning/tune_kernel.cc gives the GPU one; tests give a fake).
//
//   Tuner::Run(candidates, settings, backend) -> TuneRecord
//
// For each candidate, in order: skip it if its grid rule or its build
// failed; restore the output buffers; launch it once and wait (bounded by
// the deadline); read the outputs and check them, against the caller's
// check when there is one, else byte for byte against the first candidate
// that ran (the reference: put a trusted candidate first); time the correct
// ones (warm-up, then `samples` samples of `batch` launches each between
// two events; batch grows until a sample lasts min_sample_us). A spread
// (p75 - p25) / median above noise_threshold times the candidate again,
// once; still above, it is flagged noisy. The winner is the correct
// candidate with the smallest median; a noisy winner makes the record
// noisy (not cached as truth).
//
// A refused launch (limits, resources) marks that row and goes on. A
// sticky fault (the backend says which errors are) or a candidate that
// runs past the deadline stops the run: the error is returned, naming the
// candidate, since the stream (deadline) or the whole CUDA context (fault)
// can no longer be trusted.
#ifndef FLEETJIT_RUNTIME_TUNE_TUNER_H_
#define FLEETJIT_RUNTIME_TUNE_TUNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/tune/tune_record.h"
#include "runtime/tune/tune_space.h"

namespace fleetjit::tune {

// The most warm-up launches and samples a run takes (FJ_TUNE_MAX_COUNT):
// the deadline bounds each wait, so the counts bound a run's length.
constexpr uint32_t kMaxCount = 10000;

struct TuneSettings {
  uint32_t warmup = 3;    // launches before timing
  uint32_t samples = 21;  // timed samples per candidate
  double noise_threshold = 0.10;
  double min_sample_us = 20;  // batch launches until a sample lasts this long
  uint32_t max_batch = 64;
  // Bound on one wait for the stream (a check run, a warm-up, a sample).
  absl::Duration deadline = absl::Seconds(10);
};

class TuneBackend {
 public:
  virtual ~TuneBackend() = default;
  // Builds the candidates whose `wanted` entry is true (in parallel, through
  // the cache); one status per candidate (ignored where not wanted).
  virtual std::vector<absl::Status> BuildAll(
      const std::vector<TuneCandidate>& candidates,
      const std::vector<bool>& wanted) = 0;
  // Puts the output buffers back as they were before the tuning.
  virtual absl::Status RestoreOutputs() = 0;
  // Launches candidate `i` once and waits, bounded by `deadline`
  // (DEADLINE_EXCEEDED past it).
  virtual absl::Status RunOnce(size_t i, absl::Duration deadline) = 0;
  // The output buffers' bytes, after RunOnce.
  virtual absl::StatusOr<std::vector<std::string>> ReadOutputs() = 0;
  // The caller's check of candidate `i`'s outputs: true = correct. Only
  // called when has_check().
  virtual bool has_check() const = 0;
  virtual absl::StatusOr<bool> Check(
      size_t i, const std::vector<std::string>& outputs) = 0;
  // Milliseconds that `count` launches of candidate `i` took, between two
  // events, waiting at most `deadline`.
  virtual absl::StatusOr<double> Time(size_t i, uint32_t count,
                                      absl::Duration deadline) = 0;
  // True when `error` (from RunOnce or Time) left the context unusable.
  virtual bool IsSticky(const absl::Status& error) const = 0;
};

struct SampleStats {
  double median = 0, min = 0, spread = 0;
};
// Median, minimum and (p75 - p25) / median of `samples` (not empty).
SampleStats Summarize(std::vector<double> samples);

// Runs the loop; see the file comment. `kernel` names the record.
absl::StatusOr<TuneRecord> RunTuning(
    const std::vector<TuneCandidate>& candidates, const TuneSettings& settings,
    absl::string_view kernel, TuneBackend& backend);

}  // namespace fleetjit::tune

#endif  // FLEETJIT_RUNTIME_TUNE_TUNER_H_
