// Shared by the cache tests and cache_stress_helper: random artifacts and
// keys derived from a seed (so separate processes agree on them), temp
// directories, and spawning helper processes.
#ifndef FLEETJIT_TESTS_RUNTIME_CACHE_TEST_UTIL_H_
#define FLEETJIT_TESTS_RUNTIME_CACHE_TEST_UTIL_H_

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_key.h"
#include "tests/common/process.h"
#include "tests/common/seed.h"
#include "tests/common/temp_dir.h"

extern char** environ;

namespace fleetjit::testing {

using Rng = std::mt19937_64;

inline std::string RandomBytes(Rng& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

inline std::string RandomText(Rng& rng, size_t n) {
  static constexpr char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ;{}()";
  std::string s(n, ' ');
  for (char& c : s) c = kChars[rng() % (sizeof(kChars) - 1)];
  return s;
}

// An artifact with random content: the cache does not care how it was built.
inline jit::Artifact RandomArtifact(Rng& rng, size_t image_bytes) {
  jit::Artifact a;
  a.target.arch = 80 + static_cast<int>(rng() % 40);
  a.target.suffix = "\0af"[rng() % 3];
  a.target.ptx = rng() % 2;
  a.copy_impl = static_cast<jit::CopyImpl>(rng() % 3);
  a.is_ptx = a.target.ptx;
  a.image = RandomBytes(rng, image_bytes);
  a.ptx = RandomText(rng, 64 + rng() % 512);
  a.log = RandomText(rng, rng() % 64);
  a.compiler = absl::StrCat("nvrtc 13.0 test-", rng() % 1000);
  a.compile_ms = static_cast<double>(rng() % 100000) / 7.0;
  int kernels = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < kernels; ++k) {
    jit::KernelEntry e;
    e.name = absl::StrCat("kernel_", k, "_", RandomText(rng, 6));
    e.lowered_name = absl::StrCat("_Z", e.name.size(), e.name, "Pfi");
    int params = static_cast<int>(rng() % 6);
    uint32_t offset = 0;
    for (int p = 0; p < params; ++p) {
      jit::ParamSpec s;
      s.kind = static_cast<jit::ParamKind>(rng() % 8);
      s.size = 1u << (rng() % 4);
      s.align = s.size;
      s.offset = offset;
      offset += s.size;
      s.tensor_dtype = static_cast<int32_t>(rng() % 20) - 1;
      s.tensor_rank = static_cast<int32_t>(rng() % 5);
      s.type_name = RandomText(rng, rng() % 12);
      e.params.push_back(std::move(s));
    }
    e.param_bytes = offset;
    a.kernels.push_back(std::move(e));
  }
  a.thunk_object = RandomBytes(rng, rng() % 256);
  return a;
}

inline bool SameArtifact(const jit::Artifact& a, const jit::Artifact& b) {
  return jit::SerializeArtifact(a) == jit::SerializeArtifact(b);
}

// Key inputs for item `index` of a seeded set.
inline CacheKeyInputs KeyInputsFor(uint64_t seed, int index) {
  Rng rng(seed * 7919 + static_cast<uint64_t>(index));
  CacheKeyInputs in;
  in.source = RandomText(rng, 200 + rng() % 2000);
  for (int h = 0; h < 3; ++h) {
    in.headers.emplace_back(absl::StrCat("fleetjit/h", h, ".cuh"),
                            RandomText(rng, 100 + rng() % 500));
  }
  in.options = {"-std=c++17", absl::StrCat("-DSEED=", rng() % 100000)};
  in.target = "sm_90a";
  in.copy_impl = "tma";
  in.compiler = "nvrtc 13.0 libnvrtc.so.13 size=109338064";
  in.driver_version = 13000;
  in.name_expressions = {"k<float>"};
  return in;
}

inline CacheKey KeyFor(uint64_t seed, int index) {
  return MakeCacheKey(KeyInputsFor(seed, index));
}

// The artifact item `index` of a seeded set builds to.
inline jit::Artifact ArtifactFor(uint64_t seed, int index, size_t image_bytes) {
  Rng rng(seed * 104729 + static_cast<uint64_t>(index));
  return RandomArtifact(rng, image_bytes);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_RUNTIME_CACHE_TEST_UTIL_H_
