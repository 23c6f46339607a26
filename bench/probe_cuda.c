/* libfj_probe_cuda.so: a CUDA driver that is the real one (or any other,
 * FJPROBE_LIBCUDA, default libcuda.so.1) with a clock at the door of its
 * launch calls. fleetjit loaded with FLEETJIT_LIBCUDA pointing here takes
 * every entry point from cuGetProcAddress_v2, as it does from the real
 * driver, and gets the real ones, except cuLaunchKernel and
 * cuLaunchKernelEx: those come back wrapped, and each call through them
 * records the time-stamp counter as the driver is entered and as it returns.
 * bench/launch_probe.c reads the two stamps after each launch and splits a
 * launch's host time into before the driver, in the driver, and after it:
 * fleetjit's own share measured on the GPU host's caches, not estimated.
 *
 * The wrapper also keeps the last launch's function, stream and parameter
 * buffer (up to 4 KiB), so the probe can launch the same kernel raw. Not a
 * part of the product: a measuring instrument, single-threaded. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#else
#include <time.h>
#endif

#define FJPROBE_API __attribute__((visibility("default")))

static void* real_lib;
static CUresult (*real_get_proc)(const char*, void**, int, cuuint64_t,
                                 CUdriverProcAddressQueryResult*);
static CUresult (*real_launch)(CUfunction, unsigned, unsigned, unsigned,
                               unsigned, unsigned, unsigned, unsigned, CUstream,
                               void**, void**);
static CUresult (*real_launch_ex)(const CUlaunchConfig*, CUfunction, void**,
                                  void**);

static volatile uint64_t stamp_enter, stamp_exit;
static CUfunction last_function;
static CUstream last_stream;
static unsigned char last_buffer[4096];
static size_t last_buffer_bytes;

static uint64_t Now(void) {
#if defined(__x86_64__)
  return __rdtsc();
#else
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
#endif
}

static int Open(void) {
  static int tried;
  if (real_lib != NULL) return 1;
  if (tried) return 0; /* said once why not */
  tried = 1;
  const char* path = getenv("FJPROBE_LIBCUDA");
  if (path == NULL || path[0] == '\0') path = "libcuda.so.1";
  real_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (real_lib == NULL) {
    fprintf(stderr, "probe_cuda: cannot open %s: %s\n", path, dlerror());
    return 0;
  }
  real_get_proc = (CUresult(*)(
      const char*, void**, int, cuuint64_t,
      CUdriverProcAddressQueryResult*))dlsym(real_lib, "cuGetProcAddress_v2");
  return real_get_proc != NULL;
}

/* The kernel's parameter buffer, when passed as `extra`. */
static void KeepBuffer(void** extra) {
  last_buffer_bytes = 0;
  if (extra == NULL) return;
  void* buffer = NULL;
  size_t bytes = 0;
  for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 8; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
      bytes = *(const size_t*)extra[i + 1];
  }
  if (buffer != NULL && bytes <= sizeof(last_buffer)) {
    memcpy(last_buffer, buffer, bytes);
    last_buffer_bytes = bytes;
  }
}

static CUresult ProbeLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz,
                            unsigned shared, CUstream stream, void** params,
                            void** extra) {
  stamp_enter = Now();
  CUresult r =
      real_launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  stamp_exit = Now();
  return r;
}

static CUresult ProbeLaunchEx(const CUlaunchConfig* config, CUfunction f,
                              void** params, void** extra) {
  stamp_enter = Now();
  CUresult r = real_launch_ex(config, f, params, extra);
  stamp_exit = Now();
  if (last_function == NULL && r == CUDA_SUCCESS) {
    last_function = f;
    last_stream = config->hStream;
    KeepBuffer(extra);
  }
  return r;
}

FJPROBE_API CUresult cuInit(unsigned flags) {
  if (!Open()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(real_lib, "cuInit");
  return init != NULL ? init(flags) : CUDA_ERROR_NOT_INITIALIZED;
}

FJPROBE_API CUresult
cuGetProcAddress_v2(const char* symbol, void** fn, int version,
                    cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  if (!Open()) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real_get_proc(symbol, fn, version, flags, status);
  if (r != CUDA_SUCCESS || fn == NULL || *fn == NULL) return r;
  if (strcmp(symbol, "cuLaunchKernel") == 0) {
    real_launch =
        (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, unsigned, CUstream, void**, void**)) *
        fn;
    *fn = (void*)&ProbeLaunch;
  } else if (strcmp(symbol, "cuLaunchKernelEx") == 0) {
    real_launch_ex =
        (CUresult(*)(const CUlaunchConfig*, CUfunction, void**, void**)) * fn;
    *fn = (void*)&ProbeLaunchEx;
  }
  return r;
}

/* The last launch's stamps: entering the driver, and its return. */
FJPROBE_API void fjprobe_stamps(uint64_t* enter, uint64_t* exit) {
  *enter = stamp_enter;
  *exit = stamp_exit;
}

FJPROBE_API uint64_t fjprobe_now(void) { return Now(); }

/* The first successful cuLaunchKernelEx's function, stream and parameter
 * buffer (bytes 0 when it passed none, or more than 4 KiB). */
FJPROBE_API void fjprobe_first_launch(CUfunction* f, CUstream* stream,
                                      const void** buffer, size_t* bytes) {
  *f = last_function;
  *stream = last_stream;
  *buffer = last_buffer;
  *bytes = last_buffer_bytes;
}
