#include "runtime/tune/tune_record.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace fleetjit::tune {
namespace {

void Put(std::string& out, absl::string_view field, absl::string_view value) {
  absl::StrAppend(&out, field, "=", value.size(), ":", value, "\n");
}

std::string Dims(const std::array<uint32_t, 3>& d) {
  return absl::StrCat(d[0], "x", d[1], "x", d[2]);
}

absl::Status Bad(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("tuning record: ", what));
}

absl::Status ParseDims(absl::string_view text, std::array<uint32_t, 3>& out) {
  absl::string_view rest = text;
  for (int i = 0; i < 3; ++i) {
    const size_t x = i < 2 ? rest.find('x') : rest.size();
    if (x == absl::string_view::npos ||
        !absl::SimpleAtoi(rest.substr(0, x), &out[i])) {
      return Bad(absl::StrCat("bad dims '", text, "'"));
    }
    rest.remove_prefix(i < 2 ? x + 1 : x);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ParseInt(absl::string_view text, T& out) {
  if (!absl::SimpleAtoi(text, &out)) {
    return Bad(absl::StrCat("bad integer '", text, "'"));
  }
  return absl::OkStatus();
}

absl::Status ParseDouble(absl::string_view text, double& out) {
  if (!absl::SimpleAtod(text, &out)) {
    return Bad(absl::StrCat("bad number '", text, "'"));
  }
  return absl::OkStatus();
}

std::string Num(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace

absl::string_view RowStatusName(RowStatus s) {
  switch (s) {  // no default: a new status needs a name
    case RowStatus::kOk:
      return "ok";
    case RowStatus::kBuildFailed:
      return "build_failed";
    case RowStatus::kLaunchRefused:
      return "launch_refused";
    case RowStatus::kWrongOutput:
      return "wrong_output";
    case RowStatus::kFaulted:
      return "faulted";
    case RowStatus::kTimedOut:
      return "timed_out";
    case RowStatus::kNotRun:
      return "not_run";
  }
  return "unknown";
}

std::string EncodeTuneRecord(const TuneRecord& r) {
  std::string out;
  Put(out, "version", absl::StrCat(kTuneRecordVersion));
  Put(out, "kernel", r.kernel);
  Put(out, "winner", absl::StrCat(r.winner));
  Put(out, "noisy", r.noisy ? "1" : "0");
  Put(out, "tune_ms", Num(r.tune_ms));
  Put(out, "rows", absl::StrCat(r.rows.size()));
  for (const TuneRow& row : r.rows) {
    Put(out, "macro_index", absl::StrCat(row.macro_index));
    Put(out, "shape_index", absl::StrCat(row.shape_index));
    Put(out, "macros", row.macros);
    Put(out, "block", Dims(row.block));
    Put(out, "shared_bytes", absl::StrCat(row.shared_bytes));
    Put(out, "cluster", Dims(row.cluster));
    Put(out, "grid", Dims(row.grid));
    Put(out, "status", absl::StrCat(static_cast<int>(row.status)));
    Put(out, "message", row.message);
    Put(out, "median_us", Num(row.median_us));
    Put(out, "min_us", Num(row.min_us));
    Put(out, "spread", Num(row.spread));
    Put(out, "row_noisy", row.noisy ? "1" : "0");
    Put(out, "samples", absl::StrCat(row.samples));
    Put(out, "batch", absl::StrCat(row.batch));
  }
  return out;
}

absl::StatusOr<TuneRecord> DecodeTuneRecord(absl::string_view text) {
  // Fixed order: the header's six fields, then 15 per row. Read in one pass
  // over views of the text: a record of a hundred rows decodes in tens of
  // microseconds, which a fresh process's lookup pays.
  constexpr size_t kHeader = 6, kPerRow = 15;
  static constexpr const char* kRowFields[kPerRow] = {
      "macro_index", "shape_index", "macros",    "block",   "shared_bytes",
      "cluster",     "grid",        "status",    "message", "median_us",
      "min_us",      "spread",      "row_noisy", "samples", "batch"};
  static constexpr const char* kHeaderFields[kHeader] = {
      "version", "kernel", "winner", "noisy", "tune_ms", "rows"};
  CanonicalReader reader(text);
  absl::string_view h[kHeader];
  for (size_t i = 0; i < kHeader; ++i) {
    absl::string_view field;
    if (reader.done()) return Bad("truncated header");
    FJ_RETURN_IF_ERROR(reader.Next(field, h[i]));
    if (field != kHeaderFields[i]) {
      return Bad(absl::StrCat("expected field '", kHeaderFields[i], "', got '",
                              field, "'"));
    }
  }
  int version = 0;
  FJ_RETURN_IF_ERROR(ParseInt(h[0], version));
  if (version != kTuneRecordVersion) {
    return Bad(
        absl::StrCat("version ", version, ", expected ", kTuneRecordVersion));
  }
  TuneRecord r;
  r.kernel = std::string(h[1]);
  FJ_RETURN_IF_ERROR(ParseInt(h[2], r.winner));
  if (h[3] != "0" && h[3] != "1") return Bad("bad noisy flag");
  r.noisy = h[3] == "1";
  FJ_RETURN_IF_ERROR(ParseDouble(h[4], r.tune_ms));
  size_t rows = 0;
  FJ_RETURN_IF_ERROR(ParseInt(h[5], rows));
  // Each field takes at least five bytes ("a=0:\n"): a count the text cannot
  // hold is refused before anything is allocated for it.
  if (rows > text.size() / (kPerRow * 5)) {
    return Bad(absl::StrCat(rows, " rows in ", text.size(), " bytes"));
  }
  if (r.winner > rows) return Bad("winner out of range");
  r.rows.resize(rows);
  for (size_t i = 0; i < rows; ++i) {
    absl::string_view f[kPerRow];
    for (size_t j = 0; j < kPerRow; ++j) {
      absl::string_view field;
      if (reader.done()) {
        return Bad(absl::StrCat("truncated at row ", i, " of ", rows));
      }
      FJ_RETURN_IF_ERROR(reader.Next(field, f[j]));
      if (field != kRowFields[j]) {
        return Bad(absl::StrCat("row ", i, ": expected field '", kRowFields[j],
                                "', got '", field, "'"));
      }
    }
    TuneRow& row = r.rows[i];
    FJ_RETURN_IF_ERROR(ParseInt(f[0], row.macro_index));
    FJ_RETURN_IF_ERROR(ParseInt(f[1], row.shape_index));
    row.macros = std::string(f[2]);
    FJ_RETURN_IF_ERROR(ParseDims(f[3], row.block));
    FJ_RETURN_IF_ERROR(ParseInt(f[4], row.shared_bytes));
    FJ_RETURN_IF_ERROR(ParseDims(f[5], row.cluster));
    FJ_RETURN_IF_ERROR(ParseDims(f[6], row.grid));
    int status = 0;
    FJ_RETURN_IF_ERROR(ParseInt(f[7], status));
    if (status < 0 || status > kRowStatusLast) return Bad("bad row status");
    row.status = static_cast<RowStatus>(status);
    row.message = std::string(f[8]);
    FJ_RETURN_IF_ERROR(ParseDouble(f[9], row.median_us));
    FJ_RETURN_IF_ERROR(ParseDouble(f[10], row.min_us));
    FJ_RETURN_IF_ERROR(ParseDouble(f[11], row.spread));
    if (f[12] != "0" && f[12] != "1") return Bad("bad row noisy flag");
    row.noisy = f[12] == "1";
    FJ_RETURN_IF_ERROR(ParseInt(f[13], row.samples));
    FJ_RETURN_IF_ERROR(ParseInt(f[14], row.batch));
  }
  if (!reader.done()) return Bad(absl::StrCat("fields after row ", rows));
  if (r.has_winner() && r.rows[r.winner].status != RowStatus::kOk) {
    return Bad("the winner's row is not ok");
  }
  return r;
}

CacheKey MakeTuneKey(const TuneKeyInputs& in) {
  CacheKeyInputs k;
  k.source = in.source;
  k.options = in.options;
  k.target = in.target;
  k.copy_impl = in.copy_impl;
  k.compiler = "";  // any compiler: see the file comment
  k.driver_version = in.driver_version;
  k.name_expressions.push_back(kTuneNameExpression);
  k.name_expressions.push_back(
      absl::StrCat("tune_record_version ", kTuneRecordVersion));
  k.name_expressions.push_back(absl::StrCat("kernel ", in.kernel));
  k.name_expressions.push_back(absl::StrCat("device ", in.device_name));
  k.name_expressions.push_back(absl::StrCat("sm_count ", in.sm_count));
  k.name_expressions.push_back(
      absl::StrCat("cc ", in.cc_major, ".", in.cc_minor));
  k.name_expressions.push_back(
      absl::StrCat("space ", Sha256::Hex(Sha256::Hash(in.space))));
  if (!in.workload.empty()) {
    k.name_expressions.push_back(
        absl::StrCat("workload ", Sha256::Hex(Sha256::Hash(in.workload))));
  }
  for (const std::string& e : in.name_expressions) {
    k.name_expressions.push_back(absl::StrCat("build_name_expression ", e));
  }
  return MakeCacheKey(k);
}

bool IsTuneKey(absl::string_view canonical) {
  return CanonicalKeyField(canonical, "name_expression") == kTuneNameExpression;
}

jit::Artifact TuneArtifact(const TuneRecord& record, const jit::Target& target,
                           jit::CopyImpl impl) {
  jit::Artifact a;
  a.target = target;
  a.copy_impl = impl;
  a.is_ptx = false;
  a.image = EncodeTuneRecord(record);
  a.compiler = std::string(kTuneNameExpression);
  return a;
}

absl::StatusOr<TuneRecord> RecordOfArtifact(const jit::Artifact& artifact) {
  if (artifact.compiler != kTuneNameExpression || !artifact.kernels.empty()) {
    return Bad("the cache entry is not a tuning entry");
  }
  return DecodeTuneRecord(artifact.image);
}

bool KeepFirstUnlessBeaten(TuneRecord& record, double margin) {
  if (!record.has_winner() || record.winner == 0 || record.rows.empty() ||
      record.rows[0].status != RowStatus::kOk) {
    return false;
  }
  const double first = record.rows[0].median_us;
  if (record.rows[record.winner].median_us < first * (1.0 - margin)) {
    return false;
  }
  record.winner = 0;
  record.noisy = record.noisy || record.rows[0].noisy;
  return true;
}

}  // namespace fleetjit::tune
