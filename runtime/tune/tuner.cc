#include "runtime/tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fleetjit::tune {
namespace {

std::string Describe(const TuneCandidate& c) {
  return absl::StrCat("candidate ", c.macro_index, "/", c.shape_index, " ('",
                      c.macros, "', block ", c.shape.block[0], "x",
                      c.shape.block[1], "x", c.shape.block[2], ", smem ",
                      c.shape.shared_bytes, ")");
}

TuneRow RowOf(const TuneCandidate& c) {
  TuneRow r;
  r.macro_index = c.macro_index;
  r.shape_index = c.shape_index;
  r.macros = c.macros;
  for (int i = 0; i < 3; ++i) {
    r.block[i] = c.shape.block[i] == 0 ? 1 : c.shape.block[i];
    r.cluster[i] = c.shape.cluster[i];
    r.grid[i] = c.grid[i];
  }
  r.shared_bytes = c.shape.shared_bytes;
  return r;
}

// The first byte where two output sets differ, for the row's message.
std::string FirstDifference(const std::vector<std::string>& got,
                            const std::vector<std::string>& want) {
  for (size_t b = 0; b < got.size() && b < want.size(); ++b) {
    const std::string& g = got[b];
    const std::string& w = want[b];
    if (g == w) continue;
    size_t at = 0;
    while (at < g.size() && at < w.size() && g[at] == w[at]) ++at;
    return absl::StrCat("output ", b, " differs from the reference at byte ",
                        at);
  }
  return "the outputs differ from the reference";
}

// Why the run stops at row `i`: a sticky fault or a deadline.
absl::Status Stop(std::vector<TuneRow>& rows, size_t i, RowStatus why,
                  const TuneCandidate& c, const absl::Status& error) {
  rows[i].status = why;
  rows[i].message = std::string(error.message());
  absl::Status out(error.code(),
                   absl::StrCat(Describe(c),
                                why == RowStatus::kTimedOut
                                    ? " ran past the tuning deadline; the "
                                      "stream still holds it: "
                                    : " faulted; the CUDA context is "
                                      "unusable from now on: ",
                                error.message()));
  return out;
}

}  // namespace

SampleStats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  SampleStats s;
  if (v.empty()) return s;
  auto at = [&](double q) {
    // Linear interpolation between the closest ranks.
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
  };
  s.min = v.front();
  s.median = at(0.5);
  s.spread = s.median > 0 ? (at(0.75) - at(0.25)) / s.median : 0;
  return s;
}

absl::StatusOr<TuneRecord> RunTuning(
    const std::vector<TuneCandidate>& candidates, const TuneSettings& settings,
    absl::string_view kernel, TuneBackend& backend) {
  if (candidates.empty()) {
    return absl::InvalidArgumentError("the space has no candidate");
  }
  if (settings.samples == 0 || settings.samples > kMaxCount ||
      settings.warmup > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat(
        "samples (", settings.samples, ") must be 1 to ", kMaxCount,
        " and warmup (", settings.warmup, ") at most ", kMaxCount));
  }
  const auto start = std::chrono::steady_clock::now();
  TuneRecord record;
  record.kernel = std::string(kernel);
  std::vector<TuneRow>& rows = record.rows;
  std::vector<bool> wanted(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    rows.push_back(RowOf(candidates[i]));
    wanted[i] = candidates[i].grid_status.ok();
  }
  std::vector<absl::Status> built = backend.BuildAll(candidates, wanted);
  if (built.size() != candidates.size()) {
    return absl::InternalError("the tuning backend built the wrong count");
  }

  bool have_reference = false;
  std::vector<std::string> reference;
  // Classifies a launch or timing error of row i; a non-OK return stops.
  auto failed = [&](size_t i, const absl::Status& error) -> absl::Status {
    if (absl::IsDeadlineExceeded(error)) {
      return Stop(rows, i, RowStatus::kTimedOut, candidates[i], error);
    }
    if (backend.IsSticky(error)) {
      return Stop(rows, i, RowStatus::kFaulted, candidates[i], error);
    }
    rows[i].status = RowStatus::kLaunchRefused;
    rows[i].message = std::string(error.message());
    return absl::OkStatus();
  };

  for (size_t i = 0; i < candidates.size(); ++i) {
    const TuneCandidate& c = candidates[i];
    TuneRow& row = rows[i];
    if (!c.grid_status.ok()) {
      row.status = RowStatus::kLaunchRefused;
      row.message = std::string(c.grid_status.message());
      continue;
    }
    if (!built[i].ok()) {
      row.status = RowStatus::kBuildFailed;
      row.message = std::string(built[i].message());
      continue;
    }
    // 1. One run from the callers' starting state, checked.
    FJ_RETURN_IF_ERROR(backend.RestoreOutputs(),
                       "restoring the output buffers");
    if (absl::Status run = backend.RunOnce(i, settings.deadline); !run.ok()) {
      FJ_RETURN_IF_ERROR(failed(i, run));
      continue;
    }
    FJ_ASSIGN_OR_RETURN(std::vector<std::string> outputs, backend.ReadOutputs(),
                        "reading the outputs");
    bool correct = true;
    if (backend.has_check()) {
      FJ_ASSIGN_OR_RETURN(correct, backend.Check(i, outputs),
                          "the caller's check");
      if (!correct) row.message = "the caller's check refused the output";
    } else if (!have_reference) {
      reference = std::move(outputs);
      have_reference = true;
    } else if (outputs != reference) {
      correct = false;
      row.message = FirstDifference(outputs, reference);
    }
    if (!correct) {
      row.status = RowStatus::kWrongOutput;
      continue;
    }

    // 2. Warm-up, which also sizes the batch.
    absl::StatusOr<double> warm = backend.Time(
        i, std::max<uint32_t>(settings.warmup, 1), settings.deadline);
    if (!warm.ok()) {
      FJ_RETURN_IF_ERROR(failed(i, warm.status()));
      continue;
    }
    const double per_launch_us =
        *warm * 1000.0 / std::max<uint32_t>(settings.warmup, 1);
    uint32_t batch = 1;
    if (per_launch_us > 0 && per_launch_us < settings.min_sample_us) {
      batch = static_cast<uint32_t>(
          std::ceil(settings.min_sample_us / per_launch_us));
    }
    batch = std::clamp<uint32_t>(batch, 1,
                                 std::max<uint32_t>(1, settings.max_batch));
    row.batch = batch;

    // 3. Samples; once more if they spread too far.
    bool stopped = false;
    SampleStats stats;
    for (int attempt = 0; attempt < 2 && !stopped; ++attempt) {
      std::vector<double> us;
      us.reserve(settings.samples);
      for (uint32_t s = 0; s < settings.samples; ++s) {
        absl::StatusOr<double> ms = backend.Time(i, batch, settings.deadline);
        if (!ms.ok()) {
          FJ_RETURN_IF_ERROR(failed(i, ms.status()));
          stopped = true;
          break;
        }
        us.push_back(*ms * 1000.0 / batch);
      }
      if (stopped) break;
      stats = Summarize(std::move(us));
      row.samples = settings.samples * (attempt + 1);
      if (stats.spread <= settings.noise_threshold) break;
    }
    if (stopped) continue;
    row.status = RowStatus::kOk;
    row.median_us = stats.median;
    row.min_us = stats.min;
    row.spread = stats.spread;
    row.noisy = stats.spread > settings.noise_threshold;
  }
  FJ_RETURN_IF_ERROR(backend.RestoreOutputs(), "restoring the output buffers");

  record.winner = rows.size();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].status != RowStatus::kOk) continue;
    if (!record.has_winner() ||
        rows[i].median_us < rows[record.winner].median_us) {
      record.winner = i;
    }
  }
  record.noisy = record.has_winner() && rows[record.winner].noisy;
  record.tune_ms = std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  return record;
}

}  // namespace fleetjit::tune
