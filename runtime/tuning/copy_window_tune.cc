// fj_copy's window kernel tuned per device model (docs/tuning.md, "fj_copy's
// own launch shapes"): the tuning loop of fj_tune (tune/tuner.h) over the
// copy kernel's launch shapes (copy::CopyLaunchShape: longest tile row,
// largest tile, persistent CTAs per SM, threads), timed on a scratch
// window with a zero-filled edge, and stored like any tuning entry, so a
// fleet of one GPU model tunes once.
//
// A candidate is named by macros that no build reads
// (-DFJ_COPY_ROW_BYTES=... -DFJ_COPY_TILE_BYTES=... -DFJ_COPY_CTAS_PER_SM=...)
// and its block: the shape is a launch parameter of the one copy kernel,
// so every candidate launches the same module.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/dlpack_codes.h"
#include "base/status_macros.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/copy/copy_kernels.h"
#include "runtime/tuning/timed_stream_backend.h"
#include "runtime/tuning/tuning.h"

namespace fleetjit {
namespace {

// The scratch problem, fj_copy_bench's window at an eighth of its bytes:
// dst [kRows x kCols] f32 takes the window of src [kRows x kSrcCols] at
// (-1, kStartCol) with zero fill, so dst's first row is fill. About 268 MB
// each side: on an H200 a copy lasts ~130 us, long enough to time, and the
// whole space takes well under a second of GPU time.
constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 16384;
constexpr int64_t kSrcCols = kCols + 64;
constexpr int64_t kStartCol = 32;
constexpr size_t kPatternWords = size_t{1} << 20;  // 4 MiB, tiled over src
constexpr int kSampledRows = 16;
// Part of the key: a change of the problem or the space tunes again.
constexpr absl::string_view kWindowProblem =
    "fj_copy window v1: f32 [4096 x 16384] of [4096 x 16448] at (-1, 32), "
    "zero fill";
// A tuned shape replaces the shipped one only when faster by more than this.
constexpr double kShippedMargin = 0.03;
constexpr absl::string_view kRowMacro = "FJ_COPY_ROW_BYTES";
constexpr absl::string_view kTileMacro = "FJ_COPY_TILE_BYTES";
constexpr absl::string_view kCtasMacro = "FJ_COPY_CTAS_PER_SM";

std::string MacrosOf(uint32_t row, uint32_t tile, int ctas) {
  return absl::StrCat("-D", kRowMacro, "=", row, " -D", kTileMacro, "=", tile,
                      " -D", kCtasMacro, "=", ctas);
}

// The shapes: the shipped one first, then every (row, tile, CTAs/SM) with a
// row no longer than the tile, each with 128 and 256 threads. Rows run from
// 512 bytes to 64 KiB: a tile of whole rows reads one run of memory per row
// (past 1 KiB of f32, tma copies it as boxes of 256 elements).
tune::TuneSpace WindowSpace(jit::CopyImpl impl, int sm_count) {
  const copy::CopyLaunchShape shipped = copy::CopyShapeFor(impl);
  tune::TuneSpace space;
  space.macro_sets.push_back(MacrosOf(
      shipped.max_row_bytes, shipped.max_tile_bytes, shipped.ctas_per_sm));
  for (uint32_t row : {512u, 1024u, 4096u, 16384u, 65536u}) {
    for (uint32_t tile : {16384u, 32768u, 65536u}) {
      if (row > tile) continue;
      for (int ctas : {1, 2, 3, 4}) {
        std::string m = MacrosOf(row, tile, ctas);
        if (m != space.macro_sets.front()) space.macro_sets.push_back(m);
      }
    }
  }
  const uint32_t other = shipped.threads == 128 ? 256 : 128;
  for (uint32_t threads : {static_cast<uint32_t>(shipped.threads), other}) {
    tune::TuneShape shape;
    shape.block = {threads, 1, 1};
    space.shapes.push_back(shape);
  }
  space.grid.fn = [sm_count](const tune::TuneCandidate& c,
                             uint32_t grid[3]) -> absl::Status {
    FJ_ASSIGN_OR_RETURN(uint64_t ctas, tune::MacroValue(c.options, kCtasMacro));
    grid[0] = static_cast<uint32_t>(ctas) * std::max(1, sm_count);
    grid[1] = grid[2] = 1;
    return absl::OkStatus();
  };
  return space;
}

// The launch shape a candidate (or a stored row) names.
absl::StatusOr<copy::CopyLaunchShape> ShapeOf(absl::string_view macros,
                                              uint32_t threads) {
  const std::vector<std::string> options = tune::SplitOptions(macros);
  FJ_ASSIGN_OR_RETURN(uint64_t row, tune::MacroValue(options, kRowMacro));
  FJ_ASSIGN_OR_RETURN(uint64_t tile, tune::MacroValue(options, kTileMacro));
  FJ_ASSIGN_OR_RETURN(uint64_t ctas, tune::MacroValue(options, kCtasMacro));
  if (row < 16 || row > tile || tile > (1u << 20) || ctas < 1 || ctas > 32 ||
      threads < 32 || threads > 1024) {
    return absl::DataLossError(absl::StrCat(
        "copy shape out of range: '", macros, "', ", threads, " threads"));
  }
  return copy::CopyLaunchShape{
      static_cast<uint32_t>(row), static_cast<uint32_t>(tile),
      static_cast<int>(ctas), static_cast<int>(threads)};
}

// The candidates timed on the scratch window, each checked against the
// window's known contents (sampled rows), so a fast wrong shape never wins.
class CopyWindowBackend final : public TimedStreamBackend {
 public:
  CopyWindowBackend(const TuningParts& parts, Device& device,
                    copy::CopyKernels& kernels, jit::CopyImpl impl,
                    const std::atomic<bool>& cancel)
      : TimedStreamBackend(parts.owner, *parts.driver, device,
                           "tuning fj_copy's window kernel"),
        kernels_(kernels),
        impl_(impl),
        cancel_(cancel) {}

  ~CopyWindowBackend() override {
    if (abandoned()) return;  // a copy may still run into them
    (void)device_.MakeCurrent();
    for (CUdeviceptr p : {src_, dst_}) {
      if (p != 0) (void)api_.cuMemFree(p);
    }
  }

  absl::Status Open() {
    FJ_RETURN_IF_ERROR(OpenStream());
    const uint64_t src_bytes = uint64_t{kRows} * kSrcCols * 4;
    const uint64_t dst_bytes = uint64_t{kRows} * kCols * 4;
    FJ_RETURN_IF_ERROR(CheckCu(api_, api_.cuMemAlloc(&src_, src_bytes),
                               "cuMemAlloc (the tuning window's source)"));
    FJ_RETURN_IF_ERROR(CheckCu(api_, api_.cuMemAlloc(&dst_, dst_bytes),
                               "cuMemAlloc (the tuning window's destination)"));
    // src: 4 MiB of random words, then doubled in place until full.
    std::mt19937 rng(std::random_device{}());
    pattern_.resize(kPatternWords);
    for (uint32_t& w : pattern_) w = rng();
    FJ_RETURN_IF_ERROR(
        CheckCu(api_,
                api_.cuMemcpyHtoDAsync(src_, pattern_.data(), kPatternWords * 4,
                                       stream()),
                "cuMemcpyHtoDAsync (the tuning window's source)"));
    for (uint64_t filled = kPatternWords * 4; filled < src_bytes; filled *= 2) {
      FJ_RETURN_IF_ERROR(
          CheckCu(api_,
                  api_.cuMemcpyDtoDAsync(src_ + filled, src_,
                                         std::min(filled, src_bytes - filled),
                                         stream()),
                  "cuMemcpyDtoDAsync (the tuning window's source)"));
    }
    FJ_RETURN_IF_ERROR(Wait(absl::Seconds(30), "filling the window"));

    copy::CopySpec spec;
    const DlDtype f32{dlpack::kDLFloat, 32, 1};
    auto tensor = [&](CUdeviceptr address, const int64_t* shape) {
      return DlTensor{address,
                      dlpack::kDLCUDA,
                      device_.facts().ordinal,
                      2,
                      f32,
                      shape,
                      nullptr,
                      0};
    };
    spec.src = tensor(src_, src_shape_.data());
    spec.dst = tensor(dst_, dst_shape_.data());
    spec.start = {-1, kStartCol};
    spec.oob = fj::oob_zeros;
    spec.impl = impl_;
    spec.force_kernel = true;
    FJ_ASSIGN_OR_RETURN(copy_, copy::ValidateCopy(spec), "the tuning window");
    return absl::OkStatus();
  }

  // One module serves every candidate: LaunchCopy builds it at the first
  // check run.
  std::vector<absl::Status> BuildAll(
      const std::vector<tune::TuneCandidate>& candidates,
      const std::vector<bool>& wanted) override {
    std::vector<absl::Status> out(candidates.size());
    shapes_.resize(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!wanted[i]) continue;
      absl::StatusOr<copy::CopyLaunchShape> shape =
          ShapeOf(candidates[i].macros, candidates[i].shape.block[0]);
      if (shape.ok()) {
        shapes_[i] = *shape;
      } else {
        out[i] = shape.status();
      }
    }
    return out;
  }

  // dst is poisoned (all bits set: a NaN) before each check run.
  absl::Status RestoreOutputs() override {
    if (cancel_.load()) {
      return absl::CancelledError("the runtime is being destroyed");
    }
    FJ_RETURN_IF_ERROR(device_.MakeCurrent().status());
    FJ_RETURN_IF_ERROR(CheckCu(
        api_,
        api_.cuMemsetD8Async(dst_, 0xff, uint64_t{kRows} * kCols * 4, stream()),
        "cuMemsetD8Async (poisoning the tuning window)"));
    return Wait(absl::Seconds(30), "poisoning the window");
  }

  // Sampled rows of dst: the fill row, the last row and evenly between.
  absl::StatusOr<std::vector<std::string>> ReadOutputs() override {
    std::string host(size_t{kSampledRows} * kCols * 4, '\0');
    for (int s = 0; s < kSampledRows; ++s) {
      FJ_RETURN_IF_ERROR(CheckCu(
          api_,
          api_.cuMemcpyDtoHAsync(host.data() + size_t(s) * kCols * 4,
                                 dst_ + uint64_t(SampledRow(s)) * kCols * 4,
                                 kCols * 4, stream()),
          "cuMemcpyDtoHAsync (reading the tuning window)"));
    }
    FJ_RETURN_IF_ERROR(Wait(absl::Seconds(30), "reading the window"));
    return std::vector<std::string>{std::move(host)};
  }

  bool has_check() const override { return true; }
  absl::StatusOr<bool> Check(size_t,
                             const std::vector<std::string>& outputs) override {
    if (outputs.size() != 1 ||
        outputs[0].size() != size_t{kSampledRows} * kCols * 4) {
      return false;
    }
    const char* got = outputs[0].data();
    for (int s = 0; s < kSampledRows; ++s) {
      const int64_t r = SampledRow(s);
      for (int64_t c = 0; c < kCols; ++c) {
        uint32_t want = 0;  // row -1 of src: the fill
        if (r > 0) {
          const uint64_t flat = uint64_t(r - 1) * kSrcCols + kStartCol + c;
          want = pattern_[flat % kPatternWords];
        }
        uint32_t have;
        std::memcpy(&have, got + (size_t(s) * kCols + c) * 4, 4);
        if (have != want) return false;
      }
    }
    return true;
  }

 private:
  static int64_t SampledRow(int s) {
    return int64_t{s} * (kRows - 1) / (kSampledRows - 1);
  }

  absl::Status LaunchOne(size_t i) override {
    return kernels_.LaunchCopy(*copy_, copy_->src.address, false,
                               device_.facts().ordinal, stream(), shapes_[i]);
  }

  copy::CopyKernels& kernels_;
  const jit::CopyImpl impl_;
  const std::atomic<bool>& cancel_;
  CUdeviceptr src_ = 0, dst_ = 0;
  std::array<int64_t, 2> src_shape_ = {kRows, kSrcCols};
  std::array<int64_t, 2> dst_shape_ = {kRows, kCols};
  std::vector<uint32_t> pattern_;
  std::optional<copy::ValidatedCopy> copy_;
  std::vector<copy::CopyLaunchShape> shapes_;
};

}  // namespace

absl::StatusOr<copy::CopyLaunchShape> Tuning::CopyWindowShapeOf(
    const tune::TuneRow& row) {
  return ShapeOf(row.macros, row.block[0]);
}

absl::StatusOr<TuneOutcome> Tuning::TuneCopyWindow(int ordinal,
                                                   jit::CopyImpl impl) {
  const auto start = std::chrono::steady_clock::now();
  auto since = [&] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
        .count();
  };
  FJ_ASSIGN_OR_RETURN(DeviceReport report, parts_.describe(ordinal));
  FJ_ASSIGN_OR_RETURN(std::vector<tune::TuneCandidate> candidates,
                      tune::ExpandSpace(WindowSpace(
                          impl, std::max(1, report.facts->sm_count))));
  FJ_ASSIGN_OR_RETURN(absl::string_view source,
                      copy::CopyKernelSource("tile_copy.cu"));
  FJ_ASSIGN_OR_RETURN(BuildSpec build,
                      copy::TileCopyBuild(4, 2, ordinal, impl));
  tune::TuneKeyInputs in = TuneKeyOfDevice(report, impl, report.plan.target);
  in.source = std::string(source);
  in.options = build.options;
  in.kernel = std::string(copy::kTileCopyKernel);
  in.space =
      absl::StrCat(kWindowProblem, "\n", tune::CanonicalSpace(candidates));
  const CacheKey key = tune::MakeTuneKey(in);

  TuneOutcome outcome;
  outcome.key_digest = key.digest;
  std::shared_ptr<TuneFlight> flight =
      FindOrStartTuning(key, true, "fj_copy's window kernel", outcome);
  outcome.lookup_ms = since();
  CopyEngine& engine = parts_.copy();
  if (flight != nullptr) {
    struct EndFlight {
      Tuning* tuning;
      const std::string& digest;
      std::shared_ptr<TuneFlight> flight;
      ~EndFlight() { tuning->EndTuneFlight(digest, flight); }
    } end_flight{this, key.digest, flight};
    FJ_ASSIGN_OR_RETURN(Device * dev, device(ordinal));
    FJ_ASSIGN_OR_RETURN(outcome.record, [&] {
      CopyWindowBackend backend(parts_, *dev, engine.kernels(), impl,
                                copy_tune_cancel_);
      absl::Status opened = backend.Open();
      if (!opened.ok()) return absl::StatusOr<tune::TuneRecord>(opened);
      tune::TuneSettings settings;
      settings.samples = 11;
      settings.min_sample_us = 300;
      settings.max_batch = 8;
      absl::StatusOr<tune::TuneRecord> record =
          tune::RunTuning(candidates, settings, in.kernel, backend);
      // The scratch window is an eighth of a large copy, and wins of a few
      // percent on it did not carry over on the H200 (a cp_async shape
      // 1 % ahead there was 1 % behind on 2 GiB): the shipped shape stays
      // unless beaten clearly.
      if (record.ok()) tune::KeepFirstUnlessBeaten(*record, kShippedMargin);
      return record;
    }());
    if (!outcome.record.has_winner()) {
      return absl::NotFoundError(
          "tuning fj_copy's window kernel: no shape copied the window right");
    }
    if (!outcome.record.noisy) {
      StoreTuneRecord(key, outcome.record, report.plan.target, impl);
      outcome.stored = true;
    }
  }
  if (!outcome.record.has_winner()) {
    return absl::DataLossError("the stored copy shape names no winner");
  }
  const tune::TuneRow& win = outcome.record.rows[outcome.record.winner];
  FJ_ASSIGN_OR_RETURN(copy::CopyLaunchShape shape,
                      ShapeOf(win.macros, win.block[0]));
  // A noisy run is returned but not taken: the shipped shape stays.
  if (!outcome.record.noisy) engine.kernels().SetShape(ordinal, impl, shape);
  return outcome;
}

void Tuning::ScheduleCopyTune(int ordinal, jit::CopyImpl impl) {
  if (!parts_.copy_tune) return;
  {
    absl::MutexLock lock(&copy_tune_mu_);
    if (!copy_tune_asked_.emplace(ordinal, static_cast<int>(impl)).second) {
      return;
    }
  }
  parts_.builder->PostBackground([this, ordinal, impl] {
    if (copy_tune_cancel_.load()) return;
    // Relaxed: the first fj_copy may be inside the caller's stream capture,
    // and this job's allocations and synchronisations (of its own stream)
    // would otherwise invalidate a global-mode capture from this thread
    // (docs/launch.md, "Graph capture").
    absl::StatusOr<TuneOutcome> outcome = WithRelaxedCaptureMode(
        parts_.driver, [&] { return TuneCopyWindow(ordinal, impl); });
    const std::string what = absl::StrCat("fj_copy on device ", ordinal, " (",
                                          jit::CopyImplName(impl), "): ");
    if (!outcome.ok()) {
      parts_.logger->Log(LogLevel::kInfo,
                         absl::StrCat(what, "keeps the shipped launch shape: ",
                                      outcome.status().message()));
      return;
    }
    const tune::TuneRow& win = outcome->record.rows[outcome->record.winner];
    parts_.logger->Log(
        LogLevel::kInfo,
        absl::StrCat(
            what,
            outcome->record.noisy ? "keeps the shipped launch shape "
                                    "(the timings were noisy); "
                                  : "launch shape ",
            win.macros, ", ", win.block[0], " threads, ",
            outcome->source == CacheSource::kCompiled
                ? absl::StrCat("tuned in ",
                               static_cast<int>(outcome->record.tune_ms), " ms")
                : "from the cache"));
  });
}

}  // namespace fleetjit
