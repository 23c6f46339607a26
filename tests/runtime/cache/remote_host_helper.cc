// One "host" of remote_host_test: a process that builds a fixed kernel for
// sm_90 through the Runtime, configured only by the environment
// (FLEETJIT_CACHE_DIR, FLEETJIT_REMOTE_CACHE, FLEETJIT_FLEET_KEY,
// FLEETJIT_LIBNVRTC), publishes, and reports.
//
//   remote_host_helper OUT_PREFIX
//
// writes the cubin to OUT_PREFIX.cubin and one line to OUT_PREFIX.txt:
//   source=<compiled|memory|disk|remote> compiles=N remote_hits=N
//   remote_state=<...> nvrtc_mapped=<0|1>
// Exit 0 on success, 1 (message on stderr) otherwise.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "jit/target.h"
#include "runtime/runtime.h"
#include "tests/common/corpus.h"

namespace {

const char* SourceName(fleetjit::CacheSource s) {
  switch (s) {
    case fleetjit::CacheSource::kCompiled:
      return "compiled";
    case fleetjit::CacheSource::kMemory:
      return "memory";
    case fleetjit::CacheSource::kDisk:
      return "disk";
    case fleetjit::CacheSource::kRemote:
      return "remote";
    case fleetjit::CacheSource::kBundle:
      return "bundle";
  }
  return "?";
}

bool NvrtcMapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libnvrtc") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fleetjit;
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_PREFIX\n";
    return 2;
  }
  const std::string out = argv[1];
  RuntimeOptions options;
  options.cache.log =
      Logger(LogLevel::kDebug, [](LogLevel, absl::string_view line) {
        std::cerr << "fleetjit: " << line << "\n";
      });
  if (absl::Status s = ApplyEnvironment(options); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  auto rt = Runtime::Create(options);
  if (!rt.ok()) {
    std::cerr << rt.status() << "\n";
    return 1;
  }
  BuildSpec spec;
  spec.source = fleetjit::testing::SaxpySource();  // the corpus's
  spec.name = "saxpy.cu";
  spec.target = *jit::ParseTarget("sm_90");
  spec.output = BuildSpec::Output::kCubin;
  absl::StatusOr<ModuleRecord> record = (*rt)->BuildRecord(spec);
  if (!record.ok()) {
    std::cerr << record.status() << "\n";
    return 1;
  }
  (*rt)->WaitForBackgroundWork();
  if (!(*rt)->cache().FlushRemote(absl::Seconds(10))) {
    std::cerr << "the remote tier did not flush\n";
    return 1;
  }
  CacheStats stats = (*rt)->cache_stats();
  std::ofstream(out + ".cubin", std::ios::binary) << record->artifact->image;
  std::ofstream(out + ".txt")
      << absl::StrCat("source=", SourceName(record->source),
                      " compiles=", stats.compiles,
                      " remote_hits=", stats.remote_hits,
                      " remote_state=", stats.remote_state,
                      " nvrtc_mapped=", NvrtcMapped() ? 1 : 0)
      << "\n";
  return 0;
}
