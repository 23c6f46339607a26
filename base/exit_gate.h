// Exit and the threads still inside a native library.
//
// exit() runs the process's static destructors while its other threads
// keep running. A thread inside NVRTC (a compile) or LLVM (a launch thunk
// being generated or loaded) then runs on freed state: on the build machine
// exit() with a compile in flight crashed in nvrtcCompileProgram in most
// runs (SIGSEGV; tests/hardening/process_faults_test.cc). Such work holds
// an ExitGate::Pass. An atexit handler, registered after the libraries'
// own (atexit runs handlers last-registered first), closes the gate: later
// Enter() calls fail, and exit waits for the passes out (kDrainLimit at
// most) before any library is torn down.
//
//   FJ_ASSIGN_OR_RETURN(ExitGate::Pass pass, ExitGate::Enter("NVRTC"),
//   "building");
//   ... call NVRTC ...
//
// That order is not enough alone: NVRTC (LLVM inside) registers more exit
// handlers while it compiles, and the first dlopen of NVRTC registers them
// while its initialisers run; those run before the handler (seen on the
// H200 host: exit() 30 ms into the first builds crashed in
// nvrtcCompileProgram). So the main thread also carries a thread_local
// watch (WatchCallingThread, from Runtime::Create): exit() runs the calling
// thread's thread_local destructors before any atexit handler, and the
// watch drains there. An exit() from another thread relies on the handler
// alone; a process that does that destroys its runtimes first.
#ifndef FLEETJIT_BASE_EXIT_GATE_H_
#define FLEETJIT_BASE_EXIT_GATE_H_

#include <chrono>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

class ExitGate {
 public:
  static constexpr std::chrono::seconds kDrainLimit{30};

  // Held while native code runs; move-only.
  class Pass {
   public:
    Pass(Pass&& other) noexcept : held_(std::exchange(other.held_, false)) {}
    Pass& operator=(Pass&&) = delete;
    ~Pass();

   private:
    friend class ExitGate;
    Pass() : held_(true) {}
    bool held_;
  };

  // A pass, or FAILED_PRECONDITION naming `what` once the process is exiting.
  static absl::StatusOr<Pass> Enter(absl::string_view what);

  // Registers the drain handler (again) so that it runs before every exit
  // handler registered so far: call after loading a library whose
  // destructors must wait. The first passes released call it too (a
  // library's lazily built statics register theirs on first use).
  static void RunBeforeExistingExitHandlers();

  // Called on the thread that creates a runtime: when it is the main
  // thread, a thread_local watch of it drains first at exit(), before every
  // atexit handler (also those a library registers lazily, mid-compile,
  // after the handler above). It keeps the library loaded until the main
  // thread ends (glibc pins a library whose thread_local destructors are
  // pending), so a dlclose of it unloads nothing.
  static void WatchCallingThread();

  // For tests: whether exit has closed the gate.
  static bool closed();
};

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_EXIT_GATE_H_
