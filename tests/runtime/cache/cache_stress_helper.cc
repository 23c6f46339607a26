// A separate process for the cache's multi-process tests. Keys and
// artifacts come from a seed (cache_test_util.h), so every process agrees on
// what each entry must contain.
//
//   cache_stress_helper build DIR SEED COUNT IMAGE_BYTES
//       GetOrBuild items 0..COUNT-1 (in a pid-dependent order); each result
//       must be the item's artifact. Exit 0, or 1 on any error or mismatch.
//   cache_stress_helper write-loop DIR SEED COUNT IMAGE_BYTES [READY]
//       Store random items forever (to be killed with SIGKILL); creates
//       file READY once its first item is stored.
//   cache_stress_helper read-loop DIR SEED COUNT IMAGE_BYTES SECONDS [STOP]
//       Load random items for SECONDS, or until file STOP exists; a loaded
//       item must be the right one and no entry may be rejected (a killed
//       writer leaves none bad).
//   cache_stress_helper hit DIR SEED INDEX IMAGE_BYTES
//       GetOrBuild one item that must come from disk: exit 3 if the build
//       callback runs, 4 if any NVRTC library is mapped into the process.
//   cache_stress_helper build-one DIR SEED INDEX IMAGE_BYTES BUILD_MS OUT
//       GetOrBuild one item whose build takes BUILD_MS (a compile's time);
//       writes "source=compiled|disk compiles=N disk_hits=N lock_waits=N"
//       to file OUT. Exit 0, or 1 on an error or a wrong artifact.
//   cache_stress_helper hold DIR SEED INDEX IMAGE_BYTES READY
//       GetOrBuild one item whose build creates file READY and never
//       returns (to be killed with SIGKILL while it holds the key's lock).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "platform/nvrtc_locate.h"
#include "runtime/cache/disk_cache.h"
#include "runtime/cache/module_cache.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::testing {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "cache_stress_helper[%d]: %s\n", ::getpid(),
               message.c_str());
  return 1;
}

int Build(const std::string& dir, uint64_t seed, int count, size_t image) {
  CacheConfig config;
  config.dir = dir;
  ModuleCache cache(config);
  Rng order(static_cast<uint64_t>(::getpid()));
  const int offset = static_cast<int>(order() % count);
  for (int n = 0; n < count; ++n) {
    const int i = (n + offset) % count;
    absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
        KeyFor(seed, i), [&]() -> absl::StatusOr<jit::Artifact> {
          return ArtifactFor(seed, i, image);
        });
    if (!r.ok()) return Fail(r.status().ToString());
    if (!SameArtifact(*r->artifact, ArtifactFor(seed, i, image))) {
      return Fail(absl::StrCat("item ", i, " served a wrong artifact"));
    }
  }
  CacheStats s = cache.stats();
  std::printf("compiles=%llu disk_hits=%llu rejected=%llu\n",
              static_cast<unsigned long long>(s.compiles),
              static_cast<unsigned long long>(s.disk_hits),
              static_cast<unsigned long long>(s.rejected_entries));
  return s.rejected_entries == 0 ? 0 : Fail("rejected entries");
}

int WriteLoop(const std::string& dir, uint64_t seed, int count, size_t image,
              const std::string& ready_file) {
  DiskCache disk(dir, 0, Logger());
  std::vector<CacheKey> keys;
  std::vector<jit::Artifact> artifacts;
  for (int i = 0; i < count; ++i) {
    keys.push_back(KeyFor(seed, i));
    artifacts.push_back(ArtifactFor(seed, i, image));
  }
  Rng rng(static_cast<uint64_t>(::getpid()));
  for (bool first = true;; first = false) {
    int i = static_cast<int>(rng() % count);
    absl::Status s = disk.Store(keys[i], artifacts[i]);
    if (!s.ok()) return Fail(s.ToString());
    // READY after the first store: every writer publishes one entry, so
    // the reader has entries to check however slow the disk (under load a
    // store can outlast the whole kill window), and kills land in the
    // stores after it.
    if (first && !ready_file.empty()) WriteFile(ready_file, "ready");
  }
}

int ReadLoop(const std::string& dir, uint64_t seed, int count, size_t image,
             double seconds, const std::string& stop_file) {
  DiskCache disk(dir, 0, Logger());
  std::vector<CacheKey> keys;
  std::vector<std::string> expected;
  for (int i = 0; i < count; ++i) {
    keys.push_back(KeyFor(seed, i));
    expected.push_back(jit::SerializeArtifact(ArtifactFor(seed, i, image)));
  }
  Rng rng(static_cast<uint64_t>(::getpid()));
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t loads = 0, hits = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (!stop_file.empty() && loads % 16 == 0 &&
        ::access(stop_file.c_str(), F_OK) == 0) {
      break;
    }
    int i = static_cast<int>(rng() % count);
    std::optional<jit::Artifact> a = disk.Load(keys[i]);
    ++loads;
    if (!a) continue;
    ++hits;
    if (jit::SerializeArtifact(*a) != expected[i]) {
      return Fail(absl::StrCat("item ", i, " loaded a wrong artifact"));
    }
  }
  std::printf("loads=%llu hits=%llu rejected=%llu\n",
              static_cast<unsigned long long>(loads),
              static_cast<unsigned long long>(hits),
              static_cast<unsigned long long>(disk.rejected_entries()));
  return disk.rejected_entries() == 0 ? 0 : Fail("rejected entries");
}

bool NvrtcMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("nvrtc") != std::string::npos) return true;
  }
  return false;
}

int Hit(const std::string& dir, uint64_t seed, int index, size_t image) {
  // The environment the test sets up: no NVRTC can be found or loaded.
  const char* explicit_nvrtc = std::getenv("FLEETJIT_LIBNVRTC");
  if (explicit_nvrtc == nullptr ||
      ResolveNvrtcLibrary(explicit_nvrtc).status().code() !=
          absl::StatusCode::kUnavailable) {
    return Fail("expected FLEETJIT_LIBNVRTC to name a missing file");
  }
  CacheConfig config;
  config.dir = dir;
  ModuleCache cache(config);
  absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
      KeyFor(seed, index), []() -> absl::StatusOr<jit::Artifact> {
        std::fprintf(stderr, "cache_stress_helper: the build ran on a hit\n");
        std::_Exit(3);
      });
  if (!r.ok()) return Fail(r.status().ToString());
  if (r->source != CacheSource::kDisk) return Fail("not a disk hit");
  if (!SameArtifact(*r->artifact, ArtifactFor(seed, index, image))) {
    return Fail("wrong artifact");
  }
  if (NvrtcMapped()) {
    Fail("an NVRTC library is mapped into the process");
    return 4;
  }
  return 0;
}

int BuildOne(const std::string& dir, uint64_t seed, int index, size_t image,
             int build_ms, const std::string& out) {
  CacheConfig config;
  config.dir = dir;
  ModuleCache cache(config);
  absl::StatusOr<ModuleCache::Result> r = cache.GetOrBuild(
      KeyFor(seed, index), [&]() -> absl::StatusOr<jit::Artifact> {
        std::this_thread::sleep_for(std::chrono::milliseconds(build_ms));
        return ArtifactFor(seed, index, image);
      });
  if (!r.ok()) return Fail(r.status().ToString());
  if (!SameArtifact(*r->artifact, ArtifactFor(seed, index, image))) {
    return Fail("wrong artifact");
  }
  CacheStats s = cache.stats();
  WriteFile(out, absl::StrCat("source=",
                              r->source == CacheSource::kCompiled ? "compiled"
                              : r->source == CacheSource::kDisk   ? "disk"
                                                                  : "other",
                              " compiles=", s.compiles, " disk_hits=",
                              s.disk_hits, " lock_waits=", s.lock_waits, "\n"));
  return 0;
}

int Hold(const std::string& dir, uint64_t seed, int index,
         const std::string& ready) {
  CacheConfig config;
  config.dir = dir;
  ModuleCache cache(config);
  (void)cache.GetOrBuild(KeyFor(seed, index),
                         [&]() -> absl::StatusOr<jit::Artifact> {
                           WriteFile(ready, "ready");
                           for (;;) ::pause();
                         });
  return Fail("the hold ended");
}

}  // namespace
}  // namespace fleetjit::testing

int main(int argc, char** argv) {
  using namespace fleetjit::testing;
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: %s build|write-loop|read-loop|hit DIR SEED N "
                 "IMAGE_BYTES [SECONDS]\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  const int n = std::atoi(argv[4]);
  const size_t image = std::strtoull(argv[5], nullptr, 10);
  if (mode == "build") return Build(dir, seed, n, image);
  if (mode == "write-loop") {
    return WriteLoop(dir, seed, n, image, argc > 6 ? argv[6] : "");
  }
  if (mode == "read-loop" && argc > 6) {
    return ReadLoop(dir, seed, n, image, std::atof(argv[6]),
                    argc > 7 ? argv[7] : "");
  }
  if (mode == "hit") return Hit(dir, seed, n, image);
  if (mode == "build-one" && argc > 7) {
    return BuildOne(dir, seed, n, image, std::atoi(argv[6]), argv[7]);
  }
  if (mode == "hold" && argc > 6) return Hold(dir, seed, n, argv[6]);
  return 2;
}
