// Copy bandwidth: a GMEM -> SMEM -> GMEM tile copy written once against
// <fleetjit/copy.cuh>, built under each copy implementation the device can
// run, against cuMemcpyDtoD measured in the same run. 2 GiB, bytes read +
// written. The sweep times each configuration briefly (median of 5 timings of 2
// copies, ~15 ms); the best of each implementation is timed again like the
// anchor (median of 10 timings of 5 back-to-back copies) and verified.
//
// Goals (issue 10): every implementation >= 0.92x, tma and cp_async >= 0.93x
// DtoD (the best hand-tuned SM copy reached 0.930-0.933x,
// docs/measurements.md).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"

namespace fleetjit::bench {
namespace {

// Persistent CTAs walk the tiles; STAGES buffers keep loads in flight while
// the previous tile is stored.
constexpr const char* kKernel = R"(
#include <fleetjit/copy.cuh>
#ifndef STAGES
#define STAGES 4
#endif
extern "C" __global__ void tile_copy(FJ_TENSOR(float, 2) in, FJ_TENSOR(float, 2) out,
                                     int tiles_x, int tiles) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ fj::barrier bars[STAGES];
  const int bx = in.box(0), by = in.box(1);
  const unsigned tile_elems = (unsigned)bx * by;
  // Tiles 128-byte aligned (TMA wants it); the host adds 128 bytes.
  float* buf = (float*)(smem_raw + (-__cvta_generic_to_shared(smem_raw) & 127));
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) bars[s].init(fj::block_threads());
  }
  __syncthreads();
  for (int s = 0; s < STAGES; ++s) {
    int t = blockIdx.x + s * gridDim.x;
    fj::load_tile(buf + s * tile_elems, in, fj::at((t % tiles_x) * bx, (t / tiles_x) * by),
                  bars[s], t < tiles);
    bars[s].arrive();
  }
  // Tile k waits in slot k % STAGES. After storing it, the slot of tile
  // k - 1 is refilled once that older store has read its SMEM, so one store
  // and STAGES - 1 loads stay in flight.
  for (int k = 0;; ++k) {
    int t = blockIdx.x + k * gridDim.x;
    if (t >= tiles) break;
    int s = k % STAGES;
    bars[s].wait((k / STAGES) & 1);
    fj::store_tile(out, fj::at((t % tiles_x) * bx, (t / tiles_x) * by), buf + s * tile_elems);
    fj::commit_group();
    if (k >= 1) {
      fj::wait_group_read<1>();
      int p = (k - 1) % STAGES;
      int tn = t - gridDim.x + STAGES * gridDim.x;
      fj::load_tile(buf + p * tile_elems, in, fj::at((tn % tiles_x) * bx, (tn / tiles_x) * by),
                    bars[p], tn < tiles);
      bars[p].arrive();
    }
  }
  fj::wait_group<0>();
}
)";

constexpr int64_t kCols = 16384;
constexpr int64_t kRows = 32768;  // 2 GiB of f32
constexpr uint64_t kBytes = uint64_t(kCols) * kRows * 4;
constexpr uint64_t kChunk = 64ull << 20;

struct Config {
  int stages, box_x, box_y, ctas_per_sm, threads;
  int unroll = 0;  // -DFJ_FAST_UNROLL (0: the layer's default)
};

// One built tile-copy kernel with its arguments, ready to launch. Holds
// pointers into itself: never copied or moved.
struct TileCopy {
  fj_module* module = nullptr;
  fj_kernel* kernel = nullptr;
  int64_t shape[2] = {kRows, kCols};
  fj_tensor in{}, out{};
  fj_tensor_arg in_arg{}, out_arg{};
  fj_arg args[4]{};
  fj_launch_config cfg{};
  ~TileCopy() { fj_module_destroy(module); }
};

// Builds the kernel for `impl` and `c`; nullptr with the reason printed if
// the implementation cannot be built for this device.
std::unique_ptr<TileCopy> Prepare(fj_runtime* rt, fj_stream* stream, int sms,
                                  uint64_t src, uint64_t dst, fj_copy_impl impl,
                                  const Config& c) {
  auto t = std::make_unique<TileCopy>();
  std::string source = kKernel, def = "-DSTAGES=" + std::to_string(c.stages),
              unroll = "-DFJ_FAST_UNROLL=" + std::to_string(c.unroll);
  // FJ_COPY_BENCH_NVRTC: more NVRTC options for every build, separated by
  // spaces (e.g. "--maxrregcount=80 -DFJ_FAST_UNROLL=4"), for register and
  // occupancy studies.
  const char* extra_env = std::getenv("FJ_COPY_BENCH_NVRTC");
  std::vector<std::string> extra;
  for (std::string e = extra_env != nullptr ? extra_env : ""; !e.empty();) {
    size_t end = e.find(' ');
    if (end != 0) extra.push_back(e.substr(0, end));
    e = end == std::string::npos ? "" : e.substr(end + 1);
  }
  std::vector<fj_str> opts = {Str(def)};
  if (c.unroll > 0) opts.push_back(Str(unroll));
  for (const std::string& e : extra) opts.push_back(Str(e));
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(source);
  o.name = Str("tile_copy_bench.cu");
  o.copy_impl = impl;
  o.nvrtc_options = opts.data();
  o.num_nvrtc_options = opts.size();
  fj_status* st = fj_module_build(rt, &o, &t->module);
  if (st != nullptr) {
    std::printf("%-10s: not built: %s\n", fj_copy_impl_name(impl),
                fj_status_message(st, nullptr));
    fj_status_free(st);
    return nullptr;
  }
  Check(fj_module_get_kernel(t->module, Str("tile_copy"), 0, &t->kernel),
        "kernel");
  t->in = fj_tensor{reinterpret_cast<void*>(src),
                    {2, 0},
                    2,
                    {2, 32, 1},
                    t->shape,
                    nullptr,
                    0};
  t->out = t->in;
  t->out.data = reinterpret_cast<void*>(dst);
  for (fj_tensor_arg* a : {&t->in_arg, &t->out_arg}) {
    a->struct_size = sizeof(fj_tensor_arg);
    a->box[0] = static_cast<uint32_t>(c.box_y);
    a->box[1] = static_cast<uint32_t>(c.box_x);
  }
  t->in_arg.tensor = &t->in;
  t->out_arg.tensor = &t->out;
  int tiles_x = static_cast<int>(kCols / c.box_x);
  int tiles = tiles_x * static_cast<int>(kRows / c.box_y);
  t->args[0] = TensorArg(&t->in_arg);
  t->args[1] = TensorArg(&t->out_arg);
  t->args[2] = I32Arg(tiles_x);
  t->args[3] = I32Arg(tiles);
  t->cfg.struct_size = sizeof(t->cfg);
  t->cfg.grid[0] = static_cast<uint32_t>(c.ctas_per_sm * sms);
  t->cfg.block[0] = static_cast<uint32_t>(c.threads);
  t->cfg.shared_bytes =
      static_cast<uint32_t>(c.stages * c.box_x * c.box_y * 4 + 128);
  t->cfg.stream = stream;
  return t;
}

struct Bench {
  fj_runtime* rt = nullptr;
  fj_stream* stream = nullptr;
  uint64_t src = 0, dst = 0;
  int sms = 0;
  std::vector<uint32_t> pattern;  // kChunk bytes, repeated through src

  // Median ms of one copy, timed `reps` times as `batch` back-to-back
  // copies (the sweep uses a short timing, ~15 copies; anchors and the
  // best configuration of each implementation the full one).
  // measure::TimeMs (reference/measure.h), after 3 untimed copies.
  template <typename F>
  double Time(F&& copy, int reps = 10, int batch = 5) {
    return measure::TimeMs(
        copy, [&] { Check(fj_stream_synchronize(stream), "timed run"); }, reps,
        batch, /*warmup=*/3);
  }

  bool Verify() {
    std::vector<uint32_t> host(kChunk / 4);
    for (uint64_t off = 0; off < kBytes; off += kChunk) {
      Check(fj_memcpy_dtoh(rt, host.data(), dst + off, kChunk, nullptr),
            "reading back");
      if (std::memcmp(host.data(), pattern.data(), kChunk) != 0) return false;
    }
    return true;
  }
};

}  // namespace
}  // namespace fleetjit::bench

int main() {
  using namespace fleetjit::bench;  // NOLINT
  Bench b;
  Check(fj_runtime_create(nullptr, &b.rt), "creating the runtime");
  int32_t count = 0;
  Check(fj_device_count(b.rt, &count), "counting devices");
  if (count == 0) {
    std::printf("copy_bench: no GPU (%s); nothing measured\n",
                fj_runtime_driver_error(b.rt));
    return 0;
  }
  fj_device_info info{};
  info.struct_size = sizeof(info);
  Check(fj_device_info_get(b.rt, 0, &info), "device info");
  b.sms = info.sm_count;
  std::printf("copy_bench on %s (sm_%d%d, %d SMs): 2 GiB f32 [%" PRId64
              " x %" PRId64 "], GB/s = (read + written) / time\n",
              info.name, info.cc_major, info.cc_minor, info.sm_count, kRows,
              kCols);
  Check(fj_stream_create(b.rt, 0, &b.stream), "stream");
  Check(fj_mem_alloc(b.rt, 0, kBytes, &b.src), "alloc src");
  Check(fj_mem_alloc(b.rt, 0, kBytes, &b.dst), "alloc dst");
  b.pattern.resize(kChunk / 4);
  std::mt19937 rng(std::random_device{}());
  for (auto& v : b.pattern) v = rng();
  Check(fj_memcpy_htod(b.rt, b.src, b.pattern.data(), kChunk, nullptr),
        "upload");
  for (uint64_t off = kChunk; off < kBytes; off += kChunk) {
    Check(fj_memcpy_dtod(b.rt, b.src + off, b.src, kChunk, nullptr),
          "replicate");
  }

  // 1. The anchor: cuMemcpyDtoD, same stream, same timing.
  double anchor_ms = b.Time([&] {
    Check(fj_memcpy_dtod(b.rt, b.dst, b.src, kBytes, b.stream), "DtoD");
  });
  double anchor_gbs = 2.0 * kBytes / (anchor_ms * 1e6);
  std::printf("%-34s %8.3f ms %8.0f GB/s   1.000x\n", "cuMemcpyDtoD (anchor)",
              anchor_ms, anchor_gbs);

  // 2. The layer-built tile copy under each implementation, a small sweep.
  // Stages x box (dim 0 x dim 1) x CTAs/SM x threads; SMEM per SM stays
  // <= 192 KiB. Wider boxes read longer contiguous runs per row.
  std::vector<Config> configs = {
      {4, 64, 64, 2, 256},
      {4, 128, 32, 3, 256},
      {3, 128, 64, 2, 256},
      {2, 128, 64, 3, 128},
      {3, 256, 32, 2, 256},
      {3, 256, 64, 1, 512},
      {2, 256, 64, 1, 256},
      {4, 128, 64, 1, 512},
      {4, 256, 32, 2, 256},
      {2, 128, 64, 3, 128, 16},
      {2, 128, 64, 3, 256, 16},
      {2, 256, 64, 1, 256, 16},
      {3, 256, 64, 1, 512, 16},
      {2, 128, 64, 4, 128, 16},
      {2, 256, 32, 3, 256, 16},
      // The best cp_async and sync shapes of the 2026-11-30 H200 sweep
      // (bench/results/2026-11-30-h200-copy-sweep.txt): one warp per CTA,
      // and for sync one 32 KiB row (168 registers allow 3 x 128 threads).
      {2, 128, 64, 3, 32},
      {2, 256, 32, 3, 64},
      {2, 8192, 1, 3, 128},
      // With the fast paths inlined (no stack frame per tile), two CTAs of
      // two warps with three stages led cp_async's sweep (0.940-0.948x).
      {3, 256, 32, 2, 64},
      {3, 128, 64, 2, 64},
  };
  std::vector<fj_copy_impl> impls = {FJ_COPY_IMPL_TMA, FJ_COPY_IMPL_CP_ASYNC,
                                     FJ_COPY_IMPL_SYNC};
  // FJ_COPY_BENCH_ONLY="impl,stages,box_x,box_y,ctas_per_sm,threads[,unroll]"
  // times that one configuration (for a profiler: ncu -k tile_copy ...).
  if (const char* only = std::getenv("FJ_COPY_BENCH_ONLY")) {
    char name[16] = {};
    Config c{};
    if (std::sscanf(only, "%15[a-z_],%d,%d,%d,%d,%d,%d", name, &c.stages,
                    &c.box_x, &c.box_y, &c.ctas_per_sm, &c.threads,
                    &c.unroll) < 6) {
      std::fprintf(stderr, "copy_bench: bad FJ_COPY_BENCH_ONLY '%s'\n", only);
      return 2;
    }
    fj_copy_impl impl = std::strcmp(name, "tma") == 0 ? FJ_COPY_IMPL_TMA
                        : std::strcmp(name, "cp_async") == 0
                            ? FJ_COPY_IMPL_CP_ASYNC
                            : FJ_COPY_IMPL_SYNC;
    configs = {c};
    impls = {impl};
  }
  std::vector<std::string> summary;
  bool all_ok = true;
  for (fj_copy_impl impl : impls) {
    double best_ms = 1e30;
    Config best{};
    for (const Config& c : configs) {
      auto t = Prepare(b.rt, b.stream, b.sms, b.src, b.dst, impl, c);
      if (t == nullptr) break;  // e.g. tma on a pre-Hopper GPU
      fj_status* st = fj_launch(t->kernel, &t->cfg, t->args, 4);
      if (st != nullptr) {
        std::printf("  %-9s stages %d box %dx%d: launch refused: %s\n",
                    fj_copy_impl_name(impl), c.stages, c.box_x, c.box_y,
                    fj_status_message(st, nullptr));
        fj_status_free(st);
        continue;
      }
      double ms = b.Time(
          [&] { Check(fj_launch(t->kernel, &t->cfg, t->args, 4), "launch"); },
          5, 2);
      std::printf(
          "  %-9s stages %d box %3dx%-3d %d CTA/SM %3d thr unroll %2d %8.3f ms "
          "%8.0f GB/s   %.3fx\n",
          fj_copy_impl_name(impl), c.stages, c.box_x, c.box_y, c.ctas_per_sm,
          c.threads, c.unroll, ms, 2.0 * kBytes / (ms * 1e6), anchor_ms / ms);
      if (ms < best_ms) {
        best_ms = ms;
        best = c;
      }
    }
    if (best_ms == 1e30) continue;
    // The best configuration once more: the full timing, then a run on a
    // poisoned output, verified.
    auto t = Prepare(b.rt, b.stream, b.sms, b.src, b.dst, impl, best);
    best_ms = b.Time(
        [&] { Check(fj_launch(t->kernel, &t->cfg, t->args, 4), "launch"); });
    std::printf(
        "  %-9s best: stages %d box %dx%d %d CTA/SM %d thr unroll %d, full "
        "timing %.3f ms\n",
        fj_copy_impl_name(impl), best.stages, best.box_x, best.box_y,
        best.ctas_per_sm, best.threads, best.unroll, best_ms);
    Check(fj_memset_d8(b.rt, b.dst, 0xA5, kBytes, nullptr), "poison");
    Check(fj_launch(t->kernel, &t->cfg, t->args, 4), "verify launch");
    Check(fj_stream_synchronize(b.stream), "verify run");
    bool ok = b.Verify();
    all_ok = all_ok && ok;
    char line[256];
    std::snprintf(
        line, sizeof(line), "%-34s %8.3f ms %8.0f GB/s   %.3fx  output %s",
        (std::string("tile copy, ") + fj_copy_impl_name(impl) + " (best)")
            .c_str(),
        best_ms, 2.0 * kBytes / (best_ms * 1e6), anchor_ms / best_ms,
        ok ? "verified" : "WRONG");
    summary.push_back(line);
  }
  std::printf("\n%-34s %8.3f ms %8.0f GB/s   1.000x\n", "cuMemcpyDtoD (anchor)",
              anchor_ms, anchor_gbs);
  for (const std::string& s : summary) std::printf("%s\n", s.c_str());
  std::printf(
      "goals (issue 10): every implementation >= 0.92x, tma and cp_async >= "
      "0.93x; the best of ~50 hand-tuned kernels reached 0.930-0.933x "
      "(docs/measurements.md)\n");
  fj_mem_free(b.rt, b.src);
  fj_mem_free(b.rt, b.dst);
  fj_stream_destroy(b.stream);
  fj_runtime_destroy(b.rt);
  return all_ok ? 0 : 1;
}
