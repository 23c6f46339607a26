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
#include <mutex>
#include <new>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace fleetjit {

// The lock of a per-thread shard. Not absl::Mutex: Debian builds abseil
// without NDEBUG, so every absl::Mutex Lock/Unlock runs its deadlock
// detector, which takes one process-wide lock (measured here: 95 ns per
// uncontended Lock+Unlock, 203 ns with two threads each on its own mutex,
// against 25 / 39 ns for std::mutex). On two H200 hosts' 32 cores that made
// 16 threads' hits on 16 different shards cost ~10 us each. A std::mutex
// with the thread-safety annotations of a capability, so GUARDED_BY works.
class ABSL_LOCKABLE ShardMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};
class ABSL_SCOPED_LOCKABLE ShardLock {
 public:
  explicit ShardLock(ShardMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~ShardLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  ShardLock(const ShardLock&) = delete;
  ShardLock& operator=(const ShardLock&) = delete;

 private:
  ShardMutex* mu_;
};

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
  // Unsized: clang-14 (the fuzz and TSan builds) declares no sized
  // deallocation functions unless -fsized-deallocation is given.
  void deallocate(T* p, size_t) {
    ::operator delete (p, std::align_val_t{kCacheLineBytes});
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
