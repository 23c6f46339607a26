#include "capi/handles.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace fleetjit::capi {
namespace handle_table {

// The chunks and the free list are heap memory that no global destructor
// owns (none runs at unload or exit); FreeHandleTable below returns them
// when the library is unloaded with no handle live.
std::atomic<Slot*> g_chunks[kMaxChunks];

}  // namespace handle_table

namespace {

using handle_table::g_chunks;
using handle_table::kChunkSize;
using handle_table::kIndexBits;
using handle_table::kIndexMask;
using handle_table::kMaxChunks;
using handle_table::Slot;
using handle_table::SlotAt;

std::mutex g_mu;
uint32_t g_next_index = 0;  // guarded by g_mu
uint32_t g_live = 0;        // guarded by g_mu: handles registered, not released
bool g_freed = false;       // guarded by g_mu: FreeHandleTable ran
std::vector<uint32_t>* g_free_list;  // guarded by g_mu

// Runs at dlclose (and at exit, after main): frees the chunks so that a
// process that loads and unloads the library does not leak 64 KiB a cycle
// (tests/abi/dlopen_cycle.c). While any handle is live nothing is freed:
// a process may exit with live handles and threads that still look them up.
// It touches only this file's memory, and nothing runs at load.
__attribute__((destructor)) void FreeHandleTable() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_live != 0 || g_freed) return;
  g_freed = true;  // RegisterHandle refuses from now on ("table full")
  for (std::atomic<Slot*>& chunk : g_chunks) {
    delete[] chunk.exchange(nullptr, std::memory_order_acq_rel);
  }
  delete g_free_list;
  g_free_list = nullptr;
}

}  // namespace

uint64_t RegisterHandle(HandleType type, void* object) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_freed) return 0;
  if (g_free_list == nullptr) g_free_list = new std::vector<uint32_t>();
  uint32_t index;
  if (!g_free_list->empty()) {
    index = g_free_list->back();
    g_free_list->pop_back();
  } else {
    if (g_next_index >= kChunkSize * kMaxChunks) return 0;
    index = g_next_index++;
    if (index % kChunkSize == 0) {
      g_chunks[index / kChunkSize].store(new Slot[kChunkSize],
                                         std::memory_order_release);
    }
  }
  Slot* slot = SlotAt(index);
  uint64_t generation = (slot->tag.load(std::memory_order_relaxed) >> 8) + 1;
  generation &= 0xffffffffu;
  if (generation == 0) generation = 1;
  // Release: a lookup that reads this object also sees the tag of the
  // release before it, and so refuses a stale handle (LookupHandle).
  slot->object.store(object, std::memory_order_release);
  slot->tag.store(generation << 8 | static_cast<uint8_t>(type),
                  std::memory_order_release);
  ++g_live;
  return generation << 32 | uint64_t{static_cast<uint8_t>(type)} << kIndexBits |
         (index + 1);
}

void* ReleaseHandle(uint64_t handle, HandleType type) {
  std::lock_guard<std::mutex> lock(g_mu);
  void* object = LookupHandle(handle, type);
  if (object == nullptr) return nullptr;
  uint32_t index = static_cast<uint32_t>((handle & kIndexMask) - 1);
  Slot* slot = SlotAt(index);
  // Keep the generation, clear the type: the handle no longer matches.
  slot->tag.store((handle >> 32) << 8, std::memory_order_release);
  slot->object.store(nullptr, std::memory_order_release);
  g_free_list->push_back(index);
  --g_live;
  return object;
}

}  // namespace fleetjit::capi
