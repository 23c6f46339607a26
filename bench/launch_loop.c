/* fj_launch in a loop through the public C ABI, and nothing else timed:
 * the subject for counting what a launch costs in instructions, or for
 * profiling it on a GPU host. It prints no anchor: launch_bench measures
 * against raw cuLaunchKernel; this program is for the counters.
 *
 *   launch_loop [LAUNCHES [args|tensors]]     (default 1000 args)
 *
 * "args" launches an empty kernel of 4 scalar/pointer parameters, "tensors"
 * one of 4 TMA tensor parameters, the same tensors every launch (the kept
 * parameters' path). Instructions per launch over the tests' fake driver:
 *
 *   FLEETJIT_LIBCUDA=build/lib/libfj_fake_cuda.so valgrind --tool=callgrind \
 *     --toggle-collect=fj_launch build/bench/launch_loop 1000 args
 *
 * and the total over 1000 launches, divided by 1000 (docs/measurements.md,
 * "Instructions per launch"). The kernel's thunk is generated in the
 * background after a cold build; the loop starts once the kernel has it
 * (or after 5 s, on the generic path, which it then says). */
#include <fleetjit/fleetjit.h>
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

int main(int argc, char** argv) {
  const long launches = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
  const int tensors = argc > 2 && strcmp(argv[2], "tensors") == 0;
  if (launches <= 0 || (argc > 2 && !tensors && strcmp(argv[2], "args"))) {
    fprintf(stderr, "usage: launch_loop [LAUNCHES [args|tensors]]\n");
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

  for (long i = 0; i < launches; ++i)
    Check(fj_launch(kernel, &cfg, args, kArgs), "fj_launch");
  Check(fj_stream_synchronize(stream), "fj_stream_synchronize");
  printf("launch_loop: %ld launches of %s (uses_thunk=%d)\n", launches,
         tensors ? "4 TMA tensors" : "4 scalar/pointer args", info.uses_thunk);

  for (int i = 0; i < kArgs; ++i)
    Check(fj_mem_free(rt, data[i]), "fj_mem_free");
  Check(fj_stream_destroy(stream), "fj_stream_destroy");
  Check(fj_module_destroy(module), "fj_module_destroy");
  Check(fj_runtime_destroy(rt), "fj_runtime_destroy");
  return 0;
}
