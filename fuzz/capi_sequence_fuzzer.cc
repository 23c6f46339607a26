// Fuzzes sequences of C ABI calls decoded from the input: creates, uses and
// destroys of runtimes, modules, kernels and streams, with valid, destroyed,
// NULL and forged handles, arbitrary struct sizes, enum values and strings,
// in any order. Every status returned is read and freed; whatever an input
// leaves alive is destroyed at its end, so a leak is the library's.
//
// NVRTC is slow, so no input compiles: the init builds one small module
// (when NVRTC is present) into a disk cache in a private directory, and the
// inputs rebuild exactly that request (a cache hit) or requests that are
// refused before NVRTC (targets that start with 'x', bad enums or sizes).
// Without a GPU every launch fails in its checks before the driver, which is
// what is fuzzed here.
//
// Speed: creating and destroying a runtime costs far more than the calls an
// input makes, so one runtime, made in the init, outlives the inputs: each
// input starts with it as its first live runtime (its memory tier already
// holds the cached module, so building that is a memory hit) and may create
// up to two more (which read the disk tier). An input may destroy it like any
// other: then it is made anew after that input. Everything else an input
// created is destroyed at its end, so a leak is still the library's.
#include <fuzzer/FuzzedDataProvider.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"

namespace {

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

constexpr const char kSource[] =
    "struct pair { int a; float b; };\n"
    "extern \"C\" __global__ void k(int* p, int v) { p[threadIdx.x] = v; }\n"
    "__global__ void s(pair x, double d, unsigned char c, short h, long long q)"
    " { }\n";
constexpr const char kTarget[] = "sm_80";

bool g_have_module = false;       // the init's build succeeded (NVRTC present)
fj_runtime* g_runtime = nullptr;  // lives across inputs (see the top)

void Use(FuzzedDataProvider& in, fj_status* st) {
  (void)fj_status_code(st);
  size_t n = 0;
  (void)fj_status_message(st, in.ConsumeBool() ? &n : nullptr);
  std::string key = in.ConsumeBool() ? std::string("build_log")
                                     : in.ConsumeRandomLengthString(12);
  (void)fj_status_detail(st, S(key), in.ConsumeBool() ? &n : nullptr);
  fj_status_free(st);
}

fj_runtime* CreateRuntime(fj_runtime_options* o) {
  fj_runtime* rt = nullptr;
  fj_status* st = fj_runtime_create(o, &rt);
  fj_status_free(st);
  return rt;
}

fj_build_options GoodBuild() {
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = fj_str{kSource, sizeof(kSource) - 1};
  o.name = fj_str{"fuzz.cu", 7};
  o.target = fj_str{kTarget, sizeof(kTarget) - 1};
  return o;
}

template <typename T>
T Pick(FuzzedDataProvider& in, const std::vector<T>& live,
       uintptr_t forged_tag) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return nullptr;
    case 1:
      return reinterpret_cast<T>(in.ConsumeIntegral<uintptr_t>() | forged_tag);
    default:
      if (live.empty()) return nullptr;
      return live[in.ConsumeIntegralInRange<size_t>(0, live.size() - 1)];
  }
}

// Handles the input created, live or destroyed (destroyed ones stay in the
// list: using them is part of the fuzzing; `alive` says which are live).
template <typename T>
struct Handles {
  std::vector<T> all;
  std::vector<bool> alive;
  void Add(T h) {
    if (h == nullptr) return;
    all.push_back(h);
    alive.push_back(true);
  }
  void Dead(T h) {
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == h) alive[i] = false;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static char dir[] = "/tmp/fj-fuzz-cache-XXXXXX";
  if (mkdtemp(dir) != nullptr) setenv("FLEETJIT_CACHE_DIR", dir, 1);
  fj_runtime* rt = CreateRuntime(nullptr);
  fj_build_options o = GoodBuild();
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &o, &m);
  g_have_module = st == nullptr;
  fj_status_free(st);
  fj_status_free(fj_module_destroy(m));
  g_runtime = rt;
  return 0;
}

// g_runtime, made anew if an input destroyed it (with the module in its
// memory tier, as after the init).
void RestoreSharedRuntime() {
  g_runtime = CreateRuntime(nullptr);
  if (!g_have_module) return;
  fj_build_options o = GoodBuild();
  fj_module* m = nullptr;
  fj_status_free(fj_module_build(g_runtime, &o, &m));
  fj_status_free(fj_module_destroy(m));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Handles<fj_runtime*> runtimes;
  Handles<fj_module*> modules;
  std::vector<fj_kernel*> kernels;
  std::vector<fj_runtime*> live_rt;
  std::vector<fj_module*> live_mod;
  const bool shared = g_runtime != nullptr;  // runtimes.all[0] if so
  runtimes.Add(g_runtime);

  int steps = in.ConsumeIntegralInRange<int>(1, 24);
  for (int step = 0; step < steps && in.remaining_bytes() > 0; ++step) {
    fj_runtime* rt = Pick(in, runtimes.all, 1);
    fj_module* mod = Pick(in, modules.all, 2);
    fj_kernel* ker = Pick(in, kernels, 4);
    switch (in.ConsumeIntegralInRange<int>(0, 13)) {
      case 0: {  // create a runtime
        if (runtimes.all.size() >= 3) break;
        fj_runtime_options o{};
        o.struct_size = in.ConsumeBool()
                            ? sizeof(o)
                            : in.ConsumeIntegralInRange<size_t>(0, sizeof(o));
        // Never a runtime that would compile the cached request again: no
        // DISABLE_DISK_CACHE, and a copy override of AUTO or out of range.
        o.flags = in.ConsumeIntegralInRange<uint32_t>(0, 4) &
                  ~uint32_t{FJ_RUNTIME_DISABLE_DISK_CACHE};
        o.copy_impl_override = static_cast<fj_copy_impl>(
            in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int>(4, 9));
        runtimes.Add(
            CreateRuntime(in.ConsumeIntegralInRange<int>(0, 3) ? &o : nullptr));
        break;
      }
      case 1:  // destroy a runtime (any handle)
        Use(in, fj_runtime_destroy(rt));
        runtimes.Dead(rt);
        break;
      case 2: {  // build: the cached request, or one refused before NVRTC
        fj_build_options o = GoodBuild();
        std::string target = "x" + in.ConsumeRandomLengthString(8);
        std::string src = in.ConsumeRandomLengthString(32);
        fj_str opts[2] = {S(src), S(target)};
        bool good = g_have_module && in.ConsumeBool();
        if (!good) {
          o.target = S(target);
          if (in.ConsumeBool()) o.source = S(src);
          o.nvrtc_options = in.ConsumeBool() ? opts : nullptr;
          o.num_nvrtc_options = in.ConsumeIntegralInRange<size_t>(0, 2);
          o.copy_impl =
              static_cast<fj_copy_impl>(in.ConsumeIntegralInRange<int>(-1, 5));
          o.output =
              static_cast<fj_output>(in.ConsumeIntegralInRange<int>(-1, 3));
          o.flags = in.ConsumeIntegral<uint32_t>();
          o.struct_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(o));
          if (o.struct_size <
              offsetof(fj_build_options, target) + sizeof(fj_str))
            o.struct_size =
                0;  // no target: would need a device (or compile on a GPU host)
        }
        fj_module* m = nullptr;
        Use(in, fj_module_build(
                    rt, in.ConsumeIntegralInRange<int>(0, 7) ? &o : nullptr,
                    in.ConsumeIntegralInRange<int>(0, 7) ? &m : nullptr));
        modules.Add(m);
        break;
      }
      case 3: {  // look up a kernel
        static const char* const kNames[] = {
            "k", "s", "s(pair, double, unsigned char, short, long long)",
            "nope", ""};
        std::string name = in.ConsumeBool()
                               ? std::string(in.PickValueInArray(kNames))
                               : in.ConsumeRandomLengthString(16);
        fj_kernel* k = nullptr;
        Use(in, fj_module_get_kernel(
                    mod, S(name), in.ConsumeIntegral<uint32_t>() & 3,
                    in.ConsumeIntegralInRange<int>(0, 7) ? &k : nullptr));
        if (k != nullptr) kernels.push_back(k);
        break;
      }
      case 4: {  // kernel info
        fj_kernel_info info{};
        info.struct_size = in.ConsumeBool() ? sizeof(info)
                                            : in.ConsumeIntegralInRange<size_t>(
                                                  0, sizeof(info));
        Use(in,
            fj_kernel_info_get(
                ker, in.ConsumeIntegralInRange<int>(0, 7) ? &info : nullptr));
        break;
      }
      case 5: {  // launch with random arguments
        fj_launch_config cfg{};
        cfg.struct_size = in.ConsumeBool() ? sizeof(cfg)
                                           : in.ConsumeIntegralInRange<size_t>(
                                                 0, sizeof(cfg));
        for (auto& g : cfg.grid)
          g = in.ConsumeIntegralInRange<uint32_t>(0, 70000);
        for (auto& b : cfg.block)
          b = in.ConsumeIntegralInRange<uint32_t>(0, 2048);
        for (auto& c : cfg.cluster)
          c = in.ConsumeIntegralInRange<uint32_t>(0, 17);
        cfg.shared_bytes = in.ConsumeIntegral<uint32_t>();
        cfg.stream = in.ConsumeIntegralInRange<int>(0, 3)
                         ? nullptr
                         : reinterpret_cast<fj_stream*>(
                               in.ConsumeIntegral<uintptr_t>() | 8);
        size_t n = in.ConsumeIntegralInRange<size_t>(0, 7);
        std::vector<fj_arg> args(n);
        uint8_t blob[64] = {};
        for (auto& a : args) {
          a.struct_size = in.ConsumeIntegralInRange<int>(0, 7)
                              ? sizeof(fj_arg)
                              : in.ConsumeIntegral<uint8_t>() % sizeof(fj_arg);
          a.kind =
              static_cast<fj_arg_kind>(in.ConsumeIntegralInRange<int>(0, 16));
          a.size = in.ConsumeIntegralInRange<uint32_t>(0, 72);
          a.v.u64 = in.ConsumeIntegral<uint64_t>();
          if (a.kind == FJ_ARG_BYTES)
            a.v.bytes = a.size <= sizeof(blob) ? blob : nullptr;
          if (a.kind == FJ_ARG_TENSOR) a.v.tensor = nullptr;
        }
        Use(in, fj_launch(
                    ker, in.ConsumeIntegralInRange<int>(0, 7) ? &cfg : nullptr,
                    n == 0 && in.ConsumeBool() ? nullptr : args.data(), n));
        break;
      }
      case 6:  // destroy a module (any handle)
        Use(in, fj_module_destroy(mod));
        modules.Dead(mod);
        break;
      case 7: {  // module info and image
        fj_module_info info{};
        info.struct_size = in.ConsumeBool() ? sizeof(info)
                                            : in.ConsumeIntegralInRange<size_t>(
                                                  0, sizeof(info));
        Use(in, fj_module_info_get(mod, in.ConsumeBool() ? &info : nullptr));
        const void* image = nullptr;
        size_t bytes = 0;
        Use(in, fj_module_image(mod, in.ConsumeBool() ? &image : nullptr,
                                in.ConsumeBool() ? &bytes : nullptr));
        break;
      }
      case 8: {  // cache statistics and flush
        fj_cache_stats stats{};
        stats.struct_size =
            in.ConsumeBool()
                ? sizeof(stats)
                : in.ConsumeIntegralInRange<size_t>(0, sizeof(stats));
        Use(in,
            fj_cache_stats_get(
                rt, in.ConsumeIntegralInRange<int>(0, 7) ? &stats : nullptr));
        Use(in, fj_cache_flush(rt, 0));
        break;
      }
      case 9: {  // devices, memory and streams: UNAVAILABLE without a GPU
        int32_t count = 0;
        Use(in, fj_device_count(rt, in.ConsumeBool() ? &count : nullptr));
        fj_device_info info{};
        info.struct_size = in.ConsumeBool() ? sizeof(info)
                                            : in.ConsumeIntegralInRange<size_t>(
                                                  0, sizeof(info));
        Use(in, fj_device_info_get(
                    rt, in.ConsumeIntegralInRange<int32_t>(-2, 9), &info));
        (void)fj_runtime_driver_error(
            rt != nullptr && !runtimes.all.empty() ? runtimes.all[0] : nullptr);
        Use(in, fj_mem_free(rt, in.ConsumeIntegral<uint64_t>()));
        fj_stream* s = nullptr;
        Use(in, fj_stream_create(rt, in.ConsumeIntegralInRange<int32_t>(-1, 2),
                                 &s));
        if (s != nullptr) Use(in, fj_stream_destroy(s));
        Use(in, fj_stream_synchronize(reinterpret_cast<fj_stream*>(
                    in.ConsumeIntegral<uintptr_t>())));
        break;
      }
      case 10: {  // copy plans
        std::string t = in.ConsumeBool() ? std::string("sm_90a")
                                         : in.ConsumeRandomLengthString(12);
        fj_copy_plan plan{};
        plan.struct_size = in.ConsumeBool() ? sizeof(plan)
                                            : in.ConsumeIntegralInRange<size_t>(
                                                  0, sizeof(plan));
        Use(in,
            fj_copy_plan_for_target(S(t),
                                    static_cast<fj_copy_impl>(
                                        in.ConsumeIntegralInRange<int>(-1, 5)),
                                    in.ConsumeBool() ? &plan : nullptr));
        break;
      }
      case 11: {  // a tensor check
        int64_t shape[5] = {}, strides[5] = {};
        for (int i = 0; i < 5; ++i) {
          shape[i] = in.ConsumeIntegralInRange<int64_t>(-1, 1 << 20);
          strides[i] = in.ConsumeIntegral<int64_t>();
        }
        fj_tensor t{};
        t.data = reinterpret_cast<void*>(in.ConsumeIntegral<uintptr_t>());
        t.device.device_type = in.ConsumeIntegralInRange<int32_t>(0, 14);
        t.ndim = in.ConsumeIntegralInRange<int32_t>(-1, 5);
        t.dtype = {in.ConsumeIntegralInRange<uint8_t>(0, 10),
                   in.ConsumeIntegral<uint8_t>(), 1};
        t.shape = shape;
        t.strides = in.ConsumeBool() ? strides : nullptr;
        t.byte_offset = in.ConsumeIntegral<uint64_t>();
        fj_tensor_arg arg{};
        arg.struct_size = sizeof(arg);
        arg.tensor = &t;
        for (auto& b : arg.box) b = in.ConsumeIntegralInRange<uint32_t>(0, 300);
        arg.oob = static_cast<fj_oob>(in.ConsumeIntegralInRange<int>(-1, 3));
        fj_tensor_check check{};
        check.struct_size = sizeof(check);
        Use(in, fj_tensor_arg_check(&arg, &check));
        break;
      }
      case 12:  // names of codes and enums
        (void)fj_code_name(static_cast<fj_code>(in.ConsumeIntegral<int>()));
        (void)fj_copy_impl_name(
            static_cast<fj_copy_impl>(in.ConsumeIntegral<int>()));
        (void)fj_feature_name(
            static_cast<fj_feature>(in.ConsumeIntegral<int>()));
        (void)fj_support_name(
            static_cast<fj_support>(in.ConsumeIntegral<int>()));
        (void)fj_version();
        break;
      case 13:  // a NULL status is OK and may be freed
        Use(in, nullptr);
        break;
    }
  }
  // Destroy what is still alive: modules first, then runtimes, except the
  // shared one (runtimes.all[0]), which is made anew if the input destroyed it.
  for (size_t i = 0; i < modules.all.size(); ++i)
    if (modules.alive[i]) fj_status_free(fj_module_destroy(modules.all[i]));
  for (size_t i = shared ? 1 : 0; i < runtimes.all.size(); ++i)
    if (runtimes.alive[i]) fj_status_free(fj_runtime_destroy(runtimes.all[i]));
  if (!shared || !runtimes.alive[0]) RestoreSharedRuntime();
  return 0;
}
