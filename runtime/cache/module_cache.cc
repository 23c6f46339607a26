#include "runtime/cache/module_cache.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/cache/redis_client.h"

namespace fleetjit {
namespace {

std::string ResolvedDir(const CacheConfig& config) {
  return ResolveCacheDir(config.dir, config.xdg_cache_home, config.home);
}

constexpr absl::string_view kFileScheme = "file://";

// Set by NoSiblingWaitScope: builds on this thread never wait for a lock.
thread_local bool t_no_sibling_wait = false;

// A remote URL file:///PATH names a bundle (fj_runtime_options has one URL
// field for the fleet's tier); FLEETJIT_CACHE_BUNDLE, when set, wins.
CacheConfig WithBundleFromUrl(CacheConfig config) {
  if (absl::StartsWith(config.remote.url, kFileScheme)) {
    if (config.bundle.empty()) {
      config.bundle = config.remote.url.substr(kFileScheme.size());
    }
    config.remote.url.clear();
  }
  return config;
}

}  // namespace

// One key's state: a build in flight (done not yet notified) or its
// finished result. `result` is written once, before done.Notify().
struct ModuleCache::Slot {
  absl::Notification done;
  absl::StatusOr<std::shared_ptr<const jit::Artifact>> result;
};

ModuleCache::ModuleCache(CacheConfig config)
    : config_(WithBundleFromUrl(std::move(config))),
      use_disk_(config_.disk && !ResolvedDir(config_).empty()),
      disk_(std::make_unique<DiskCache>(ResolvedDir(config_), config_.max_bytes,
                                        config_.log)),
      shards_(new CacheLinePadded<Shard>[kThreadShards]) {
  if (!config_.remote.url.empty()) {
    // A remote tier that cannot start leaves the local tiers working; the
    // reason is logged once here and shown by stats().
    absl::StatusOr<std::unique_ptr<RemoteTier>> remote =
        RemoteTier::Create(config_.remote, config_.log);
    if (remote.ok()) {
      remote_ = *std::move(remote);
    } else {
      remote_status_ = remote.status();
      CacheLog(config_.log, LogLevel::kWarn,
               absl::StrCat("remote tier off: ", remote_status_.message()));
    }
  }
  if (!config_.bundle.empty()) {
    absl::StatusOr<std::unique_ptr<CacheBundle>> bundle = CacheBundle::Open(
        config_.bundle, config_.remote.fleet_key, config_.log);
    if (bundle.ok()) {
      bundle_ = *std::move(bundle);
    } else {
      bundle_status_ = bundle.status();
      CacheLog(config_.log, LogLevel::kWarn,
               absl::StrCat("bundle tier off: ", bundle_status_.message()));
    }
  }
  // A directory that is refused turns the disk tier off: say so now, at
  // warn, rather than at the first build.
  if (use_disk_) disk_->Health().IgnoreError();
}

std::vector<ModuleCache::TierState> ModuleCache::Tiers() const {
  std::vector<TierState> tiers;
  tiers.push_back({"memory", config_.memory,
                   config_.memory ? "this process" : "off by option"});
  if (config_.bundle.empty()) {
    tiers.push_back({"bundle", false,
                     "not configured (FLEETJIT_CACHE_BUNDLE, "
                     "docs/fleet-cache.md)"});
  } else if (bundle_ == nullptr) {
    tiers.push_back({"bundle", false, std::string(bundle_status_.message())});
  } else {
    tiers.push_back(
        {"bundle", true,
         absl::StrCat(bundle_->path(), ": ", bundle_->entries(), " entries, ",
                      bundle_->sealed_with_key()
                          ? "signed with the fleet key"
                          : "unsigned (trusted as its owner's file)")});
  }
  if (!config_.disk) {
    tiers.push_back({"disk", false,
                     "off by option (FLEETJIT_CACHE=0 or "
                     "FJ_RUNTIME_DISABLE_DISK_CACHE)"});
  } else if (!use_disk_) {
    tiers.push_back({"disk", false,
                     "no folder: set FLEETJIT_CACHE_DIR (neither "
                     "XDG_CACHE_HOME nor a home folder was found)"});
  } else if (absl::Status health = disk_->Health(); !health.ok()) {
    tiers.push_back({"disk", false, std::string(health.message())});
  } else {
    tiers.push_back({"disk", true, disk_->dir()});
  }
  if (config_.remote.url.empty()) {
    tiers.push_back({"remote", false,
                     "not configured (FLEETJIT_REMOTE_CACHE, "
                     "docs/fleet-cache.md)"});
  } else if (remote_ == nullptr) {
    tiers.push_back({"remote", false, std::string(remote_status_.message())});
  } else {
    tiers.push_back({"remote", true, RedactUrl(config_.remote.url)});
  }
  return tiers;
}

ModuleCache::~ModuleCache() = default;

ModuleCache::NoSiblingWaitScope::NoSiblingWaitScope()
    : previous_(t_no_sibling_wait) {
  t_no_sibling_wait = true;
}

ModuleCache::NoSiblingWaitScope::~NoSiblingWaitScope() {
  t_no_sibling_wait = previous_;
}

const std::string& ModuleCache::dir() const { return disk_->dir(); }

absl::StatusOr<ModuleCache::Result> ModuleCache::GetOrBuild(
    const CacheKey& key,
    absl::FunctionRef<absl::StatusOr<jit::Artifact>()> build, DiskStore store) {
  return Get(key, [&] { return Fill(key, build, store); });
}

absl::StatusOr<ModuleCache::Result> ModuleCache::Find(const CacheKey& key) {
  return Get(key, [&]() -> absl::StatusOr<Result> {
    if (bundle_ != nullptr) {
      if (std::optional<jit::Artifact> found = bundle_->Load(key)) {
        bundle_hits_.fetch_add(1, std::memory_order_relaxed);
        return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                      CacheSource::kBundle};
      }
    }
    if (use_disk_) {
      if (std::optional<jit::Artifact> found = disk_->Load(key)) {
        disk_hits_.fetch_add(1, std::memory_order_relaxed);
        return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                      CacheSource::kDisk};
      }
    }
    if (remote_ != nullptr) {
      if (std::optional<jit::Artifact> found = remote_->Load(key)) {
        remote_hits_.fetch_add(1, std::memory_order_relaxed);
        auto artifact =
            std::make_shared<const jit::Artifact>(std::move(*found));
        if (use_disk_) (void)StoreToDisk(key, *artifact);
        return Result{std::move(artifact), CacheSource::kRemote};
      }
    }
    return absl::NotFoundError(
        absl::StrCat("no cache entry ", key.digest.substr(0, 12), "..."));
  });
}

absl::StatusOr<ModuleCache::Result> ModuleCache::GetPublished(
    const CacheKey& agnostic_key,
    absl::FunctionRef<absl::Status(absl::string_view compiler)> accept) {
  return Get(agnostic_key, [&] { return FillPublished(agnostic_key, accept); });
}

absl::StatusOr<ModuleCache::Result> ModuleCache::Get(
    const CacheKey& key, absl::FunctionRef<absl::StatusOr<Result>()> fill) {
  // 1. The memory tier: this thread's shard, else the shared map (whose
  // finished artifact the shard then keeps a reference of its own to).
  Shard& shard = ThisThreadsShard();
  if (config_.memory) {
    ShardLock shard_lock(&shard.mu);
    auto hit = shard.hits.find(key.digest);
    if (hit != shard.hits.end()) {
      shard.memory_hits.fetch_add(1, std::memory_order_relaxed);
      return Result{hit->second, CacheSource::kMemory};
    }
    std::shared_ptr<const jit::Artifact> finished;
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = slots_.find(key.digest);
      if (it != slots_.end() && it->second->done.HasBeenNotified() &&
          it->second->result.ok()) {
        finished = *it->second->result;
      }
    }
    if (finished != nullptr) {
      // Under the shard's lock: an Update or Clear that changed the shared
      // map after the read above sweeps this shard after this insertion.
      std::shared_ptr<const jit::Artifact> mine =
          LocalReference(std::move(finished));
      shard.hits.emplace(key.digest, mine);
      shard.memory_hits.fetch_add(1, std::memory_order_relaxed);
      return Result{std::move(mine), CacheSource::kMemory};
    }
  }

  // 2. Join the key's build in flight, or lead one.
  std::shared_ptr<Slot> slot;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = slots_.try_emplace(key.digest);
    if (inserted) {
      it->second = std::make_shared<Slot>();
      leader = true;
    }
    slot = it->second;
  }
  if (!leader) {
    slot->done.WaitForNotification();
    if (!slot->result.ok()) return slot->result.status();
    shard.memory_hits.fetch_add(1, std::memory_order_relaxed);
    return Result{*slot->result, CacheSource::kMemory};
  }

  // 3. Lead: disk, remote, then build, then hand the result to the
  // waiters. If build() throws, the guard hands them an error so that they
  // never hang.
  struct ThrowGuard {
    ModuleCache* cache;
    const std::string& digest;
    Slot* slot;
    bool armed = true;
    ~ThrowGuard() {
      if (armed) {
        cache->Publish(
            digest, *slot,
            absl::InternalError("the module build threw an exception"));
      }
    }
  } guard{this, key.digest, slot.get()};
  absl::StatusOr<Result> outcome = fill();
  guard.armed = false;
  if (outcome.ok()) {
    Publish(key.digest, *slot, outcome->artifact);
  } else {
    Publish(key.digest, *slot, outcome.status());
  }
  return outcome;
}

void ModuleCache::Publish(
    const std::string& digest, Slot& slot,
    absl::StatusOr<std::shared_ptr<const jit::Artifact>> result) {
  // Only a success is kept (and only with a memory tier); a failure is
  // removed first, so the next caller builds again.
  if (!result.ok() || !config_.memory) {
    absl::MutexLock lock(&mu_);
    auto it = slots_.find(digest);
    if (it != slots_.end() && it->second.get() == &slot) slots_.erase(it);
  }
  slot.result = std::move(result);
  slot.done.Notify();
}

absl::StatusOr<ModuleCache::Result> ModuleCache::Fill(
    const CacheKey& key,
    absl::FunctionRef<absl::StatusOr<jit::Artifact>()> build, DiskStore store) {
  if (bundle_ != nullptr) {
    if (std::optional<jit::Artifact> found = bundle_->Load(key)) {
      bundle_hits_.fetch_add(1, std::memory_order_relaxed);
      return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                    CacheSource::kBundle};
    }
  }
  bool on_disk = false;  // a file stood under the entry's name
  if (use_disk_) {
    if (std::optional<jit::Artifact> found = disk_->Load(key, &on_disk)) {
      disk_hits_.fetch_add(1, std::memory_order_relaxed);
      return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                    CacheSource::kDisk};
    }
  }
  if (remote_ != nullptr) {
    if (std::optional<jit::Artifact> found = remote_->Load(key)) {
      remote_hits_.fetch_add(1, std::memory_order_relaxed);
      auto artifact = std::make_shared<const jit::Artifact>(std::move(*found));
      if (use_disk_) (void)StoreToDisk(key, *artifact);
      return Result{std::move(artifact), CacheSource::kRemote};
    }
  }
  // Across processes: one builds the key into this folder, the others wait
  // for its entry (module_cache.h).
  std::unique_ptr<DiskCache::KeyLock> lock;
  if (use_disk_ && config_.lock_wait_ms > 0) {
    const auto wait_start = std::chrono::steady_clock::now();
    DiskCache::LockResult locked = disk_->LockKey(
        key.digest,
        t_no_sibling_wait
            ? absl::InfinitePast()
            : absl::Now() + absl::Milliseconds(config_.lock_wait_ms));
    if (locked.waited) {
      lock_waits_.fetch_add(1, std::memory_order_relaxed);
      lock_wait_us_total_.fetch_add(
          std::chrono::duration_cast<std::chrono::microseconds>(
              std::chrono::steady_clock::now() - wait_start)
              .count(),
          std::memory_order_relaxed);
    }
    // The holder before us stored the entry, or one that finished between
    // our look and our lock (where there was none: a file refused just now
    // is not looked at twice).
    if (locked.waited || (locked.lock != nullptr && !on_disk)) {
      if (std::optional<jit::Artifact> found = disk_->Load(key)) {
        disk_hits_.fetch_add(1, std::memory_order_relaxed);
        return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                      CacheSource::kDisk};
      }
    }
    if (locked.lock == nullptr && locked.waited) {
      CacheLog(config_.log, LogLevel::kInfo,
               absl::StrCat("building ", key.digest.substr(0, 12),
                            "... without waiting longer for another process: ",
                            locked.why_none));
    }
    lock = std::move(locked.lock);
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<jit::Artifact> built = build();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (!built.ok()) return built.status();
  compiles_.fetch_add(1, std::memory_order_relaxed);
  compile_us_total_.fetch_add(
      std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count(),
      std::memory_order_relaxed);

  auto artifact = std::make_shared<const jit::Artifact>(std::move(*built));
  bool pending = false;
  if (use_disk_ || remote_ != nullptr) {
    if (store == DiskStore::kDeferred) {
      pending = true;
    } else {
      if (use_disk_) (void)StoreToDisk(key, *artifact);
      if (remote_ != nullptr) remote_->Publish(key, artifact);
    }
  }
  // Released here once the entry is on disk, else by the caller after its
  // Update.
  return Result{
      std::move(artifact), CacheSource::kCompiled, pending,
      pending ? std::shared_ptr<DiskCache::KeyLock>(std::move(lock)) : nullptr};
}

absl::StatusOr<ModuleCache::Result> ModuleCache::FillPublished(
    const CacheKey& agnostic_key,
    absl::FunctionRef<absl::Status(absl::string_view compiler)> accept) {
  if (bundle_ != nullptr) {
    if (std::optional<CacheBundle::Published> found =
            bundle_->LoadPublished(agnostic_key, accept)) {
      bundle_hits_.fetch_add(1, std::memory_order_relaxed);
      return Result{
          std::make_shared<const jit::Artifact>(std::move(found->artifact)),
          CacheSource::kBundle};
    }
  }
  // The disk holds agnostic keys only as this function wrote them, after
  // the checks below.
  if (use_disk_) {
    if (std::optional<jit::Artifact> found = disk_->Load(agnostic_key)) {
      disk_hits_.fetch_add(1, std::memory_order_relaxed);
      return Result{std::make_shared<const jit::Artifact>(std::move(*found)),
                    CacheSource::kDisk};
    }
  }
  if (remote_ != nullptr) {
    if (std::optional<RemoteTier::Published> found =
            remote_->LoadPublished(agnostic_key, accept)) {
      remote_hits_.fetch_add(1, std::memory_order_relaxed);
      auto artifact =
          std::make_shared<const jit::Artifact>(std::move(found->artifact));
      if (use_disk_) (void)StoreToDisk(agnostic_key, *artifact);
      return Result{std::move(artifact), CacheSource::kRemote};
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  // Where it was looked for, and why a configured tier was not asked.
  std::string where = bundle_ != nullptr
                          ? absl::StrCat("the bundle ", bundle_->path(), ", ")
                          : "";
  absl::StrAppend(&where,
                  remote_ != nullptr ? "the local or remote cache"
                  : remote_status_.ok()
                      ? "the local cache (no remote tier is configured)"
                      : absl::StrCat("the local cache (remote tier off: ",
                                     remote_status_.message(), ")"));
  if (!bundle_status_.ok()) {
    absl::StrAppend(&where, " (bundle off: ", bundle_status_.message(), ")");
  }
  return absl::NotFoundError(absl::StrCat("no published entry for this build (",
                                          agnostic_key.digest.substr(0, 12),
                                          "...) in ", where));
}

bool ModuleCache::FlushRemote(absl::Duration timeout) {
  return remote_ == nullptr || remote_->Flush(timeout);
}

std::optional<jit::Artifact> ModuleCache::LoadDiskOnly(const CacheKey& key) {
  if (!use_disk_) return std::nullopt;
  return disk_->Load(key);
}

absl::Status ModuleCache::StoreDiskOnly(const CacheKey& key,
                                        const jit::Artifact& artifact) {
  if (!use_disk_) return absl::OkStatus();
  return StoreToDisk(key, artifact);
}

absl::Status ModuleCache::StoreToDisk(const CacheKey& key,
                                      const jit::Artifact& artifact) {
  absl::Status stored = disk_->Store(key, artifact);
  // A cache that cannot be written still serves this process (memory
  // tier); say so once rather than on every build. FAILED_PRECONDITION
  // means the disk tier refused its directory and already said why.
  if (!stored.ok() && stored.code() != absl::StatusCode::kFailedPrecondition &&
      !write_failure_logged_.exchange(true)) {
    CacheLog(config_.log, LogLevel::kWarn,
             absl::StrCat("not saving to the disk cache: ", stored.message(),
                          " (further write failures are not logged)"));
  }
  return stored;
}

absl::Status ModuleCache::Update(
    const CacheKey& key, std::shared_ptr<const jit::Artifact> artifact) {
  if (artifact == nullptr) {
    return absl::InvalidArgumentError("ModuleCache::Update: no artifact");
  }
  if (config_.memory) {
    auto slot = std::make_shared<Slot>();
    slot->result = artifact;
    slot->done.Notify();
    {
      absl::MutexLock lock(&mu_);
      auto it = slots_.find(key.digest);
      if (it == slots_.end()) {
        slots_.emplace(key.digest, std::move(slot));
      } else if (it->second->done.HasBeenNotified()) {
        // Readers that copied the old slot keep its artifact alive.
        it->second = std::move(slot);
      }
      // A build of the key in flight (possible only after Clear) publishes
      // its own result, an equally valid entry; it is left alone.
    }
    // The shards learn the new artifact on their next hit.
    ForgetInShards(&key.digest);
  }
  if (remote_ != nullptr) remote_->Publish(key, artifact);
  if (!use_disk_) return absl::OkStatus();
  return StoreToDisk(key, *artifact);
}

CacheStats ModuleCache::stats() const {
  CacheStats s;
  for (int i = 0; i < kThreadShards; ++i) {
    s.memory_hits += shards_[i]->memory_hits.load(std::memory_order_relaxed);
  }
  s.disk_hits = disk_hits_.load(std::memory_order_relaxed);
  s.bundle_hits = bundle_hits_.load(std::memory_order_relaxed);
  if (bundle_ != nullptr) {
    s.bundle_rejected = bundle_->rejected();
    s.bundle_entries = bundle_->entries();
  }
  s.lock_waits = lock_waits_.load(std::memory_order_relaxed);
  s.lock_wait_ms_total =
      lock_wait_us_total_.load(std::memory_order_relaxed) / 1000.0;
  s.misses = misses_.load(std::memory_order_relaxed);
  s.compiles = compiles_.load(std::memory_order_relaxed);
  s.compile_ms_total =
      compile_us_total_.load(std::memory_order_relaxed) / 1000.0;
  if (use_disk_) {
    s.evictions = disk_->evictions();
    s.rejected_entries = disk_->rejected_entries();
    DiskCache::Usage usage = disk_->Scan();
    s.disk_entries = usage.entries;
    s.disk_bytes = usage.bytes;
  }
  if (remote_ != nullptr) {
    RemoteCacheStats r = remote_->stats();
    switch (r.state) {  // no default: a new breaker state needs a decision
      case CircuitBreaker::State::kClosed:
        s.remote = CacheStats::Remote::kClosed;
        break;
      case CircuitBreaker::State::kOpen:
        s.remote = CacheStats::Remote::kOpen;
        break;
      case CircuitBreaker::State::kHalfOpen:
        s.remote = CacheStats::Remote::kHalfOpen;
        break;
    }
    s.remote_state = CircuitBreakerStateName(r.state);
    s.remote_hits = remote_hits_.load(std::memory_order_relaxed);
    s.remote_misses = r.misses;
    s.remote_errors = r.errors;
    s.remote_rejected = r.rejected;
    s.remote_skipped = r.skipped;
    s.remote_writes = r.writes;
    s.remote_write_drops = r.write_drops;
    s.remote_breaker_opens = r.breaker_opens;
  } else if (!remote_status_.ok()) {
    s.remote = CacheStats::Remote::kUnavailable;
    s.remote_state = absl::StrCat("unavailable: ", remote_status_.message());
  }
  return s;
}

absl::Status ModuleCache::Clear() {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      // Builds in flight stay: their leader and waiters finish normally.
      auto current = it++;
      if (current->second->done.HasBeenNotified()) slots_.erase(current);
    }
  }
  ForgetInShards(nullptr);
  return use_disk_ ? disk_->Clear() : absl::OkStatus();
}

void ModuleCache::ForgetInShards(const std::string* digest) {
  for (int i = 0; i < kThreadShards; ++i) {
    Shard& shard = *shards_[i];
    ShardLock lock(&shard.mu);
    if (digest == nullptr) {
      shard.hits.clear();
    } else {
      shard.hits.erase(*digest);
    }
  }
}

absl::StatusOr<std::vector<ModuleCache::EntryInfo>> ModuleCache::List(
    bool verify) const {
  if (disk_->dir().empty()) return std::vector<EntryInfo>();
  return disk_->List(verify);
}

}  // namespace fleetjit
