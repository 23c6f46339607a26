/* fj_launch in a loop through the public C ABI, and nothing else timed:
 * the subject for counting what a launch costs in instructions, or for
 * profiling it on a GPU host. It prints no anchor: launch_bench measures
 * against raw cuLaunchKernel; this program is for the counters.
 *
 *   launch_loop [LAUNCHES [args|tensors]]     (default 1000 args)
 *
 * "args" launches an empty kernel of 4 scalar/pointer parameters, "tensors"
 * one of 4 TMA tensor parameters, the same tensors every launch (the kept
 * parameters' path).
 *
 *   launch_loop LAUNCHES args|tensors probe
 *
 * splits each launch's host time on the GPU host's own caches: run with
 * FLEETJIT_LIBCUDA=build/lib/libfj_probe_cuda.so (bench/probe_cuda.c, the
 * real driver with a clock at the door of its launch calls), it prints the
 * median ns before the driver is entered, inside it, and after it returns,
 * for fj_launch and, in the same run, for the same kernel launched raw
 * (cuLaunchKernel with an argument array, cuLaunchKernelEx with the
 * parameter buffer fleetjit packed). Instructions per launch over the
 * tests' fake driver:
 *
 *   FLEETJIT_LIBCUDA=build/lib/libfj_fake_cuda.so valgrind --tool=callgrind \
 *     --toggle-collect=fj_launch build/bench/launch_loop 1000 args
 *
 * and the total over 1000 launches, divided by 1000 (docs/measurements.md,
 * "Instructions per launch"). The kernel's thunk is generated in the
 * background after a cold build; the loop starts once the kernel has it
 * (or after 5 s, on the generic path, which it then says). */
#include <cuda.h>
#include <dlfcn.h>
#include <fleetjit/fleetjit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char kSource[] =
    "#include <fleetjit/copy.cuh>\n"
    "extern \"C\" __global__ void empty_args(float* a, const float* b,\n"
    "                                        float c, int n) {}\n"
    "extern \"C\" __global__ void empty_tensors(\n"
    "    FJ_TENSOR(float, 2) a, FJ_TENSOR(float, 2) b,\n"
    "    FJ_TENSOR(float, 2) c, FJ_TENSOR(float, 2) d) {}\n";

static fj_str Str(const char* s) {
  fj_str r;
  r.data = s;
  r.size = strlen(s);
  return r;
}

/* Exits 1 with the status's message when `s` is an error. */
static void Check(fj_status* s, const char* what) {
  if (s == NULL) return;
  fprintf(stderr, "launch_loop: %s: %s\n", what, fj_status_message(s, NULL));
  fj_status_free(s);
  exit(1);
}

static void SleepMs(long ms) {
  struct timespec t;
  t.tv_sec = ms / 1000;
  t.tv_nsec = (ms % 1000) * 1000000L;
  nanosleep(&t, NULL);
}

/* ------------------------------------------------------------ the probe */

typedef void (*StampsFn)(uint64_t*, uint64_t*);
typedef uint64_t (*NowFn)(void);
typedef void (*FirstLaunchFn)(CUfunction*, CUstream*, const void**, size_t*);
typedef CUresult (*GetProcFn)(const char*, void**, int, cuuint64_t,
                              CUdriverProcAddressQueryResult*);

/* Time-stamp ticks per ns, against CLOCK_MONOTONIC over 50 ms. */
static double TicksPerNs(NowFn now) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  const uint64_t t0 = now();
  SleepMs(50);
  clock_gettime(CLOCK_MONOTONIC, &b);
  const uint64_t t1 = now();
  const double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
  return (double)(t1 - t0) / ns;
}

static int CompareU64(const void* a, const void* b) {
  const uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* One way of launching, its samples: before the driver, in it, after it. */
enum { kBatch = 100, kParts = 3 };
typedef struct {
  const char* name;
  uint64_t* ticks[kParts];
  long n;
} Row;

static void Record(Row* row, uint64_t t0, uint64_t t3, StampsFn stamps) {
  uint64_t enter = 0, exit = 0;
  stamps(&enter, &exit);
  row->ticks[0][row->n] = enter - t0;
  row->ticks[1][row->n] = exit - enter;
  row->ticks[2][row->n] = t3 - exit;
  ++row->n;
}

static double MedianNs(uint64_t* v, long n, double ticks_per_ns) {
  qsort(v, (size_t)n, sizeof *v, CompareU64);
  return (double)v[n / 2] / ticks_per_ns;
}

/* The mean of the middle half of `v`, sorted: finer than the median where
 * the time-stamp counter ticks coarsely (a VM's). */
static double MidMeanNs(const uint64_t* v, long n, double ticks_per_ns) {
  double sum = 0;
  long count = 0;
  for (long i = n / 4; i < n - n / 4; ++i, ++count) sum += (double)v[i];
  return count > 0 ? sum / (double)count / ticks_per_ns : 0;
}

/* Interleaved batches of kBatch launches (a synchronize after each, so the
 * queue never fills and blocks): fj_launch, raw cuLaunchKernelEx with the
 * buffer fleetjit packed, and raw cuLaunchKernel with `raw_params` (NULL:
 * not for this kernel). Each launch is split by the probe driver's stamps. */
static void Probe(fj_kernel* kernel, const fj_launch_config* cfg,
                  const fj_arg* args, size_t num_args, fj_stream* stream,
                  void** raw_params, long launches) {
  const char* path = getenv("FLEETJIT_LIBCUDA");
  void* lib = path != NULL ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  StampsFn stamps = lib ? (StampsFn)dlsym(lib, "fjprobe_stamps") : NULL;
  NowFn now = lib ? (NowFn)dlsym(lib, "fjprobe_now") : NULL;
  FirstLaunchFn first =
      lib ? (FirstLaunchFn)dlsym(lib, "fjprobe_first_launch") : NULL;
  GetProcFn get_proc =
      lib ? (GetProcFn)dlsym(lib, "cuGetProcAddress_v2") : NULL;
  if (stamps == NULL || now == NULL || first == NULL || get_proc == NULL) {
    fprintf(stderr,
            "launch_loop probe: FLEETJIT_LIBCUDA must name "
            "build/lib/libfj_probe_cuda.so (it names %s)\n",
            path ? path : "nothing");
    exit(2);
  }
  CUresult (*launch_ex)(const CUlaunchConfig*, CUfunction, void**, void**) =
      NULL;
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, unsigned, CUstream, void**, void**) =
      NULL;
  CUdriverProcAddressQueryResult found;
  if (get_proc("cuLaunchKernelEx", (void**)&launch_ex, 12000, 0, &found) !=
          CUDA_SUCCESS ||
      get_proc("cuLaunchKernel", (void**)&launch, 4000, 0, &found) !=
          CUDA_SUCCESS) {
    fprintf(stderr, "launch_loop probe: the driver lacks its launch calls\n");
    exit(1);
  }
  Check(fj_launch(kernel, cfg, args, num_args), "fj_launch");
  Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
  CUfunction f = NULL;
  CUstream raw_stream = NULL;
  const void* captured = NULL;
  size_t captured_bytes = 0;
  first(&f, &raw_stream, &captured, &captured_bytes);
  static unsigned char buffer[4096];
  memcpy(buffer, captured, captured_bytes);
  size_t buffer_bytes = captured_bytes;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &buffer_bytes,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig ex;
  memset(&ex, 0, sizeof ex);
  ex.gridDimX = ex.gridDimY = ex.gridDimZ = 1;
  ex.blockDimX = cfg->block[0];
  ex.blockDimY = ex.blockDimZ = 1;
  ex.hStream = raw_stream;

  const long batches = (launches + kBatch - 1) / kBatch;
  const long n = batches * kBatch;
  Row rows[3] = {{"fj_launch", {0}, 0},
                 {"raw cuLaunchKernelEx, fleetjit's buffer", {0}, 0},
                 {"raw cuLaunchKernel, argument array", {0}, 0}};
  const int num_rows = raw_params != NULL ? 3 : 2;
  for (int r = 0; r < num_rows; ++r) {
    for (int p = 0; p < kParts; ++p) {
      rows[r].ticks[p] = (uint64_t*)malloc(sizeof(uint64_t) * (size_t)n);
      if (rows[r].ticks[p] == NULL) exit(1);
    }
  }
  for (long b = 0; b < batches + 1; ++b) {
    const int keep = b > 0; /* the first round warms up */
    for (int i = 0; i < kBatch; ++i) {
      const uint64_t t0 = now();
      fj_status* st = fj_launch(kernel, cfg, args, num_args);
      const uint64_t t3 = now();
      Check(st, "fj_launch");
      if (keep) Record(&rows[0], t0, t3, stamps);
    }
    Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
    for (int i = 0; i < kBatch; ++i) {
      const uint64_t t0 = now();
      const CUresult r = launch_ex(&ex, f, NULL, extra);
      const uint64_t t3 = now();
      if (r != CUDA_SUCCESS) exit(1);
      if (keep) Record(&rows[1], t0, t3, stamps);
    }
    Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
    if (raw_params == NULL) continue;
    for (int i = 0; i < kBatch; ++i) {
      const uint64_t t0 = now();
      const CUresult r = launch(f, 1, 1, 1, cfg->block[0], 1, 1, 0, raw_stream,
                                raw_params, NULL);
      const uint64_t t3 = now();
      if (r != CUDA_SUCCESS) exit(1);
      if (keep) Record(&rows[2], t0, t3, stamps);
    }
    Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
  }
  const double tpn = TicksPerNs(now);
  printf(
      "median ns per launch, %ld launches each, batches of %d "
      "interleaved:\n",
      n, kBatch);
  printf("  %-42s %9s %9s %9s %9s %9s\n", "", "total", "before", "driver",
         "after", "own~");
  for (int r = 0; r < num_rows; ++r) {
    /* The total's median from the sums, before the parts are sorted. */
    uint64_t* total = (uint64_t*)malloc(sizeof(uint64_t) * (size_t)n);
    if (total == NULL) exit(1);
    for (long i = 0; i < n; ++i)
      total[i] =
          rows[r].ticks[0][i] + rows[r].ticks[1][i] + rows[r].ticks[2][i];
    const double t = MedianNs(total, n, tpn);
    /* before + after, the caller's own share, per launch */
    for (long i = 0; i < n; ++i)
      total[i] = rows[r].ticks[0][i] + rows[r].ticks[2][i];
    qsort(total, (size_t)n, sizeof *total, CompareU64);
    const double own = MidMeanNs(total, n, tpn);
    printf("  %-42s %9.1f %9.1f %9.1f %9.1f %9.1f\n", rows[r].name, t,
           MedianNs(rows[r].ticks[0], n, tpn),
           MedianNs(rows[r].ticks[1], n, tpn),
           MedianNs(rows[r].ticks[2], n, tpn), own);
    free(total);
    for (int p = 0; p < kParts; ++p) free(rows[r].ticks[p]);
  }
  printf(
      "  (before/after: the caller's side of the call, fleetjit's own "
      "work for fj_launch; driver: inside cuLaunchKernel[Ex]; own~: "
      "before + after, the mean of the middle half of the launches)\n");
}

int main(int argc, char** argv) {
  const long launches = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
  const int tensors = argc > 2 && strcmp(argv[2], "tensors") == 0;
  const int probe = argc > 3 && strcmp(argv[3], "probe") == 0;
  if (launches <= 0 || (argc > 2 && !tensors && strcmp(argv[2], "args")) ||
      (argc > 3 && !probe) || argc > 4) {
    fprintf(stderr, "usage: launch_loop [LAUNCHES [args|tensors [probe]]]\n");
    return 2;
  }

  fj_runtime* rt = NULL;
  Check(fj_runtime_create(NULL, &rt), "fj_runtime_create");
  fj_build_options bo;
  memset(&bo, 0, sizeof bo);
  bo.struct_size = sizeof bo;
  bo.source = Str(kSource);
  bo.name = Str("launch_loop.cu");
  fj_module* module = NULL;
  Check(fj_module_build(rt, &bo, &module), "fj_module_build");
  fj_kernel* kernel = NULL;
  Check(fj_module_get_kernel(
            module, Str(tensors ? "empty_tensors" : "empty_args"), 0, &kernel),
        "fj_module_get_kernel");
  fj_kernel_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  for (int waited = 0; waited < 5000; ++waited) {
    Check(fj_kernel_info_get(kernel, &info), "fj_kernel_info_get");
    if (info.uses_thunk) break;
    SleepMs(1);
  }

  fj_stream* stream = NULL;
  Check(fj_stream_create(rt, 0, &stream), "fj_stream_create");
  fj_launch_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.struct_size = sizeof cfg;
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  cfg.stream = stream;

  enum { kArgs = 4, kSide = 256 };
  uint64_t data[kArgs];
  for (int i = 0; i < kArgs; ++i) {
    Check(fj_mem_alloc(rt, 0, sizeof(float) * kSide * kSide, &data[i]),
          "fj_mem_alloc");
  }
  fj_arg args[kArgs];
  int64_t shape[kArgs][2];
  fj_tensor tensor[kArgs];
  fj_tensor_arg tensor_arg[kArgs];
  memset(args, 0, sizeof args);
  memset(tensor, 0, sizeof tensor);
  memset(tensor_arg, 0, sizeof tensor_arg);
  for (int i = 0; i < kArgs; ++i) {
    args[i].struct_size = sizeof(fj_arg);
    if (tensors) {
      shape[i][0] = shape[i][1] = kSide;
      tensor[i].data = (void*)(uintptr_t)data[i];
      tensor[i].device.device_type = 2; /* kDLCUDA */
      tensor[i].ndim = 2;
      tensor[i].dtype.code = 2; /* kDLFloat */
      tensor[i].dtype.bits = 32;
      tensor[i].dtype.lanes = 1;
      tensor[i].shape = shape[i];
      tensor_arg[i].struct_size = sizeof(fj_tensor_arg);
      tensor_arg[i].tensor = &tensor[i];
      tensor_arg[i].box[0] = tensor_arg[i].box[1] = 32;
      args[i].kind = FJ_ARG_TENSOR;
      args[i].v.tensor = &tensor_arg[i];
    }
  }
  if (!tensors) {
    args[0].kind = FJ_ARG_POINTER;
    args[0].v.pointer = data[0];
    args[1].kind = FJ_ARG_POINTER;
    args[1].v.pointer = data[1];
    args[2].kind = FJ_ARG_F32;
    args[2].v.f32 = 2.0f;
    args[3].kind = FJ_ARG_I32;
    args[3].v.i32 = kSide * kSide;
  }

  if (probe) {
    const float f32 = 2.0f;
    const int32_t i32 = kSide * kSide;
    void* raw_params[kArgs] = {&data[0], &data[1], (void*)&f32, (void*)&i32};
    Probe(kernel, &cfg, args, kArgs, stream, tensors ? NULL : raw_params,
          launches);
  } else {
    for (long i = 0; i < launches; ++i)
      Check(fj_launch(kernel, &cfg, args, kArgs), "fj_launch");
    Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
  }
  printf("launch_loop: %ld launches of %s (uses_thunk=%d)\n", launches,
         tensors ? "4 TMA tensors" : "4 scalar/pointer args", info.uses_thunk);

  for (int i = 0; i < kArgs; ++i)
    Check(fj_mem_free(rt, data[i]), "fj_mem_free");
  Check(fj_stream_destroy(stream), "fj_stream_destroy");
  Check(fj_module_destroy(module), "fj_module_destroy");
  Check(fj_runtime_destroy(rt), "fj_runtime_destroy");
  return 0;
}
