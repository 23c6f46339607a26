// A cache bundle: the entries of one or more cache folders in one read-only
// file, for hosts that build nothing and have no Redis (`fleetjit cache
// export FILE` writes one; FLEETJIT_CACHE_BUNDLE names the one a runtime
// serves from). docs/fleet-cache.md, "A bundle instead of Redis".
//
// Layout (integers little-endian):
//
//   offset  size    field
//   0       8       magic "FJBUNDL\0"
//   8       4       format version (kBundleFormatVersion)
//   12      4       flags: bit 0 = the seal is an HMAC-SHA256 under the fleet
//                   key; clear = the seal is a plain SHA-256 (a checksum)
//   16      8       entry count N
//   24      8       index offset X
//   32      32      the seal of "fleetjit bundle\n" + bytes [0, 32) + index
//   64      ...     the entries, back to back, each a cache entry exactly as
//                   the disk tier stores it (cache_entry.h)
//   X       N*112   the index, sorted by digest, one record per entry:
//                   32 digest (SHA-256 of its canonical key), 32 the digest
//                   of its compiler-agnostic key (cache_key.h), 32 its
//                   payload's SHA-256 (as its header holds it), 8 offset,
//                   8 length
//
// The file ends at X + 112 N. The seal covers the header and the index, and
// the index binds each entry: a served entry's key must hash to the index's
// digest and its payload to the index's payload digest (its own checksum,
// checked as the disk tier checks it), so no byte of an entry can change
// without the seal noticing, and opening a bundle hashes only its index
// whatever the size of its images.
//
// Trust. With a fleet key configured (FLEETJIT_FLEET_KEY, fleet_key), only
// a bundle sealed with that key is opened; anything else is refused whole.
// Without one, the file must be owned by the effective user or by root and
// writable by neither group nor others, as the disk tier asks of its
// folder; its seal is then a checksum. An entry is served only if it passes
// the disk tier's checks (entry format, stored key equal to the key looked
// up, payload checksum, a payload that parses); a bad entry is logged,
// counted and served by nothing else (the build goes on as a miss).
//
// Lookups take a full key (a host with NVRTC: its own compiler's output
// only) or a compiler-agnostic one (a host without NVRTC: the rule of
// cache_key.h, "Hosts without a compiler", with the bundle standing in for
// the remote tier's pointer record). The file is read with pread on one
// descriptor kept open, never mapped: a file truncated underneath makes
// entries unreadable (misses), never a SIGBUS. Thread-safe: immutable once
// opened.
#ifndef FLEETJIT_RUNTIME_CACHE_CACHE_BUNDLE_H_
#define FLEETJIT_RUNTIME_CACHE_CACHE_BUNDLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/files.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/cache_key.h"
#include "runtime/cache/disk_cache.h"

namespace fleetjit {

inline constexpr int kBundleFormatVersion = 1;
inline constexpr size_t kBundleHeaderBytes = 64;
inline constexpr size_t kBundleIndexRecordBytes = 112;

// Writes `entries` (each a whole cache entry, cache_entry.h) as a bundle at
// `path`: sealed with HMAC-SHA256 under `fleet_key` (the key's bytes, as
// ParseFleetKey gives them) when it is not empty, else with SHA-256. Every
// entry is checked first (format, checksum, a payload that parses);
// duplicates (same key) are written once. The file is written beside
// `path` under a temporary name, synced and renamed into place (mode 0644),
// replacing only a bundle: an existing `path` that is not one (or is a
// link) is left alone, FAILED_PRECONDITION. INVALID_ARGUMENT for a bad
// entry, UNAVAILABLE for an I/O error.
absl::Status WriteCacheBundle(const std::string& path,
                              const std::vector<std::string>& entries,
                              absl::string_view fleet_key);

class CacheBundle {
 public:
  // Opens `path` and checks its header, index and seal (see the file
  // comment); `fleet_key` is the configured key as text (ParseFleetKey), ""
  // for none. FAILED_PRECONDITION names why a bundle is refused (not
  // sealed with the fleet key, not owned safely, damaged), UNAVAILABLE
  // when it cannot be read, INVALID_ARGUMENT for a malformed fleet key.
  static absl::StatusOr<std::unique_ptr<CacheBundle>> Open(
      const std::string& path, absl::string_view fleet_key, CacheLogger log);

  CacheBundle(const CacheBundle&) = delete;
  CacheBundle& operator=(const CacheBundle&) = delete;

  // The artifact stored under `key` (its full canonical key), or nullopt:
  // absent, or refused (logged, counted in rejected()).
  std::optional<jit::Artifact> Load(const CacheKey& key);

  // For hosts without a compiler: the entry whose key equals `agnostic`
  // (a CompilerAgnosticKey) but for its compiler record, and whose recorded
  // compiler `accept` passes (published_compiler.h). The first such entry
  // in digest order; nullopt if none.
  struct Published {
    CacheKey key;  // the entry's full key
    jit::Artifact artifact;
  };
  std::optional<Published> LoadPublished(
      const CacheKey& agnostic,
      absl::FunctionRef<absl::Status(absl::string_view compiler)> accept);

  // Every entry, checked as a Load checks it (`fleetjit cache ls --bundle`).
  std::vector<CacheEntryInfo> List() const;

  const std::string& path() const { return path_; }
  size_t entries() const { return records_.size(); }
  uint64_t bytes() const { return file_bytes_; }
  bool sealed_with_key() const { return keyed_; }
  uint64_t rejected() const { return rejected_.load(); }

 private:
  struct Record {
    uint8_t digest[32];
    uint8_t agnostic[32];
    uint8_t payload_sha[32];
    uint64_t offset;
    uint64_t length;
  };
  CacheBundle(std::string path, files::Fd fd, uint64_t file_bytes, bool keyed,
              std::vector<Record> records, CacheLogger log);
  // One entry's bytes, and where its key and payload lie in them.
  struct Entry {
    std::string bytes;
    size_t key_bytes = 0;
    absl::string_view key() const {
      return absl::string_view(bytes).substr(kCacheEntryHeaderBytes, key_bytes);
    }
    absl::string_view payload() const {
      return absl::string_view(bytes).substr(kCacheEntryHeaderBytes +
                                             key_bytes);
    }
  };
  // The entry of `record` read and checked: it decodes as a cache entry
  // (header, lengths, payload checksum), its key hashes to the record's
  // digest and its payload to the record's payload digest. DATA_LOSS names
  // the problem; UNAVAILABLE: a read failed.
  absl::StatusOr<Entry> ReadEntry(const Record& record) const;
  std::nullopt_t Reject(const Record& record, absl::string_view why);

  const std::string path_;
  const files::Fd fd_;
  const uint64_t file_bytes_;
  const bool keyed_;
  const std::vector<Record> records_;  // sorted by digest
  std::vector<uint32_t> by_agnostic_;  // indices of records_, by agnostic
  const CacheLogger log_;
  std::atomic<uint64_t> rejected_{0};
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_CACHE_BUNDLE_H_
