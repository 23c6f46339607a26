// What a tuning run found (TuneRecord), how it is keyed (MakeTuneKey) and
// how it travels through the module cache's tiers (TuneArtifact).
//
// A tuning entry is a cache entry like a module's: the same file layout,
// checksums, byte cap and eviction on disk, and the same HMAC signature in
// the remote tier (runtime/cache/remote_tier.h), so an entry from Redis is
// taken only if its stored canonical key equals the key looked up, byte for
// byte, and its signature verifies under the fleet key. What marks it is
// its key's first name_expression, kTuneNameExpression (no C++ name
// expression reads so), and its artifact holds no kernel: the image is
// EncodeTuneRecord's text.
//
// The key covers: the kernel source, the base NVRTC options and name
// expressions, the kernel's name, the expanded space (CanonicalSpace: every
// candidate's options, shape and grid), the device model (name, SM count,
// compute capability), the driver version, the copy implementation and the
// target. It does not name the compiler: a host without NVRTC finds the
// entry, and a tuning result is a choice among candidates, which any
// compiler builds. Headers read from include folders are not covered
// (documented in docs/tuning.md).
#ifndef FLEETJIT_RUNTIME_TUNE_TUNE_RECORD_H_
#define FLEETJIT_RUNTIME_TUNE_TUNE_RECORD_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_key.h"

namespace fleetjit::tune {

using ::fleetjit::kTuneNameExpression;  // runtime/cache/cache_key.h
// Bumped when the record's text changes; part of every tuning key.
inline constexpr int kTuneRecordVersion = 1;

// What happened to one candidate.
enum class RowStatus : int {
  kOk = 0,         // ran, output correct, timed
  kBuildFailed,    // NVRTC refused it (message: the first log line)
  kLaunchRefused,  // the launch was refused (limits, resources, grid rule)
  kWrongOutput,    // its output differed from the reference / the check
  kFaulted,        // a sticky CUDA error: the tuning stopped there
  kTimedOut,       // it ran past the deadline: the tuning stopped there
  kNotRun,         // the tuning stopped before it
};
inline constexpr int kRowStatusLast = static_cast<int>(RowStatus::kNotRun);
absl::string_view RowStatusName(RowStatus s);  // "ok", "build_failed", ...

struct TuneRow {
  size_t macro_index = 0;
  size_t shape_index = 0;
  std::string macros;
  std::array<uint32_t, 3> block = {1, 1, 1};
  uint32_t shared_bytes = 0;
  std::array<uint32_t, 3> cluster = {0, 0, 0};
  std::array<uint32_t, 3> grid = {1, 1, 1};
  RowStatus status = RowStatus::kNotRun;
  std::string message;  // why not OK ("" when OK)
  double median_us = 0;
  double min_us = 0;
  // (p75 - p25) / median of the samples: above the run's threshold the
  // candidate was timed again, and if still above, flagged noisy.
  double spread = 0;
  bool noisy = false;
  uint32_t samples = 0;  // timed samples
  uint32_t batch = 1;    // launches per sample (median_us is per launch)
};

struct TuneRecord {
  std::string kernel;
  std::vector<TuneRow> rows;  // in candidate order
  // The fastest correct row; rows.size() when none was correct.
  size_t winner = 0;
  // The winner was noisy (or a row within its spread was): such a record
  // is returned but never stored as truth.
  bool noisy = false;
  double tune_ms = 0;  // wall time of the run that produced it
  bool has_winner() const { return winner < rows.size(); }
};

// Makes rows[0] (the space's first candidate: a shipped default) the winner
// unless the fastest correct row beats it by more than `margin` (0.03: 3 %
// of its median). For a tuning on a stand-in problem whose small wins need
// not carry over to the real one. Returns whether it changed the winner.
bool KeepFirstUnlessBeaten(TuneRecord& record, double margin);

// A text of "<field>=<length>:<value>\n" records (the cache key's
// encoding); DecodeTuneRecord refuses anything malformed with DATA_LOSS.
std::string EncodeTuneRecord(const TuneRecord& record);
absl::StatusOr<TuneRecord> DecodeTuneRecord(absl::string_view text);

struct TuneKeyInputs {
  std::string source;
  std::vector<std::string> options;           // base NVRTC options
  std::vector<std::string> name_expressions;  // the build's own
  std::string kernel;
  std::string space;  // CanonicalSpace
  std::string device_name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int driver_version = 0;
  std::string copy_impl;  // "tma"
  std::string target;     // "sm_90a"
  // The problem the candidates run on (CanonicalWorkload in
  // runtime/launch/wire.h); empty for tunings that are per device alone
  // (fj_copy's window kernel).
  std::string workload;
};
CacheKey MakeTuneKey(const TuneKeyInputs& in);

// True if `canonical` is a tuning entry's key (for listings).
bool IsTuneKey(absl::string_view canonical);

// The cache payload of a record, and back (DATA_LOSS if `artifact` is not
// a tuning entry).
jit::Artifact TuneArtifact(const TuneRecord& record, const jit::Target& target,
                           jit::CopyImpl impl);
absl::StatusOr<TuneRecord> RecordOfArtifact(const jit::Artifact& artifact);

}  // namespace fleetjit::tune

#endif  // FLEETJIT_RUNTIME_TUNE_TUNE_RECORD_H_
