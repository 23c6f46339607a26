// Fuzzes the parsers of names and options: target names (jit::ParseTarget),
// copy implementation names, the C ABI's struct readers (capi/convert:
// fj_runtime_options, fj_build_options, fj_copy_plan with any struct_size)
// and the environment parser (ApplyEnvironment with FLEETJIT_* set to
// arbitrary values). Nothing here compiles or touches a GPU.
#include <fuzzer/FuzzedDataProvider.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "fleetjit/fleetjit.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/config.h"

namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

void Free(fj_status* st) {
  (void)fj_status_code(st);
  size_t n = 0;
  (void)fj_status_message(st, &n);
  fj_status_free(st);
}

// A struct of type T at the start of a zeroed buffer bigger than any
// struct_size chosen here, so a reader honours struct_size without ever
// reading past memory the caller owns.
template <typename T>
struct Padded {
  alignas(16) unsigned char bytes[sizeof(T) + 256] = {};
  T* get() { return reinterpret_cast<T*>(bytes); }
};

size_t PickSize(FuzzedDataProvider& in, size_t real) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return real;
    case 1:
      return in.ConsumeIntegralInRange<size_t>(0, real);
    case 2:
      return in.ConsumeIntegralInRange<size_t>(real, real + 256);
    default:
      return in.ConsumeIntegralInRange<size_t>(0, 2 * sizeof(size_t));
  }
}

const char* const kEnv[] = {"FLEETJIT_TARGET",       "FLEETJIT_COPY_IMPL",
                            "FLEETJIT_CACHE_DIR",    "FLEETJIT_CACHE_MAX_BYTES",
                            "FLEETJIT_CACHE",        "FLEETJIT_THUNKS",
                            "FLEETJIT_LIBCUDA",      "FLEETJIT_LIBNVRTC",
                            "FLEETJIT_REMOTE_CACHE", "FLEETJIT_FLEET_KEY"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);

  std::string name = in.ConsumeRandomLengthString(48);
  auto target = fleetjit::jit::ParseTarget(name);
  if (target.ok()) {
    // A parsed target's canonical name parses to itself.
    std::string canon = target->Name();
    auto again = fleetjit::jit::ParseTarget(canon);
    if (!again.ok() || again->Name() != canon) __builtin_trap();
  }
  auto impl = fleetjit::jit::ParseCopyImpl(name);
  if (impl.has_value()) (void)fleetjit::jit::CopyImplName(*impl);

  // fj_copy_plan_for_target: any name, any enum value, any struct_size.
  {
    Padded<fj_copy_plan> plan;
    plan.get()->struct_size = PickSize(in, sizeof(fj_copy_plan));
    auto e = static_cast<fj_copy_impl>(in.ConsumeIntegralInRange<int>(-2, 6));
    Free(fj_copy_plan_for_target(S(name), e,
                                 in.ConsumeBool() ? plan.get() : nullptr));
    (void)fj_copy_impl_name(e);
    (void)fj_feature_name(static_cast<fj_feature>(in.ConsumeIntegral<int>()));
    (void)fj_support_name(static_cast<fj_support>(in.ConsumeIntegral<int>()));
    (void)fj_code_name(static_cast<fj_code>(in.ConsumeIntegral<int>()));
  }

  // The environment parser.
  {
    int n = in.ConsumeIntegralInRange<int>(0, 4);
    for (int i = 0; i < n; ++i) {
      const char* var =
          kEnv[in.ConsumeIntegralInRange<size_t>(0, std::size(kEnv) - 1)];
      std::string value = in.ConsumeRandomLengthString(64);
      setenv(var, value.c_str(), 1);
    }
    fleetjit::RuntimeOptions options;
    (void)fleetjit::ApplyEnvironment(options);
    for (const char* var : kEnv) unsetenv(var);
  }

  // fj_runtime_create's struct reader: options that are refused before a
  // runtime exists (a bad struct_size, flags, enum or target). Options that
  // would be accepted are not created here: that would open caches and
  // libraries on every input (capi_sequence_fuzzer creates runtimes).
  {
    Padded<fj_runtime_options> ro;
    std::string t = in.ConsumeRandomLengthString(24);
    std::string url = "\x01" + in.ConsumeRandomLengthString(32);
    fj_runtime_options* o = ro.get();
    o->target_override = S(t);
    o->copy_impl_override =
        static_cast<fj_copy_impl>(in.ConsumeIntegralInRange<int>(-1, 6));
    o->flags =
        in.ConsumeIntegral<uint32_t>() | (1u << 31);  // unknown flag: refused
    o->remote_cache_url = S(url);
    o->struct_size = PickSize(in, sizeof(fj_runtime_options));
    fj_runtime* rt = nullptr;
    fj_status* st = fj_runtime_create(o, &rt);
    if (fj_status_code(st) == FJ_OK)
      __builtin_trap();  // the flag must be refused
    Free(st);
  }

  // fj_module_build's struct reader on a live runtime. The target always
  // starts with 'x', so no request reaches NVRTC: it is refused while the
  // options are read (or, with a struct_size short of `target`, for want
  // of a device).
  static fj_runtime* runtime = [] {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    fj_runtime* rt = nullptr;
    Free(fj_runtime_create(&o, &rt));
    return rt;
  }();
  {
    Padded<fj_build_options> bo;
    std::string src = in.ConsumeRandomLengthString(64);
    std::string nm = in.ConsumeRandomLengthString(16);
    std::string tg = "x" + in.ConsumeRandomLengthString(16);
    fj_str opts[3] = {S(src), S(nm), S(tg)};
    fj_build_options* o = bo.get();
    o->source = S(src);
    o->name = S(nm);
    o->target = S(tg);
    o->nvrtc_options = in.ConsumeBool() ? opts : nullptr;
    o->num_nvrtc_options = in.ConsumeIntegralInRange<size_t>(0, 3);
    o->name_expressions = in.ConsumeBool() ? opts : nullptr;
    o->num_name_expressions = in.ConsumeIntegralInRange<size_t>(0, 3);
    o->copy_impl =
        static_cast<fj_copy_impl>(in.ConsumeIntegralInRange<int>(-1, 6));
    o->output = static_cast<fj_output>(in.ConsumeIntegralInRange<int>(-1, 4));
    o->flags = in.ConsumeIntegral<uint32_t>();
    o->struct_size = PickSize(in, sizeof(fj_build_options));
    fj_module* m = nullptr;
    Free(fj_module_build(in.ConsumeBool() ? runtime : nullptr, o, &m));
    if (m != nullptr) __builtin_trap();
  }
  return 0;
}
