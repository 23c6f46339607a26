#include "runtime/cache/cache_entry.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "runtime/cache/cache_key.h"

namespace fleetjit {
namespace {

constexpr char kMagic[8] = {'F', 'J', 'C', 'A', 'C', 'H', 'E', '\0'};
constexpr size_t kChecksumOffset = 32;

void PutLe(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

}  // namespace

std::string EncodeCacheEntryHeader(absl::string_view key,
                                   absl::string_view payload) {
  std::string out(kCacheEntryHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  PutLe(out.data() + 8, kCacheFormatVersion, 4);
  PutLe(out.data() + 12, 0, 4);
  PutLe(out.data() + 16, key.size(), 8);
  PutLe(out.data() + 24, payload.size(), 8);
  Sha256::Digest sum = Sha256::Hash(payload);
  std::memcpy(out.data() + kChecksumOffset, sum.data(), sum.size());
  return out;
}

std::string EncodeCacheEntry(absl::string_view key, absl::string_view payload) {
  std::string out = EncodeCacheEntryHeader(key, payload);
  out.reserve(out.size() + key.size() + payload.size());
  out.append(key.data(), key.size());
  out.append(payload.data(), payload.size());
  return out;
}

absl::StatusOr<CacheEntryHeader> DecodeCacheEntryHeader(
    absl::string_view header, uint64_t file_bytes) {
  if (header.size() < kCacheEntryHeaderBytes ||
      file_bytes < kCacheEntryHeaderBytes) {
    return absl::DataLossError(absl::StrCat("truncated: ", file_bytes,
                                            " bytes, shorter than the header"));
  }
  if (std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a fleetjit cache entry (bad magic)");
  }
  uint64_t version = GetLe(header.data() + 8, 4);
  if (version != kCacheFormatVersion) {
    return absl::DataLossError(absl::StrCat(
        "format version ", version, ", expected ", kCacheFormatVersion));
  }
  if (uint64_t flags = GetLe(header.data() + 12, 4); flags != 0) {
    return absl::DataLossError(absl::StrCat("unknown flags ", flags));
  }
  CacheEntryHeader h;
  h.key_bytes = GetLe(header.data() + 16, 8);
  h.payload_bytes = GetLe(header.data() + 24, 8);
  const uint64_t body = file_bytes - kCacheEntryHeaderBytes;
  if (h.key_bytes > body || h.payload_bytes != body - h.key_bytes) {
    return absl::DataLossError(
        absl::StrCat("length mismatch: header says ", h.key_bytes, " key + ",
                     h.payload_bytes, " payload bytes, file holds ", body,
                     " (truncated or damaged)"));
  }
  return h;
}

absl::StatusOr<CacheEntryView> DecodeCacheEntry(absl::string_view bytes) {
  absl::StatusOr<CacheEntryHeader> h =
      DecodeCacheEntryHeader(bytes, bytes.size());
  if (!h.ok()) return h.status();
  CacheEntryView view;
  view.key = bytes.substr(kCacheEntryHeaderBytes, h->key_bytes);
  view.payload =
      bytes.substr(kCacheEntryHeaderBytes + h->key_bytes, h->payload_bytes);
  Sha256::Digest sum = Sha256::Hash(view.payload);
  if (std::memcmp(bytes.data() + kChecksumOffset, sum.data(), sum.size()) !=
      0) {
    return absl::DataLossError("payload checksum mismatch (damaged)");
  }
  return view;
}

}  // namespace fleetjit
