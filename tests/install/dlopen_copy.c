/* dlopen_copy PREFIX: loads PREFIX/lib/libfleetjit.so.1 with
 * RTLD_NOW | RTLD_LOCAL (no LD_LIBRARY_PATH), builds saxpy for sm_90, and
 * checks that libfleetjit_core.so and every libabsl_* mapped into the
 * process came from PREFIX/lib/fleetjit: the tree is relocatable. */
#include <dlfcn.h>
#include <fleetjit/fleetjit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef fj_status* (*create_fn)(const fj_runtime_options*, fj_runtime**);
typedef fj_status* (*destroy_fn)(fj_runtime*);
typedef fj_status* (*build_fn)(fj_runtime*, const fj_build_options*,
                               fj_module**);
typedef const char* (*message_fn)(const fj_status*, size_t*);

static const char kSaxpy[] =
    "extern \"C\" __global__ void saxpy(float* y, const float* x, float a, int "
    "n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

/* Counts mapped files whose name contains `needle`; those outside `dir` are
 * printed and counted in *foreign. */
static int Mapped(const char* needle, const char* dir, int* foreign) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096], last[4096] = "";
  int n = 0;
  if (maps == NULL) return -1;
  while (fgets(line, sizeof(line), maps) != NULL) {
    char* path = strchr(line, '/');
    if (path == NULL || strstr(path, needle) == NULL) continue;
    path[strcspn(path, "\n")] = 0;
    if (strcmp(path, last) == 0) continue; /* one file, several segments */
    snprintf(last, sizeof(last), "%s", path);
    ++n;
    if (strncmp(path, dir, strlen(dir)) != 0) {
      fprintf(stderr, "mapped from outside %s: %s\n", dir, path);
      ++*foreign;
    }
  }
  fclose(maps);
  return n;
}

int main(int argc, char** argv) {
  char lib[4096], dir[4096];
  void* h;
  create_fn create;
  destroy_fn destroy;
  build_fn build;
  message_fn message;
  fj_runtime* rt = NULL;
  fj_module* m = NULL;
  fj_build_options o;
  fj_status* st;
  int foreign = 0, cores, absl;
  if (argc != 2) {
    fprintf(stderr, "usage: dlopen_copy PREFIX\n");
    return 2;
  }
  if (getenv("LD_LIBRARY_PATH") != NULL) {
    fprintf(stderr, "LD_LIBRARY_PATH is set: the test would prove nothing\n");
    return 2;
  }
  snprintf(lib, sizeof(lib), "%s/lib/libfleetjit.so.1", argv[1]);
  snprintf(dir, sizeof(dir), "%s/lib/", argv[1]);
  h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  *(void**)&create = dlsym(h, "fj_runtime_create");
  *(void**)&destroy = dlsym(h, "fj_runtime_destroy");
  *(void**)&build = dlsym(h, "fj_module_build");
  *(void**)&message = dlsym(h, "fj_status_message");
  if (!create || !destroy || !build || !message) {
    fprintf(stderr, "missing fj_* symbols\n");
    return 1;
  }
  if (dlsym(RTLD_DEFAULT, "fj_runtime_create") != NULL) {
    fprintf(stderr,
            "RTLD_LOCAL leaked fj_runtime_create into the global scope\n");
    return 1;
  }
  if ((st = create(NULL, &rt)) != NULL) {
    fprintf(stderr, "fj_runtime_create: %s\n", message(st, NULL));
    return 1;
  }
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source.data = kSaxpy;
  o.source.size = strlen(kSaxpy);
  o.target.data = "sm_90";
  o.target.size = 5;
  o.flags = FJ_BUILD_NO_CACHE;
  if ((st = build(rt, &o, &m)) != NULL) {
    fprintf(stderr, "fj_module_build: %s\n", message(st, NULL));
    return 1;
  }
  cores = Mapped("libfleetjit_core.so", dir, &foreign);
  absl = Mapped("libabsl_", dir, &foreign);
  printf(
      "from %s: libfleetjit_core.so mapped %d, libabsl_* mapped %d, from "
      "elsewhere %d\n",
      dir, cores, absl, foreign);
  if (cores != 1 || absl < 1 || foreign != 0) return 1;
  destroy(rt);
  if (dlclose(h) != 0) return 1;
  printf("OK\n");
  return 0;
}
