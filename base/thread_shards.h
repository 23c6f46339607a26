// Per-thread shards: how a hot read path avoids writing a cache line that
// other threads write too.
//
// A reader-writer lock, a shared_ptr copy or a shared counter each write one
// cache line that every thread shares; at 16 threads that line moves between
// cores on every call and a 100 ns lookup becomes 5 us. The cure used here
// is to give each thread its own shard (ThisThreadShard) and keep, per
// shard, its own lock, counters and references (LocalReference), each on its
// own cache line (CacheLinePadded). Threads are spread round-robin, so up to
// kThreadShards threads write disjoint lines; more share a shard, which is
// still correct (each shard has its own lock), only slower.
//
//   struct Shard { absl::Mutex mu; uint64_t hits ABSL_GUARDED_BY(mu) = 0; };
//   std::array<CacheLinePadded<Shard>, kThreadShards> shards;
//   Shard& mine = *shards[ThisThreadShard()];
#ifndef FLEETJIT_BASE_THREAD_SHARDS_H_
#define FLEETJIT_BASE_THREAD_SHARDS_H_

#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace fleetjit {

inline constexpr size_t kCacheLineBytes = 64;
inline constexpr int kThreadShards = 64;

// This thread's shard, in [0, kThreadShards): assigned round-robin on the
// thread's first call, then fixed for its life.
int ThisThreadShard();

// A T alone on its cache line(s): no other object shares them.
template <typename T>
struct alignas(kCacheLineBytes) CacheLinePadded {
  T value;
  T& operator*() { return value; }
  const T& operator*() const { return value; }
  T* operator->() { return &value; }
  const T* operator->() const { return &value; }
};

// Allocates whole, aligned cache lines: what it allocates shares a line with
// nothing else (a shared_ptr control block allocated with it, for one).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding
  static size_t Bytes(size_t n) {
    return (n * sizeof(T) + kCacheLineBytes - 1) / kCacheLineBytes *
           kCacheLineBytes;
  }
  T* allocate(size_t n) {
    return static_cast<T*>(
        ::operator new (Bytes(n), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, size_t n) {
    ::operator delete (p, Bytes(n), std::align_val_t{kCacheLineBytes});
  }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const {
    return false;
  }
};

// Another owning reference to `owner`'s object with its own reference count,
// on its own cache line: copies of it count there, not in `owner`'s control
// block. The object lives while either has a copy. One per shard gives each
// thread a reference count of its own.
template <typename T>
std::shared_ptr<T> LocalReference(std::shared_ptr<T> owner) {
  T* object = owner.get();
  return std::shared_ptr<T>(
      object, [owner = std::move(owner)](T*) mutable { owner.reset(); },
      CacheLineAllocator<T>());
}

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_THREAD_SHARDS_H_
