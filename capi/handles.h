// Checked opaque handles for the C ABI.
//
// A handle is not a pointer to the object: it encodes a slot index, the
// object's type and the slot's generation. Looking one up never dereferences
// the caller's value, so a destroyed, foreign or forged handle is detected
// (generation or type mismatch, index out of range) instead of crashing.
// Lookups take no lock; creating and destroying handles take one.
#ifndef FLEETJIT_CAPI_HANDLES_H_
#define FLEETJIT_CAPI_HANDLES_H_

#include <atomic>
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
inline void* LookupHandle(uint64_t handle, HandleType type);
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

namespace handle_table {

// Layout of a handle value: | generation:32 | type:8 | index+1:24 |.
constexpr int kIndexBits = 24;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint32_t kChunkSize = 4096;
constexpr uint32_t kMaxChunks = 4096;  // 16M handles

struct Slot {
  // generation << 8 | type while live; the generation is bumped on release.
  std::atomic<uint64_t> tag{0};
  std::atomic<void*> object{nullptr};
};

// The table's chunks of kChunkSize slots, made as the table grows
// (handles.cc). Constant-initialised: nothing runs at library load.
extern std::atomic<Slot*> g_chunks[kMaxChunks];

// The slot of `index` (< kChunkSize * kMaxChunks), or null when its chunk
// was never made.
inline Slot* SlotAt(uint32_t index) {
  Slot* chunk = g_chunks[index / kChunkSize].load(std::memory_order_acquire);
  return chunk == nullptr ? nullptr : &chunk[index % kChunkSize];
}

}  // namespace handle_table

// In the header: every launch looks up two handles, and a call into
// handles.cc for each cost more than the lookup.
inline void* LookupHandle(uint64_t handle, HandleType type) {
  namespace t = handle_table;
  const uint64_t index_plus_one = handle & t::kIndexMask;
  if (index_plus_one == 0 ||
      ((handle >> t::kIndexBits) & 0xff) != static_cast<uint8_t>(type)) {
    return nullptr;
  }
  const uint32_t index = static_cast<uint32_t>(index_plus_one - 1);
  if (index >= t::kChunkSize * t::kMaxChunks) return nullptr;
  t::Slot* slot = t::SlotAt(index);
  if (slot == nullptr) return nullptr;
  const uint64_t expected = (handle >> 32) << 8 | static_cast<uint8_t>(type);
  if (slot->tag.load(std::memory_order_acquire) != expected) return nullptr;
  void* object = slot->object.load(std::memory_order_acquire);
  // The slot may have been released and given to a new object between the
  // two loads (its generation then differs): never hand out another object.
  if (__builtin_expect(slot->tag.load(std::memory_order_acquire) != expected,
                       0)) {
    return nullptr;
  }
  return object;
}

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_HANDLES_H_
