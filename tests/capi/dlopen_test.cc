// Loading inside a server: dlopen -> use -> dlclose -> dlopen again works,
// NVRTC is not loaded by a process that never compiles, and process exit
// with live handles does not crash. Each check runs in a fresh child process
// so nothing earlier in this binary has loaded the libraries.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/test_paths.h"

namespace {

// Runs `body` in a forked child; returns its exit code (or 128 + signal).
int InChild(const std::function<int()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool Mapped(const char* needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

struct Api {
  void* handle = nullptr;
  decltype(&fj_runtime_create) runtime_create = nullptr;
  decltype(&fj_runtime_destroy) runtime_destroy = nullptr;
  decltype(&fj_module_build) module_build = nullptr;
  decltype(&fj_device_count) device_count = nullptr;
  decltype(&fj_status_free) status_free = nullptr;
  bool Load() {
    const std::string path = fleetjit::testing::BesideExecutable(
        "../lib/libfleetjit.so.1", FJ_LIBRARY_PATH);
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      return false;
    }
    runtime_create = reinterpret_cast<decltype(runtime_create)>(
        dlsym(handle, "fj_runtime_create"));
    runtime_destroy = reinterpret_cast<decltype(runtime_destroy)>(
        dlsym(handle, "fj_runtime_destroy"));
    module_build = reinterpret_cast<decltype(module_build)>(
        dlsym(handle, "fj_module_build"));
    device_count = reinterpret_cast<decltype(device_count)>(
        dlsym(handle, "fj_device_count"));
    status_free = reinterpret_cast<decltype(status_free)>(
        dlsym(handle, "fj_status_free"));
    return runtime_create && runtime_destroy && module_build && device_count &&
           status_free;
  }
};

const char* kKernel = "extern \"C\" __global__ void k(int* p) { *p = 42; }";

// Builds kKernel for sm_80 with a fresh runtime; 0 on success.
int BuildOnce(Api& api, bool destroy) {
  fj_runtime* rt = nullptr;
  if (api.runtime_create(nullptr, &rt) != nullptr) return 10;
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = fj_str{kKernel, std::strlen(kKernel)};
  o.target = fj_str{"sm_80", 5};
  o.flags = FJ_BUILD_NO_CACHE;
  fj_module* m = nullptr;
  fj_status* st = api.module_build(rt, &o, &m);
  if (st != nullptr) {
    api.status_free(st);
    return 11;
  }
  if (destroy && api.runtime_destroy(rt) != nullptr) return 12;
  return 0;
}

TEST(DlopenTest, NothingLoadsNvrtcUntilABuildNeedsIt) {
  EXPECT_EQ(InChild([] {
              Api api;
              if (!api.Load()) return 1;
              if (Mapped("libnvrtc")) return 2;  // loading the library
              fj_runtime* rt = nullptr;
              if (api.runtime_create(nullptr, &rt) != nullptr) return 3;
              int32_t n = 0;
              if (api.device_count(rt, &n) != nullptr) return 4;
              if (Mapped("libnvrtc")) return 5;  // creating a runtime
              api.runtime_destroy(rt);
              if (BuildOnce(api, true) != 0) return 6;
              return Mapped("libnvrtc") ? 0 : 7;  // a compile loads it
            }),
            0);
}

TEST(DlopenTest, DlcloseAndDlopenAgainWork) {
  EXPECT_EQ(InChild([] {
              for (int round = 0; round < 3; ++round) {
                Api api;
                if (!api.Load()) return 1;
                if (int rc = BuildOnce(api, true)) return 20 + rc;
                if (dlclose(api.handle) != 0) return 2;
              }
              return 0;
            }),
            0);
}

TEST(DlopenTest, ExitWithLiveHandlesDoesNotCrash) {
  EXPECT_EQ(InChild([] {
              Api api;
              if (!api.Load()) return 1;
              int rc = BuildOnce(api, /*destroy=*/false);
              if (rc != 0) return rc;
              std::exit(0);  // runs atexit handlers and static destructors
            }),
            0);
}

}  // namespace
