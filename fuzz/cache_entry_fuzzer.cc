// Fuzzes the disk cache's entry parser (runtime/cache/cache_entry.h), the
// canonical key parser (runtime/cache/cache_key.h) and the artifact decoder
// an entry's payload goes to. Entries come from disk, written by another
// process or damaged: every byte string must give a status, never a crash,
// and whatever parses must round-trip.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "jit/artifact.h"
#include "runtime/cache/cache_entry.h"
#include "runtime/cache/cache_key.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The whole entry, as the disk tier reads it.
  auto entry = fleetjit::DecodeCacheEntry(bytes);
  if (entry.ok()) {
    Check(entry->key.data() >= bytes.data() &&
          entry->key.data() + entry->key.size() <= bytes.data() + bytes.size());
    Check(entry->payload.data() + entry->payload.size() <=
          bytes.data() + bytes.size());
    // A decoded entry re-encodes to the same bytes.
    Check(fleetjit::EncodeCacheEntry(entry->key, entry->payload) == bytes);
    (void)fleetjit::ParseCanonicalKey(entry->key);
    (void)fleetjit::jit::DeserializeArtifact(entry->payload);
  }

  // The header alone, with the file size the input claims.
  if (size >= fleetjit::kCacheEntryHeaderBytes) {
    uint64_t claimed = size;
    if (size >= fleetjit::kCacheEntryHeaderBytes + 8) {
      memcpy(&claimed, data + fleetjit::kCacheEntryHeaderBytes, 8);
    }
    auto header = fleetjit::DecodeCacheEntryHeader(
        bytes.substr(0, fleetjit::kCacheEntryHeaderBytes), claimed);
    if (header.ok()) Check(header->file_bytes() == claimed);
  }

  // The input as a canonical key, and as an artifact.
  auto fields = fleetjit::ParseCanonicalKey(bytes);
  if (fields.ok()) {
    std::string again;
    for (const auto& [field, value] : *fields) {
      again += field + "=" + std::to_string(value.size()) + ":" + value + "\n";
    }
    // Re-encoded, the records parse back the same. (Not byte equality: the
    // length field is read with absl::SimpleAtoi, which also takes "+5",
    // "05" and surrounding spaces; harmless, since keys are compared as
    // bytes and parsed only for listings.)
    auto reparsed = fleetjit::ParseCanonicalKey(again);
    Check(reparsed.ok() && *reparsed == *fields);
    if (!fields->empty()) {
      (void)fleetjit::CanonicalKeyField(bytes, fields->front().first);
    }
  }
  (void)fleetjit::CanonicalKeyField(bytes, "target");
  (void)fleetjit::IsCacheDigest(bytes);
  auto artifact = fleetjit::jit::DeserializeArtifact(bytes);
  if (artifact.ok()) {
    // What decodes re-encodes to something that decodes the same way.
    std::string again = fleetjit::jit::SerializeArtifact(*artifact);
    auto twice = fleetjit::jit::DeserializeArtifact(again);
    Check(twice.ok());
    Check(fleetjit::jit::SerializeArtifact(*twice) == again);
  }

  // Any (key, payload) split of the input round-trips through an entry.
  if (size > 0) {
    size_t cut = data[0] % size;
    absl::string_view key = bytes.substr(1, cut),
                      payload = bytes.substr(1 + cut);
    std::string encoded = fleetjit::EncodeCacheEntry(key, payload);
    auto decoded = fleetjit::DecodeCacheEntry(encoded);
    Check(decoded.ok() && decoded->key == key && decoded->payload == payload);
  }
  return 0;
}
