// This process's id at the cost of a load, for the fork checks on hot paths
// (CUDA is not fork-safe: a child's calls on what its parent made must be
// refused).
#ifndef FLEETJIT_BASE_PROCESS_ID_H_
#define FLEETJIT_BASE_PROCESS_ID_H_

namespace fleetjit {

// getpid(), kept current by a pthread_atfork child handler registered on
// the first call (glibc drops it if this library is unloaded). A child made
// by a raw clone() system call runs no atfork handler and goes unnoticed;
// fork(), posix_spawn and vfork+exec are covered.
int ProcessId();

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_PROCESS_ID_H_
