// Launch overhead: host time per launch of an empty kernel through
// fleetjit's launch path, next to raw cuLaunchKernel of the same CUfunction
// measured in the same run (interleaved batches, so drift hits both).
//
//   (a) 4 scalar/pointer arguments, JIT-built thunk    goal <= 1.02x raw
//   (b) 4 TMA tensor arguments, pointers reused        goal <= 1.05x raw
//   (c) the generic (interpreted) path, for comparison
//   (d) the public C ABI fj_launch, 4 args and 4 TMA tensors: the same
//       goals (issue 21's: at most 1.02x and 1.05x of raw)
//   the driver's own entries, for the record: raw cuLaunchKernel with a
//   parameter buffer (`extra`), raw cuLaunchKernelEx with one, and raw
//   cuCtxGetCurrent + cuLaunchKernel (fleetjit checks the current context)
//   (e) fj_launch from 16 threads on 16 streams against raw cuLaunchKernel
//       from 16 threads on 16 streams: host launch throughput, all threads
//       together                                      goal >= 0.9x raw
//
// `launch_bench attributes` instead times ABI 1.3's launch attributes
// (programmatic dependent launch, a persisting L2 window) against their
// anchors: bench/launch_bench_attributes.cc.
//
// Also: the thunk JIT time (IR + ELF emission, and loading the object into
// a fresh JIT) and its share of a cold module build, and, on the CPU alone,
// the cost of packing the parameter buffer through each path. Without a
// GPU only the CPU part runs; the program says so and exits 0. With
// FLEETJIT_LIBCUDA=build/lib/libfj_fake_cuda.so (the tests' fake driver,
// whose launches check their arguments and do nothing) the whole table runs
// on any machine: fleetjit's own host cost per launch, next to the fake's.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "jit/thunk/arg_rules.h"
#include "jit/thunk/thunk_codegen.h"
#include "jit/thunk/thunk_jit.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/launch_thunks.h"
#include "runtime/launch/tensor_encoder.h"
#include "runtime/runtime.h"

namespace fleetjit::bench {
namespace {

constexpr char kSource[] = R"CUDA(
#include <fleetjit/copy.cuh>
extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}
extern "C" __global__ void empty_tensors(FJ_TENSOR(float, 2) a, FJ_TENSOR(float, 2) b,
                                         FJ_TENSOR(float, 2) c, FJ_TENSOR(float, 2) d) {}
)CUDA";

constexpr int kBatch = 64;  // launches per timed batch
// Tensors "at new addresses" take the next of kMovingTurns offsets
// kMovingStep bytes apart: 4 x 256 tensors, 8 times what the per-thread
// cache holds, within the 1 MiB each [256, 256] f32 tensor is given.
constexpr unsigned kMovingTurns = 256;
constexpr uint64_t kMovingStep = 1024;
// Where the CPU table's tensors claim to be (nothing reads them there).
constexpr uint64_t kCpuTensorBase = 0x7f0000000000ull;
constexpr int kWarmup = 50;   // batches
constexpr int kRounds = 400;  // batches per case, interleaved

using Clock = std::chrono::steady_clock;

double UsPer(Clock::time_point start, int n) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start)
             .count() /
         n;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "launch_bench: %s\n", what.c_str());
  std::exit(1);
}

void DieIf(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

// A tensor the bench owns: [256, 256] f32, compact, box {32, 32}.
struct BenchTensor {
  int64_t shape[2] = {256, 256};
  fj_tensor tensor{};
  fj_tensor_arg arg{};
  void Set(uint64_t address) {
    tensor.data = reinterpret_cast<void*>(static_cast<uintptr_t>(address));
    tensor.device = {2, 0};
    tensor.ndim = 2;
    tensor.dtype = {2, 32, 1};
    tensor.shape = shape;
    arg.struct_size = sizeof(arg);
    arg.tensor = &tensor;
    arg.box[0] = 32;
    arg.box[1] = 32;
    arg.oob = FJ_OOB_ZEROS;
  }
};

// --- CPU: packing alone
// -------------------------------------------------------

CUresult StubEncode(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void*,
                    const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                    const cuuint32_t*, CUtensorMapInterleave,
                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                    CUtensorMapFloatOOBfill) {
  std::memset(map, 0x42, sizeof(*map));
  return CUDA_SUCCESS;
}

jit::KernelEntry Entry(const std::string& name,
                       std::vector<jit::ParamKind> kinds) {
  jit::KernelEntry e;
  e.name = name;
  uint32_t offset = 0;
  for (jit::ParamKind kind : kinds) {
    jit::ParamSpec p;
    p.kind = kind;
    p.size = kind == jit::ParamKind::kTensor    ? 320
             : kind == jit::ParamKind::kPointer ? 8
                                                : 4;
    p.align = kind == jit::ParamKind::kTensor ? 64 : p.size;
    offset = (offset + p.align - 1) / p.align * p.align;
    p.offset = offset;
    offset += p.size;
    e.params.push_back(p);
  }
  e.param_bytes = offset;
  return e;
}

// Moves the 4 bench tensors at `base`, 1 MiB apart, to their `turn`-th
// place (kMovingStep apart; turn 0: where BenchTensor::Set put them).
void MoveTensors(BenchTensor* tensors, uint64_t base, unsigned turn) {
  for (int i = 0; i < 4; ++i) {
    tensors[i].tensor.data = reinterpret_cast<void*>(static_cast<uintptr_t>(
        base + (uint64_t{1} << 20) * i + kMovingStep * turn));
  }
}

// ns per PackForLaunch call, median of batches. With `moving` (4 tensors),
// each call first moves the tensors to the next of kMovingTurns addresses:
// more than the per-thread cache holds, so every call encodes them.
double PackNs(const LoadedKernel& k, const std::vector<fj_arg>& args,
              const DriverApi& api, bool use_thunk,
              BenchTensor* moving = nullptr) {
  TensorEncoder encoder(&api, k.display_name, nullptr, nullptr);
  alignas(64) static uint8_t buffer[jit::kMaxParamBytes];
  std::vector<double> ns;
  unsigned turn = 0;
  for (int round = 0; round < 200; ++round) {
    const auto start = Clock::now();
    for (int i = 0; i < 1000; ++i) {
      if (moving != nullptr) {
        turn = (turn + 1) % kMovingTurns;
        MoveTensors(moving, kCpuTensorBase, turn);
      }
      DieIf(PackForLaunch(k, args.data(), args.size(), sizeof(fj_arg), encoder,
                          use_thunk, buffer, sizeof(buffer)),
            "packing");
    }
    ns.push_back(UsPer(start, 1000) * 1000);
  }
  return Median(ns);
}

void PackingOnTheCpu(const DriverApi* real_api) {
  DriverApi stub;
  stub.cuTensorMapEncodeTiled = &StubEncode;
  const DriverApi& api = real_api != nullptr ? *real_api : stub;
  auto jit = jit::ThunkJit::Create();
  DieIf(jit.status(), "starting the thunk JIT");
  std::printf(
      "\nPacking the parameter buffer (CPU only, ns per launch, median):\n");
  std::printf("  %-34s %10s %10s\n", "signature", "thunk", "generic");
  static BenchTensor tensors[4];
  for (int i = 0; i < 4; ++i)
    tensors[i].Set(kCpuTensorBase + (uint64_t{1} << 20) * i);
  struct Case {
    const char* name;
    jit::KernelEntry entry;
    jit::CopyImpl impl;
    std::vector<fj_arg> args;
    bool moving = false;  // a new address every call (PackNs)
  };
  std::vector<fj_arg> scalars = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER),
                                 Arg(FJ_ARG_F32), Arg(FJ_ARG_I32)};
  std::vector<fj_arg> four(4, Arg(FJ_ARG_TENSOR));
  for (int i = 0; i < 4; ++i) four[i].v.tensor = &tensors[i].arg;
  std::vector<fj_arg> many;
  std::vector<jit::ParamKind> many_kinds;
  for (int i = 0; i < 16; ++i) {
    many.push_back(Arg(i % 2 ? FJ_ARG_I32 : FJ_ARG_POINTER));
    many_kinds.push_back(i % 2 ? jit::ParamKind::kSigned
                               : jit::ParamKind::kPointer);
  }
  using K = jit::ParamKind;
  std::vector<Case> cases = {
      {"4 scalar/pointer args",
       Entry("s", {K::kPointer, K::kPointer, K::kFloat, K::kSigned}),
       jit::CopyImpl::kTma, scalars},
      {"16 scalar/pointer args", Entry("m", many_kinds), jit::CopyImpl::kTma,
       many},
      {"4 TMA tensors (maps reused)",
       Entry("t", {K::kTensor, K::kTensor, K::kTensor, K::kTensor}),
       jit::CopyImpl::kTma, four},
      {"4 tensors, cp_async build",
       Entry("t", {K::kTensor, K::kTensor, K::kTensor, K::kTensor}),
       jit::CopyImpl::kCpAsync, four},
      {"4 TMA tensors, new addresses",
       Entry("t", {K::kTensor, K::kTensor, K::kTensor, K::kTensor}),
       jit::CopyImpl::kTma, four, true},
  };
  for (Case& c : cases) {
    auto object = jit::EmitThunkObject({c.entry}, c.impl);
    DieIf(object.status(), "thunk codegen");
    auto lib = (*jit)->Load(*object);
    DieIf(lib.status(), "thunk load");
    auto thunk = (*jit)->Find(*lib, c.entry, c.impl);
    DieIf(thunk.status(), "thunk lookup");
    LoadedKernel k;
    k.entry = &c.entry;
    k.copy_impl = c.impl;
    k.display_name = c.name;
    k.thunk.store(*thunk);
    BenchTensor* moving = c.moving ? tensors : nullptr;
    const double thunk_ns = PackNs(k, c.args, api, true, moving);
    const double generic_ns = PackNs(k, c.args, api, false, moving);
    if (moving != nullptr) MoveTensors(tensors, kCpuTensorBase, 0);
    std::printf("  %-34s %10.1f %10.1f\n", c.name, thunk_ns, generic_ns);
  }
}

// --- GPU
// ------------------------------------------------------------------------

struct Row {
  std::string name;
  double raw_us;
  double ours_us;
  double goal;  // 0 = none
};

void PrintRows(const std::vector<Row>& rows, bool header = true) {
  if (header) {
    std::printf("  %-50s %10s %12s %8s %8s\n", "case", "raw us", "fleetjit us",
                "ratio", "goal");
  }
  for (const Row& r : rows) {
    const double ratio = r.ours_us / r.raw_us;
    std::printf("  %-50s %10.3f %12.3f %7.3fx %8s%s\n", r.name.c_str(),
                r.raw_us, r.ours_us, ratio,
                r.goal > 0 ? absl::StrCat("<=", r.goal, "x").c_str() : "-",
                r.goal > 0 ? (ratio <= r.goal ? "  met" : "  MISSED") : "");
  }
}

// (e) Host launch throughput of `threads` threads, each launching on its
// own stream: launch(t) launches once on thread t's stream, sync(t) waits
// for it. Each thread times batches of kBatch launches (its stream is
// synchronised, untimed, after each, so no queue fills and blocks) and
// the result adds up 1 / (median time per launch) over the threads.
struct ThreadedLaunches {
  double launches_per_s;  // all threads together
  double median_us;       // per launch, median thread
};
template <typename Launch, typename Sync>
void LaunchOnThreads(int threads, int batches, Launch launch, Sync sync,
                     std::vector<std::vector<double>>& us) {
  measure::OnThreadsTogether(threads, [&](int t) {
    for (int b = 0; b < batches; ++b) {
      const auto start = Clock::now();
      for (int i = 0; i < kBatch; ++i) launch(t);
      us[t].push_back(UsPer(start, kBatch));
      sync(t);
    }
  });
}

ThreadedLaunches Summarise(const std::vector<std::vector<double>>& us) {
  ThreadedLaunches out{0, 0};
  std::vector<double> medians;
  for (const std::vector<double>& v : us) {
    medians.push_back(Median(v));
    out.launches_per_s += 1e6 / medians.back();
  }
  out.median_us = Median(medians);
  return out;
}

int RunGpu(Runtime& rt) {
  const DriverApi& api = *rt.driver();
  Device* dev = *rt.device(0);
  DieIf(dev->MakeCurrent().status(), "entering device 0");
  std::printf("device 0: %s (sm_%d), driver %d\n", dev->facts().name.c_str(),
              dev->facts().arch(), api.driver_version);

  // 1. A cold build: NVRTC, then the thunks for its kernels.
  BuildSpec build;
  build.source = kSource;
  build.name = "launch_bench.cu";
  build.use_cache = false;
  auto record = rt.BuildRecord(build);
  DieIf(record.status(), "building the bench kernels");
  rt.WaitForBackgroundWork();  // thunks are generated after a cold build
  const jit::Artifact& artifact = *record->artifact;
  jit::ThunkCodegenStats codegen;
  auto object =
      jit::EmitThunkObject(artifact.kernels, artifact.copy_impl, &codegen);
  DieIf(object.status(), "thunk codegen");
  auto fresh = jit::ThunkJit::Create();
  DieIf(fresh.status(), "thunk JIT");
  const auto load_start = Clock::now();
  DieIf((*fresh)->Load(*object).status(), "loading the thunk object");
  const double load_ms = UsPer(load_start, 1) / 1000;
  const double thunk_ms = codegen.ir_ms + codegen.codegen_ms;
  std::printf("\nThunk JIT (%d thunks, copy impl %s):\n", codegen.thunks,
              std::string(jit::CopyImplName(artifact.copy_impl)).c_str());
  std::printf(
      "  IR build %.3f ms + ELF emission %.3f ms = %.3f ms; object load (cache "
      "hit "
      "path, fresh JIT) %.3f ms; %zu-byte object\n",
      codegen.ir_ms, codegen.codegen_ms, thunk_ms, load_ms,
      codegen.object_bytes);
  std::printf(
      "  cold build: NVRTC %.1f ms + thunks %.3f ms -> thunks are %.2f%% of "
      "it\n",
      artifact.compile_ms, thunk_ms,
      100 * thunk_ms / (artifact.compile_ms + thunk_ms));

  // 2. The kernels, with thunks attached.
  LaunchThunks thunks(true);
  auto args_kernel = rt.LoadKernel(*record, "empty_args", 0);
  auto tensor_kernel = rt.LoadKernel(*record, "empty_tensors", 0);
  DieIf(args_kernel.status(), "loading empty_args");
  DieIf(tensor_kernel.status(), "loading empty_tensors");
  LoadedKernel& ka = **args_kernel;
  LoadedKernel& kt = **tensor_kernel;
  DieIf(thunks.Attach(artifact, ka), "attaching a thunk");
  DieIf(thunks.Attach(artifact, kt), "attaching a thunk");
  const LaunchThunk* ka_thunk = ka.thunk.load();
  const LaunchThunk* kt_thunk = kt.thunk.load();

  CUstream stream = nullptr;
  DieIf(FJ_CU_CALL(api, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING),
        "stream");
  auto a = rt.Allocate(0, 4 << 20);
  DieIf(a.status(), "allocating");
  BenchTensor tensors[4];
  for (int i = 0; i < 4; ++i) tensors[i].Set(*a + (uint64_t{1} << 20) * i);

  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  // The same geometry as the runtime takes it (capi/convert.cc converts).
  LaunchConfig launch_cfg;
  launch_cfg.grid[0] = cfg.grid[0];
  launch_cfg.block[0] = cfg.block[0];
  std::vector<fj_arg> scalar_args = {Arg(FJ_ARG_POINTER), Arg(FJ_ARG_POINTER),
                                     Arg(FJ_ARG_F32), Arg(FJ_ARG_I32)};
  scalar_args[0].v.pointer = *a;
  scalar_args[1].v.pointer = *a + 4096;
  scalar_args[2].v.f32 = 2.0f;
  scalar_args[3].v.i32 = 1024;
  std::vector<fj_arg> tensor_args(4, Arg(FJ_ARG_TENSOR));
  for (int i = 0; i < 4; ++i) tensor_args[i].v.tensor = &tensors[i].arg;

  // Raw cuLaunchKernel arguments: the same values, tensor maps pre-encoded.
  CUdeviceptr p0 = *a, p1 = *a + 4096;
  float c = 2.0f;
  int n = 1024;
  void* raw_scalar[] = {&p0, &p1, &c, &n};
  TensorEncoder encoder(&api, "raw", nullptr, nullptr);
  encoder.set_cache_enabled(false);
  alignas(64) static fj::tensor_param raw_params[4];
  for (int i = 0; i < 4; ++i) {
    DieIf(
        encoder.Encode(i, &tensors[i].arg, 0, -1, kt.copy_impl, &raw_params[i]),
        "encoding");
  }
  void* raw_tensor[] = {&raw_params[0], &raw_params[1], &raw_params[2],
                        &raw_params[3]};
  const bool tma = kt.copy_impl == jit::CopyImpl::kTma;
  if (tma && (raw_params[0].flags & FJ_TP_HAS_TMAP) == 0)
    Die("the bench tensors got no TMA map");

  // The same 24 bytes as one parameter buffer (float*, const float*, float,
  // int at offsets 0, 8, 16, 20), for the driver's `extra` entries.
  alignas(8) static uint8_t raw_buffer[24];
  std::memcpy(raw_buffer, &p0, 8);
  std::memcpy(raw_buffer + 8, &p1, 8);
  std::memcpy(raw_buffer + 16, &c, 4);
  std::memcpy(raw_buffer + 20, &n, 4);
  static size_t raw_buffer_bytes = sizeof(raw_buffer);
  static void* raw_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, raw_buffer,
                              CU_LAUNCH_PARAM_BUFFER_SIZE, &raw_buffer_bytes,
                              CU_LAUNCH_PARAM_END};
  // The four tensor parameters as one buffer at the kernel's offsets (sm_90
  // puts the first at byte 48): how fleetjit hands its packed parameters to
  // the driver.
  alignas(64) static uint8_t raw_tensor_buffer[sizeof(raw_params) + 64];
  static size_t raw_tensor_bytes = kt.entry->param_bytes;
  if (raw_tensor_bytes > sizeof(raw_tensor_buffer) ||
      kt.entry->params.size() != 4) {
    Die(absl::StrCat("empty_tensors takes ", raw_tensor_bytes,
                     " parameter bytes in ", kt.entry->params.size(),
                     " parameters, not four tensors"));
  }
  for (int i = 0; i < 4; ++i) {
    std::memcpy(raw_tensor_buffer + kt.entry->params[i].offset, &raw_params[i],
                sizeof(raw_params[i]));
  }
  static void* raw_tensor_extra[] = {
      CU_LAUNCH_PARAM_BUFFER_POINTER, raw_tensor_buffer,
      CU_LAUNCH_PARAM_BUFFER_SIZE, &raw_tensor_bytes, CU_LAUNCH_PARAM_END};

  // (f) A new address every launch, as an allocator hands out fresh
  // buffers: the four tensors move through kMovingTurns offsets, more than
  // the per-thread cache holds, so every launch encodes all four. The
  // anchor is what host code written by hand pays: four
  // cuTensorMapEncodeTiled calls (the same arguments fleetjit passes) and
  // cuLaunchKernel.
  BenchTensor moving[4];
  for (int i = 0; i < 4; ++i) moving[i].Set(*a + (uint64_t{1} << 20) * i);
  std::vector<fj_arg> moving_args(4, Arg(FJ_ARG_TENSOR));
  for (int i = 0; i < 4; ++i) moving_args[i].v.tensor = &moving[i].arg;
  unsigned moving_turn = 0;
  auto move_tensors = [&] {
    moving_turn = (moving_turn + 1) % kMovingTurns;
    MoveTensors(moving, *a, moving_turn);
  };
  alignas(64) static fj::tensor_param moving_raw[4];
  std::memcpy(moving_raw, raw_params, sizeof(raw_params));
  void* moving_raw_ptrs[] = {&moving_raw[0], &moving_raw[1], &moving_raw[2],
                             &moving_raw[3]};

  // The C ABI: its own runtime, module and kernel.
  fj_runtime* crt = nullptr;
  Check(fj_runtime_create(nullptr, &crt), "fj_runtime_create");
  fj_build_options bo{};
  bo.struct_size = sizeof(bo);
  bo.source = Str(kSource);
  bo.name = Str("launch_bench.cu");
  fj_module* cmod = nullptr;
  Check(fj_module_build(crt, &bo, &cmod), "fj_module_build");
  fj_kernel* ckernel = nullptr;
  Check(fj_module_get_kernel(cmod, Str("empty_args"), 0, &ckernel),
        "fj_module_get_kernel");
  fj_kernel* ckernel_t = nullptr;
  Check(fj_module_get_kernel(cmod, Str("empty_tensors"), 0, &ckernel_t),
        "fj_module_get_kernel");
  // Thunks are generated in the background after a cold build: measure
  // once this kernel has its thunk (or after 5 s, on the generic path).
  fj_kernel_info info{};
  info.struct_size = sizeof(info);
  fj_kernel_info info_t{};
  info_t.struct_size = sizeof(info_t);
  for (double start = NowMs(); NowMs() - start < 5000;) {
    Check(fj_kernel_info_get(ckernel, &info), "fj_kernel_info_get");
    Check(fj_kernel_info_get(ckernel_t, &info_t), "fj_kernel_info_get");
    if (info.uses_thunk && info_t.uses_thunk) break;
    usleep(1000);
  }
  // The raw anchor's own stream, wrapped: a launch's cost depends on the
  // stream (its flags, its queue), so both sides launch onto one CUstream.
  fj_stream* cstream = nullptr;
  Check(fj_stream_wrap(crt, 0, reinterpret_cast<uint64_t>(stream), &cstream),
        "fj_stream_wrap");
  fj_launch_config ccfg = cfg;
  ccfg.stream = cstream;

  // 3. Interleaved timed batches. Each batch is followed by an untimed
  // synchronize, so the launch queue never fills and blocks.
  using LaunchFn = std::function<void()>;
  struct Case {
    std::string name;
    LaunchFn launch;
    LaunchFn before;  // untimed, before each batch
    std::vector<double> us;
  };
  auto raw = [&](CUfunction f, void** params) {
    return [&api, f, params, &stream] {
      if (api.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, stream, params,
                             nullptr) != CUDA_SUCCESS) {
        Die("cuLaunchKernel failed");
      }
    };
  };
  // The driver's other entries, same kernel, same values.
  CUlaunchConfig raw_ex{};
  raw_ex.gridDimX = raw_ex.gridDimY = raw_ex.gridDimZ = 1;
  raw_ex.blockDimX = 32;
  raw_ex.blockDimY = raw_ex.blockDimZ = 1;
  raw_ex.hStream = stream;
  auto raw_extra_plain = [&] {
    if (api.cuLaunchKernel(ka.function, 1, 1, 1, 32, 1, 1, 0, stream, nullptr,
                           raw_extra) != CUDA_SUCCESS) {
      Die("cuLaunchKernel (extra) failed");
    }
  };
  auto raw_extra_ex = [&] {
    if (api.cuLaunchKernelEx(&raw_ex, ka.function, nullptr, raw_extra) !=
        CUDA_SUCCESS) {
      Die("cuLaunchKernelEx failed");
    }
  };
  auto raw_tensor_extra_ex = [&] {
    if (api.cuLaunchKernelEx(&raw_ex, kt.function, nullptr, raw_tensor_extra) !=
        CUDA_SUCCESS) {
      Die("cuLaunchKernelEx (tensors) failed");
    }
  };
  auto raw_ctx_plain = [&api, plain = raw(ka.function, raw_scalar)] {
    CUcontext current = nullptr;
    if (api.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == nullptr)
      Die("cuCtxGetCurrent failed");
    plain();
  };
  auto raw_moving = [&] {
    move_tensors();
    const cuuint64_t dims[2] = {256, 256};
    const cuuint64_t strides[1] = {256 * sizeof(float)};
    const cuuint32_t box[2] = {32, 32};
    const cuuint32_t element_strides[2] = {1, 1};
    for (int i = 0; i < 4; ++i) {
      if (api.cuTensorMapEncodeTiled(
              reinterpret_cast<CUtensorMap*>(moving_raw[i].tmap),
              CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
              const_cast<void*>(moving[i].tensor.data), dims, strides, box,
              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        Die("cuTensorMapEncodeTiled failed");
      }
    }
    if (api.cuLaunchKernel(kt.function, 1, 1, 1, 32, 1, 1, 0, stream,
                           moving_raw_ptrs, nullptr) != CUDA_SUCCESS) {
      Die("cuLaunchKernel (moving tensors) failed");
    }
  };
  auto ours = [&](LoadedKernel& k, const std::vector<fj_arg>& args) {
    return [&k, &args, &launch_cfg, &stream] {
      absl::Status s = Launch(k, launch_cfg, stream, args.data(), args.size(),
                              sizeof(fj_arg));
      if (!s.ok()) Die(s.ToString());
    };
  };
  // The same LoadedKernel serves both paths: the thunk pointer is set
  // before each batch (the generic path is what a kernel without a thunk,
  // or FLEETJIT_THUNKS=0, runs).
  auto with = [](LoadedKernel& k, const LaunchThunk* thunk) {
    return [&k, thunk] { k.thunk.store(thunk); };
  };
  auto nothing = [] {};
  std::vector<Case> cases;
  cases.push_back({"raw scalar", raw(ka.function, raw_scalar), nothing, {}});
  cases.push_back(
      {"thunk scalar", ours(ka, scalar_args), with(ka, ka_thunk), {}});
  cases.push_back(
      {"generic scalar", ours(ka, scalar_args), with(ka, nullptr), {}});
  cases.push_back({"raw tensors", raw(kt.function, raw_tensor), nothing, {}});
  cases.push_back(
      {"thunk tensors", ours(kt, tensor_args), with(kt, kt_thunk), {}});
  cases.push_back(
      {"generic tensors", ours(kt, tensor_args), with(kt, nullptr), {}});
  cases.push_back({"c abi scalar",
                   [&] {
                     Check(fj_launch(ckernel, &ccfg, scalar_args.data(), 4),
                           "fj_launch");
                   },
                   nothing,
                   {}});
  cases.push_back({"c abi tensors",
                   [&] {
                     Check(fj_launch(ckernel_t, &ccfg, tensor_args.data(), 4),
                           "fj_launch");
                   },
                   nothing,
                   {}});
  if (tma) {
    cases.push_back({"raw moving", raw_moving, nothing, {}});
    cases.push_back({"c abi moving",
                     [&] {
                       move_tensors();
                       Check(fj_launch(ckernel_t, &ccfg, moving_args.data(), 4),
                             "fj_launch");
                     },
                     nothing,
                     {}});
  }
  cases.push_back({"raw extra", raw_extra_plain, nothing, {}});
  cases.push_back({"raw ex extra", raw_extra_ex, nothing, {}});
  cases.push_back({"raw ex extra tensors", raw_tensor_extra_ex, nothing, {}});
  cases.push_back({"raw ctx", raw_ctx_plain, nothing, {}});
  for (int round = 0; round < kWarmup + kRounds; ++round) {
    for (Case& c : cases) {
      c.before();
      const auto start = Clock::now();
      for (int i = 0; i < kBatch; ++i) c.launch();
      const double us = UsPer(start, kBatch);
      if (round >= kWarmup) c.us.push_back(us);
      if (api.cuStreamSynchronize(stream) != CUDA_SUCCESS) Die("sync failed");
    }
    Check(fj_stream_synchronize(cstream), "fj_stream_synchronize");
  }
  ka.thunk.store(ka_thunk);
  kt.thunk.store(kt_thunk);
  auto med = [&](const char* name) {
    for (Case& c : cases) {
      if (c.name == name) return Median(c.us);
    }
    return 0.0;
  };
  std::printf(
      "\nHost time per launch of an empty kernel (median of %d batches of %d, "
      "interleaved with raw):\n",
      kRounds, kBatch);
  PrintRows({
      {"(a) 4 scalar/pointer args, thunk", med("raw scalar"),
       med("thunk scalar"), 1.02},
      {absl::StrCat("(b) 4 ", tma ? "TMA" : "(non-TMA)",
                    " tensors reused, thunk"),
       med("raw tensors"), med("thunk tensors"), 1.05},
      {"(c) 4 scalar/pointer args, generic", med("raw scalar"),
       med("generic scalar"), 0},
      {"(c) 4 tensors, generic", med("raw tensors"), med("generic tensors"), 0},
      {absl::StrCat("(d) C ABI fj_launch, 4 args (uses_thunk=", info.uses_thunk,
                    ")"),
       med("raw scalar"), med("c abi scalar"), 1.02},
      {absl::StrCat("(d) C ABI fj_launch, 4 ", tma ? "TMA" : "(non-TMA)",
                    " tensors (uses_thunk=", info_t.uses_thunk, ")"),
       med("raw tensors"), med("c abi tensors"), 1.05},
      {"driver: cuLaunchKernel, parameter buffer", med("raw scalar"),
       med("raw extra"), 0},
      {"driver: cuLaunchKernelEx, parameter buffer", med("raw scalar"),
       med("raw ex extra"), 0},
      {"driver: cuLaunchKernelEx, buffer, 4 tensors", med("raw tensors"),
       med("raw ex extra tensors"), 0},
      {"driver: cuCtxGetCurrent + cuLaunchKernel", med("raw scalar"),
       med("raw ctx"), 0},
  });
  if (tma) {
    PrintRows({{"(f) fj_launch, 4 TMA tensors, new addresses",
                med("raw moving"), med("c abi moving"), 0}},
              /*header=*/false);
    std::printf(
        "      (f)'s raw encodes the four maps itself: 4 "
        "cuTensorMapEncodeTiled + cuLaunchKernel\n");
  }
  std::printf(
      "  thunk vs generic: scalar %.3f us vs %.3f us, tensors %.3f us vs %.3f "
      "us\n",
      med("thunk scalar"), med("generic scalar"), med("thunk tensors"),
      med("generic tensors"));
  std::printf("  TMA fallbacks during the run: %llu (expected 0)\n",
              static_cast<unsigned long long>(kt.tma_fallbacks.load()));
  DieIf(CheckStickyError(*dev, api, api.cuCtxSynchronize(), "launch_bench"),
        "final sync");

  // 4. (e) 16 threads on 16 streams, raw and fj_launch in alternate phases.
  {
    constexpr int kThreads = 16;
    constexpr int kPhases = 4;
    constexpr int kBatchesPerPhase = 100;
    CUcontext ctx = nullptr;
    DieIf(FJ_CU_CALL(api, cuCtxGetCurrent, &ctx), "context");
    std::vector<CUstream> raw_streams(kThreads);
    std::vector<fj_stream*> fj_streams(kThreads);
    std::vector<fj_launch_config> fj_cfgs(kThreads, cfg);
    for (int t = 0; t < kThreads; ++t) {
      DieIf(FJ_CU_CALL(api, cuStreamCreate, &raw_streams[t],
                       CU_STREAM_NON_BLOCKING),
            "stream");
      Check(fj_stream_create(crt, 0, &fj_streams[t]), "fj_stream_create");
      fj_cfgs[t].stream = fj_streams[t];
    }
    std::vector<std::vector<double>> raw_us(kThreads), fj_us(kThreads);
    auto raw_launch = [&](int t) {
      static thread_local bool current = false;
      if (!current) {
        if (api.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
          Die("cuCtxSetCurrent failed");
        current = true;
      }
      if (api.cuLaunchKernel(ka.function, 1, 1, 1, 32, 1, 1, 0, raw_streams[t],
                             raw_scalar, nullptr) != CUDA_SUCCESS) {
        Die("cuLaunchKernel failed");
      }
    };
    auto raw_sync = [&](int t) {
      if (api.cuStreamSynchronize(raw_streams[t]) != CUDA_SUCCESS)
        Die("sync failed");
    };
    auto fj_launch_one = [&](int t) {
      Check(fj_launch(ckernel, &fj_cfgs[t], scalar_args.data(), 4),
            "fj_launch");
    };
    auto fj_sync = [&](int t) {
      Check(fj_stream_synchronize(fj_streams[t]), "fj_stream_synchronize");
    };
    // A warm-up phase of each, then the measured ones.
    std::vector<std::vector<double>> warm(kThreads);
    LaunchOnThreads(kThreads, 20, raw_launch, raw_sync, warm);
    LaunchOnThreads(kThreads, 20, fj_launch_one, fj_sync, warm);
    for (int phase = 0; phase < kPhases; ++phase) {
      LaunchOnThreads(kThreads, kBatchesPerPhase, raw_launch, raw_sync, raw_us);
      LaunchOnThreads(kThreads, kBatchesPerPhase, fj_launch_one, fj_sync,
                      fj_us);
    }
    const ThreadedLaunches raw16 = Summarise(raw_us), fj16 = Summarise(fj_us);
    const double ratio = fj16.launches_per_s / raw16.launches_per_s;
    std::printf(
        "\n(e) %d threads, each on its own stream (%d phases of %d batches of "
        "%d, "
        "alternating raw and fj_launch; %u hardware threads):\n",
        kThreads, kPhases, kBatchesPerPhase, kBatch,
        std::thread::hardware_concurrency());
    std::printf("  %-40s %14s %14s\n", "path", "launches/s", "us/launch");
    std::printf("  %-40s %14.0f %14.3f\n", "raw cuLaunchKernel",
                raw16.launches_per_s, raw16.median_us);
    std::printf("  %-40s %14.0f %14.3f\n", "fj_launch (C ABI), 4 args",
                fj16.launches_per_s, fj16.median_us);
    std::printf("  fj_launch / raw throughput: %.3fx (goal >= 0.9x: %s)\n",
                ratio, ratio >= 0.9 ? "met" : "MISSED");
    for (int t = 0; t < kThreads; ++t) {
      Check(fj_stream_destroy(fj_streams[t]), "fj_stream_destroy");
      api.cuStreamDestroy(raw_streams[t]);
    }
  }

  Check(fj_stream_destroy(cstream), "fj_stream_destroy");
  Check(fj_module_destroy(cmod), "fj_module_destroy");
  Check(fj_runtime_destroy(crt), "fj_runtime_destroy");
  api.cuStreamDestroy(stream);
  (void)rt.Free(*a);
  PackingOnTheCpu(&api);
  return 0;
}

}  // namespace

// bench/launch_bench_attributes.cc
int RunLaunchAttributes();

}  // namespace fleetjit::bench

int main(int argc, char** argv) {
  using namespace fleetjit;
  if (argc > 1) {
    if (argc == 2 && std::strcmp(argv[1], "attributes") == 0) {
      return bench::RunLaunchAttributes();
    }
    std::fprintf(stderr, "usage: launch_bench [attributes]\n");
    return 2;
  }
  std::printf("fleetjit launch_bench\n");
  RuntimeOptions options;
  // FLEETJIT_* as a server's runtime reads them: FLEETJIT_CACHE_DIR, and
  // FLEETJIT_LIBCUDA, which may name the fake driver of the tests
  // (build/lib/libfj_fake_cuda.so, whose launches do nothing): the tables
  // then give fleetjit's own host cost per launch on a machine without a
  // GPU, next to the fake's raw entry points.
  absl::Status env = ApplyEnvironment(options);
  if (!env.ok()) {
    std::printf("launch_bench: %s\n", env.ToString().c_str());
    return 2;
  }
  auto rt = Runtime::Create(options);
  if (!rt.ok() || (*rt)->device_count() == 0) {
    std::printf(
        "no GPU: %s\nthe launch overhead figures need a CUDA device; "
        "measuring the CPU part only.\n",
        rt.ok() ? (*rt)->driver_status().ToString().c_str()
                : rt.status().ToString().c_str());
    bench::PackingOnTheCpu(nullptr);
    return 0;
  }
  return bench::RunGpu(**rt);
}
