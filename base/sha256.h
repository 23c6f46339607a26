// SHA-256 for the module cache: cache keys and entry checksums.
//
// A disk hit checksums the whole entry (image included, up to megabytes), so
// hashing speed is on the hit path. Where the CPU has the SHA extensions
// (x86 SHA-NI: Intel since Ice Lake/Goldmont, AMD since Zen) the block
// function uses them, about 1.5-2 GB/s; elsewhere a portable version runs at
// about a quarter of that. Both give identical digests (tests compare them).
//
//   Sha256 h;
//   h.Update(header);
//   h.Update(payload);
//   std::string hex = Sha256::Hex(h.Finish());
#ifndef FLEETJIT_BASE_SHA256_H_
#define FLEETJIT_BASE_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace fleetjit {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();

  void Update(const void* data, size_t size);
  void Update(absl::string_view data) { Update(data.data(), data.size()); }
  // Returns the digest; the object must not be updated afterwards.
  Digest Finish();

  static Digest Hash(absl::string_view data);
  // 64 lowercase hex characters.
  static std::string Hex(const Digest& digest);

 private:
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
  void (*compress_)(uint32_t state[8], const uint8_t* blocks, size_t count);
};

namespace internal {
// For tests and benchmarks: whether the hardware block function is used by
// Sha256 objects created from now on. Enabling it has no effect where the
// CPU lacks the instructions. Returns the previous setting.
bool UseSha256Hardware(bool enable);
bool Sha256HardwareAvailable();
}  // namespace internal

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_SHA256_H_
