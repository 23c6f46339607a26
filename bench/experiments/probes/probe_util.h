// What the standalone probes of bench/experiments/probes share (nvcc and the
// driver API only, no fleetjit): a checked driver call, a stream and two events
// on device 0's primary context, and the median of timed runs.
#ifndef FLEETJIT_BENCH_EXPERIMENTS_PROBES_PROBE_UTIL_H_
#define FLEETJIT_BENCH_EXPERIMENTS_PROBES_PROBE_UTIL_H_

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Exits naming the call and the driver's message when it fails.
#define CK(x)                                              \
  do {                                                     \
    CUresult r = (x);                                      \
    if (r != CUDA_SUCCESS) {                               \
      const char* s;                                       \
      cuGetErrorString(r, &s);                             \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, s); \
      exit(1);                                             \
    }                                                      \
  } while (0)

// Device 0's primary context made current, a non-blocking stream on it and
// two events to time with.
struct Probe {
  CUdevice device;
  CUcontext context;
  CUstream stream;
  CUevent start, stop;
  Probe() {
    CK(cuInit(0));
    CK(cuDeviceGet(&device, 0));
    CK(cuDevicePrimaryCtxRetain(&context, device));
    CK(cuCtxSetCurrent(context));
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&start, 0));
    CK(cuEventCreate(&stop, 0));
  }
  // The median of `reps` timings (ms) of `f` on the stream, after 3 warm-ups.
  template <class F>
  double Time(F f, int reps = 15) {
    for (int i = 0; i < 3; ++i) f();
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      CK(cuEventRecord(start, stream));
      f();
      CK(cuEventRecord(stop, stream));
      CK(cuEventSynchronize(stop));
      float ms;
      CK(cuEventElapsedTime(&ms, start, stop));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

#endif  // FLEETJIT_BENCH_EXPERIMENTS_PROBES_PROBE_UTIL_H_
