// A fake CUDA driver for tests on machines without a GPU, and the control
// functions that inject faults into it.
//
// libfj_fake_cuda.so stands in for libcuda.so.1: a runtime created with
// libcuda_path (fj_runtime_options, FLEETJIT_LIBCUDA) naming it loads it
// through the same dlopen + cuGetProcAddress path as the real driver, so
// nothing in the library changes for tests. It simulates a small device:
// primary contexts, memory (host malloc; copies and fills are real),
// streams and events (work completes at once), stream capture, modules that
// load any image
// (kernels and parameter layouts are read from PTX text, or from a
// cubin's symbol table and .nv.info records), launches that check their
// parameter buffer's size and then do nothing. Releasing a primary
// context's last retain destroys its objects, as the driver does. Every entry
// point of platform/driver_symbols.inc, plus cuInit, exists (the file does not
// build otherwise); those the runtime does not use answer
// CUDA_ERROR_NOT_SUPPORTED.
//
// A test links the library too (the loader then shares one copy between
// the test and the runtime's dlopen) and steers it with the functions
// below. Fault injection, as in SQLite's I/O-error tests:
//
//   fjfake_reset();
//   fjfake_fail("cuMemAlloc", 2, CUDA_ERROR_OUT_OF_MEMORY);  // the 2nd call
//   ... drive the runtime; expect a status naming cuMemAlloc ...
//   fjfake_get_live(&live);  // nothing left allocated, loaded or retained
#ifndef FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_CUDA_H_
#define FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_CUDA_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FJFAKE_API __attribute__((visibility("default")))

// Objects alive in the fake driver now (every process-wide count).
typedef struct fjfake_live {
  int64_t allocations;       // cuMemAlloc not yet freed
  int64_t host_allocations;  // cuMemHostAlloc not yet freed
  int64_t modules;           // cuModuleLoadData* not yet unloaded
  int64_t streams;
  int64_t events;
  int64_t context_retains;  // cuDevicePrimaryCtxRetain not yet released
  // Objects (of the kinds above) still alive when their primary context's
  // last retain went, freed with it as the driver does, since the last
  // fjfake_reset: what a process that shares the context (PyTorch) leaks.
  int64_t reclaimed;
} fjfake_live;

// Forgets every fault plan, call count and hidden entry point, and gives
// every device a P2P path again; the simulated objects stay. Sets the
// device count (1..8) the driver reports from then on; 0 keeps the current
// one (1 at start).
FJFAKE_API void fjfake_reset(int devices);
// The entry points, by the name cuGetProcAddress knows them ("cuMemAlloc"),
// cuInit included: `index` in [0, fjfake_symbol_count()).
FJFAKE_API int fjfake_symbol_count(void);
FJFAKE_API const char* fjfake_symbol_name(int index);
// Calls of `name` since the last reset (failed ones included); 0 for an
// unknown name.
FJFAKE_API uint64_t fjfake_calls(const char* name);
// The call site (return address in the caller) of call number `nth`
// (1-based) of `name` since the last reset; 0 if unknown.
FJFAKE_API uintptr_t fjfake_call_site(const char* name, uint64_t nth);
// Makes call number `nth` (1-based, counting from the last reset) of
// `name` return `result` without doing anything; nth 0 makes every call
// from now on fail. -1 for an unknown name.
FJFAKE_API int fjfake_fail(const char* name, uint64_t nth, int result);
// Faults fired since the last reset.
FJFAKE_API uint64_t fjfake_faults_fired(void);
// cuGetProcAddress reports `name` as absent (an older driver); -1 for an
// unknown name.
FJFAKE_API int fjfake_hide(const char* name);
FJFAKE_API void fjfake_get_live(fjfake_live* out);
// The part every device reports from now on (not undone by
// fjfake_reset): compute capability and shared memory per block (opt-in)
// and per SM, which also bound the occupancy. The start: an H100-like
// sm_90, 232448 and 233472 bytes; consumer Blackwell (sm_120) allows
// 101376 per block.
FJFAKE_API void fjfake_set_part(int cc_major, int cc_minor, int shared_optin,
                                int shared_per_sm);
// Devices at or past `devices` have no P2P path to any other (reset: all
// have one).
FJFAKE_API void fjfake_set_p2p_devices(int devices);
// A stream of device `device`'s primary context (which must be retained),
// as a caller's own code (PyTorch) would create it: counted as a live
// stream but not as a driver call. 0 if the context is not retained.
FJFAKE_API uint64_t fjfake_create_stream(int device);
FJFAKE_API void fjfake_destroy_stream(uint64_t stream);
// fjfake_create_stream's stream, blocking (created without
// CU_STREAM_NON_BLOCKING): the legacy stream depends on it implicitly, so
// the legacy stream reports its capture (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
FJFAKE_API uint64_t fjfake_create_blocking_stream(int device);

// Stream capture. A test captures as a caller would, through the entry
// points cuGetProcAddress hands out (cuStreamBeginCapture, ...); the fake
// follows the rules cuStreamBeginCapture and
// cuThreadExchangeStreamCaptureMode document (fake_cuda.cc, section 2b):
// work on a capturing stream is recorded, not run, and a potentially
// unsafe call (cuMemAlloc, cuMemFree, cuModuleUnload, synchronisations)
// that the calling thread's mode prohibits is
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.
//
// The version cuDriverGetVersion reports (13000 at start and after
// fjfake_reset). Below 12030 a module load on a thread that is capturing
// is refused too, whatever its mode (the driver before CUDA 12.3).
FJFAKE_API void fjfake_set_driver_version(int version);
// The work a graph from cuStreamEndCapture captured; -1 for an unknown
// graph.
FJFAKE_API int64_t fjfake_graph_nodes(uint64_t graph);
// Launches, since the last reset, that found their function partly loaded
// (lazy loading) and had to finish loading it: code loaded by a launch.
// cuFuncLoad finishes loading a function; attribute and parameter queries
// do not.
FJFAKE_API uint64_t fjfake_launch_loads(void);

#ifdef __cplusplus
}  // extern "C"

#include <map>
#include <string>

// Calls since the last reset of each entry point called at least once.
inline std::map<std::string, uint64_t> fjfake_call_counts() {
  std::map<std::string, uint64_t> counts;
  for (int i = 0; i < fjfake_symbol_count(); ++i) {
    const char* name = fjfake_symbol_name(i);
    if (const uint64_t n = fjfake_calls(name); n != 0) counts[name] = n;
  }
  return counts;
}
#endif

#endif  // FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_CUDA_H_
