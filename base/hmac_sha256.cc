#include "base/hmac_sha256.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fleetjit {

HmacSha256::HmacSha256(absl::string_view key) {
  uint8_t block[64] = {};
  if (key.size() > sizeof(block)) {
    Sha256::Digest hashed = Sha256::Hash(key);
    std::memcpy(block, hashed.data(), hashed.size());
  } else {
    std::memcpy(block, key.data(), key.size());
  }
  uint8_t inner_pad[64];
  for (size_t i = 0; i < sizeof(block); ++i) {
    inner_pad[i] = block[i] ^ 0x36;
    outer_pad_[i] = block[i] ^ 0x5c;
  }
  inner_.Update(inner_pad, sizeof(inner_pad));
}

Sha256::Digest HmacSha256::Finish() {
  Sha256::Digest inner = inner_.Finish();
  Sha256 outer;
  outer.Update(outer_pad_, sizeof(outer_pad_));
  outer.Update(inner.data(), inner.size());
  return outer.Finish();
}

Sha256::Digest HmacSha256::Mac(absl::string_view key,
                               absl::string_view message) {
  HmacSha256 mac(key);
  mac.Update(message);
  return mac.Finish();
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

absl::StatusOr<std::string> ParseFleetKey(absl::string_view text) {
  constexpr size_t kMinBytes = 16;
  bool force_hex = absl::ConsumePrefix(&text, "hex:");
  bool force_raw = !force_hex && absl::ConsumePrefix(&text, "raw:");
  const bool looks_hex = text.size() % 2 == 0 && text.size() >= 2 * kMinBytes &&
                         std::all_of(text.begin(), text.end(), [](char c) {
                           return absl::ascii_isxdigit(c);
                         });
  std::string key;
  if (force_hex || (!force_raw && looks_hex)) {
    if (text.size() % 2 != 0 ||
        !std::all_of(text.begin(), text.end(),
                     [](char c) { return absl::ascii_isxdigit(c); })) {
      return absl::InvalidArgumentError(
          "the fleet key after 'hex:' is not an even number of hex digits");
    }
    key = absl::HexStringToBytes(text);
  } else {
    key = std::string(text);
  }
  if (key.size() < kMinBytes) {
    // The key itself is never part of a message.
    return absl::InvalidArgumentError(absl::StrCat(
        "the fleet key has ", key.size(), " bytes; at least ", kMinBytes,
        " are needed (e.g. 64 hex digits from `openssl rand -hex 32`)"));
  }
  return key;
}

}  // namespace fleetjit
