// Soak (issue 12, item 6): 16 threads share one runtime, as a server's
// request threads do, and mix for a given time
//   build    fj_module_build of one of K sources (compiled, or a memory or
//            disk hit), the module kept by the thread (at most 8 held);
//   launch   a kernel of a held module, on the thread's stream, between a
//            random host->device copy and a device->host copy that is
//            checked (on the fake driver a launch computes nothing: the
//            check is the copy round trip);
//   destroy  a held module;
//   clear    fj_cache_clear (rare: at most one every 5 s), so builds keep
//            compiling;
//   churn    a short-lived runtime of its own: create, build (a hit),
//            launch, destroy (every 10 s, one thread).
// Every second it samples the resident set size; at the end it prints the
// least-squares slope of RSS over time (KiB/min, the first 20% left out as
// warm-up) and the operation counts. Any failed operation fails the run.
//
//   soak [--seconds N] [--threads T] [--sources K] [--cache-dir DIR]
//        [--fake-driver PATH | --real-driver]
//
// Without a GPU it launches on the fake CUDA driver (libfj_fake_cuda.so
// beside the build's libraries, or --fake-driver) and says so; on a GPU host
// the real driver. scripts/gpu-host/gpu-check runs it on the H200 when given a
// soak duration.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fleetjit/fleetjit.h"

namespace {

using Clock = std::chrono::steady_clock;

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }
// Literals: a temporary std::string would die before the struct is used.
fj_str S(const char* s) { return fj_str{s, std::strlen(s)}; }

struct Config {
  int seconds = 60;
  int threads = 16;
  int sources = 24;
  std::string cache_dir;
  std::string driver;  // "" = the system's libcuda
  bool fake = false;
};

struct Counters {
  std::atomic<uint64_t> builds{0}, compiled{0}, memory_hits{0}, disk_hits{0},
      launches{0}, copies_checked{0}, destroys{0}, clears{0}, churns{0},
      failures{0};
};

std::mutex failure_mu;
std::string first_failure;

bool Ok(Counters& c, const char* what, fj_status* st) {
  if (st == nullptr) return true;
  c.failures.fetch_add(1);
  std::lock_guard<std::mutex> lock(failure_mu);
  if (first_failure.empty()) {
    first_failure = std::string(what) + ": " +
                    fj_code_name(fj_status_code(st)) + ": " +
                    fj_status_message(st, nullptr);
  }
  fj_status_free(st);
  return false;
}

std::string Source(int variant) {
  return "extern \"C\" __global__ void step(float* p, float a, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) p[i] = p[i] * a + " +
         std::to_string(variant % 3) + ".0f;  // variant " +
         std::to_string(variant) + "\n}\n";
}

bool ToInt(const std::string& text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return false;
  *out = static_cast<int>(v);
  return true;
}

fj_runtime* NewRuntime(const Config& cfg, Counters& c) {
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  o.libcuda_path = S(cfg.driver);
  o.cache_dir = S(cfg.cache_dir);
  static const std::string ptx_target = "compute_90";
  if (cfg.fake)
    o.target_override = S(ptx_target);  // the fake reads PTX layouts
  fj_runtime* rt = nullptr;
  return Ok(c, "fj_runtime_create", fj_runtime_create(&o, &rt)) ? rt : nullptr;
}

fj_module* Build(fj_runtime* rt, int variant, Counters& c) {
  const std::string source = Source(variant);
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(source);
  o.name = S("soak.cu");
  fj_module* m = nullptr;
  if (!Ok(c, "fj_module_build", fj_module_build(rt, &o, &m))) return nullptr;
  fj_module_info info{};
  info.struct_size = sizeof(info);
  if (Ok(c, "fj_module_info_get", fj_module_info_get(m, &info))) {
    c.builds.fetch_add(1);
    if (info.cache_result == FJ_CACHE_COMPILED) c.compiled.fetch_add(1);
    if (info.cache_result == FJ_CACHE_MEMORY_HIT) c.memory_hits.fetch_add(1);
    if (info.cache_result == FJ_CACHE_DISK_HIT) c.disk_hits.fetch_add(1);
  }
  return m;
}

// Round trip through `buffer` with a launch of step() in between. On a GPU
// the launch computes p * 1 + variant % 3; on the fake it leaves p alone.
bool Launch(fj_runtime* rt, fj_module* m, int variant, fj_stream* stream,
            uint64_t buffer, int n, bool fake, std::mt19937_64& rng,
            Counters& c) {
  fj_kernel* k = nullptr;
  if (!Ok(c, "fj_module_get_kernel", fj_module_get_kernel(m, S("step"), 0, &k)))
    return false;
  std::vector<float> in(n), out(n, -1.f);
  for (float& v : in) v = static_cast<float>(rng() % 4096);
  fj_arg args[3] = {};
  for (fj_arg& a : args) a.struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_POINTER;
  args[0].v.pointer = buffer;
  args[1].kind = FJ_ARG_F32;
  args[1].v.f32 = 1.0f;
  args[2].kind = FJ_ARG_I32;
  args[2].v.i32 = n;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = static_cast<uint32_t>((n + 255) / 256);
  cfg.block[0] = 256;
  cfg.stream = stream;
  if (!Ok(c, "fj_memcpy_htod",
          fj_memcpy_htod(rt, buffer, in.data(), 4ull * n, stream)) ||
      !Ok(c, "fj_launch", fj_launch(k, &cfg, args, 3)) ||
      !Ok(c, "fj_memcpy_dtoh",
          fj_memcpy_dtoh(rt, out.data(), buffer, 4ull * n, stream)) ||
      !Ok(c, "fj_stream_synchronize", fj_stream_synchronize(stream))) {
    return false;
  }
  c.launches.fetch_add(1);
  const float add = fake ? 0.f : static_cast<float>(variant % 3);
  for (int i = 0; i < n; ++i) {
    if (out[i] != in[i] + add) {
      c.failures.fetch_add(1);
      std::lock_guard<std::mutex> lock(failure_mu);
      if (first_failure.empty()) {
        first_failure = "launch of variant " + std::to_string(variant) +
                        ": element " + std::to_string(i) + " is " +
                        std::to_string(out[i]) + ", expected " +
                        std::to_string(in[i] + add);
      }
      return false;
    }
  }
  c.copies_checked.fetch_add(1);
  return true;
}

void Worker(int id, const Config& cfg, fj_runtime* rt, Clock::time_point end,
            std::atomic<int64_t>& last_clear_ms,
            std::atomic<int64_t>& last_churn_ms, Counters& c) {
  std::mt19937_64 rng(static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ull + 1);
  const int n = 1024 + 256 * (id % 8);
  fj_stream* stream = nullptr;
  uint64_t buffer = 0;
  if (!Ok(c, "fj_stream_create", fj_stream_create(rt, 0, &stream)) ||
      !Ok(c, "fj_mem_alloc", fj_mem_alloc(rt, 0, 4ull * n, &buffer))) {
    return;
  }
  struct Held {
    fj_module* module;
    int variant;
  };
  std::vector<Held> held;
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               Clock::now().time_since_epoch())
        .count();
  };
  while (Clock::now() < end) {
    const int r = static_cast<int>(rng() % 100);
    if (r < 40 || held.empty()) {
      const int variant =
          static_cast<int>(rng() % static_cast<uint64_t>(cfg.sources));
      if (fj_module* m = Build(rt, variant, c)) held.push_back({m, variant});
      if (held.size() > 8) {
        Ok(c, "fj_module_destroy", fj_module_destroy(held.front().module));
        held.erase(held.begin());
        c.destroys.fetch_add(1);
      }
    } else if (r < 80) {
      const Held& h = held[rng() % held.size()];
      Launch(rt, h.module, h.variant, stream, buffer, n, cfg.fake, rng, c);
    } else if (r < 97) {
      const size_t i = rng() % held.size();
      Ok(c, "fj_module_destroy", fj_module_destroy(held[i].module));
      held.erase(held.begin() + static_cast<long>(i));
      c.destroys.fetch_add(1);
    } else if (r < 99) {
      int64_t last = last_clear_ms.load();
      if (now_ms() - last > 5000 &&
          last_clear_ms.compare_exchange_strong(last, now_ms())) {
        Ok(c, "fj_cache_clear", fj_cache_clear(rt));
        c.clears.fetch_add(1);
      }
    } else {
      int64_t last = last_churn_ms.load();
      if (now_ms() - last > 10000 &&
          last_churn_ms.compare_exchange_strong(last, now_ms())) {
        fj_runtime* own = NewRuntime(cfg, c);
        if (own != nullptr) {
          fj_stream* s = nullptr;
          uint64_t b = 0;
          const int variant =
              static_cast<int>(rng() % static_cast<uint64_t>(cfg.sources));
          if (fj_module* m = Build(own, variant, c)) {
            if (Ok(c, "fj_stream_create", fj_stream_create(own, 0, &s)) &&
                Ok(c, "fj_mem_alloc", fj_mem_alloc(own, 0, 4ull * n, &b))) {
              Launch(own, m, variant, s, b, n, cfg.fake, rng, c);
            }
          }
          // Destroying the runtime destroys its module, stream and memory.
          Ok(c, "fj_runtime_destroy", fj_runtime_destroy(own));
          c.churns.fetch_add(1);
        }
      }
    }
  }
  for (const Held& h : held)
    Ok(c, "fj_module_destroy", fj_module_destroy(h.module));
  Ok(c, "fj_stream_destroy", fj_stream_destroy(stream));
  Ok(c, "fj_mem_free", fj_mem_free(rt, buffer));
}

int64_t RssKiB() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  int got = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// Least-squares slope of (t seconds, rss KiB), in KiB per minute.
double SlopeKiBPerMin(const std::vector<std::pair<double, double>>& samples) {
  const double n = static_cast<double>(samples.size());
  if (n < 2) return 0;
  double st = 0, sr = 0, stt = 0, str = 0;
  for (const auto& [t, r] : samples) {
    st += t;
    sr += r;
    stt += t * t;
    str += t * r;
  }
  const double denom = n * stt - st * st;
  return denom == 0 ? 0 : (n * str - st * sr) / denom * 60.0;
}

std::string SelfDir() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ".";
  std::string path(self, static_cast<size_t>(n));
  return path.substr(0, path.find_last_of('/'));
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  bool force_real = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--seconds" && ToInt(value(), &cfg.seconds)) continue;
    if (a == "--threads" && ToInt(value(), &cfg.threads)) continue;
    if (a == "--sources" && ToInt(value(), &cfg.sources)) continue;
    if (a == "--cache-dir") {
      cfg.cache_dir = value();
      continue;
    }
    if (a == "--fake-driver") {
      cfg.driver = value();
      cfg.fake = true;
      continue;
    }
    if (a == "--real-driver") {
      force_real = true;
      continue;
    }
    std::fprintf(stderr,
                 "usage: soak [--seconds N] [--threads T] [--sources K] "
                 "[--cache-dir DIR] "
                 "[--fake-driver PATH | --real-driver]\n");
    return 2;
  }
  if (cfg.threads < 1 || cfg.sources < 1 || cfg.seconds < 1) return 2;
  Counters c;
  // 1. The driver: the real one if it shows a GPU, else the fake.
  if (!cfg.fake) {
    fj_runtime_options probe_options{};
    probe_options.struct_size = sizeof(probe_options);
    fj_runtime* probe = nullptr;
    int32_t devices = 0;
    std::string why;
    if (fj_runtime_create(&probe_options, &probe) == nullptr) {
      fj_device_count(probe, &devices);
      why = fj_runtime_driver_error(probe);
      fj_status_free(fj_runtime_destroy(probe));
    }
    if (devices == 0) {
      if (force_real) {
        std::printf("soak: no GPU (%s) and --real-driver given\n", why.c_str());
        return 1;
      }
      cfg.driver = SelfDir() + "/../lib/libfj_fake_cuda.so";
      cfg.fake = true;
      std::printf("soak: no GPU (%s): launching on the fake CUDA driver %s\n",
                  why.c_str(), cfg.driver.c_str());
    }
  }
  std::string owned_dir;
  if (cfg.cache_dir.empty()) {
    char tmpl[] = "/tmp/fleetjit-soak-XXXXXX";
    owned_dir = cfg.cache_dir = mkdtemp(tmpl);
  }
  std::printf("soak: %d threads, %d s, %d sources, %s driver, cache %s\n",
              cfg.threads, cfg.seconds, cfg.sources, cfg.fake ? "fake" : "real",
              cfg.cache_dir.c_str());
  std::fflush(stdout);

  // 2. The shared runtime and the workers.
  fj_runtime* rt = NewRuntime(cfg, c);
  if (rt == nullptr) {
    std::printf("soak: FAIL %s\n", first_failure.c_str());
    return 1;
  }
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(cfg.seconds);
  std::atomic<int64_t> last_clear{0}, last_churn{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < cfg.threads; ++t) {
    workers.emplace_back(Worker, t, std::cref(cfg), rt, end,
                         std::ref(last_clear), std::ref(last_churn),
                         std::ref(c));
  }

  // 3. RSS every second.
  std::vector<std::pair<double, double>> samples;
  int64_t rss_min = INT64_MAX, rss_max = 0;
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double t =
        std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t rss = RssKiB();
    samples.emplace_back(t, static_cast<double>(rss));
    rss_min = std::min(rss_min, rss);
    rss_max = std::max(rss_max, rss);
    if (samples.size() % 60 == 0) {
      std::printf(
          "soak: t=%.0fs rss=%lld KiB builds=%llu launches=%llu "
          "failures=%llu\n",
          t, static_cast<long long>(rss),
          static_cast<unsigned long long>(c.builds.load()),
          static_cast<unsigned long long>(c.launches.load()),
          static_cast<unsigned long long>(c.failures.load()));
      std::fflush(stdout);
    }
  }
  for (std::thread& w : workers) w.join();
  Ok(c, "fj_runtime_destroy", fj_runtime_destroy(rt));

  // 4. The figures.
  std::vector<std::pair<double, double>> steady(
      samples.begin() + static_cast<long>(samples.size() / 5), samples.end());
  const double slope = SlopeKiBPerMin(steady);
  std::printf(
      "soak: ops builds=%llu (compiled %llu, memory hits %llu, disk hits %llu) "
      "launches=%llu checked=%llu destroys=%llu clears=%llu "
      "runtime_churns=%llu "
      "failures=%llu\n",
      static_cast<unsigned long long>(c.builds.load()),
      static_cast<unsigned long long>(c.compiled.load()),
      static_cast<unsigned long long>(c.memory_hits.load()),
      static_cast<unsigned long long>(c.disk_hits.load()),
      static_cast<unsigned long long>(c.launches.load()),
      static_cast<unsigned long long>(c.copies_checked.load()),
      static_cast<unsigned long long>(c.destroys.load()),
      static_cast<unsigned long long>(c.clears.load()),
      static_cast<unsigned long long>(c.churns.load()),
      static_cast<unsigned long long>(c.failures.load()));
  std::printf(
      "soak: rss min %lld KiB, max %lld KiB, final %lld KiB; slope %.1f "
      "KiB/min "
      "(least squares over the last %zu of %zu one-second samples)\n",
      static_cast<long long>(rss_min), static_cast<long long>(rss_max),
      static_cast<long long>(RssKiB()), slope, steady.size(), samples.size());
  if (!owned_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(owned_dir, ec);
  }
  if (c.failures.load() != 0) {
    std::printf("soak: FAIL: %s\n", first_failure.c_str());
    return 1;
  }
  std::printf("soak: PASS\n");
  return 0;
}
