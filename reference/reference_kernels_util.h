// What the reference-kernel problems (reference_kernels.cc,
// reference_kernels_attn.cc) share: an fj_status as an absl::Status, the
// return-if-error macro over it, and the device buffers a problem owns.
// Internal to reference/: the problems speak the C ABI only.
#ifndef FLEETJIT_REFERENCE_REFERENCE_KERNELS_UTIL_H_
#define FLEETJIT_REFERENCE_REFERENCE_KERNELS_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::refk {

#define REFK_RETURN_IF_ERROR(expr)       \
  do {                                   \
    absl::Status refk_st_ = (expr);      \
    if (!refk_st_.ok()) return refk_st_; \
  } while (0)

// An fj_status as an absl::Status ("what: CODE: message"), freeing it.
inline absl::Status Fj(fj_status* st, const std::string& what) {
  if (st == nullptr) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", fj_code_name(fj_status_code(st)),
                                 ": ", fj_status_message(st, nullptr));
  fj_status_free(st);
  return absl::InternalError(msg);
}

// Device buffers owned by a problem, freed with it.
class Buffers {
 public:
  Buffers(fj_runtime* rt, int device) : rt_(rt), device_(device) {}
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  ~Buffers() {
    for (uint64_t a : all_) fj_status_free(fj_mem_free(rt_, a));
  }
  absl::StatusOr<uint64_t> Alloc(uint64_t bytes) {
    uint64_t a = 0;
    REFK_RETURN_IF_ERROR(
        Fj(fj_mem_alloc(rt_, device_, bytes, &a), "fj_mem_alloc"));
    all_.push_back(a);
    return a;
  }
  absl::StatusOr<uint64_t> Upload(const void* host, uint64_t bytes) {
    absl::StatusOr<uint64_t> a = Alloc(bytes);
    if (!a.ok()) return a.status();
    REFK_RETURN_IF_ERROR(
        Fj(fj_memcpy_htod(rt_, *a, host, bytes, nullptr), "upload"));
    return *a;
  }
  absl::Status Fill(uint64_t a, unsigned char byte, uint64_t bytes) {
    return Fj(fj_memset_d8(rt_, a, byte, bytes, nullptr), "memset");
  }
  // NaN bytes (0xFF), so a kernel that skips an element is caught.
  absl::Status Poison(uint64_t a, uint64_t bytes) {
    return Fj(fj_memset_d8(rt_, a, 0xFF, bytes, nullptr), "poison");
  }
  absl::Status Download(void* host, uint64_t a, uint64_t bytes) {
    return Fj(fj_memcpy_dtoh(rt_, host, a, bytes, nullptr), "read back");
  }

 private:
  fj_runtime* rt_;
  int device_;
  std::vector<uint64_t> all_;
};

}  // namespace fleetjit::refk

#endif  // FLEETJIT_REFERENCE_REFERENCE_KERNELS_UTIL_H_
