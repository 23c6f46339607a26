// HMAC-SHA256 (RFC 2104 over FIPS 180-4 SHA-256, checked against RFC 4231):
// signs the entries of the shared remote cache tier with the fleet key, so a
// host only runs code that a holder of the key published.
//
//   Sha256::Digest tag = HmacSha256::Mac(fleet_key, message);
//   if (!DigestsEqual(tag, stored_tag)) { /* refuse */ }
//
// Incremental use, for a message in pieces:
//
//   HmacSha256 mac(fleet_key);
//   mac.Update(redis_key);
//   mac.Update(entry);
//   Sha256::Digest tag = mac.Finish();
//
// Keys longer than the 64-byte block are first hashed, as the RFC says.
// Compare tags only with ConstantTimeEquals: a comparison that stops at the
// first differing byte tells an attacker how much of a forged tag is right.
#ifndef FLEETJIT_BASE_HMAC_SHA256_H_
#define FLEETJIT_BASE_HMAC_SHA256_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"

namespace fleetjit {

class HmacSha256 {
 public:
  explicit HmacSha256(absl::string_view key);

  void Update(absl::string_view data) { inner_.Update(data); }
  // Returns the tag; the object must not be updated afterwards.
  Sha256::Digest Finish();

  static Sha256::Digest Mac(absl::string_view key, absl::string_view message);

 private:
  Sha256 inner_;
  uint8_t outer_pad_[64];
};

// True if `a` and `b` have the same length and bytes; the time taken
// depends only on the length.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// A key given as text (an option or FLEETJIT_FLEET_KEY): an even number of
// hex digits, at least 32 (16 bytes), is decoded ("hex:" in front forces
// hex); anything else ("raw:" in front forces it) is the key's bytes as
// written. INVALID_ARGUMENT for an empty key or one under 16 bytes: a short
// fleet key is guessable, and it guards executable code.
absl::StatusOr<std::string> ParseFleetKey(absl::string_view text);

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_HMAC_SHA256_H_
