/* dlopen_cycle LIBRARY [ROUNDS [keep]]: ROUNDS times (default 100) dlopen
 * the library with RTLD_NOW | RTLD_LOCAL, create a runtime, use it (device
 * count, a copy plan, a build for sm_90 when NVRTC is there), destroy it and
 * dlclose. Built with -fsanitize=address: LeakSanitizer fails the process if
 * a round leaks. "keep" skips the last dlclose, so a leak report can name
 * the library's functions (a closed library's frames are "<unknown module>").
 */
#include <dlfcn.h>
#include <fleetjit/fleetjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define API(X)               \
  X(fj_runtime_create)       \
  X(fj_runtime_destroy)      \
  X(fj_device_count)         \
  X(fj_copy_plan_for_target) \
  X(fj_module_build)         \
  X(fj_module_destroy)       \
  X(fj_cache_stats_get)      \
  X(fj_status_code)          \
  X(fj_status_message)       \
  X(fj_status_free)

typedef struct Api {
#define FIELD(name) __typeof__(&name) name;
  API(FIELD)
#undef FIELD
} Api;

static const char kSaxpy[] =
    "extern \"C\" __global__ void saxpy(float* y, const float* x, float a, int "
    "n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static int Failed(const Api* api, fj_status* st, const char* what, int round) {
  if (st == NULL) return 0;
  fprintf(stderr, "round %d: %s: %s\n", round, what,
          api->fj_status_message(st, NULL));
  api->fj_status_free(st);
  return 1;
}

/* One round; 0 on success. *built is set when the sm_90 build ran. */
static int Round(const char* path, int round, int keep, int* built) {
  Api api;
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  fj_runtime* rt = NULL;
  fj_module* m = NULL;
  fj_copy_plan plan;
  fj_build_options o;
  fj_cache_stats stats;
  fj_status* st;
  int32_t count = -1;
  if (h == NULL) {
    fprintf(stderr, "round %d: dlopen: %s\n", round, dlerror());
    return 1;
  }
#define LOAD(name)                                      \
  *(void**)&api.name = dlsym(h, #name);                 \
  if (api.name == NULL) {                               \
    fprintf(stderr, "round %d: no %s\n", round, #name); \
    return 1;                                           \
  }
  API(LOAD)
#undef LOAD
  memset(&plan, 0, sizeof(plan));
  plan.struct_size = sizeof(plan);
  if (Failed(&api,
             api.fj_copy_plan_for_target((fj_str){"sm_90", 5},
                                         FJ_COPY_IMPL_AUTO, &plan),
             "copy plan", round) ||
      Failed(&api, api.fj_runtime_create(NULL, &rt), "create", round) ||
      Failed(&api, api.fj_device_count(rt, &count), "device count", round)) {
    return 1;
  }
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source = (fj_str){kSaxpy, strlen(kSaxpy)};
  o.target = (fj_str){"sm_90", 5};
  st = api.fj_module_build(rt, &o, &m);
  if (st != NULL && api.fj_status_code(st) == FJ_UNAVAILABLE) {
    api.fj_status_free(
        st); /* no NVRTC here: the rest of the round still runs */
  } else if (Failed(&api, st, "build sm_90", round)) {
    return 1;
  } else {
    *built = 1;
    if (Failed(&api, api.fj_module_destroy(m), "module destroy", round))
      return 1;
  }
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  if (Failed(&api, api.fj_cache_stats_get(rt, &stats), "cache stats", round) ||
      Failed(&api, api.fj_runtime_destroy(rt), "destroy", round)) {
    return 1;
  }
  if (!keep && dlclose(h) != 0) {
    fprintf(stderr, "round %d: dlclose: %s\n", round, dlerror());
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  int rounds = argc > 2 ? atoi(argv[2]) : 100, built = 0, i;
  struct timespec t0, t1;
  if (argc < 2) {
    fprintf(stderr, "usage: dlopen_cycle LIBRARY [ROUNDS]\n");
    return 2;
  }
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (i = 0; i < rounds; ++i) {
    int keep = i == rounds - 1 && argc > 3 && strcmp(argv[3], "keep") == 0;
    if (Round(argv[1], i, keep, &built) != 0) return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf(
      "%d rounds of dlopen/create/use/destroy/dlclose in %.1f s (%s)\n", rounds,
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
      built ? "with sm_90 builds" : "NVRTC absent: no builds");
  return 0;
}
