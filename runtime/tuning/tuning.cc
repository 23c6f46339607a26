// The tuning's state: the single flight of each tuning key, the store of
// its records, and the cancellation of the copy-shape tuning.
#include "runtime/tuning/tuning.h"

#include "absl/strings/str_cat.h"

namespace fleetjit {

std::shared_ptr<Tuning::TuneFlight> Tuning::FindOrStartTuning(
    const CacheKey& key, bool read_cache, absl::string_view name,
    TuneOutcome& outcome) {
  // Look up the key; when another call is tuning it, wait for that run and
  // look again. The loop ends with a hit or with this call as the one
  // tuning the key.
  while (true) {
    if (read_cache) {
      absl::StatusOr<ModuleCache::Result> found = parts_.cache->Find(key);
      if (found.ok()) {
        absl::StatusOr<tune::TuneRecord> record =
            tune::RecordOfArtifact(*found->artifact);
        if (record.ok()) {
          outcome.record = *std::move(record);
          outcome.source = found->source;
          return nullptr;
        }
        parts_.logger->Log(LogLevel::kWarn,
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
    parts_.logger->Log(
        LogLevel::kInfo,
        absl::StrCat("tune: ", name, " (", key.digest.substr(0, 12),
                     "...) is being tuned by another call; waiting "
                     "for its result"));
    running->done.WaitForNotification();
  }
}

void Tuning::EndTuneFlight(const std::string& digest,
                           const std::shared_ptr<TuneFlight>& flight) {
  {
    absl::MutexLock lock(&tune_mu_);
    tune_flights_.erase(digest);
  }
  flight->done.Notify();
}

void Tuning::StoreTuneRecord(const CacheKey& key,
                             const tune::TuneRecord& record,
                             const jit::Target& target, jit::CopyImpl impl) {
  absl::Status stored =
      parts_.cache->Update(key, std::make_shared<const jit::Artifact>(
                                    tune::TuneArtifact(record, target, impl)));
  if (!stored.ok()) {
    parts_.logger->Log(
        LogLevel::kWarn,
        absl::StrCat("tune: not saved to disk: ", stored.message()));
  }
}

bool Tuning::CancelCopyTuning() {
  copy_tune_cancel_.store(true);
  absl::MutexLock lock(&copy_tune_mu_);
  return !copy_tune_asked_.empty();
}

}  // namespace fleetjit
