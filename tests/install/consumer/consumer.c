/* The smallest client of an installed fleetjit: create a runtime, build a
 * saxpy kernel for sm_90 (no GPU needed), print OK. */
#include <fleetjit/fleetjit.h>
#include <stdio.h>
#include <string.h>

static const char kSaxpy[] =
    "extern \"C\" __global__ void saxpy(float* y, const float* x, float a, int "
    "n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

static int Failed(fj_status* st, const char* what) {
  if (st == NULL) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, fj_code_name(fj_status_code(st)),
          fj_status_message(st, NULL));
  fj_status_free(st);
  return 1;
}

int main(void) {
  fj_runtime* rt = NULL;
  fj_module* m = NULL;
  fj_build_options o;
  fj_module_info info;
  if (fj_version() >> 16 != FJ_VERSION_MAJOR) {
    fprintf(stderr, "library major %u, header %d\n", fj_version() >> 16,
            FJ_VERSION_MAJOR);
    return 1;
  }
  if (Failed(fj_runtime_create(NULL, &rt), "fj_runtime_create")) return 1;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source.data = kSaxpy;
  o.source.size = strlen(kSaxpy);
  o.target.data = "sm_90";
  o.target.size = 5;
  if (Failed(fj_module_build(rt, &o, &m), "fj_module_build")) return 1;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (Failed(fj_module_info_get(m, &info), "fj_module_info_get")) return 1;
  printf("saxpy for %s (%s): %llu bytes\n", info.target,
         fj_copy_impl_name(info.copy_impl),
         (unsigned long long)info.image_bytes);
  if (Failed(fj_module_destroy(m), "fj_module_destroy") ||
      Failed(fj_runtime_destroy(rt), "fj_runtime_destroy")) {
    return 1;
  }
  printf("OK\n");
  return 0;
}
