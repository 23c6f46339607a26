// The call gate: how a destroy waits for the calls that may still use what
// it destroys, so that destroying a handle while other threads use it never
// frees memory under them (header rule 4).
//
// Every fj_* entry runs inside a CallScope (entry.h's Guard). A destroy
// first makes its objects unreachable (their handles released, so no new
// lookup finds them), then leaves the gate (OutsideGate) and calls
// WaitForCallsInFlight, which returns once every call that was inside the
// gate when it started has returned; only then does it free them. Calls
// that started later cannot have found them.
//
// Readers pay one atomic add and one subtract on a counter of their own
// thread's shard (no line shared between threads, base/thread_shards.h).
// The counters come in two epochs: a waiter flips the epoch and waits for
// the old one's counters to drain, so calls that keep arriving never starve
// it. A call that blocks for long (a build, a wait on a build, a tuning)
// leaves the gate while it blocks, holding a reference to what it needs
// instead (Runtime::Pin), so a destroy elsewhere does not wait for it.
//
//   fj_status* fj_thing_destroy(fj_thing* h) {
//     return Guard([&]() -> absl::Status {
//       FJ_RETURN_IF_ERROR(CheckCanWaitHere());
//       FJ_ASSIGN_OR_RETURN(Thing * t, Take<Thing>(h, ...));  // unreachable
//       OutsideGate outside;                                   // we hold none
//       WaitForCallsInFlight();
//       delete t;                                              // nobody uses
//       it
//     });
//   }
#ifndef FLEETJIT_CAPI_CALL_GATE_H_
#define FLEETJIT_CAPI_CALL_GATE_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "base/thread_shards.h"

namespace fleetjit::capi {
namespace gate {

struct Shard {
  // Calls inside the gate, per epoch parity.
  std::atomic<int64_t> calls[2] = {0, 0};
};
extern CacheLinePadded<Shard> g_shards[kThreadShards];
extern std::atomic<uint64_t> g_epoch;

// Per thread, in one thread_local (one TLS lookup per call): its nesting (a
// log callback may call fj_* inside a call), its shard (-1 until its first
// call) and the counter its outermost call holds (nullptr outside).
struct ThreadState {
  int depth = 0;
  int shard = -1;
  std::atomic<int64_t>* counter = nullptr;
};
// initial-exec: a %fs-relative load, not a __tls_get_addr call per fj_*
// call (16 bytes of the static TLS surplus glibc keeps for dlopen).
extern constinit thread_local ThreadState t_state
    __attribute__((tls_model("initial-exec")));

// Assigns this thread's shard (round-robin, like ThisThreadShard).
int AssignShard(ThreadState& state);

// Takes a count in the current epoch; re-reads the epoch after counting so
// a waiter that flipped meanwhile either sees the count or made its
// objects unreachable before this call looks anything up.
inline void Enter(ThreadState& state) {
  const int index =
      __builtin_expect(state.shard >= 0, 1) ? state.shard : AssignShard(state);
  Shard& shard = *g_shards[index];
  for (;;) {
    const uint64_t epoch = g_epoch.load(std::memory_order_seq_cst);
    std::atomic<int64_t>& counter = shard.calls[epoch & 1];
    counter.fetch_add(1, std::memory_order_seq_cst);
    if (__builtin_expect(g_epoch.load(std::memory_order_seq_cst) == epoch, 1)) {
      state.counter = &counter;
      return;
    }
    counter.fetch_sub(1, std::memory_order_release);
  }
}

inline void Leave(ThreadState& state) {
  state.counter->fetch_sub(1, std::memory_order_release);
  state.counter = nullptr;
}

}  // namespace gate

// Marks one fj_* call as inside the gate for its lifetime. Nested scopes
// (a call from a callback the library made) count once.
class CallScope {
 public:
  CallScope() : state_(gate::t_state) {
    if (state_.depth++ == 0) gate::Enter(state_);
  }
  ~CallScope() {
    if (--state_.depth == 0) gate::Leave(state_);
  }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  gate::ThreadState& state_;
};

// Leaves the gate for its lifetime and enters it again after: for a destroy
// between making its objects unreachable and freeing them, and for a call
// that blocks for long while holding references of its own. Inside a nested
// call (a callback) it cannot leave, and does nothing: then
// WaitForCallsInFlight refuses.
class OutsideGate {
 public:
  OutsideGate() : left_(gate::t_state.depth == 1) {
    if (left_) gate::Leave(gate::t_state);
  }
  ~OutsideGate() {
    if (left_) gate::Enter(gate::t_state);
  }
  OutsideGate(const OutsideGate&) = delete;
  OutsideGate& operator=(const OutsideGate&) = delete;

 private:
  const bool left_;
};

// FAILED_PRECONDITION when the calling thread is inside a nested call (a
// destroy from a log callback would wait for its own caller); destroys
// check this before they take anything.
absl::Status CheckCanWaitHere();

// Returns once every fj_* call that was inside the gate when this was
// called has returned (or left the gate to block). The calling thread must
// be outside the gate (OutsideGate after CheckCanWaitHere).
void WaitForCallsInFlight();

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_CALL_GATE_H_
