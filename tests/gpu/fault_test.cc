// A faulting kernel through the C ABI: the synchronisation that observes the
// fault names the kernel, and every later call on that device is a clear
// FAILED_PRECONDITION instead of a confusing driver error. Runs in a forked
// child (the fault poisons the process's context).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void write_through(int* p) { p[threadIdx.x] = 7; }
)";

fj_str S(const char* s) { return fj_str{s, std::char_traits<char>::length(s)}; }

int Child() {
  fj_runtime* rt = nullptr;
  if (fj_runtime_create(nullptr, &rt) != nullptr) return 10;
  int32_t n = 0;
  fj_device_count(rt, &n);
  if (n == 0) return 77;
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = S(kSource);
  o.name = S("fault.cu");
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  fj_stream* s = nullptr;
  if (fj_module_build(rt, &o, &m) ||
      fj_module_get_kernel(m, S("write_through"), 0, &k) ||
      fj_stream_create(rt, 0, &s)) {
    return 11;
  }
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = FJ_ARG_POINTER;
  arg.v.pointer = 0x10;  // not mapped: the kernel faults
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 32;
  cfg.stream = s;
  if (fj_launch(k, &cfg, &arg, 1) != nullptr) return 12;
  fj_status* st = fj_stream_synchronize(s);
  if (fj_status_code(st) != FJ_CUDA_ERROR) return 13;
  std::string msg = fj_status_message(st, nullptr);
  std::printf("sync: %s\n", msg.c_str());
  if (msg.find("fault.cu:write_through") == std::string::npos) return 14;
  fj_status_free(st);
  uint64_t p = 0;
  st = fj_mem_alloc(rt, 0, 64, &p);
  std::printf("later: %s\n", fj_status_message(st, nullptr));
  if (fj_status_code(st) != FJ_FAILED_PRECONDITION) return 15;
  fj_status_free(st);
  return 0;
}

TEST(FaultTest, TheSyncNamesTheFaultingKernelAndLaterCallsAreRefused) {
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(Child());
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "the child crashed";
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "no GPU";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
