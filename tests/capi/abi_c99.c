/* Drives the fleetjit C ABI from strict C99 (built with -std=c99 -Wall
 * -Wpedantic -Werror). Builds a kernel for a named target (no GPU needed);
 * where a GPU exists, also runs it on random data and checks the result. */
#include <fleetjit/fleetjit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;
static int checks = 0;

#define CHECK(cond, what)                                        \
  do {                                                           \
    ++checks;                                                    \
    if (!(cond)) {                                               \
      ++failures;                                                \
      fprintf(stderr, "FAILED: %s (line %d)\n", what, __LINE__); \
    }                                                            \
  } while (0)

static fj_str S(const char* s) {
  fj_str out;
  out.data = s;
  out.size = strlen(s);
  return out;
}

/* Returns the code and frees the status. */
static fj_code Code(fj_status* st) {
  fj_code c = fj_status_code(st);
  if (st != NULL && c != FJ_OK) {
    fprintf(stderr, "  status %s: %s\n", fj_code_name(c),
            fj_status_message(st, NULL));
  }
  fj_status_free(st);
  return c;
}

static const char* kSource =
    "extern \"C\" __global__ void saxpy(float* y, const float* x, float a, int "
    "n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static void RunOnGpu(fj_runtime* rt) {
  enum { N = 100003 };
  static float x[N], y[N], out[N];
  fj_build_options o;
  fj_module* m = NULL;
  fj_kernel* k = NULL;
  fj_arg args[4];
  fj_launch_config cfg;
  uint64_t dx = 0, dy = 0;
  float a = (float)(rand() % 1000) / 250.0f - 2.0f;
  int i, bad = 0;
  for (i = 0; i < N; ++i) {
    x[i] = (float)rand() / (float)RAND_MAX * 8.0f - 4.0f;
    y[i] = (float)rand() / (float)RAND_MAX * 8.0f - 4.0f;
  }
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source = S(kSource);
  o.name = S("saxpy_c99.cu");
  CHECK(Code(fj_module_build(rt, &o, &m)) == FJ_OK, "build for the live GPU");
  CHECK(Code(fj_module_get_kernel(m, S("saxpy"), 0, &k)) == FJ_OK,
        "get kernel");
  CHECK(Code(fj_mem_alloc(rt, 0, sizeof(x), &dx)) == FJ_OK, "alloc x");
  CHECK(Code(fj_mem_alloc(rt, 0, sizeof(y), &dy)) == FJ_OK, "alloc y");
  CHECK(Code(fj_memcpy_htod(rt, dx, x, sizeof(x), NULL)) == FJ_OK, "copy x");
  CHECK(Code(fj_memcpy_htod(rt, dy, y, sizeof(y), NULL)) == FJ_OK, "copy y");
  memset(args, 0, sizeof(args));
  for (i = 0; i < 4; ++i) args[i].struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = dy;
  args[1].kind = FJ_ARG_POINTER;
  args[1].v.pointer = dx;
  args[2].kind = FJ_ARG_F32;
  args[2].v.f32 = a;
  args[3].kind = FJ_ARG_I32;
  args[3].v.i32 = N;
  memset(&cfg, 0, sizeof(cfg));
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = (N + 127) / 128;
  cfg.block[0] = 128;
  memset(out, 0xff, sizeof(out)); /* poison */
  CHECK(Code(fj_launch(k, &cfg, args, 4)) == FJ_OK, "launch");
  CHECK(Code(fj_memcpy_dtoh(rt, out, dy, sizeof(out), NULL)) == FJ_OK,
        "read back");
  for (i = 0; i < N; ++i) {
    float ref = a * x[i] + y[i];
    if (!(fabsf(out[i] - ref) <= 1e-5f * (1.0f + fabsf(ref)))) ++bad;
  }
  CHECK(bad == 0, "saxpy result matches the host");
  /* A wrong argument count is a status, before the driver runs. */
  CHECK(Code(fj_launch(k, &cfg, args, 3)) == FJ_INVALID_ARGUMENT,
        "short argument list");
  CHECK(Code(fj_mem_free(rt, dx)) == FJ_OK, "free x");
  CHECK(Code(fj_mem_free(rt, dx)) == FJ_INVALID_ARGUMENT,
        "double free is refused");
  CHECK(Code(fj_mem_free(rt, dy)) == FJ_OK, "free y");
  CHECK(Code(fj_module_destroy(m)) == FJ_OK, "destroy module");
  CHECK(Code(fj_launch(k, &cfg, args, 4)) == FJ_INVALID_ARGUMENT,
        "kernel of a destroyed module");
}

int main(void) {
  fj_runtime* rt = NULL;
  fj_module* m = NULL;
  fj_copy_plan plan;
  fj_build_options o;
  fj_module_info info;
  int32_t count = -1;
  const void* image = NULL;
  size_t image_size = 0;

  srand((unsigned)time(NULL));
  CHECK(fj_version() >> 16 == FJ_VERSION_MAJOR,
        "library major matches the header");

  memset(&plan, 0, sizeof(plan));
  plan.struct_size = sizeof(plan);
  CHECK(Code(fj_copy_plan_for_target(S("sm_90"), FJ_COPY_IMPL_AUTO, &plan)) ==
            FJ_OK,
        "plan sm_90");
  CHECK(plan.impl == FJ_COPY_IMPL_TMA, "sm_90 uses tma");
  CHECK(Code(fj_copy_plan_for_target(S("sm_80"), FJ_COPY_IMPL_TMA, &plan)) ==
            FJ_FAILED_PRECONDITION,
        "tma forced on sm_80 is refused");

  CHECK(Code(fj_runtime_create(NULL, &rt)) == FJ_OK, "runtime create");
  CHECK(Code(fj_device_count(rt, &count)) == FJ_OK && count >= 0,
        "device count");

  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source = S(kSource);
  o.name = S("saxpy_c99.cu");
  o.target = S("sm_80");
  CHECK(Code(fj_module_build(rt, &o, &m)) == FJ_OK,
        "build for sm_80 without a GPU");
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  CHECK(Code(fj_module_info_get(m, &info)) == FJ_OK, "module info");
  CHECK(strcmp(info.target, "sm_80") == 0, "target is sm_80");
  CHECK(info.copy_impl == FJ_COPY_IMPL_CP_ASYNC, "sm_80 chose cp_async");
  CHECK(Code(fj_module_image(m, &image, &image_size)) == FJ_OK &&
            image_size > 4 && memcmp(image, "\177ELF", 4) == 0,
        "the image is a cubin");
  CHECK(Code(fj_module_destroy(m)) == FJ_OK, "destroy");
  CHECK(Code(fj_module_destroy(m)) == FJ_INVALID_ARGUMENT,
        "double destroy is refused");
  CHECK(Code(fj_module_destroy(NULL)) == FJ_OK, "destroy accepts NULL");

  o.struct_size = 8; /* too short */
  CHECK(Code(fj_module_build(rt, &o, &m)) == FJ_INVALID_ARGUMENT,
        "short struct_size");
  o.struct_size = sizeof(o);
  o.target = S("sm_12345");
  CHECK(Code(fj_module_build(rt, &o, &m)) == FJ_INVALID_ARGUMENT,
        "unknown target");
  o.target = S("sm_80");
  o.source = S("__global__ void broken( { }");
  CHECK(Code(fj_module_build(rt, &o, &m)) == FJ_BUILD_ERROR,
        "source that does not compile");

  if (count > 0)
    RunOnGpu(rt);
  else
    printf("no GPU: skipped the launch part (%s)\n",
           fj_runtime_driver_error(rt));

  CHECK(Code(fj_runtime_destroy(rt)) == FJ_OK, "runtime destroy");
  CHECK(Code(fj_device_count(rt, &count)) == FJ_INVALID_ARGUMENT,
        "destroyed runtime");
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
