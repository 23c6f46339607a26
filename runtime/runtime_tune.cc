// fj_tune on the live device: the GPU backend of the tuning loop
// (tune/tuner.h) and the tuning entries' lookup and store.
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "runtime/copy/placement.h"
#include "runtime/launch/wire.h"
#include "runtime/runtime.h"
#include "runtime/tune_backend.h"

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
  GpuBackend(Runtime& rt, BuildPool& pool, const TuneRequest& request,
             Device& device)
      : TimedStreamBackend(rt, device, absl::StrCat("tuning ", request.kernel)),
        pool_(pool),
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
      Runtime* rt = &rt_;
      jobs[i] = pool_.Submit(
          [rt, spec = std::move(spec)] { return rt->BuildRecord(spec); });
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
      absl::StatusOr<LoadedKernel*> k =
          rt_.LoadKernel(records_[i], request_.kernel, request_.build.device);
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

  BuildPool& pool_;
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

// ---------------------------------------------------------- the base

TimedStreamBackend::~TimedStreamBackend() {
  // A candidate still running (deadline) keeps its stream: waiting for it
  // could take forever, so it is left behind.
  if (abandoned_) {
    (void)stream_.release();
    return;
  }
  (void)device_.MakeCurrent();
  for (CUevent e : {start_, stop_}) {
    if (e != nullptr) (void)api_.cuEventDestroy(e);
  }
  if (stream_ != nullptr) (void)stream_->Close();
}

absl::Status TimedStreamBackend::OpenStream() {
  FJ_RETURN_IF_ERROR(device_.poisoned());
  FJ_RETURN_IF_ERROR(device_.MakeCurrent().status());
  FJ_ASSIGN_OR_RETURN(stream_, Stream::Create(&rt_, api_, device_));
  FJ_CU_RETURN_IF_ERROR(api_, cuEventCreate, &start_, CU_EVENT_DEFAULT);
  return FJ_CU_CALL(api_, cuEventCreate, &stop_, CU_EVENT_DEFAULT);
}

absl::Status TimedStreamBackend::RunOnce(size_t i, absl::Duration deadline) {
  FJ_RETURN_IF_ERROR(LaunchOne(i));
  return Wait(deadline, "the check run");
}

absl::StatusOr<double> TimedStreamBackend::Time(size_t i, uint32_t count,
                                                absl::Duration deadline) {
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, start_, stream());
  for (uint32_t n = 0; n < count; ++n) FJ_RETURN_IF_ERROR(LaunchOne(i));
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, stop_, stream());
  FJ_RETURN_IF_ERROR(WaitEvent(stop_, deadline, "a timed sample"));
  float ms = 0;
  FJ_CU_RETURN_IF_ERROR(api_, cuEventElapsedTime, &ms, start_, stop_);
  return static_cast<double>(ms);
}

absl::Status TimedStreamBackend::Wait(absl::Duration deadline,
                                      absl::string_view what) {
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, stop_, stream());
  return WaitEvent(stop_, deadline, what);
}

absl::Status TimedStreamBackend::WaitEvent(CUevent event,
                                           absl::Duration deadline,
                                           absl::string_view what) {
  const std::string call = absl::StrCat(what_, ": ", what);
  if (api_.cuEventQuery == nullptr) {
    return CheckStickyError(device_, api_, api_.cuEventSynchronize(event),
                            call);
  }
  const auto end =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(deadline);
  auto pause = std::chrono::microseconds(2);
  while (true) {
    CUresult r = api_.cuEventQuery(event);
    if (r != CUDA_ERROR_NOT_READY) {
      return CheckStickyError(device_, api_, r, call);
    }
    if (std::chrono::steady_clock::now() >= end) {
      abandoned_ = true;
      return absl::DeadlineExceededError(absl::StrCat(
          call, " did not finish within ", absl::FormatDuration(deadline)));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

tune::TuneKeyInputs TuneKeyOfDevice(const DeviceReport& report,
                                    jit::CopyImpl impl,
                                    const jit::Target& target) {
  tune::TuneKeyInputs in;
  in.device_name = report.facts->name;
  in.sm_count = report.facts->sm_count;
  in.cc_major = report.facts->cc_major;
  in.cc_minor = report.facts->cc_minor;
  in.driver_version = report.driver_version;
  in.copy_impl = std::string(jit::CopyImplName(impl));
  in.target = target.Name();
  return in;
}

absl::StatusOr<CacheKey> Runtime::TuneKey(
    const TuneRequest& request, std::vector<tune::TuneCandidate>* out) {
  if (request.kernel.empty()) {
    return absl::InvalidArgumentError("kernel: empty kernel name");
  }
  FJ_ASSIGN_OR_RETURN(std::vector<tune::TuneCandidate> candidates,
                      tune::ExpandSpace(request.space));
  FJ_ASSIGN_OR_RETURN(DeviceReport report,
                      DescribeDevice(request.build.device));
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

std::shared_ptr<Runtime::TuneFlight> Runtime::FindOrStartTuning(
    const CacheKey& key, bool read_cache, absl::string_view name,
    TuneOutcome& outcome) {
  // Look up the key; when another call is tuning it, wait for that run and
  // look again. The loop ends with a hit or with this call as the one
  // tuning the key.
  while (true) {
    if (read_cache) {
      absl::StatusOr<ModuleCache::Result> found = cache_->Find(key);
      if (found.ok()) {
        absl::StatusOr<tune::TuneRecord> record =
            tune::RecordOfArtifact(*found->artifact);
        if (record.ok()) {
          outcome.record = *std::move(record);
          outcome.source = found->source;
          return nullptr;
        }
        logger_.Log(LogLevel::kWarn,
                    absl::StrCat("tune: ignoring the stored entry ",
                                 key.digest.substr(0, 12),
                                 "...: ", record.status().message()));
      }
    }
    std::shared_ptr<TuneFlight> running;
    {
      absl::MutexLock lock(&tune_mu_);
      auto [it, inserted] = tune_flights_.try_emplace(key.digest);
      if (inserted) {
        it->second = std::make_shared<TuneFlight>();
        return it->second;
      }
      running = it->second;
    }
    logger_.Log(LogLevel::kInfo,
                absl::StrCat("tune: ", name, " (", key.digest.substr(0, 12),
                             "...) is being tuned by another call; waiting "
                             "for its result"));
    running->done.WaitForNotification();
  }
}

void Runtime::EndTuneFlight(const std::string& digest,
                            const std::shared_ptr<TuneFlight>& flight) {
  {
    absl::MutexLock lock(&tune_mu_);
    tune_flights_.erase(digest);
  }
  flight->done.Notify();
}

void Runtime::StoreTuneRecord(const CacheKey& key,
                              const tune::TuneRecord& record,
                              const jit::Target& target, jit::CopyImpl impl) {
  absl::Status stored =
      cache_->Update(key, std::make_shared<const jit::Artifact>(
                              tune::TuneArtifact(record, target, impl)));
  if (!stored.ok()) {
    logger_.Log(LogLevel::kWarn,
                absl::StrCat("tune: not saved to disk: ", stored.message()));
  }
}

absl::StatusOr<TuneOutcome> Runtime::Tune(const TuneRequest& request) {
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
    Runtime* rt;
    const std::string& digest;
    std::shared_ptr<TuneFlight> flight;
    ~EndFlight() { rt->EndTuneFlight(digest, flight); }
  } end_flight{this, key.digest, flight};

  FJ_ASSIGN_OR_RETURN(Device * dev, device(request.build.device));
  // Relaxed: the tuning allocates and synchronises its own stream, none of
  // which joins a caller's stream capture (docs/launch.md, "Graph
  // capture"); in global mode it would invalidate one on any thread.
  FJ_ASSIGN_OR_RETURN(tune::TuneRecord record,
                      WithRelaxedCaptureMode(driver_.get(), [&] {
                        GpuBackend backend(*this, *build_pool_, request, *dev);
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
    FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan,
                        PlanForDevice(request.build.device));
    StoreTuneRecord(key, record, request.build.target.value_or(plan.target),
                    request.build.copy_impl.value_or(plan.impl));
    outcome.stored = true;
  }
  outcome.record = std::move(record);
  return outcome;
}

}  // namespace fleetjit
