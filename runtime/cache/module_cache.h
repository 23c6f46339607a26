// The module cache: built artifacts by cache key, in memory and on disk.
//
// GetOrBuild looks in the memory tier, then the bundle (cache_bundle.h, when
// configured), the disk tier, then the remote tier (remote_tier.h, when
// configured), and only then calls `build`. Within a process one key is
// built once at a time (single flight): concurrent callers of a key wait for
// the one build and share its result, while distinct keys build in parallel
// (no lock is held around `build`). Across processes sharing a disk folder
// too: before it builds, a process takes the key's lock in the folder
// (DiskCache::LockKey); one that finds it held waits, at most
// CacheConfig::lock_wait_ms, then takes the entry its holder stored. A holder
// that dies (even by SIGKILL) frees the lock at once; one that outlasts the
// wait is built beside. Duplicate builds stay harmless: entries are published
// atomically and any one of them is a correct result.
//
//   ModuleCache cache(CacheConfig{});            // no I/O yet
//   CacheKey key = MakeCacheKey(inputs);
//   FJ_ASSIGN_OR_RETURN(ModuleCache::Result r,
//                       cache.GetOrBuild(key, [&] { return Compile(); }),
//                       "building 'saxpy.cu'");
//   UseImage(r.artifact->image);                 // r.source says where from
//
// A disk entry that fails any check is deleted (logged with the reason) and
// rebuilt: the caller sees a slower call, never an error and never a wrong
// kernel. A failed build is returned to every waiter and not cached. A hit
// never calls `build`, so it never loads NVRTC.
//
// The memory tier keeps every artifact for the cache's life (a process uses
// a bounded set of kernels; the runtime holds them loaded anyway).
//
// A memory hit writes no cache line that another thread writes: each thread
// looks in its own shard (base/thread_shards.h) under the shard's lock,
// counts the hit there, and copies the shard's own reference to the
// artifact (LocalReference), whose count no other shard touches. A shard
// learns a key from the shared map on its first hit, and Update and Clear
// take the key out of every shard before they return, so a shard never
// serves what the shared map no longer holds.
#ifndef FLEETJIT_RUNTIME_CACHE_MODULE_CACHE_H_
#define FLEETJIT_RUNTIME_CACHE_MODULE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/thread_shards.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_bundle.h"
#include "runtime/cache/cache_key.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/remote_tier.h"

namespace fleetjit {

struct CacheConfig {
  // "" = resolve: xdg_cache_home/fleetjit, else home/.cache/fleetjit (see
  // ResolveCacheDir). ApplyEnvironment (runtime/config.h) sets it from
  // $FLEETJIT_CACHE_DIR.
  std::string dir;
  // Where "" resolves: $XDG_CACHE_HOME and $HOME, filled by ApplyEnvironment
  // (the cache reads no environment); empty = unset.
  std::string xdg_cache_home;
  std::string home;
  uint64_t max_bytes = uint64_t{1} << 30;  // disk byte cap; 0 = default
  bool disk = true;
  bool memory = true;
  // The shared tier behind memory and disk; off unless remote.url is set.
  // A remote.url of file:///PATH names a bundle instead (see `bundle`).
  RemoteCacheConfig remote;
  // A cache bundle (cache_bundle.h) served read-only before the disk tier;
  // "" = none. FLEETJIT_CACHE_BUNDLE. Sealed bundles are checked with
  // remote.fleet_key (FLEETJIT_FLEET_KEY).
  std::string bundle;
  // How long a build waits for another process that builds the same key
  // into the same disk folder, before compiling it too; 0 = no
  // cross-process lock at all. FLEETJIT_BUILD_WAIT (seconds).
  int64_t lock_wait_ms = 120000;
  // Rejection, eviction and write-failure lines ("cache: ...", each at its
  // level: see CacheLog); a default Logger drops them (Runtime::Create
  // gives the cache its own Logger).
  Logger log;
};

enum class CacheSource { kCompiled, kMemory, kDisk, kRemote, kBundle };

// Counters of one ModuleCache, plus the disk directory's size now. Every
// GetOrBuild that returns an artifact counts once in memory_hits, disk_hits
// remote_hits or misses; a build that fails counts as a miss too.
struct CacheStats {
  uint64_t memory_hits = 0;     // served from memory (incl. waiters of a build)
  uint64_t disk_hits = 0;       // loaded from a disk entry
  uint64_t misses = 0;          // found in no tier: build() was called
  uint64_t compiles = 0;        // build() calls that succeeded
  double compile_ms_total = 0;  // wall time of those builds
  uint64_t evictions = 0;       // disk entries evicted by this process
  uint64_t rejected_entries = 0;  // disk entries refused and deleted
  uint64_t disk_entries = 0;
  uint64_t disk_bytes = 0;
  // The bundle (counted apart from disk_hits).
  uint64_t bundle_hits = 0;
  uint64_t bundle_rejected = 0;  // entries refused (damaged), not served
  uint64_t bundle_entries = 0;
  // Builds that found another process building their key and waited
  // (then took its entry from disk, or built it after all).
  uint64_t lock_waits = 0;
  double lock_wait_ms_total = 0;
  // The remote tier: off (not configured), unavailable (configured but
  // refused, e.g. no hiredis or no fleet key), or its breaker's state.
  // remote_state is its name for people: "off", "unavailable: <why>",
  // "closed", "open" or "half-open".
  enum class Remote { kOff, kUnavailable, kClosed, kOpen, kHalfOpen };
  Remote remote = Remote::kOff;
  std::string remote_state = "off";
  uint64_t remote_hits = 0;      // served from the remote tier
  uint64_t remote_misses = 0;    // asked, absent
  uint64_t remote_errors = 0;    // calls that failed or timed out
  uint64_t remote_rejected = 0;  // values refused (signature, key, size)
  uint64_t remote_skipped = 0;   // reads not sent: breaker open
  uint64_t remote_writes = 0;    // entries published
  uint64_t remote_write_drops = 0;
  uint64_t remote_breaker_opens = 0;
};

class ModuleCache {
 public:
  // Resolves the directory (from `config` alone); does no I/O until first use.
  explicit ModuleCache(CacheConfig config);
  ~ModuleCache();

  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  struct Result {
    std::shared_ptr<const jit::Artifact> artifact;
    CacheSource source;
    // Only with DiskStore::kDeferred: the artifact was built but not yet
    // written to disk; the caller owes an Update(key, ...) for it.
    bool disk_store_pending = false;
    // With disk_store_pending: the key's cross-process lock, which the
    // caller holds until that Update is done (other processes wait for the
    // entry rather than compile it). Null when there is none.
    std::shared_ptr<DiskCache::KeyLock> build_lock = nullptr;
  };

  // When a built artifact is written to the disk tier.
  enum class DiskStore {
    kNow,       // before GetOrBuild returns (and before waiters wake)
    kDeferred,  // by the caller, later, through Update (see Result)
  };

  // Memory tier -> disk tier -> build(). Errors only come from build().
  // Single flight holds either way: the memory tier has the artifact before
  // any waiter wakes, whatever `store` says. With kDeferred, other
  // processes cannot see the entry until the caller's Update; if this
  // process dies first they rebuild it (a duplicate build, never a wrong
  // or corrupt entry).
  absl::StatusOr<Result> GetOrBuild(
      const CacheKey& key,
      absl::FunctionRef<absl::StatusOr<jit::Artifact>()> build,
      DiskStore store = DiskStore::kNow);

  // Memory tier -> disk tier -> remote tier, never building: NOT_FOUND when
  // no tier has `key` (counted in no counter but the hit's). For entries
  // that are not builds: tuning results (runtime/tune/tune_record.h),
  // stored with Update.
  absl::StatusOr<Result> Find(const CacheKey& key);

  // For a host without a compiler (the rule in cache_key.h): the entry of
  // `agnostic_key` (CompilerAgnosticKey) from memory, disk, or the remote
  // tier's pointer record, taken only if `accept(recorded compiler)` is OK
  // (see published_compiler.h); a remote one is kept on disk under the
  // agnostic key. Single flight as in GetOrBuild. NOT_FOUND when no tier
  // has it (nothing is built: there is no compiler).
  absl::StatusOr<Result> GetPublished(
      const CacheKey& agnostic_key,
      absl::FunctionRef<absl::Status(absl::string_view compiler)> accept);

  // While one lives on a thread, builds there never wait for another
  // process's build of their key: they take its lock only if it is free,
  // else compile at once. The runtime's background worker holds one: its
  // queue holds the jobs that release this process's locks (deferred
  // stores), so a job waiting there for another process's lock could wait
  // on a process that waits on this one.
  class NoSiblingWaitScope {
   public:
    NoSiblingWaitScope();
    ~NoSiblingWaitScope();
    NoSiblingWaitScope(const NoSiblingWaitScope&) = delete;
    NoSiblingWaitScope& operator=(const NoSiblingWaitScope&) = delete;

   private:
    bool previous_;
  };

  // Waits (at most `timeout`) until the remote tier has written what was
  // queued; true if it did or there is no remote tier (`fleetjit build
  // --publish`).
  bool FlushRemote(absl::Duration timeout);
  // OK, or why the configured remote tier is off (UNAVAILABLE: no hiredis;
  // FAILED_PRECONDITION: no fleet key; INVALID_ARGUMENT: bad URL).
  const absl::Status& remote_status() const { return remote_status_; }

  // Each tier (memory, bundle, disk, remote), on or off, with why
  // (fleetjit info).
  // A tier that turned itself off was also logged at warn when the cache
  // was made.
  struct TierState {
    std::string tier;  // "memory", "bundle", "disk", "remote"
    bool on = false;
    std::string detail;  // where it is, or why it is off
  };
  std::vector<TierState> Tiers() const;

  // Replaces the entry of `key` with `artifact` (the same module, e.g. now
  // carrying its launch thunk object): the memory tier serves it to later
  // GetOrBuild calls (callers holding the previous artifact keep it), and
  // the disk tier publishes it by the usual temp file + fsync + rename, so
  // a reader sees the old entry or the new one, never a mix. With no memory
  // tier only the disk is written. The error, if any, is the disk write's
  // (logged once per cache like any write failure); the memory tier is
  // updated regardless. An Update racing Clear may leave the entry in place
  // after the clear: a valid entry, as if built just after it.
  absl::Status Update(const CacheKey& key,
                      std::shared_ptr<const jit::Artifact> artifact);

  // Precompiled headers (jit/nvrtc_pch.h) live in the disk tier alone, as
  // entries whose key names kPchNameExpression (never the memory or the
  // remote tier: a PCH only serves a build on this host, and is ~10 MB).
  // Checked, counted in the byte cap and evicted like module entries.
  // nullopt when there is no disk tier, no entry, or it was rejected.
  std::optional<jit::Artifact> LoadDiskOnly(const CacheKey& key);
  absl::Status StoreDiskOnly(const CacheKey& key,
                             const jit::Artifact& artifact);
  bool has_disk() const { return use_disk_; }

  // The counters, and disk_entries/disk_bytes from a scan of the directory
  // (cost grows with the number of entries: call it for reports, not per
  // build).
  CacheStats stats() const;

  // Empties the memory tier (builds in flight finish normally) and deletes
  // this directory's entries.
  absl::Status Clear();

  using EntryInfo = CacheEntryInfo;
  // The disk entries (for `fleetjit cache ls|verify`); with `verify`, each
  // is fully checked and `problem` says what is wrong.
  absl::StatusOr<std::vector<EntryInfo>> List(bool verify) const;

  // The resolved directory ("" when there is none).
  const std::string& dir() const;
  // The bundle, null when none is configured or it was refused
  // (bundle_status() then says why).
  const CacheBundle* bundle() const { return bundle_.get(); }
  const absl::Status& bundle_status() const { return bundle_status_; }

 private:
  struct Slot;
  // Gives `result` to the waiters of `slot` (the slot of `digest`), and
  // drops the slot from the memory tier unless it is a success to keep.
  void Publish(const std::string& digest, Slot& slot,
               absl::StatusOr<std::shared_ptr<const jit::Artifact>> result);
  // Memory tier, then single flight around `fill` (run by the leader).
  absl::StatusOr<Result> Get(const CacheKey& key,
                             absl::FunctionRef<absl::StatusOr<Result>()> fill);
  absl::StatusOr<Result> FillPublished(
      const CacheKey& agnostic_key,
      absl::FunctionRef<absl::Status(absl::string_view compiler)> accept);
  // Loads from disk or remote, or builds; the leader of a key's single flight.
  absl::StatusOr<Result> Fill(
      const CacheKey& key,
      absl::FunctionRef<absl::StatusOr<jit::Artifact>()> build,
      DiskStore store);
  // Writes `artifact` to the disk tier; logs the first failure.
  absl::Status StoreToDisk(const CacheKey& key, const jit::Artifact& artifact);

  // One thread's view of the memory tier: finished artifacts it has hit,
  // each held by a reference of this shard's own (see the file comment).
  // Lock order: a shard's mu, then mu_; never mu_ then a shard's.
  struct Shard {
    ShardMutex mu;
    absl::flat_hash_map<std::string, std::shared_ptr<const jit::Artifact>> hits
        ABSL_GUARDED_BY(mu);
    std::atomic<uint64_t> memory_hits{0};
  };
  Shard& ThisThreadsShard() { return *shards_[ThisThreadShard()]; }
  // Takes `digest` (every key when null) out of every shard. Called after
  // the shared map changed, without mu_ held.
  void ForgetInShards(const std::string* digest);

  const CacheConfig config_;
  const bool use_disk_;              // the disk tier is on and has a directory
  std::unique_ptr<DiskCache> disk_;  // also kept when off, for listings
  absl::Status remote_status_;       // why remote_ is null though configured
  std::unique_ptr<RemoteTier> remote_;
  absl::Status bundle_status_;  // why bundle_ is null though configured
  std::unique_ptr<CacheBundle> bundle_;

  mutable absl::Mutex mu_;
  // Digest -> finished artifact, or a build in flight.
  absl::flat_hash_map<std::string, std::shared_ptr<Slot>> slots_
      ABSL_GUARDED_BY(mu_);

  std::unique_ptr<CacheLinePadded<Shard>[]> shards_;

  std::atomic<uint64_t> disk_hits_{0}, remote_hits_{0}, bundle_hits_{0},
      misses_{0}, compiles_{0}, compile_us_total_{0}, lock_waits_{0},
      lock_wait_us_total_{0};
  std::atomic<bool> write_failure_logged_{false};
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_MODULE_CACHE_H_
