// Remote cache tier benchmark (CPU; no GPU needed). In one run, for a
// module with a 64 KiB image:
//  1. a cold build: NVRTC compiling a small kernel for sm_90 (the anchor a
//     hit saves), through the Runtime, uncached;
//  2. a local disk hit (memory tier off, page cache warm);
//  3. a remote hit over loopback TCP and over a unix socket: GET, HMAC and
//     checksum verification, parse (memory and disk tiers off), on a warm
//     pooled connection and on a new one (a fresh process's first hit);
//                                                          goal <= 3 ms
//  4. what a miss pays for the tier (a GET, then queueing the publication),
//     the publication on the writer thread, and a miss while Redis is down
//     (breaker open), each next to the same miss with no remote tier.
//
//   scripts/dev/with-redis build/bench/remote_cache_bench [--rounds N]
// (reads $FJ_REDIS_URL and $FJ_REDIS_SOCKET, which scripts/dev/with-redis
// sets).
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "jit/artifact.h"
#include "jit/target.h"
#include "reference/bundled_kernels.h"
#include "reference/measure.h"
#include "runtime/cache/module_cache.h"
#include "runtime/runtime.h"

namespace fleetjit::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kFleetKey[] =
    "hex:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
constexpr size_t kImage = 64 << 10;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

jit::Artifact MakeArtifact(uint64_t seed) {
  std::mt19937_64 rng(seed);
  jit::Artifact a;
  a.target = *jit::ParseTarget("sm_90");
  a.image.resize(kImage);
  for (char& c : a.image) c = static_cast<char>(rng());
  a.compiler = "nvrtc 13.0 bench";
  jit::KernelEntry k;
  k.name = k.lowered_name = "saxpy";
  a.kernels.push_back(k);
  return a;
}

CacheKey Key(uint64_t seed) {
  CacheKeyInputs in;
  in.source = absl::StrCat("// bench module ", seed);
  in.target = "sm_90";
  in.copy_impl = "sync";
  in.compiler = "nvrtc 13.0 bench";
  return MakeCacheKey(in);
}

CacheConfig Config(const std::string& dir, const std::string& url) {
  CacheConfig c;
  c.dir = dir;
  c.disk = !dir.empty();
  c.memory = false;  // every call goes to the tier under test
  c.remote.url = url;
  c.remote.fleet_key = kFleetKey;
  c.log = Logger(LogLevel::kDebug, [](LogLevel, absl::string_view line) {
    std::fprintf(stderr, "fleetjit: %.*s\n", int(line.size()), line.data());
  });
  return c;
}

// Median and p99 of `rounds` GetOrBuild calls of `key` on `cache`, all of
// which must come from `expected`.
std::pair<double, double> Hits(ModuleCache& cache, const CacheKey& key,
                               CacheSource expected, int rounds) {
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    auto start = Clock::now();
    auto r = cache.GetOrBuild(key, []() -> absl::StatusOr<jit::Artifact> {
      return absl::InternalError("unexpected build");
    });
    ms.push_back(Ms(Clock::now() - start));
    if (!r.ok() || r->source != expected) {
      std::fprintf(stderr, "unexpected result: %s\n",
                   r.ok() ? "wrong tier" : r.status().ToString().c_str());
      std::exit(1);
    }
  }
  return {measure::Percentile(ms, 0.5), measure::Percentile(ms, 0.99)};
}

void Row(const std::string& what, const std::string& value,
         const std::string& anchor) {
  std::printf("| %-60s | %-24s | %-36s |\n", what.c_str(), value.c_str(),
              anchor.c_str());
}

std::string Fig(std::pair<double, double> m) {
  return absl::StrFormat("%.3f ms (p99 %.3f)", m.first, m.second);
}

int Main(int argc, char** argv) {
  int rounds = 200;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--rounds") rounds = std::atoi(argv[++i]);
  }
  const char* url = std::getenv("FJ_REDIS_URL");
  const char* socket = std::getenv("FJ_REDIS_SOCKET");
  if (url == nullptr || socket == nullptr) {
    std::fprintf(stderr,
                 "run under scripts/dev/with-redis (FJ_REDIS_URL unset)\n");
    return 77;
  }
  const std::string unix_url = absl::StrCat("unix://", socket);
  char pattern[] = "/tmp/fj_remote_bench.XXXXXX";
  const std::string dir = ::mkdtemp(pattern);
  std::printf(
      "fleetjit remote cache benchmark: 64 KiB image, loopback Redis "
      "(%s), %d rounds\n\n",
      url, rounds);
  Row("measure", "fleetjit", "anchor (this run) / goal");
  std::printf("|%s|%s|%s|\n", std::string(62, '-').c_str(),
              std::string(26, '-').c_str(), std::string(38, '-').c_str());

  // 1. The cold build, through the Runtime (NVRTC), uncached.
  double cold_ms = -1;
  size_t cubin_bytes = 0;
  {
    RuntimeOptions options;
    options.cache.disk = false;
    options.thunks = false;
    auto rt = Runtime::Create(options);
    std::vector<double> ms;
    for (int i = 0; rt.ok() && i < 5; ++i) {
      BuildSpec spec;
      // The corpus's saxpy (examples/saxpy.cu), a new key each round.
      spec.source =
          absl::StrCat(bundled::FindBundledKernel("examples/saxpy.cu")->content,
                       "// ", i, "\n");
      spec.target = *jit::ParseTarget("sm_90");
      spec.use_cache = false;
      auto start = Clock::now();
      auto r = (*rt)->BuildRecord(spec);
      if (!r.ok()) break;
      ms.push_back(Ms(Clock::now() - start));
      cubin_bytes = r->artifact->image.size();
    }
    if (!ms.empty()) cold_ms = measure::Percentile(ms, 0.5);
  }
  Row("cold build: NVRTC, small kernel, sm_90 (median of 5)",
      cold_ms < 0 ? "no NVRTC" : absl::StrFormat("%.1f ms", cold_ms),
      absl::StrFormat("(cubin %zu bytes)", cubin_bytes));

  // Publish the entry once (remote) and once to disk.
  const CacheKey key = Key(1);
  {
    CacheConfig c = Config(dir + "/publisher", url);
    c.memory = true;
    ModuleCache publisher(c);
    if (!publisher
             .GetOrBuild(
                 key,
                 [] { return absl::StatusOr<jit::Artifact>(MakeArtifact(1)); })
             .ok() ||
        !publisher.FlushRemote(absl::Seconds(5)) ||
        publisher.stats().remote_writes != 1) {
      std::fprintf(stderr, "could not publish\n");
      return 1;
    }
  }

  // 2. Disk hit.
  ModuleCache disk(Config(dir + "/publisher", ""));
  auto disk_hit = Hits(disk, key, CacheSource::kDisk, rounds);
  Row("local disk hit (memory tier off)", Fig(disk_hit), "");

  // 3. Remote hits.
  ModuleCache tcp(Config("", url));
  auto tcp_hit = Hits(tcp, key, CacheSource::kRemote, rounds);
  Row("remote hit, loopback TCP, warm connection", Fig(tcp_hit),
      absl::StrFormat("goal <= 3 ms; disk %.3f ms", disk_hit.first));
  ModuleCache unix_cache(Config("", unix_url));
  auto unix_hit = Hits(unix_cache, key, CacheSource::kRemote, rounds);
  Row("remote hit, unix socket, warm connection", Fig(unix_hit),
      "goal <= 3 ms");
  {
    std::vector<double> ms;
    for (int i = 0; i < std::max(10, rounds / 10); ++i) {
      ModuleCache fresh(Config("", url));  // a new connection each time
      auto m = Hits(fresh, key, CacheSource::kRemote, 1);
      ms.push_back(m.first);
    }
    Row("remote hit, loopback TCP, new connection (fresh process)",
        Fig({measure::Percentile(ms, 0.5), measure::Percentile(ms, 0.99)}),
        cold_ms < 0 ? "goal <= 3 ms"
                    : absl::StrFormat("goal <= 3 ms; cold %.1f ms", cold_ms));
  }

  // 4. What a miss costs with the tier, against no remote tier at all;
  // and the background publication. The build returns a prepared copy.
  const jit::Artifact prepared = MakeArtifact(2);
  auto miss_loop = [&](ModuleCache& cache, uint64_t first) {
    std::vector<double> ms;
    for (int i = 0; i < rounds; ++i) {
      auto start = Clock::now();
      auto r = cache.GetOrBuild(Key(first + i), [&] {
        return absl::StatusOr<jit::Artifact>(prepared);
      });
      ms.push_back(Ms(Clock::now() - start));
      if (!r.ok() || r->source != CacheSource::kCompiled) std::exit(1);
    }
    return std::make_pair(measure::Percentile(ms, 0.5),
                          measure::Percentile(ms, 0.99));
  };
  ModuleCache local_only(Config("", ""));
  auto baseline = miss_loop(local_only, 10000);
  Row("miss, no remote tier (instant build)", Fig(baseline), "");
  auto remote_miss = miss_loop(tcp, 20000);
  Row("miss, remote tier: GET absent + queue the publication", Fig(remote_miss),
      absl::StrFormat("+%.3f ms over no tier",
                      remote_miss.first - baseline.first));
  {
    auto start = Clock::now();
    bool flushed = tcp.FlushRemote(absl::Seconds(30));
    double per = Ms(Clock::now() - start) / rounds;
    Row("publication on the writer thread (entry + pointer SET)",
        flushed ? absl::StrFormat("<= %.3f ms per entry", per) : "timed out",
        absl::StrFormat(
            "%llu written, %llu dropped (queue)",
            static_cast<unsigned long long>(tcp.stats().remote_writes),
            static_cast<unsigned long long>(tcp.stats().remote_write_drops)));
  }
  {
    ModuleCache down(Config("", "redis://127.0.0.1:1/0"));  // nothing listens
    auto m = miss_loop(down, 30000);
    Row("miss, Redis down (refused; breaker open after 3 failures)", Fig(m),
        absl::StrFormat("+%.3f ms over no tier; breaker %s",
                        m.first - baseline.first, down.stats().remote_state));
  }
  std::printf(
      "\nAnchors are measured in this run: the cold build is what a "
      "hit saves; the disk hit is the local tier a remote hit stands "
      "behind.\n");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace fleetjit::bench

int main(int argc, char** argv) { return fleetjit::bench::Main(argc, argv); }
