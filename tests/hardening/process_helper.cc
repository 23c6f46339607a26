// Child processes for the process-fault tests (process_faults_test.cc):
//
//   process_helper publish DIR SEED KEYS
//       Publishes to the disk cache at DIR forever (ModuleCache: builds
//       stored at once, then replaced by Update, as the thunk follow-up
//       does; a small cap so eviction runs too). Writes one byte to stdout
//       once the loop runs, so the parent can time its SIGKILL.
//   process_helper verify DIR SEED KEYS
//       Loads every key through the disk cache and checks each entry served
//       is one of the two artifacts the publisher writes for that key.
//       Prints "served=N corrupt_served=N files=N bad_files=N temps=N".
//   process_helper exit-in-flight DIR MODE DELAY_MS BASE
//       Creates a runtime over the C ABI, starts builds of variants BASE..
//       (MODE "async": six fj_module_build_async; "thread": three
//       fj_module_build on threads of its own), and calls exit(0) after
//       DELAY_MS with them in flight and the runtime never destroyed.
//       "+preload" in MODE: NVRTC loaded by fj_runtime_create; "+warm": one
//       build done before the others start.
//   process_helper build DIR VARIANT
//       Builds one variant through the C ABI (NVRTC from the environment:
//       the crash tests point FLEETJIT_LIBNVRTC at a fake that aborts).
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "runtime/cache/module_cache.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit::testing {
namespace {

// The two artifacts the publisher writes under key `i`: as built, then as
// "updated" (a different image size, like a thunk being added).
jit::Artifact Version(uint64_t seed, int i, int version) {
  const size_t bytes = 2000 + static_cast<size_t>((seed + i * 7919) % 200000);
  jit::Artifact a = ArtifactFor(seed, i, bytes);
  if (version == 1)
    a.thunk_object =
        std::string(4096 + i % 1000, static_cast<char>('A' + i % 26));
  return a;
}

CacheConfig Config(const std::string& dir) {
  CacheConfig c{dir};
  c.max_bytes = 4 << 20;  // eviction runs often
  c.memory = false;       // every store and load reaches the disk
  return c;
}

int Publish(const std::string& dir, uint64_t seed, int keys) {
  ModuleCache cache(Config(dir));
  std::mt19937_64 rng(static_cast<uint64_t>(getpid()));
  bool announced = false;
  for (;;) {
    const int i = static_cast<int>(rng() % static_cast<uint64_t>(keys));
    auto built = cache.GetOrBuild(KeyFor(seed, i), [&] {
      return absl::StatusOr<jit::Artifact>(Version(seed, i, 0));
    });
    if (!built.ok()) return 2;
    (void)cache.Update(KeyFor(seed, i), std::make_shared<const jit::Artifact>(
                                            Version(seed, i, 1)));
    if (!announced) {
      (void)!write(1, "R", 1);
      announced = true;
    }
  }
}

int Verify(const std::string& dir, uint64_t seed, int keys) {
  DiskCache disk(dir, 0, Logger());
  int served = 0, corrupt_served = 0;
  for (int i = 0; i < keys; ++i) {
    std::optional<jit::Artifact> got = disk.Load(KeyFor(seed, i));
    if (!got.has_value()) continue;
    ++served;
    if (!SameArtifact(*got, Version(seed, i, 0)) &&
        !SameArtifact(*got, Version(seed, i, 1))) {
      ++corrupt_served;
    }
  }
  int files = 0, bad_files = 0, temps = 0;
  auto listed = disk.List(/*verify=*/true);
  if (listed.ok()) {
    for (const auto& e : *listed) {
      ++files;
      bad_files += e.problem.empty() ? 0 : 1;
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    temps += it->path().filename().string().rfind(".tmp-", 0) == 0;
  }
  std::printf(
      "served=%d corrupt_served=%d files=%d bad_files=%d temps=%d "
      "rejected=%llu\n",
      served, corrupt_served, files, bad_files, temps,
      static_cast<unsigned long long>(disk.rejected_entries()));
  return corrupt_served == 0 && bad_files == 0 ? 0 : 1;
}

fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }
// Literals: a temporary std::string would die before the struct is used.
fj_str S(const char* s) { return fj_str{s, std::strlen(s)}; }

std::string Source(int variant) {
  return absl::StrCat(
      "extern \"C\" __global__ void k(float* p, int n) {\n"
      "  if (threadIdx.x < n) p[threadIdx.x] = ",
      variant, ".25f * p[threadIdx.x];\n}\n");
}

fj_runtime* NewRuntime(const std::string& dir, bool preload_nvrtc = false) {
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  o.cache_dir = S(dir);
  if (preload_nvrtc) o.flags = FJ_RUNTIME_PRELOAD_NVRTC;
  fj_runtime* rt = nullptr;
  fj_status* st = fj_runtime_create(&o, &rt);
  if (st != nullptr) {
    std::fprintf(stderr, "fj_runtime_create: %s\n",
                 fj_status_message(st, nullptr));
    std::exit(3);
  }
  return rt;
}

int ExitInFlight(const std::string& dir, const std::string& mode, int delay_ms,
                 int base) {
  // "async+preload", "thread+preload": NVRTC loaded inside the create.
  const bool preload = mode.find("+preload") != std::string::npos;
  fj_runtime* rt = NewRuntime(dir, preload);
  const std::string target = "sm_90";
  std::vector<std::string> sources;
  for (int v = 0; v < 6; ++v) sources.push_back(Source(base + v));
  if (mode.find("+warm") != std::string::npos) {
    // A first build done before the others start: NVRTC's and LLVM's lazily
    // built state exists before exit can race it.
    const std::string first = Source(base + 99);
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(first);
    o.target = S(target);
    fj_module* m = nullptr;
    if (fj_module_build(rt, &o, &m) != nullptr) return 6;
    fj_status_free(fj_module_destroy(m));
  }
  if (mode.rfind("async", 0) == 0) {
    for (const std::string& source : sources) {
      fj_build_options o{};
      o.struct_size = sizeof(o);
      o.source = S(source);
      o.target = S(target);
      fj_build* b = nullptr;
      if (fj_module_build_async(rt, &o, &b) != nullptr) return 4;
    }
  } else {
    for (size_t v = 0; v < 3; ++v) {
      std::thread([rt, source = sources[v], target] {
        fj_build_options o{};
        o.struct_size = sizeof(o);
        o.source = S(source);
        o.target = S(target);
        fj_module* m = nullptr;
        fj_status_free(fj_module_build(rt, &o, &m));
      }).detach();
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  std::exit(0);  // atexit handlers and static destructors run under the builds
}

int Build(const std::string& dir, int variant) {
  fj_runtime* rt = NewRuntime(dir);
  const std::string source = Source(variant), target = "sm_90";
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(source);
  o.target = S(target);
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &o, &m);
  if (st != nullptr) {
    std::printf("status %s: %s\n", fj_code_name(fj_status_code(st)),
                fj_status_message(st, nullptr));
    fj_status_free(st);
    fj_status_free(fj_runtime_destroy(rt));
    return 5;
  }
  fj_status_free(fj_runtime_destroy(rt));
  return 0;
}

}  // namespace
}  // namespace fleetjit::testing

// On SIGSEGV/SIGBUS/SIGABRT, the faulting thread's frames to stderr (raw
// addresses with their libraries; addr2line resolves them), then the
// default action: a crash on a GPU host, where there is no debugger, still
// says where it happened.
void PrintCrashStack(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  char line[64];
  const int len =
      snprintf(line, sizeof(line), "process_helper: signal %d; stack:\n", sig);
  if (len > 0) (void)!write(2, line, static_cast<size_t>(len));
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char** argv) {
  using namespace fleetjit::testing;
  {
    void* warm[1];
    backtrace(warm, 1);  // loads libgcc's unwinder now, not in the handler
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT}) signal(sig, PrintCrashStack);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  auto number = [&](size_t i) {
    int64_t v = 0;
    return i < args.size() && absl::SimpleAtoi(args[i], &v) ? v : -1;
  };
  if (args.size() == 4 && args[0] == "publish") {
    return Publish(args[1], static_cast<uint64_t>(number(2)),
                   static_cast<int>(number(3)));
  }
  if (args.size() == 4 && args[0] == "verify") {
    return Verify(args[1], static_cast<uint64_t>(number(2)),
                  static_cast<int>(number(3)));
  }
  if (args.size() == 5 && args[0] == "exit-in-flight") {
    return ExitInFlight(args[1], args[2], static_cast<int>(number(3)),
                        static_cast<int>(number(4)));
  }
  if (args.size() == 3 && args[0] == "build") {
    return Build(args[1], static_cast<int>(number(2)));
  }
  std::fprintf(stderr, "usage: see tests/hardening/process_helper.cc\n");
  return 64;
}
