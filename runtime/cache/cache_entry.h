// The layout of one disk cache entry: a single self-checking file that holds
// the full key and the artifact together, so an entry's image and metadata
// can never come from two writers.
//
//   offset  size  field (integers little-endian)
//   0       8     magic "FJCACHE\0"
//   8       4     format version (kCacheFormatVersion)
//   12      4     flags, 0
//   16      8     key length K
//   24      8     payload length P
//   32      32    SHA-256 of the payload
//   64      K     canonical key (CacheKey::canonical)
//   64+K    P     payload: SerializeArtifact bytes
//
// The file is exactly 64 + K + P bytes. A reader compares the stored key
// with the key it looked up (catching a misplaced or colliding file and any
// damage to the key), checks the payload's checksum, and then parses the
// payload, which rejects anything malformed. Damage to the header shows up
// as a wrong magic, version, flag or length.
#ifndef FLEETJIT_RUNTIME_CACHE_CACHE_ENTRY_H_
#define FLEETJIT_RUNTIME_CACHE_CACHE_ENTRY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

inline constexpr size_t kCacheEntryHeaderBytes = 64;

std::string EncodeCacheEntry(absl::string_view canonical_key,
                             absl::string_view payload);
// The first kCacheEntryHeaderBytes of EncodeCacheEntry, for writers that
// write the key and payload from where they already are.
std::string EncodeCacheEntryHeader(absl::string_view canonical_key,
                                   absl::string_view payload);

struct CacheEntryHeader {
  uint64_t key_bytes = 0;
  uint64_t payload_bytes = 0;
  uint64_t file_bytes() const {
    return kCacheEntryHeaderBytes + key_bytes + payload_bytes;
  }
};

// Parses and checks the fixed header (magic, version, flags) and that the
// lengths add up to `file_bytes`. DATA_LOSS names what is wrong.
absl::StatusOr<CacheEntryHeader> DecodeCacheEntryHeader(
    absl::string_view header, uint64_t file_bytes);

struct CacheEntryView {
  absl::string_view key;
  absl::string_view payload;
};

// Checks a whole entry: header, lengths and the payload checksum. The
// views point into `bytes`. DATA_LOSS names what is wrong.
absl::StatusOr<CacheEntryView> DecodeCacheEntry(absl::string_view bytes);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_CACHE_ENTRY_H_
