/* Enum values from C that C++ may not hold: every enum field and enum
 * argument of the C ABI, given 0x7fffffff, -1, INT32_MIN and small values
 * past its last, is refused with FJ_INVALID_ARGUMENT naming the field (the
 * *_name calls answer "unknown"). Written in C because C may store any int in
 * an enum; the library must read such a field as an int before it range-checks
 * it (clang's -fsanitize=enum reports a load of it as the enum type). Needs no
 * GPU and no NVRTC: every value is refused before either. */
#include <fleetjit/fleetjit.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
static int checks = 0;

static fj_str S(const char* s) {
  fj_str out;
  out.data = s;
  out.size = strlen(s);
  return out;
}

/* Frees `st`; checks it is INVALID_ARGUMENT and its message says
 * "FIELD is VALUE". */
static void ExpectRefused(fj_status* st, const char* field, int32_t value,
                          const char* call) {
  const char* message = fj_status_message(st, NULL);
  char needle[128];
  snprintf(needle, sizeof(needle), "%s is %ld", field, (long)value);
  ++checks;
  if (fj_status_code(st) != FJ_INVALID_ARGUMENT ||
      strstr(message, needle) == NULL) {
    ++failures;
    fprintf(stderr, "FAILED: %s with %s = %ld: %s \"%s\"\n", call, field,
            (long)value, fj_code_name(fj_status_code(st)), message);
  }
  fj_status_free(st);
}

static void ExpectName(const char* got, const char* want, const char* call,
                       int32_t value) {
  ++checks;
  if (strcmp(got, want) != 0) {
    ++failures;
    fprintf(stderr, "FAILED: %s(%ld) is \"%s\", not \"%s\"\n", call,
            (long)value, got, want);
  }
}

static const char* kSource =
    "extern \"C\" __global__ void k(int* p) { p[0] = 1; }";

static fj_build_options Build(void) {
  fj_build_options o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.source = S(kSource);
  o.target = S("sm_80");
  return o;
}

static void CheckValue(fj_runtime* rt, int32_t v) {
  static int64_t shape[1] = {64};
  static const char image[] = "// not read: the kind is refused first\n";
  fj_build_options b = Build();
  fj_module* m = NULL;
  fj_build* pending = NULL;
  fj_runtime* other = NULL;
  fj_runtime_options ro;
  fj_copy_plan plan;
  fj_module_load_options lo;
  fj_tensor t;
  fj_tensor_arg ta;
  fj_tensor_check check;
  fj_copy_desc cd;
  fj_prefetch_desc pd;
  fj_tensor src, dst;

  /* Arguments. */
  ExpectName(fj_copy_impl_name((fj_copy_impl)v), "unknown", "fj_copy_impl_name",
             v);
  ExpectName(fj_feature_name((fj_feature)v), "unknown", "fj_feature_name", v);
  ExpectName(fj_support_name((fj_support)v), "unknown", "fj_support_name", v);
  ExpectName(fj_code_name((fj_code)v), "UNKNOWN", "fj_code_name", v);
  memset(&plan, 0, sizeof(plan));
  plan.struct_size = sizeof(plan);
  ExpectRefused(fj_copy_plan_for_target(S("sm_80"), (fj_copy_impl)v, &plan),
                "impl", v, "fj_copy_plan_for_target");

  /* fj_runtime_options. */
  memset(&ro, 0, sizeof(ro));
  ro.struct_size = sizeof(ro);
  ro.copy_impl_override = (fj_copy_impl)v;
  ExpectRefused(fj_runtime_create(&ro, &other), "copy_impl_override", v,
                "fj_runtime_create");
  ro.copy_impl_override = FJ_COPY_IMPL_AUTO;
  ro.log_level = v;
  ExpectRefused(fj_runtime_create(&ro, &other), "log_level", v,
                "fj_runtime_create");

  /* fj_build_options, blocking and not. */
  b.copy_impl = (fj_copy_impl)v;
  ExpectRefused(fj_module_build(rt, &b, &m), "copy_impl", v, "fj_module_build");
  ExpectRefused(fj_module_build_async(rt, &b, &pending), "copy_impl", v,
                "fj_module_build_async");
  b.copy_impl = FJ_COPY_IMPL_AUTO;
  b.output = (fj_output)v;
  ExpectRefused(fj_module_build(rt, &b, &m), "output", v, "fj_module_build");
  ExpectRefused(fj_module_build_async(rt, &b, &pending), "output", v,
                "fj_module_build_async");

  /* fj_module_load_options. */
  memset(&lo, 0, sizeof(lo));
  lo.struct_size = sizeof(lo);
  lo.image = image;
  lo.image_size = sizeof(image) - 1;
  lo.kind = (fj_image_kind)v;
  ExpectRefused(fj_module_load(rt, &lo, &m), "kind", v, "fj_module_load");

  /* fj_tensor_arg (as fj_launch reads it, too). */
  memset(&t, 0, sizeof(t));
  t.data = (void*)(uintptr_t)0x7f0000000000ull;
  t.device.device_type = 2;
  t.ndim = 1;
  t.dtype.code = 2;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  memset(&ta, 0, sizeof(ta));
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  ta.oob = (fj_oob)v;
  memset(&check, 0, sizeof(check));
  check.struct_size = sizeof(check);
  ExpectRefused(fj_tensor_arg_check(&ta, &check), "oob", v,
                "fj_tensor_arg_check");

  /* fj_copy_desc and fj_prefetch_desc. */
  src = t;
  dst = t;
  dst.data = (void*)(uintptr_t)0x7f1000000000ull;
  memset(&cd, 0, sizeof(cd));
  cd.struct_size = sizeof(cd);
  cd.src = &src;
  cd.dst = &dst;
  cd.oob = (fj_oob)v;
  ExpectRefused(fj_copy(rt, &cd, NULL), "oob", v, "fj_copy");
  memset(&pd, 0, sizeof(pd));
  pd.struct_size = sizeof(pd);
  pd.address = 0x7f0000000000ull;
  pd.bytes = 4096;
  pd.reader_device = -1;
  pd.mode = (fj_prefetch_mode)v;
  ExpectRefused(fj_prefetch(rt, &pd, NULL), "mode", v, "fj_prefetch");

  /* Nothing was made. */
  ++checks;
  if (m != NULL || pending != NULL || other != NULL) {
    ++failures;
    fprintf(stderr, "FAILED: an output was written on error (value %ld)\n",
            (long)v);
  }
}

int main(void) {
  fj_runtime* rt = NULL;
  fj_status* st = fj_runtime_create(NULL, &rt);
  /* Outside every enum here: FJ_CODE_LAST + 1 (11) is past the longest
   * (fj_code, and fj_feature's FJ_FEATURE_COUNT). */
  const int32_t values[] = {0x7fffffff, -1, INT32_MIN, FJ_CODE_LAST + 1, 4096};
  size_t i;
  if (st != NULL) {
    fprintf(stderr, "fj_runtime_create: %s\n", fj_status_message(st, NULL));
    fj_status_free(st);
    return 1;
  }
  for (i = 0; i < sizeof(values) / sizeof(values[0]); ++i)
    CheckValue(rt, values[i]);
  fj_status_free(fj_runtime_destroy(rt));
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
