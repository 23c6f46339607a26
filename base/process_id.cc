#include "base/process_id.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace fleetjit {
namespace {

std::atomic<int> g_pid{0};  // constant-initialised: nothing runs at load

void NotePid() {
  g_pid.store(static_cast<int>(::getpid()), std::memory_order_relaxed);
}

}  // namespace

int ProcessId() {
  const int pid = g_pid.load(std::memory_order_relaxed);
  if (__builtin_expect(pid != 0, 1)) return pid;
  static std::once_flag once;
  std::call_once(once, [] {
    NotePid();
    pthread_atfork(nullptr, nullptr, &NotePid);
  });
  return g_pid.load(std::memory_order_relaxed);
}

}  // namespace fleetjit
