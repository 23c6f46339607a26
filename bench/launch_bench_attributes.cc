// `launch_bench attributes`: the launch attributes of ABI 1.3, each next to
// its anchor measured in the same run, through the C ABI only:
//  1. Programmatic dependent launch: a chain of small dependent kernels
//     (each reads what the previous one wrote, after griddepcontrol.wait,
//     and lets its dependents launch first thing) launched with
//     FJ_LAUNCH_PROGRAMMATIC_DEPENDENT, against the same chain without it
//     (the anchor: plain stream order). Microseconds per kernel, from the
//     first launch to the stream's end; the chain's result is checked.
//  2. An L2 access-policy window: a kernel re-reads a hot table (gathered
//     at hashed offsets) while streaming a cold buffer several times the
//     L2's size, with the table under a persisting window over an L2
//     set-aside, against the same kernel without a window (the anchor).
//     Milliseconds per launch; the output is checked against a host
//     reference.
// Needs sm_90 for 1 and sm_80 for 2; prints why a part is skipped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace fleetjit::bench {
namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void step(const int* in, int* out, int n) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + 1;
}

extern "C" __global__ void reread(const float* hot, unsigned hot_n,
                                  const float* cold, unsigned long long cold_n,
                                  float* out, int hot_reads) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x +
                         threadIdx.x;
  const unsigned long long stride = gridDim.x * (unsigned long long)blockDim.x;
  const unsigned long long thread = i;
  float sum = 0;
  for (; i < cold_n; i += stride) {
    float acc = cold[i];
    unsigned h = (unsigned)(i * 2654435761ull);
    for (int r = 0; r < hot_reads; ++r) {
      acc += hot[h % hot_n];
      h = h * 1664525u + 1013904223u;
    }
    sum += acc;
  }
  out[thread] = sum;
}
)";

fj_launch_config Config(uint32_t grid, uint32_t block, fj_stream* stream) {
  fj_launch_config c{};
  c.struct_size = sizeof(c);
  c.grid[0] = grid;
  c.block[0] = block;
  c.stream = stream;
  return c;
}

struct Setup {
  fj_runtime* rt = nullptr;
  fj_stream* stream = nullptr;
  fj_module* module = nullptr;
  fj_device_info info{};
};

void PdlChain(Setup& s) {
  if (s.info.cc_major < 9) {
    std::printf("pdl: skipped: device 0 is sm_%d%d (PDL needs sm_90)\n",
                s.info.cc_major, s.info.cc_minor);
    return;
  }
  fj_kernel* k = nullptr;
  Check(fj_module_get_kernel(s.module, Str("step"), 0, &k), "step");
  constexpr int kN = 4096, kChain = 2000, kSamples = 7;
  uint64_t buf[2] = {};
  for (uint64_t& b : buf) {
    Check(fj_mem_alloc(s.rt, 0, sizeof(int) * kN, &b), "alloc");
  }
  std::vector<int> start(kN);
  std::mt19937 rng(12345);
  for (int& v : start) v = static_cast<int>(rng() % 1000);
  auto run = [&](bool pdl) {
    Check(
        fj_memcpy_htod(s.rt, buf[0], start.data(), sizeof(int) * kN, s.stream),
        "upload");
    Check(fj_stream_synchronize(s.stream), "sync");
    const double t0 = NowMs();
    for (int j = 0; j < kChain; ++j) {
      fj_arg args[] = {PtrArg(buf[j % 2]), PtrArg(buf[(j + 1) % 2]),
                       I32Arg(kN)};
      fj_launch_config c = Config(kN / 128, 128, s.stream);
      c.flags = pdl ? FJ_LAUNCH_PROGRAMMATIC_DEPENDENT : 0;
      Check(fj_launch(k, &c, args, 3), "launch step");
    }
    Check(fj_stream_synchronize(s.stream), "sync");
    const double us = (NowMs() - t0) * 1000.0 / kChain;
    std::vector<int> end(kN);
    Check(fj_memcpy_dtoh(s.rt, end.data(), buf[kChain % 2], sizeof(int) * kN,
                         nullptr),
          "download");
    for (int i = 0; i < kN; ++i) {
      if (end[i] != start[i] + kChain) {
        std::fprintf(stderr, "pdl chain wrong at %d: %d, want %d\n", i, end[i],
                     start[i] + kChain);
        std::exit(1);
      }
    }
    return us;
  };
  run(true);  // warm-up: module load, thunk, first launches
  run(false);
  std::vector<double> with, without;
  for (int i = 0; i < kSamples; ++i) {  // interleaved
    with.push_back(run(true));
    without.push_back(run(false));
  }
  const double w = Median(with), a = Median(without);
  std::printf(
      "pdl: %d dependent kernels of %d blocks x 128 threads, us per kernel "
      "(median of %d): anchor without PDL %.2f, with PDL %.2f, saves %.2f us "
      "(%.1f%%)\n",
      kChain, kN / 128, kSamples, a, w, a - w, 100.0 * (a - w) / a);
  for (uint64_t b : buf) Check(fj_mem_free(s.rt, b), "free");
}

void L2Window(Setup& s) {
  if (s.info.cc_major < 8 || s.info.max_persisting_l2_bytes <= 0) {
    std::printf("l2_window: skipped: device 0 (sm_%d%d) has no persisting L2\n",
                s.info.cc_major, s.info.cc_minor);
    return;
  }
  fj_kernel* k = nullptr;
  Check(fj_module_get_kernel(s.module, Str("reread"), 0, &k), "reread");
  const uint64_t aside = static_cast<uint64_t>(s.info.max_persisting_l2_bytes);
  // The hot table fills most of the set-aside; the cold stream is 8x L2.
  const uint64_t hot_bytes =
      std::min<uint64_t>(aside, s.info.max_access_policy_window_bytes) / 4 * 3 /
      4 * 4;
  const uint32_t hot_n = static_cast<uint32_t>(hot_bytes / 4);
  const uint64_t cold_n = uint64_t{8} * s.info.l2_cache_bytes / 4;
  constexpr int kHotReads = 4;
  std::mt19937 rng(777);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> hot(hot_n), cold(cold_n);
  for (float& v : hot) v = dist(rng);
  for (float& v : cold) v = dist(rng);
  uint64_t d_hot = 0, d_cold = 0, d_out = 0;
  Check(fj_mem_alloc(s.rt, 0, hot_n * 4ull, &d_hot), "alloc hot");
  Check(fj_mem_alloc(s.rt, 0, cold_n * 4, &d_cold), "alloc cold");
  const uint32_t grid = static_cast<uint32_t>(s.info.sm_count) * 8;
  const uint64_t threads = uint64_t{grid} * 256;
  Check(fj_mem_alloc(s.rt, 0, threads * 4, &d_out), "alloc out");
  Check(fj_memcpy_htod(s.rt, d_hot, hot.data(), hot_n * 4ull, nullptr), "up");
  Check(fj_memcpy_htod(s.rt, d_cold, cold.data(), cold_n * 4, nullptr), "up");
  uint64_t set = 0;
  Check(fj_device_set_persisting_l2(s.rt, 0, aside, &set), "set-aside");
  auto run = [&](bool window) {
    fj_arg args[] = {PtrArg(d_hot),   Arg(FJ_ARG_U32), PtrArg(d_cold),
                     Arg(FJ_ARG_U64), PtrArg(d_out),   I32Arg(kHotReads)};
    args[1].v.u32 = hot_n;
    args[3].v.u64 = cold_n;
    fj_launch_config c = Config(grid, 256, s.stream);
    if (window) {
      c.l2_window_base = d_hot;
      c.l2_window_bytes = hot_n * 4ull;
      c.l2_hit_ratio = 1.0f;
    }
    constexpr int kBatch = 10;
    Check(fj_stream_synchronize(s.stream), "sync");
    const double t0 = NowMs();
    for (int i = 0; i < kBatch; ++i) {
      Check(fj_launch(k, &c, args, 6), "launch reread");
    }
    Check(fj_stream_synchronize(s.stream), "sync");
    return (NowMs() - t0) / kBatch;
  };
  run(true);
  run(false);
  std::vector<double> with, without;
  for (int i = 0; i < 7; ++i) {
    with.push_back(run(true));
    without.push_back(run(false));
  }
  // Each thread's sum against a host reference, for every 997th thread.
  std::vector<float> out(threads);
  Check(fj_memcpy_dtoh(s.rt, out.data(), d_out, threads * 4, nullptr), "down");
  for (uint64_t t = 0; t < threads; t += 997) {
    double want = 0, magnitude = 0;
    for (uint64_t i = t; i < cold_n; i += threads) {
      float acc = cold[i];
      uint32_t h = static_cast<uint32_t>(i * 2654435761ull);
      for (int r = 0; r < kHotReads; ++r) {
        acc += hot[h % hot_n];
        h = h * 1664525u + 1013904223u;
      }
      want += acc;
      magnitude += std::fabs(acc);
    }
    if (std::fabs(want - out[t]) > 1e-4 * (1 + magnitude)) {
      std::fprintf(stderr, "reread wrong at thread %llu: %g, want %g\n",
                   static_cast<unsigned long long>(t), out[t], want);
      std::exit(1);
    }
  }
  const double w = Median(with), a = Median(without);
  std::printf(
      "l2_window: %.1f MiB hot table re-read %dx per element of a %.0f MiB "
      "stream (set-aside %.1f MiB of %.0f MiB L2), ms per launch (median of "
      "7 batches of 10): anchor without window %.3f, with persisting window "
      "%.3f (%.2fx)\n",
      hot_n * 4.0 / (1 << 20), kHotReads, cold_n * 4.0 / (1 << 20),
      set / double(1 << 20), s.info.l2_cache_bytes / double(1 << 20), a, w,
      a / w);
  Check(fj_device_set_persisting_l2(s.rt, 0, 0, nullptr), "set-aside off");
  for (uint64_t p : {d_hot, d_cold, d_out}) Check(fj_mem_free(s.rt, p), "free");
}

}  // namespace

int RunLaunchAttributes() {
  Setup s;
  Check(fj_runtime_create(nullptr, &s.rt), "runtime");
  int32_t n = 0;
  Check(fj_device_count(s.rt, &n), "devices");
  if (n == 0) {
    std::printf("launch_bench attributes: skipped: no GPU (%s)\n",
                fj_runtime_driver_error(s.rt));
    fj_runtime_destroy(s.rt);
    return 0;
  }
  s.info.struct_size = sizeof(s.info);
  Check(fj_device_info_get(s.rt, 0, &s.info), "device info");
  std::printf("launch_bench attributes: %s (sm_%d%d, %d SMs)\n", s.info.name,
              s.info.cc_major, s.info.cc_minor, s.info.sm_count);
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(kSource);
  o.name = Str("launch_bench_attributes.cu");
  Check(fj_module_build(s.rt, &o, &s.module), "build");
  Check(fj_stream_create(s.rt, 0, &s.stream), "stream");
  PdlChain(s);
  L2Window(s);
  Check(fj_stream_destroy(s.stream), "stream destroy");
  Check(fj_module_destroy(s.module), "module destroy");
  Check(fj_runtime_destroy(s.rt), "runtime destroy");
  return 0;
}

}  // namespace fleetjit::bench
