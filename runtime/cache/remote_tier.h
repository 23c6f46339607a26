// The module cache's remote tier: entries shared by a fleet through Redis.
//
// ModuleCache reads memory -> disk -> remote and builds only when all three
// miss; a remote hit also fills the local disk tier. Builds are published
// asynchronously: Publish() queues the entry (a bounded queue, dropped when
// full) and one background thread writes it, so a build never waits for
// the network. Only Load()/LoadPublished() run on the caller's thread, on a
// cache miss of the local tiers; the launch path never touches this tier.
//
// Time. Every Redis call is bounded by the connect and command timeouts
// (50 ms each by default). A circuit breaker (circuit_breaker.h) opens after
// `breaker_failures` consecutive failures; while it is open, reads return
// "absent" at once and writes are dropped, and after `breaker_cooldown` one
// call probes the server. So a dead or hung Redis costs at most
// `breaker_failures` bounded calls, then nothing, per cooldown.
//
// Trust. The store is shared, so entries are signed: a value is
//
//   offset  size  field
//   0       8     magic "FJREMOT1"
//   8       32    HMAC-SHA256(fleet key, "<redis key name>\n" + body)
//   40      ...   body
//
// where the body of "<prefix>e:<digest>" is a cache entry exactly as on
// disk (cache_entry.h: full key, payload checksum, artifact), and the body
// of the pointer "<prefix>latest:<agnostic digest>" is the 64-hex digest of
// the full key it points to (cache_key.h, "Hosts without a compiler").
// Binding the key name into the MAC stops a valid value being replayed
// under another name. A value that is unsigned, signed with another key,
// truncated, too large, or whose entry does not carry the key looked up is
// refused, logged with the reason and counted in `rejected`; the caller
// rebuilds and the rebuild's publication replaces it. No fleet key, no
// remote tier: Create() refuses.
//
// Keys: "<prefix>e:<digest>" and "<prefix>latest:<agnostic digest>", each
// stored with SET ... [PX ttl]. One key per command, so the tier works on a
// Redis Cluster (see redis_client.h and docs/fleet-cache.md).
#ifndef FLEETJIT_RUNTIME_CACHE_REMOTE_TIER_H_
#define FLEETJIT_RUNTIME_CACHE_REMOTE_TIER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_key.h"
#include "runtime/cache/circuit_breaker.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/redis_client.h"

namespace fleetjit {

struct RemoteCacheConfig {
  // "" = no remote tier. redis://[[user]:password@]host[:port][/db] or
  // unix://[[user]:password@]/path.sock[?db=N]; overridden by
  // $FLEETJIT_REMOTE_CACHE (ApplyEnvironment, runtime/config.h). rediss://
  // is refused (hiredis 0.14 has no TLS).
  std::string url;
  // The HMAC key (hex, or raw bytes: see ParseFleetKey), at least 16
  // bytes; overridden by $FLEETJIT_FLEET_KEY. Required.
  std::string fleet_key;
  // The hiredis library dlopen'ed for the tier ("" = libhiredis.so.0.14;
  // FLEETJIT_LIBHIREDIS). Process-wide: the first tier's choice holds.
  std::string libhiredis_path;
  std::string prefix = "fleetjit:";
  uint64_t max_entry_bytes = uint64_t{64} << 20;  // larger: not published
  int64_t ttl_ms = 0;                             // 0 = no expiry
  int connect_timeout_ms = 50;
  int command_timeout_ms = 50;
  int breaker_failures = 3;        // consecutive failures that open it
  int breaker_cooldown_ms = 5000;  // then one probe
  int write_queue_entries = 64;    // queued publications, at most
  uint64_t write_queue_bytes = uint64_t{256} << 20;
  bool read = true;   // look entries up
  bool write = true;  // publish builds
};

struct RemoteCacheStats {
  uint64_t hits = 0;         // entries served (full or agnostic key)
  uint64_t misses = 0;       // asked, not there
  uint64_t errors = 0;       // calls that failed (timeout, I/O, error reply)
  uint64_t rejected = 0;     // values refused (signature, size, key, format)
  uint64_t skipped = 0;      // reads not sent: breaker open
  uint64_t writes = 0;       // entries published
  uint64_t write_drops = 0;  // not published: queue full, breaker open,
                             // too large, or the write failed
  uint64_t breaker_opens = 0;
  uint64_t redirects = 0;  // MOVED/ASK followed
  CircuitBreaker::State state = CircuitBreaker::State::kClosed;
};

class RemoteTier {
 public:
  // Checks the URL and the fleet key and loads hiredis; connects to
  // nothing and starts no thread. INVALID_ARGUMENT / UNIMPLEMENTED (URL),
  // FAILED_PRECONDITION (no fleet key), UNAVAILABLE (no hiredis). Messages
  // show the URL redacted.
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Create(
      const RemoteCacheConfig& config, CacheLogger log);
  // Writes what is queued (each write bounded by the timeouts; dropped at
  // once while the breaker is open), then stops the writer.
  ~RemoteTier();

  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // The artifact published under `key`, or nullopt (absent, refused,
  // unreachable). Never an error.
  std::optional<jit::Artifact> Load(const CacheKey& key);

  // For hosts without a compiler: follows the pointer of `agnostic`
  // (CompilerAgnosticKey) and returns the entry if its full key matches
  // `agnostic` but for the compiler and `accept(recorded compiler)` is OK.
  struct Published {
    CacheKey key;  // the entry's full key (its compiler recorded)
    jit::Artifact artifact;
  };
  std::optional<Published> LoadPublished(
      const CacheKey& agnostic,
      absl::FunctionRef<absl::Status(absl::string_view compiler)> accept);

  // Queues `artifact` for publication under `key` (and the pointer of its
  // agnostic key). Returns at once.
  void Publish(const CacheKey& key,
               std::shared_ptr<const jit::Artifact> artifact);

  // Waits until the queue is empty and no write is in flight, at most
  // `timeout`; false if it timed out.
  bool Flush(absl::Duration timeout);

  RemoteCacheStats stats() const;
  const RedisUrl& url() const { return url_; }

  // The wire format, for tests that forge or damage values.
  std::string EntryName(absl::string_view digest) const;
  std::string PointerName(absl::string_view agnostic_digest) const;
  static std::string Sign(absl::string_view fleet_key, absl::string_view name,
                          absl::string_view body);

 private:
  RemoteTier(const RemoteCacheConfig& config, RedisUrl url,
             std::string fleet_key, CacheLogger log);
  struct Write {
    CacheKey key;
    std::shared_ptr<const jit::Artifact> artifact;
    uint64_t bytes;
  };
  // The body of a signed value, or why it is refused.
  absl::StatusOr<absl::string_view> Open(absl::string_view name,
                                         absl::string_view value) const;
  // GET through the pool and the breaker. nullopt value: absent; an error
  // status: the call failed or was skipped (already counted).
  absl::StatusOr<std::optional<std::string>> Fetch(const std::string& name);
  // Counts and logs a refused value; returns nullopt for the caller.
  std::nullopt_t Reject(absl::string_view name, absl::string_view reason);
  void RecordCall(const absl::Status& status, absl::string_view what);
  std::unique_ptr<RedisClient> Acquire();
  void Release(std::unique_ptr<RedisClient> client);
  void WriterLoop();
  absl::Status WriteOne(RedisClient& client, const Write& write);

  const RemoteCacheConfig config_;
  const RedisUrl url_;
  const std::string fleet_key_;
  const CacheLogger log_;
  const RedisTimeouts timeouts_;
  CircuitBreaker breaker_;

  mutable absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<RedisClient>> idle_ ABSL_GUARDED_BY(pool_mu_);
  uint64_t redirects_ ABSL_GUARDED_BY(pool_mu_) = 0;

  mutable absl::Mutex queue_mu_;
  std::deque<Write> queue_ ABSL_GUARDED_BY(queue_mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(queue_mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread writer_;  // started by the first Publish

  std::atomic<uint64_t> hits_{0}, misses_{0}, errors_{0}, rejected_{0},
      skipped_{0}, writes_{0}, write_drops_{0};
  std::atomic<bool> failing_{false};  // logged "unreachable", not yet "back"
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_REMOTE_TIER_H_
