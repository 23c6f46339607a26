#include "base/thread_shards.h"

#include <atomic>

namespace fleetjit {
namespace {

// Constant-initialised: nothing runs at library load.
std::atomic<unsigned> g_next_shard{0};
thread_local int t_shard = -1;

}  // namespace

int ThisThreadShard() {
  if (t_shard < 0) {
    t_shard = static_cast<int>(
        g_next_shard.fetch_add(1, std::memory_order_relaxed) % kThreadShards);
  }
  return t_shard;
}

}  // namespace fleetjit
