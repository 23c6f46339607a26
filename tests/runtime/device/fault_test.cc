// A faulting kernel through the C ABI: the synchronisation that observes the
// fault names the kernel, and every later call on that device is a clear
// FAILED_PRECONDITION instead of a confusing driver error. And a copy-layer
// kernel whose tensor parameter lacks FJ_TENSOR, built with
// FJ_CHECK_TENSORS=1: its copy call prints the layer's message and traps,
// under each implementation. Each runs in a forked child (a fault or trap
// poisons the process's context).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void write_through(int* p) { p[threadIdx.x] = 7; }
)";

fj_str S(const char* s) { return fj_str{s, std::char_traits<char>::length(s)}; }

// A child's runtime and the build options of `source`: 0, 77 when there
// is no GPU, `fail` when the runtime cannot be created.
int OpenChild(const char* source, const char* name, int fail, fj_runtime** rt,
              fj_build_options* o) {
  if (fj_runtime_create(nullptr, rt) != nullptr) return fail;
  int32_t n = 0;
  fj_device_count(*rt, &n);
  if (n == 0) return 77;
  *o = fj_build_options{};
  o->struct_size = sizeof(*o);
  o->source = S(source);
  o->name = S(name);
  return 0;
}

int Child() {
  fj_runtime* rt = nullptr;
  fj_build_options o;
  if (int rc = OpenChild(kSource, "fault.cu", 10, &rt, &o)) return rc;
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

// The tensor parameter is a plain fj::tensor, not FJ_TENSOR: a copy of it
// in local memory, which TMA cannot read. Built with FJ_CHECK_TENSORS=1,
// copy.cuh's detail::checked prints and traps at the first copy call.
constexpr const char* kByValueTensor = R"(
#define FJ_CHECK_TENSORS 1
#include <fleetjit/copy.cuh>
extern "C" __global__ void by_value(fj::tensor<float, 2> t, float* out) {
  __shared__ __align__(128) float buf[32 * 32];
  __shared__ fj::barrier bar;
  if (threadIdx.x == 0) bar.init(fj::block_threads());
  __syncthreads();
  fj::load_tile(buf, t, fj::at(0, 0), bar);
  bar.arrive_and_wait(0);
  out[threadIdx.x] = buf[threadIdx.x];
}
)";

// The child: builds kByValueTensor under `impl`, launches it on a real
// tensor with its device printf going to `log`, and checks that the
// synchronisation fails. 0: as expected; 77: no GPU or no such impl here.
int ByValueChild(fj_copy_impl impl, const char* log) {
  const int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, 1) < 0) return 20;
  fj_runtime* rt = nullptr;
  fj_build_options o;
  if (int rc = OpenChild(kByValueTensor, "by_value.cu", 21, &rt, &o)) {
    return rc;
  }
  o.copy_impl = impl;
  fj_module* m = nullptr;
  fj_kernel* k = nullptr;
  fj_stream* s = nullptr;
  fj_status* st = fj_module_build(rt, &o, &m);
  if (st != nullptr) {
    // An implementation the GPU lacks (tma before sm_90): nothing to show.
    const bool unsupported = fj_status_code(st) == FJ_FAILED_PRECONDITION;
    std::fprintf(stderr, "build: %s\n", fj_status_message(st, nullptr));
    return unsupported ? 77 : 22;
  }
  if (fj_module_get_kernel(m, S("by_value"), 0, &k) ||
      fj_stream_create(rt, 0, &s)) {
    return 23;
  }
  constexpr int64_t kSide = 64;
  uint64_t src = 0, out = 0;
  if (fj_mem_alloc(rt, 0, kSide * kSide * 4, &src) ||
      fj_mem_alloc(rt, 0, 32 * 32 * 4, &out)) {
    return 24;
  }
  int64_t shape[2] = {kSide, kSide};
  fj_tensor t{
      reinterpret_cast<void*>(src), {2, 0}, 2, {2, 32, 1}, shape, nullptr, 0};
  fj_tensor_arg ta{};
  ta.struct_size = sizeof(ta);
  ta.tensor = &t;
  ta.box[0] = ta.box[1] = 32;
  ta.oob = FJ_OOB_ZEROS;
  fj_arg args[2] = {};
  args[0].struct_size = args[1].struct_size = sizeof(fj_arg);
  args[0].kind = FJ_ARG_TENSOR;
  args[0].v.tensor = &ta;
  args[1].kind = FJ_ARG_POINTER;
  args[1].v.pointer = out;
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = 1;
  cfg.block[0] = 128;
  cfg.stream = s;
  st = fj_launch(k, &cfg, args, 2);
  if (st != nullptr) {
    std::fprintf(stderr, "launch: %s\n", fj_status_message(st, nullptr));
    return 25;
  }
  st = fj_stream_synchronize(s);
  std::fflush(stdout);
  if (fj_status_code(st) != FJ_CUDA_ERROR) return 26;
  std::fprintf(stderr, "sync: %s\n", fj_status_message(st, nullptr));
  return 0;
}

TEST(FaultTest, ATensorParameterWithoutFjTensorTrapsWithTheLayersMessage) {
  for (fj_copy_impl impl :
       {FJ_COPY_IMPL_SYNC, FJ_COPY_IMPL_CP_ASYNC, FJ_COPY_IMPL_TMA}) {
    SCOPED_TRACE(static_cast<int>(impl));
    char log[] = "/tmp/fj_by_value_XXXXXX";
    const int fd = mkstemp(log);
    ASSERT_GE(fd, 0);
    close(fd);
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) _exit(ByValueChild(impl, log));
    int status = 0;
    waitpid(pid, &status, 0);
    std::ifstream in(log);
    std::stringstream printed;
    printed << in.rdbuf();
    unlink(log);
    ASSERT_TRUE(WIFEXITED(status)) << "the child crashed";
    if (WEXITSTATUS(status) == 77) {
      if (impl == FJ_COPY_IMPL_SYNC) GTEST_SKIP() << "no GPU";
      continue;  // an implementation this GPU lacks
    }
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the launch did not fail";
    EXPECT_NE(printed.str().find("fleetjit: an fj::tensor given to a copy "
                                 "call is not the kernel's __grid_constant__ "
                                 "parameter"),
              std::string::npos)
        << "device output: '" << printed.str() << "'";
  }
}

}  // namespace
