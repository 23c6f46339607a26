// Device linking's cost (since 1.3): fj_module_link next to the plain build
// of the same code as one source (the anchor), each a cache miss in a fresh
// cache folder, for a named target (NVRTC and nvJitLink need no GPU):
//  1. fj_module_build of one source holding the kernel and the __device__
//     function it calls                                         (anchor)
//  2. fj_module_link of the same code as two sources (-dc), nvJitLink
//  2b. the same code linked from prebuilt PTX: nvJitLink (and its ptxas)
//     alone, without NVRTC (uncached: the PTX would repeat)
//  3. the same link with LTO (-dlto sources, nvJitLink -lto; includes the
//     second, -ptx pass that gives the kernels' parameter layouts)
//  4. a dynamic-parallelism kernel linked with libcudadevrt (a link only:
//     its ratio is to the anchor)
//  5. a memory hit and a disk hit (a new runtime) of link 2
// The first link of the process (which loads nvJitLink) is reported apart.
// Medians of N runs (default 7). Every source is unique (a counter in a
// comment), so no cache can answer a miss row.
//
//   link_bench [--target sm_90] [--runs 7]
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"

namespace fleetjit::bench {
namespace {

constexpr char kKernel[] =
    "extern \"C\" __device__ float fj_link_combine(float x, float y, float "
    "a);\n"
    "extern \"C\" __global__ void combine(float* out, const float* x,\n"
    "                                     const float* y, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = fj_link_combine(x[i], y[i], a);\n"
    "}\n";
constexpr char kCombine[] =
    "extern \"C\" __device__ float fj_link_combine(float x, float y, float a) "
    "{\n"
    "  float r = 0.0f;\n"
    "  for (int k = 0; k < 4; ++k) r = r * y + a * x + k;\n"
    "  return r;\n"
    "}\n";
constexpr char kParentChild[] =
    "extern \"C\" __global__ void dp_child(float* out, const float* x, int n,\n"
    "                                      float a) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = a * x[i] + i;\n"
    "}\n"
    "extern \"C\" __global__ void dp_parent(float* out, const float* x, int "
    "n,\n"
    "                                       float a) {\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0)\n"
    "    dp_child<<<(n + 255) / 256, 256>>>(out, x, n, a);\n"
    "}\n";

int counter = 0;
std::string Unique(const char* source) {
  return absl::StrCat("// link_bench ", getpid(), " ", ++counter, "\n", source);
}

fj_runtime* NewRuntime(const std::string& cache_dir) {
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  o.cache_dir = Str(cache_dir);
  fj_runtime* rt = nullptr;
  Check(fj_runtime_create(&o, &rt), "fj_runtime_create");
  return rt;
}

double Build(fj_runtime* rt, const std::string& source,
             const std::string& target) {
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = Str(source);
  b.target = Str(target);
  fj_module* m = nullptr;
  double start = NowMs();
  Check(fj_module_build(rt, &b, &m), "fj_module_build");
  double ms = NowMs() - start;
  Check(fj_module_destroy(m), "fj_module_destroy");
  return ms;
}

// Relocatable PTX of `source` for `target`'s virtual architecture.
std::string Ptx(fj_runtime* rt, const std::string& source,
                const std::string& target) {
  std::string virtual_target = "compute_" + target.substr(3);
  std::string rdc = "-rdc=true";
  fj_str option = Str(rdc);
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = Str(source);
  b.target = Str(virtual_target);
  b.nvrtc_options = &option;
  b.num_nvrtc_options = 1;
  b.output = FJ_OUTPUT_PTX;
  b.flags = FJ_BUILD_NO_CACHE;
  fj_module* m = nullptr;
  Check(fj_module_build(rt, &b, &m), "fj_module_build (PTX)");
  const void* data = nullptr;
  size_t size = 0;
  Check(fj_module_image(m, &data, &size), "fj_module_image");
  std::string ptx(static_cast<const char*>(data), size);
  Check(fj_module_destroy(m), "fj_module_destroy");
  return ptx;
}

double Link(fj_runtime* rt, const std::vector<std::string>& sources,
            const std::string& target, uint32_t flags,
            fj_cache_result* result = nullptr,
            fj_link_input_kind kind = FJ_LINK_SOURCE) {
  std::vector<fj_link_input> in(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    in[i] = fj_link_input{};
    in[i].struct_size = sizeof(fj_link_input);
    in[i].kind = kind;
    in[i].data = sources[i].data();
    in[i].size = sources[i].size();
  }
  fj_link_options o{};
  o.struct_size = sizeof(o);
  o.inputs = in.data();
  o.num_inputs = in.size();
  o.target = Str(target);
  o.flags = flags;
  fj_module* m = nullptr;
  double start = NowMs();
  Check(fj_module_link(rt, &o, &m), "fj_module_link");
  double ms = NowMs() - start;
  if (result != nullptr) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    Check(fj_module_info_get(m, &info), "fj_module_info_get");
    *result = info.cache_result;
  }
  Check(fj_module_destroy(m), "fj_module_destroy");
  return ms;
}

int Main(int argc, char** argv) {
  std::string target = "sm_90";
  int runs = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--target") == 0) target = argv[i + 1];
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
  }
  char dir[] = "/tmp/fj_link_bench_XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  const std::string cache_dir = dir;
  fj_runtime* rt = NewRuntime(cache_dir);
  // NVRTC's first compile and nvJitLink's load, apart from the medians.
  Build(rt, Unique(kKernel).append(kCombine), target);
  double first_link = Link(rt, {Unique(kKernel), Unique(kCombine)}, target, 0);

  std::vector<double> plain, dc, ptx, lto, devrt, memory_hit, disk_hit;
  std::vector<std::string> last_pair;
  for (int r = 0; r < runs; ++r) {
    // Interleaved rows: drift on a shared machine hits each alike.
    plain.push_back(Build(rt, Unique(kKernel).append(kCombine), target));
    last_pair = {Unique(kKernel), Unique(kCombine)};
    dc.push_back(Link(rt, last_pair, target, 0));
    fj_cache_result hit;
    memory_hit.push_back(Link(rt, last_pair, target, 0, &hit));
    if (hit != FJ_CACHE_MEMORY_HIT) {
      std::fprintf(stderr, "expected a memory hit, got %d\n", hit);
      return 1;
    }
    std::vector<std::string> ptxs = {Ptx(rt, Unique(kKernel), target),
                                     Ptx(rt, Unique(kCombine), target)};
    // Uncached: a PTX is the same whatever comment its source had.
    ptx.push_back(
        Link(rt, ptxs, target, FJ_LINK_NO_CACHE, nullptr, FJ_LINK_PTX));
    lto.push_back(
        Link(rt, {Unique(kKernel), Unique(kCombine)}, target, FJ_LINK_LTO));
    devrt.push_back(Link(rt, {Unique(kParentChild)}, target, FJ_LINK_DEVRT));
  }
  // Disk hits: a new runtime per run on the same folder.
  Check(fj_cache_flush(rt, 60000), "fj_cache_flush");
  Check(fj_runtime_destroy(rt), "fj_runtime_destroy");
  for (int r = 0; r < runs; ++r) {
    fj_runtime* other = NewRuntime(cache_dir);
    fj_cache_result hit;
    disk_hit.push_back(Link(other, last_pair, target, 0, &hit));
    if (hit != FJ_CACHE_DISK_HIT) {
      std::fprintf(stderr, "expected a disk hit, got %d\n", hit);
      return 1;
    }
    Check(fj_runtime_destroy(other), "fj_runtime_destroy");
  }
  const double anchor = Median(plain);
  std::printf(
      "link_bench: target %s, medians of %d, cache misses in a fresh "
      "folder\n",
      target.c_str(), runs);
  std::printf("%-58s %9s %7s\n", "row", "ms", "x anchor");
  auto row = [&](const char* name, double ms) {
    std::printf("%-58s %9.2f %7.2f\n", name, ms, ms / anchor);
  };
  row("1 fj_module_build, one source (anchor)", anchor);
  row("2 fj_module_link, two sources -dc", Median(dc));
  row("2b fj_module_link of row 2's code as PTX (nvJitLink only)", Median(ptx));
  row("3 fj_module_link, two sources LTO (-dlto, -lto)", Median(lto));
  row("4 fj_module_link, dynamic parallelism + libcudadevrt", Median(devrt));
  row("5a fj_module_link memory hit (row 2's key)", Median(memory_hit));
  row("5b fj_module_link disk hit, new runtime (row 2's key)",
      Median(disk_hit));
  row("first link of the process (loads nvJitLink), -dc", first_link);
  std::string rm = absl::StrCat("rm -rf '", cache_dir, "'");
  (void)system(rm.c_str());
  return 0;
}

}  // namespace
}  // namespace fleetjit::bench

int main(int argc, char** argv) { return fleetjit::bench::Main(argc, argv); }
