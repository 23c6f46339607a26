// Checked opaque handles for the C ABI.
//
// A handle is not a pointer to the object: it encodes a slot index, the
// object's type and the slot's generation. Looking one up never dereferences
// the caller's value, so a destroyed, foreign or forged handle is detected
// (generation or type mismatch, index out of range) instead of crashing.
// Lookups take no lock; creating and destroying handles take one.
#ifndef FLEETJIT_CAPI_HANDLES_H_
#define FLEETJIT_CAPI_HANDLES_H_

#include <cstdint>

namespace fleetjit::capi {

enum class HandleType : uint8_t {
  kRuntime = 1,
  kModule = 2,
  kKernel = 3,
  kStream = 4,
  kBuild = 5,
  kTuneResult = 6,  // (since 1.3) capi/tune.cc
};

// Registers `object` and returns its handle value (never 0), or 0 if the
// table is full.
uint64_t RegisterHandle(HandleType type, void* object);
// The object behind `handle` if it is live and of `type`, else nullptr.
void* LookupHandle(uint64_t handle, HandleType type);
// Invalidates `handle` and returns its object (nullptr if not live).
void* ReleaseHandle(uint64_t handle, HandleType type);

template <typename Handle>
uint64_t HandleValue(const Handle* h) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(h));
}
template <typename Handle>
Handle* AsHandle(uint64_t value) {
  return reinterpret_cast<Handle*>(static_cast<uintptr_t>(value));
}

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_HANDLES_H_
