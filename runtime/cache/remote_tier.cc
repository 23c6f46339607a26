#include "runtime/cache/remote_tier.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/hmac_sha256.h"
#include "platform/hiredis_api.h"
#include "runtime/cache/cache_entry.h"

namespace fleetjit {
namespace {

constexpr char kMagic[8] = {'F', 'J', 'R', 'E', 'M', 'O', 'T', '1'};
constexpr size_t kSignedHeaderBytes = 8 + 32;

uint64_t ArtifactBytes(const jit::Artifact& a) {
  return a.image.size() + a.ptx.size() + a.log.size() + a.thunk_object.size() +
         1024;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Create(
    const RemoteCacheConfig& config, CacheLogger log) {
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(config.url);
  if (!url.ok()) return url.status();
  if (config.fleet_key.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the remote cache ", url->Redacted(),
        " needs a fleet key to sign and check entries (the remote option "
        "fleet_key or FLEETJIT_FLEET_KEY, e.g. `openssl rand -hex 32`)"));
  }
  absl::StatusOr<std::string> key = ParseFleetKey(config.fleet_key);
  if (!key.ok()) return key.status();
  absl::StatusOr<const HiredisApi*> hiredis =
      LoadHiredis(config.libhiredis_path);
  if (!hiredis.ok()) return hiredis.status();
  return std::unique_ptr<RemoteTier>(
      new RemoteTier(config, *std::move(url), *std::move(key), std::move(log)));
}

RemoteTier::RemoteTier(const RemoteCacheConfig& config, RedisUrl url,
                       std::string fleet_key, CacheLogger log)
    : config_(config),
      url_(std::move(url)),
      fleet_key_(std::move(fleet_key)),
      log_(std::move(log)),
      timeouts_{absl::Milliseconds(config.connect_timeout_ms),
                absl::Milliseconds(config.command_timeout_ms)},
      breaker_(config.breaker_failures,
               absl::Milliseconds(config.breaker_cooldown_ms)) {}

RemoteTier::~RemoteTier() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

std::string RemoteTier::EntryName(absl::string_view digest) const {
  return absl::StrCat(config_.prefix, "e:", digest);
}

std::string RemoteTier::PointerName(absl::string_view agnostic_digest) const {
  return absl::StrCat(config_.prefix, "latest:", agnostic_digest);
}

std::string RemoteTier::Sign(absl::string_view fleet_key,
                             absl::string_view name, absl::string_view body) {
  HmacSha256 mac(fleet_key);
  mac.Update(name);
  mac.Update("\n");
  mac.Update(body);
  Sha256::Digest tag = mac.Finish();
  std::string out(kMagic, sizeof(kMagic));
  out.append(reinterpret_cast<const char*>(tag.data()), tag.size());
  out.append(body.data(), body.size());
  return out;
}

absl::StatusOr<absl::string_view> RemoteTier::Open(
    absl::string_view name, absl::string_view value) const {
  if (value.size() > config_.max_entry_bytes + kSignedHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        value.size(), " bytes, over the limit of ", config_.max_entry_bytes));
  }
  if (value.size() < kSignedHeaderBytes ||
      std::memcmp(value.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::PermissionDeniedError("unsigned (no fleetjit signature)");
  }
  absl::string_view body = value.substr(kSignedHeaderBytes);
  HmacSha256 mac(fleet_key_);
  mac.Update(name);
  mac.Update("\n");
  mac.Update(body);
  Sha256::Digest tag = mac.Finish();
  if (!ConstantTimeEquals(
          value.substr(sizeof(kMagic), tag.size()),
          absl::string_view(reinterpret_cast<const char*>(tag.data()),
                            tag.size()))) {
    return absl::PermissionDeniedError(
        "wrong signature (signed with another fleet key, or damaged)");
  }
  return body;
}

std::nullopt_t RemoteTier::Reject(absl::string_view name,
                                  absl::string_view reason) {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  CacheLog(log_, LogLevel::kWarn,
           absl::StrCat("refusing remote entry ", name, " from ",
                        url_.Redacted(), ": ", reason, "; rebuilding"));
  return std::nullopt;
}

void RemoteTier::RecordCall(const absl::Status& status,
                            absl::string_view what) {
  const CircuitBreaker::State before = breaker_.state();
  breaker_.Record(status.ok());
  if (status.ok()) {
    if (failing_.exchange(false)) {
      CacheLog(
          log_, LogLevel::kInfo,
          absl::StrCat("remote cache ", url_.Redacted(), " answers again"));
    }
    return;
  }
  errors_.fetch_add(1, std::memory_order_relaxed);
  // One line when trouble starts and one when the breaker opens, not one
  // per call: a dead server must not flood the log.
  const bool opened = before != CircuitBreaker::State::kOpen &&
                      breaker_.state() == CircuitBreaker::State::kOpen;
  if (!failing_.exchange(true) || opened) {
    CacheLog(
        log_, LogLevel::kWarn,
        absl::StrCat("remote cache ", what, ": ", status.message(),
                     opened ? absl::StrCat("; not asking it for ",
                                           config_.breaker_cooldown_ms, " ms")
                            : std::string()));
  }
}

std::unique_ptr<RedisClient> RemoteTier::Acquire() {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!idle_.empty()) {
      std::unique_ptr<RedisClient> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  return std::make_unique<RedisClient>(url_, timeouts_);
}

void RemoteTier::Release(std::unique_ptr<RedisClient> client) {
  absl::MutexLock lock(&pool_mu_);
  // Keep a few connections; concurrent misses beyond that connect anew.
  if (idle_.size() < 4) idle_.push_back(std::move(client));
}

absl::StatusOr<std::optional<std::string>> RemoteTier::Fetch(
    const std::string& name) {
  if (!breaker_.Allow()) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return absl::UnavailableError("breaker open");
  }
  std::unique_ptr<RedisClient> client = Acquire();
  const uint64_t redirects_before = client->redirects();
  absl::StatusOr<std::optional<std::string>> value = client->Get(name);
  {
    absl::MutexLock lock(&pool_mu_);
    redirects_ += client->redirects() - redirects_before;
  }
  // A failed call dropped its connection; the client reconnects on reuse.
  Release(std::move(client));
  RecordCall(value.status(), "read failed");
  return value;
}

std::optional<jit::Artifact> RemoteTier::Load(const CacheKey& key) {
  if (!config_.read) return std::nullopt;
  const std::string name = EntryName(key.digest);
  absl::StatusOr<std::optional<std::string>> value = Fetch(name);
  if (!value.ok()) return std::nullopt;
  if (!value->has_value()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  absl::StatusOr<absl::string_view> body = Open(name, **value);
  if (!body.ok()) return Reject(name, body.status().message());
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(*body);
  if (!entry.ok()) return Reject(name, entry.status().message());
  if (entry->key != key.canonical) {
    return Reject(name, "it holds another key");
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload);
  if (!artifact.ok()) {
    return Reject(name, artifact.status().message());
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return *std::move(artifact);
}

std::optional<RemoteTier::Published> RemoteTier::LoadPublished(
    const CacheKey& agnostic,
    absl::FunctionRef<absl::Status(absl::string_view compiler)> accept) {
  if (!config_.read) return std::nullopt;
  // 1. The pointer: which full key was published last for this build.
  const std::string pointer_name = PointerName(agnostic.digest);
  absl::StatusOr<std::optional<std::string>> pointer = Fetch(pointer_name);
  if (!pointer.ok()) return std::nullopt;
  if (!pointer->has_value()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  absl::StatusOr<absl::string_view> digest = Open(pointer_name, **pointer);
  if (!digest.ok()) {
    return Reject(pointer_name, digest.status().message());
  }
  if (!IsCacheDigest(*digest)) {
    return Reject(pointer_name, "not a digest");
  }
  // 2. The entry it names, checked like any entry...
  const std::string name = EntryName(*digest);
  absl::StatusOr<std::optional<std::string>> value = Fetch(name);
  if (!value.ok()) return std::nullopt;
  if (!value->has_value()) {
    misses_.fetch_add(1, std::memory_order_relaxed);  // expired or evicted
    return std::nullopt;
  }
  absl::StatusOr<absl::string_view> body = Open(name, **value);
  if (!body.ok()) return Reject(name, body.status().message());
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(*body);
  if (!entry.ok()) return Reject(name, entry.status().message());
  // 3. ...plus the rule of cache_key.h: everything but the compiler equal,
  // and a compiler whose output this host can use.
  absl::StatusOr<CacheKey> entry_agnostic = CompilerAgnosticKeyOf(entry->key);
  if (!entry_agnostic.ok() || entry_agnostic->canonical != agnostic.canonical) {
    return Reject(name,
                  "its key differs from the build's in more than the "
                  "compiler");
  }
  const std::string compiler = CanonicalKeyField(entry->key, "compiler");
  if (absl::Status ok = accept(compiler); !ok.ok()) {
    return Reject(name, ok.message());
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload);
  if (!artifact.ok()) {
    return Reject(name, artifact.status().message());
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  Published out;
  out.key.canonical = std::string(entry->key);
  out.key.digest = std::string(*digest);
  out.artifact = *std::move(artifact);
  return out;
}

void RemoteTier::Publish(const CacheKey& key,
                         std::shared_ptr<const jit::Artifact> artifact) {
  if (!config_.write || artifact == nullptr) return;
  const uint64_t bytes = ArtifactBytes(*artifact);
  absl::MutexLock lock(&queue_mu_);
  if (stopping_ ||
      static_cast<int>(queue_.size()) >= config_.write_queue_entries ||
      queued_bytes_ + bytes > config_.write_queue_bytes) {
    write_drops_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  queue_.push_back(Write{key, std::move(artifact), bytes});
  queued_bytes_ += bytes;
  if (!writer_.joinable()) writer_ = std::thread([this] { WriterLoop(); });
}

void RemoteTier::WriterLoop() {
  RedisClient client(url_, timeouts_);
  for (;;) {
    Write write;
    {
      absl::MutexLock lock(&queue_mu_);
      queue_mu_.Await(absl::Condition(
          +[](RemoteTier* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return !t->queue_.empty() || t->stopping_;
          },
          this));
      if (queue_.empty()) return;  // stopping, all written
      write = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= write.bytes;
      writing_ = true;
    }
    const uint64_t redirects_before = client.redirects();
    absl::Status written = WriteOne(client, write);
    (written.ok() ? writes_ : write_drops_)
        .fetch_add(1, std::memory_order_relaxed);
    {
      absl::MutexLock lock(&pool_mu_);
      redirects_ += client.redirects() - redirects_before;
    }
    absl::MutexLock lock(&queue_mu_);
    writing_ = false;
  }
}

absl::Status RemoteTier::WriteOne(RedisClient& client, const Write& write) {
  const std::string entry = EncodeCacheEntry(
      write.key.canonical, jit::SerializeArtifact(*write.artifact));
  if (entry.size() > config_.max_entry_bytes) {
    return absl::ResourceExhaustedError("entry over max_entry_bytes");
  }
  absl::StatusOr<CacheKey> agnostic =
      CompilerAgnosticKeyOf(write.key.canonical);
  if (!agnostic.ok()) return agnostic.status();
  if (!breaker_.Allow()) return absl::UnavailableError("breaker open");
  // The entry first, then the pointer to it: a reader that follows a
  // pointer finds its entry (unless it expired or was evicted since).
  const std::string name = EntryName(write.key.digest);
  absl::Status s =
      client.Set(name, Sign(fleet_key_, name, entry), config_.ttl_ms);
  if (s.ok()) {
    const std::string pointer = PointerName(agnostic->digest);
    s = client.Set(pointer, Sign(fleet_key_, pointer, write.key.digest),
                   config_.ttl_ms);
  }
  RecordCall(s, "write failed");
  return s;
}

bool RemoteTier::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&queue_mu_);
  return queue_mu_.AwaitWithTimeout(
      absl::Condition(
          +[](RemoteTier* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return t->queue_.empty() && !t->writing_;
          },
          this),
      timeout);
}

RemoteCacheStats RemoteTier::stats() const {
  RemoteCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.write_drops = write_drops_.load(std::memory_order_relaxed);
  s.breaker_opens = breaker_.opens();
  s.state = breaker_.state();
  {
    absl::MutexLock lock(&pool_mu_);
    s.redirects = redirects_;
  }
  return s;
}

}  // namespace fleetjit
