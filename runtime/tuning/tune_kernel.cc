// fj_tune on the live device: the GPU backend of the tuning loop
// (tune/tuner.h), the key and the run (Tuning::Tune).
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runtime/copy/placement.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/wire.h"
#include "runtime/tuning/timed_stream_backend.h"
#include "runtime/tuning/tuning.h"

namespace fleetjit {
namespace {

using tune::TuneCandidate;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// The GPU backend: candidates built through the runtime's build pool and
// cache, launched with the caller's arguments on the base's stream.
class GpuBackend final : public TimedStreamBackend {
 public:
  GpuBackend(const TuningParts& parts, const TuneRequest& request,
             Device& device)
      : TimedStreamBackend(parts.owner, *parts.driver, device,
                           absl::StrCat("tuning ", request.kernel)),
        parts_(parts),
        request_(request) {}

  ~GpuBackend() override {
    // A candidate still running keeps the saved copies (see abandoned()).
    if (abandoned()) return;
    (void)device_.MakeCurrent();
    for (CUdeviceptr p : saved_) {
      if (p != 0) (void)api_.cuMemFree(p);
    }
  }

  absl::Status Open() {
    FJ_RETURN_IF_ERROR(OpenStream());
    // Save the outputs: every check run starts from them, and the caller
    // gets them back.
    for (size_t i = 0; i < request_.outputs.size(); ++i) {
      FJ_RETURN_IF_ERROR(CheckOutput(i));
    }
    for (const auto& [address, bytes] : request_.outputs) {
      CUdeviceptr p = 0;
      FJ_RETURN_IF_ERROR(CheckCu(api_, api_.cuMemAlloc(&p, bytes),
                                 "cuMemAlloc (a copy of an output buffer)"));
      saved_.push_back(p);
      FJ_RETURN_IF_ERROR(
          CheckCu(api_, api_.cuMemcpyDtoDAsync(p, address, bytes, stream()),
                  "cuMemcpyDtoDAsync (saving an output buffer)"));
    }
    return Wait(absl::Seconds(30), "saving the outputs");
  }

  // Output `i` is CUDA memory (device, managed or pinned host) and lies
  // inside one allocation: the buffers are saved, restored and read whole.
  absl::Status CheckOutput(size_t i) const {
    const auto& [address, bytes] = request_.outputs[i];
    const std::string name = absl::StrCat("outputs[", i, "]");
    if (bytes > UINT64_MAX - address) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: 0x%x + %u bytes runs past the end of the address space", name,
          address, bytes));
    }
    FJ_ASSIGN_OR_RETURN(copy::Placement p, copy::ClassifyAddress(api_, address),
                        name);
    if (p.kind == copy::MemoryKind::kPageableHost) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: 0x%x is not CUDA memory (the driver does not know it)", name,
          address));
    }
    if (p.allocation.size() > 0 &&
        (address < p.allocation.lo || bytes > p.allocation.hi - address)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %u bytes at 0x%x run outside its allocation [0x%x, 0x%x)", name,
          bytes, address, p.allocation.lo, p.allocation.hi));
    }
    return absl::OkStatus();
  }

  std::vector<absl::Status> BuildAll(const std::vector<TuneCandidate>& cands,
                                     const std::vector<bool>& wanted) override {
    std::vector<std::shared_ptr<BuildJob>> jobs(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!wanted[i]) continue;
      BuildSpec spec = request_.build;
      spec.options.insert(spec.options.end(), cands[i].options.begin(),
                          cands[i].options.end());
      ModuleBuilder* builder = parts_.builder;
      jobs[i] = parts_.build_pool->Submit([builder, spec = std::move(spec)] {
        return builder->BuildRecord(spec);
      });
    }
    std::vector<absl::Status> out(cands.size());
    kernels_.assign(cands.size(), nullptr);
    records_.resize(cands.size());
    candidates_ = &cands;
    for (size_t i = 0; i < cands.size(); ++i) {
      if (jobs[i] == nullptr) continue;
      absl::StatusOr<ModuleRecord> record = jobs[i]->Take();
      if (!record.ok()) {
        out[i] = record.status();
        continue;
      }
      records_[i] = *std::move(record);
      absl::StatusOr<LoadedKernel*> k = parts_.load_kernel(
          records_[i], request_.kernel, request_.build.device);
      if (!k.ok()) {
        out[i] = k.status();
        continue;
      }
      kernels_[i] = *k;
    }
    return out;
  }

  absl::Status RestoreOutputs() override {
    FJ_RETURN_IF_ERROR(device_.MakeCurrent().status());
    for (size_t b = 0; b < saved_.size(); ++b) {
      const auto& [address, bytes] = request_.outputs[b];
      FJ_RETURN_IF_ERROR(CheckCu(
          api_, api_.cuMemcpyDtoDAsync(address, saved_[b], bytes, stream()),
          "cuMemcpyDtoDAsync (restoring an output buffer)"));
    }
    return Wait(absl::Seconds(30), "restoring the outputs");
  }

  absl::StatusOr<std::vector<std::string>> ReadOutputs() override {
    std::vector<std::string> out;
    for (const auto& [address, bytes] : request_.outputs) {
      std::string host(bytes, '\0');
      FJ_RETURN_IF_ERROR(CheckCu(
          api_, api_.cuMemcpyDtoHAsync(host.data(), address, bytes, stream()),
          "cuMemcpyDtoHAsync (reading an output)"));
      FJ_RETURN_IF_ERROR(Wait(absl::Seconds(30), "reading the outputs"));
      out.push_back(std::move(host));
    }
    return out;
  }

  bool has_check() const override { return bool(request_.check); }
  absl::StatusOr<bool> Check(size_t i,
                             const std::vector<std::string>& outputs) override {
    return request_.check(i, outputs);
  }

 private:
  absl::Status LaunchOne(size_t i) override {
    const TuneCandidate& c = (*candidates_)[i];
    LaunchConfig cfg;
    for (int d = 0; d < 3; ++d) {
      cfg.grid[d] = c.grid[d];
      cfg.block[d] = c.shape.block[d];
      cfg.cluster[d] = c.shape.cluster[d];
    }
    cfg.shared_bytes = c.shape.shared_bytes;
    return LaunchAndNote(*kernels_[i], cfg, stream(), request_.args,
                         request_.num_args, request_.arg_stride);
  }

  const TuningParts& parts_;
  const TuneRequest& request_;
  std::vector<CUdeviceptr> saved_;
  const std::vector<TuneCandidate>* candidates_ = nullptr;
  std::vector<ModuleRecord> records_;
  std::vector<LoadedKernel*> kernels_;
};

std::string RowsSummary(const tune::TuneRecord& record) {
  std::string out;
  for (size_t i = 0; i < record.rows.size(); ++i) {
    const tune::TuneRow& r = record.rows[i];
    absl::StrAppend(&out, i == 0 ? "" : "; ", "candidate ", i, " ('", r.macros,
                    "', block ", r.block[0],
                    "): ", tune::RowStatusName(r.status),
                    r.message.empty() ? "" : absl::StrCat(": ", r.message));
  }
  return out;
}

}  // namespace

absl::StatusOr<CacheKey> Tuning::TuneKey(
    const TuneRequest& request, std::vector<tune::TuneCandidate>* out) {
  if (request.kernel.empty()) {
    return absl::InvalidArgumentError("kernel: empty kernel name");
  }
  FJ_ASSIGN_OR_RETURN(std::vector<tune::TuneCandidate> candidates,
                      tune::ExpandSpace(request.space));
  FJ_ASSIGN_OR_RETURN(DeviceReport report,
                      parts_.describe(request.build.device));
  jit::Target target = request.build.target.value_or(report.plan.target);
  jit::CopyImpl impl = request.build.copy_impl.value_or(report.plan.impl);
  tune::TuneKeyInputs in = TuneKeyOfDevice(report, impl, target);
  in.source = request.build.source;
  in.options = request.build.options;
  in.name_expressions = request.build.name_expressions;
  in.kernel = request.kernel;
  in.space = tune::CanonicalSpace(candidates);
  in.workload =
      CanonicalWorkload(request.args, request.num_args, request.arg_stride);
  if (out != nullptr) *out = std::move(candidates);
  return tune::MakeTuneKey(in);
}

absl::StatusOr<TuneOutcome> Tuning::Tune(const TuneRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<tune::TuneCandidate> candidates;
  FJ_ASSIGN_OR_RETURN(CacheKey key, TuneKey(request, &candidates));
  TuneOutcome outcome;
  outcome.key_digest = key.digest;
  std::shared_ptr<TuneFlight> flight =
      FindOrStartTuning(key, request.read_cache, request.kernel, outcome);
  outcome.lookup_ms = MsSince(start);
  if (flight == nullptr) return outcome;
  struct EndFlight {
    Tuning* tuning;
    const std::string& digest;
    std::shared_ptr<TuneFlight> flight;
    ~EndFlight() { tuning->EndTuneFlight(digest, flight); }
  } end_flight{this, key.digest, flight};

  FJ_ASSIGN_OR_RETURN(Device * dev, device(request.build.device));
  // Relaxed: the tuning allocates and synchronises its own stream, none of
  // which joins a caller's stream capture (docs/launch.md, "Graph
  // capture"); in global mode it would invalidate one on any thread.
  FJ_ASSIGN_OR_RETURN(tune::TuneRecord record,
                      WithRelaxedCaptureMode(parts_.driver, [&] {
                        GpuBackend backend(parts_, request, *dev);
                        absl::Status opened = backend.Open();
                        if (!opened.ok())
                          return absl::StatusOr<tune::TuneRecord>(opened);
                        return tune::RunTuning(candidates, request.settings,
                                               request.kernel, backend);
                      }));
  if (!record.has_winner()) {
    return absl::NotFoundError(
        absl::StrCat("tuning ", request.kernel,
                     ": no candidate ran correctly: ", RowsSummary(record)));
  }
  if (request.write_cache && !record.noisy) {
    FJ_ASSIGN_OR_RETURN(DeviceReport report,
                        parts_.describe(request.build.device));
    StoreTuneRecord(key, record,
                    request.build.target.value_or(report.plan.target),
                    request.build.copy_impl.value_or(report.plan.impl));
    outcome.stored = true;
  }
  outcome.record = std::move(record);
  return outcome;
}

}  // namespace fleetjit
