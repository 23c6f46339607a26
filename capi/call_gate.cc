#include "capi/call_gate.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <mutex>
#include <new>

namespace fleetjit::capi {
namespace gate {

// Constant-initialised: nothing runs at library load.
CacheLinePadded<Shard> g_shards[kThreadShards];
std::atomic<uint64_t> g_epoch{0};
constinit thread_local ThreadState t_state
    __attribute__((tls_model("initial-exec")));

namespace {

std::atomic<unsigned> g_next_shard{0};

// One waiter flips the epoch at a time. Placement-constructed again in a
// forked child, where a thread that held it no longer exists.
alignas(std::mutex) unsigned char g_waiter_mu_storage[sizeof(std::mutex)];
std::mutex& WaiterMutex() {
  return *std::launder(reinterpret_cast<std::mutex*>(g_waiter_mu_storage));
}

// In a forked child only the forking thread exists: the counts of the
// parent's other threads would make every wait hang. Keep this thread's own.
void AfterForkInChild() {
  for (CacheLinePadded<Shard>& shard : g_shards) {
    shard->calls[0].store(0, std::memory_order_relaxed);
    shard->calls[1].store(0, std::memory_order_relaxed);
  }
  if (t_state.counter != nullptr) t_state.counter->fetch_add(1);
  new (g_waiter_mu_storage) std::mutex();
}

void Initialise() {
  new (g_waiter_mu_storage) std::mutex();
  // glibc drops the handler when this library is unloaded.
  pthread_atfork(nullptr, nullptr, &AfterForkInChild);
}

void Backoff(int round) {
  if (round < 64) {
    __builtin_ia32_pause();
  } else if (round < 256) {
    sched_yield();
  } else {
    const long ns = round < 512 ? 20'000 : 500'000;  // then 0.5 ms steps
    struct timespec ts = {0, ns};
    nanosleep(&ts, nullptr);
  }
}

std::once_flag g_once;

}  // namespace

int AssignShard(ThreadState& state) {
  std::call_once(g_once, &Initialise);
  state.shard = static_cast<int>(
      g_next_shard.fetch_add(1, std::memory_order_relaxed) % kThreadShards);
  return state.shard;
}

}  // namespace gate

absl::Status CheckCanWaitHere() {
  if (gate::t_state.depth > 1) {
    return absl::FailedPreconditionError(
        "a destroy cannot run inside a callback of another fleetjit call (it "
        "would wait for that call); destroy after the call returns");
  }
  return absl::OkStatus();
}

void WaitForCallsInFlight() {
  std::call_once(gate::g_once, &gate::Initialise);
  std::lock_guard<std::mutex> lock(gate::WaiterMutex());
  // Flip: calls that start from now on count in the other epoch, and they
  // cannot find what the caller made unreachable before this point.
  const uint64_t old = gate::g_epoch.fetch_add(1, std::memory_order_seq_cst);
  for (CacheLinePadded<gate::Shard>& shard : gate::g_shards) {
    std::atomic<int64_t>& calls = shard->calls[old & 1];
    for (int round = 0; calls.load(std::memory_order_seq_cst) > 0; ++round) {
      gate::Backoff(round);
    }
  }
}

}  // namespace fleetjit::capi
