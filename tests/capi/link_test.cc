// fj_module_link on the CPU (since 1.3): links for named targets (NVRTC and
// nvJitLink need no GPU), the kernel list of the linked cubin, LTO-IR, PTX
// and cubin inputs mixed in, libcudadevrt, the cache key over every input,
// nvJitLink's error log, a host without nvJitLink, and every bad input.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "jit/image_reader.h"
#include "runtime/runtime.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/seed.h"

namespace fleetjit {
namespace {

using testing::Code;
using testing::S;

// A kernel whose body calls a __device__ function defined in another
// source: only a device link resolves it.
constexpr char kCaller[] =
    "extern \"C\" __device__ float fj_link_scale(float x);\n"
    "extern \"C\" __global__ void scale_all(float* out, const float* in,\n"
    "                                       int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = fj_link_scale(in[i]);\n"
    "}\n";

// The callee, with a factor drawn per test so that no earlier run's cache
// entry can stand in for this link.
std::string Callee(int factor) {
  return absl::StrCat(
      "extern \"C\" __device__ float fj_link_scale(float x) {\n"
      "  return x * ",
      factor, ".0f + 1.0f;\n}\n");
}

int DrawFactor(const char* name) {
  std::mt19937_64 rng = testing::SeededRng(name);
  return static_cast<int>(rng() % 100000) + 2;
}

// The strings an fj_link_input borrows, kept alive with it.
struct Input {
  fj_link_input_kind kind;
  std::string name;
  std::string data;
  std::vector<std::string> options;
};

class LinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/fj_link_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    cache_dir_ = dir;
    rt_ = NewRuntime();
    ASSERT_NE(rt_, nullptr);
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
    std::string rm = absl::StrCat("rm -rf '", cache_dir_, "'");
    (void)system(rm.c_str());
  }

  // A runtime on this test's own (fresh) cache folder.
  fj_runtime* NewRuntime() {
    fj_runtime_options o{};
    o.struct_size = sizeof(o);
    o.cache_dir = S(cache_dir_);
    fj_runtime* rt = nullptr;
    fj_status* st = fj_runtime_create(&o, &rt);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    return rt;
  }

  // Links `inputs` for `target` with `flags` on `rt` (default: rt_).
  fj_status* Link(const std::vector<Input>& inputs, const std::string& target,
                  uint32_t flags, fj_module** out, fj_runtime* rt = nullptr,
                  const std::vector<fj_str>& link_options = {}) {
    std::vector<std::vector<fj_str>> options(inputs.size());
    std::vector<fj_link_input> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (const std::string& o : inputs[i].options) {
        options[i].push_back(S(o));
      }
      in[i] = fj_link_input{};
      in[i].struct_size = sizeof(fj_link_input);
      in[i].kind = inputs[i].kind;
      in[i].name = S(inputs[i].name);
      in[i].data = inputs[i].data.data();
      in[i].size = inputs[i].data.size();
      in[i].nvrtc_options = options[i].data();
      in[i].num_nvrtc_options = options[i].size();
    }
    fj_link_options o{};
    o.struct_size = sizeof(o);
    o.inputs = in.data();
    o.num_inputs = in.size();
    o.name = S(link_name_);
    o.target = S(target);
    o.flags = flags;
    o.link_options = link_options.data();
    o.num_link_options = link_options.size();
    return fj_module_link(rt == nullptr ? rt_ : rt, &o, out);
  }

  // The kernels of a module's linked cubin (its ELF symbol table).
  static std::vector<std::string> KernelsOf(fj_module* m) {
    const void* data = nullptr;
    size_t size = 0;
    EXPECT_EQ(Code(fj_module_image(m, &data, &size)), FJ_OK);
    auto names = jit::CubinEntryNames(
        absl::string_view(static_cast<const char*>(data), size));
    EXPECT_TRUE(names.ok()) << names.status();
    return names.ok() ? *names : std::vector<std::string>{};
  }

  static fj_module_info InfoOf(fj_module* m) {
    fj_module_info info{};
    info.struct_size = sizeof(info);
    EXPECT_EQ(Code(fj_module_info_get(m, &info)), FJ_OK);
    return info;
  }

  // A PTX or cubin of `source` built by fj_module_build with `options`.
  std::string Image(const std::string& source, const std::string& target,
                    fj_output output, std::vector<std::string> options) {
    std::vector<fj_str> opts;
    for (const std::string& o : options) opts.push_back(S(o));
    fj_build_options b{};
    b.struct_size = sizeof(b);
    b.source = S(source);
    b.target = S(target);
    b.output = output;
    b.nvrtc_options = opts.data();
    b.num_nvrtc_options = opts.size();
    fj_module* m = nullptr;
    fj_status* st = fj_module_build(rt_, &b, &m);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    if (m == nullptr) return "";
    const void* data = nullptr;
    size_t size = 0;
    EXPECT_EQ(Code(fj_module_image(m, &data, &size)), FJ_OK);
    std::string image(static_cast<const char*>(data), size);
    EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
    return image;
  }

  std::string cache_dir_;
  std::string link_name_ = "split.cu";
  fj_runtime* rt_ = nullptr;
};

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(LinkTest, TwoSourcesLinkForNamedTargets) {
  const int factor = DrawFactor("TwoSourcesLinkForNamedTargets");
  for (const char* target : {"sm_80", "sm_90"}) {
    SCOPED_TRACE(target);
    fj_module* m = nullptr;
    FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                       {FJ_LINK_SOURCE, "callee.cu", Callee(factor), {}}},
                      target, 0, &m));
    std::vector<std::string> kernels = KernelsOf(m);
    EXPECT_TRUE(Has(kernels, "scale_all"));
    fj_module_info info = InfoOf(m);
    EXPECT_STREQ(info.target, target);
    EXPECT_EQ(info.output, FJ_OUTPUT_CUBIN);
    EXPECT_EQ(info.cache_result, FJ_CACHE_COMPILED);
    const void* data = nullptr;
    size_t size = 0;
    FJ_ASSERT_OK(fj_module_image(m, &data, &size));
    auto elf_target = jit::CubinTarget(
        absl::string_view(static_cast<const char*>(data), size));
    ASSERT_TRUE(elf_target.ok()) << elf_target.status();
    EXPECT_EQ(elf_target->Name(), target);
    FJ_ASSERT_OK(fj_module_destroy(m));
  }
}

TEST_F(LinkTest, SourceAloneWithoutLinkLeavesTheCallUndefined) {
  // The same caller built as a whole program cannot resolve the callee:
  // the reason the link entry exists.
  fj_module* m = nullptr;
  fj_status* st =
      Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}}}, "sm_90", 0, &m);
  ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR);
  std::string message = fj_status_message(st, nullptr);
  EXPECT_NE(message.find("fj_link_scale"), std::string::npos) << message;
  size_t n = 0;
  const char* log = fj_status_detail(st, S("link_log"), &n);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(log, n).find("Undefined reference to 'fj_link_scale'"),
            std::string::npos)
      << std::string(log, n);
  EXPECT_NE(fj_status_detail(st, S("build_log"), nullptr), nullptr);
  EXPECT_STREQ(fj_status_detail(st, S("target"), nullptr), "sm_90");
  fj_status_free(st);
  EXPECT_EQ(m, nullptr);
}

TEST_F(LinkTest, LtoLinksSourcesAsLtoIr) {
  const int factor = DrawFactor("LtoLinksSourcesAsLtoIr");
  fj_module* m = nullptr;
  FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                     {FJ_LINK_SOURCE, "callee.cu", Callee(factor), {}}},
                    "sm_90", FJ_LINK_LTO, &m));
  EXPECT_TRUE(Has(KernelsOf(m), "scale_all"));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(LinkTest, LtoIrInputAndPtxInputMixIn) {
  const int factor = DrawFactor("LtoIrInputAndPtxInputMixIn");
  // The callee as PTX of relocatable code, built by fj_module_build.
  std::string ptx =
      Image(Callee(factor), "compute_90", FJ_OUTPUT_PTX, {"-rdc=true"});
  ASSERT_NE(ptx.find("fj_link_scale"), std::string::npos);
  fj_module* m = nullptr;
  FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                     {FJ_LINK_PTX, "callee.ptx", ptx, {}}},
                    "sm_90", 0, &m));
  EXPECT_TRUE(Has(KernelsOf(m), "scale_all"));
  FJ_ASSERT_OK(fj_module_destroy(m));
  // The same PTX under an LTO link of the caller.
  FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                     {FJ_LINK_PTX, "callee.ptx", ptx, {}}},
                    "sm_90", FJ_LINK_LTO, &m));
  EXPECT_TRUE(Has(KernelsOf(m), "scale_all"));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

TEST_F(LinkTest, PrebuiltCubinInputLinks) {
  const int factor = DrawFactor("PrebuiltCubinInputLinks");
  // A relocatable cubin of the callee (NVRTC -dc), as nvcc -dc makes one.
  std::string cubin = Image(Callee(factor), "sm_90", FJ_OUTPUT_CUBIN, {"-dc"});
  ASSERT_FALSE(cubin.empty());
  fj_module* m = nullptr;
  FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                     {FJ_LINK_CUBIN, "callee.cubin", cubin, {}}},
                    "sm_90", 0, &m));
  EXPECT_TRUE(Has(KernelsOf(m), "scale_all"));
  FJ_ASSERT_OK(fj_module_destroy(m));
}

// Dynamic parallelism: the parent launches the child with <<<>>>.
constexpr char kParentChild[] =
    "extern \"C\" __global__ void dp_child(float* out, int n, float a) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = a * i;\n"
    "}\n"
    "extern \"C\" __global__ void dp_parent(float* out, int n, float a) {\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0)\n"
    "    dp_child<<<(n + 127) / 128, 128>>>(out, n, a);\n"
    "}\n";

TEST_F(LinkTest, DynamicParallelismNeedsAndFindsLibcudadevrt) {
  fj_module* m = nullptr;
  FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "dp.cu", kParentChild, {}}}, "sm_90",
                    FJ_LINK_DEVRT, &m));
  std::vector<std::string> kernels = KernelsOf(m);
  EXPECT_TRUE(Has(kernels, "dp_parent"));
  EXPECT_TRUE(Has(kernels, "dp_child"));
  FJ_ASSERT_OK(fj_module_destroy(m));
  // Without libcudadevrt the device launch stays undefined.
  fj_status* st =
      Link({{FJ_LINK_SOURCE, "dp.cu", kParentChild, {}}}, "sm_90", 0, &m);
  ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR);
  size_t n = 0;
  const char* log = fj_status_detail(st, S("link_log"), &n);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(log, n).find("__cudaCDP2"), std::string::npos)
      << std::string(log, n);
  fj_status_free(st);
}

TEST_F(LinkTest, CacheHitsTheSameLinkAndMissesAChangedInput) {
  const int factor = DrawFactor("CacheHitsTheSameLinkAndMissesAChangedInput");
  std::vector<Input> inputs = {
      {FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
      {FJ_LINK_SOURCE, "callee.cu", Callee(factor), {}}};
  auto link = [&](fj_runtime* rt, const std::vector<Input>& in,
                  uint32_t flags = 0) {
    fj_module* m = nullptr;
    fj_status* st = Link(in, "sm_90", flags, &m, rt);
    EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    fj_status_free(st);
    fj_module_info info = InfoOf(m);
    const void* data = nullptr;
    size_t size = 0;
    EXPECT_EQ(Code(fj_module_image(m, &data, &size)), FJ_OK);
    std::string image(static_cast<const char*>(data), size);
    EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
    return std::make_pair(info.cache_result, image);
  };
  auto [first, image] = link(rt_, inputs);
  EXPECT_EQ(first, FJ_CACHE_COMPILED);
  auto [second, image2] = link(rt_, inputs);
  EXPECT_EQ(second, FJ_CACHE_MEMORY_HIT);
  EXPECT_EQ(image2, image);
  // Another process (runtime) on the same folder hits the disk tier.
  fj_runtime* other = NewRuntime();
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(Code(fj_cache_flush(rt_, 10000)), FJ_OK);
  EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);  // finishes disk writes
  rt_ = nullptr;
  auto [third, image3] = link(other, inputs);
  EXPECT_EQ(third, FJ_CACHE_DISK_HIT);
  EXPECT_EQ(image3, image);
  // One input changed: links again, and the image differs.
  std::vector<Input> changed = inputs;
  changed[1].data = Callee(factor + 1);
  auto [fourth, image4] = link(other, changed);
  EXPECT_EQ(fourth, FJ_CACHE_COMPILED);
  EXPECT_NE(image4, image);
  // An input's options are part of the key too, and so are the flags.
  changed = inputs;
  changed[1].options = {"-DUNUSED_MACRO=1"};
  EXPECT_EQ(link(other, changed).first, FJ_CACHE_COMPILED);
  EXPECT_EQ(link(other, inputs, FJ_LINK_LTO).first, FJ_CACHE_COMPILED);
  // The order of the inputs is part of the link.
  std::vector<Input> swapped = {inputs[1], inputs[0]};
  EXPECT_EQ(link(other, swapped).first, FJ_CACHE_COMPILED);
  EXPECT_EQ(link(other, inputs).first, FJ_CACHE_MEMORY_HIT);
  rt_ = other;
}

TEST_F(LinkTest, UncachedLinkCompilesEveryTime) {
  const int factor = DrawFactor("UncachedLinkCompilesEveryTime");
  for (int i = 0; i < 2; ++i) {
    fj_module* m = nullptr;
    FJ_ASSERT_OK(Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                       {FJ_LINK_SOURCE, "callee.cu", Callee(factor), {}}},
                      "sm_80", FJ_LINK_NO_CACHE, &m));
    EXPECT_EQ(InfoOf(m).cache_result, FJ_CACHE_COMPILED);
    FJ_ASSERT_OK(fj_module_destroy(m));
  }
}

// A link option nvJitLink does not take is the caller's input, not a bug
// in fleetjit (INTERNAL).
TEST_F(LinkTest, AnUnknownLinkOptionIsInvalidArgument) {
  const int factor = DrawFactor("AnUnknownLinkOptionIsInvalidArgument");
  fj_module* m = nullptr;
  fj_status* st = Link({{FJ_LINK_SOURCE, "caller.cu", kCaller, {}},
                        {FJ_LINK_SOURCE, "callee.cu", Callee(factor), {}}},
                       "sm_80", FJ_LINK_NO_CACHE, &m, nullptr,
                       {S("--no-such-link-option")});
  EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT)
      << fj_status_message(st, nullptr);
  EXPECT_NE(std::string(fj_status_message(st, nullptr))
                .find("NVJITLINK_ERROR_UNRECOGNIZED_OPTION"),
            std::string::npos)
      << fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_EQ(m, nullptr);
}

TEST_F(LinkTest, SourceErrorIsABuildErrorWithItsLog) {
  fj_module* m = nullptr;
  fj_status* st = Link({{FJ_LINK_SOURCE,
                         "broken.cu",
                         "__device__ int f() { return no_such_name; }",
                         {}}},
                       "sm_90", 0, &m);
  ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR);
  const char* log = fj_status_detail(st, S("build_log"), nullptr);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(log).find("no_such_name"), std::string::npos);
  fj_status_free(st);
}

TEST(LinkWithoutNvJitLink, NamesTheLibraryAndWhereItLooked) {
  char dir[] = "/tmp/fj_no_nvjitlink_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  ASSERT_EQ(setenv("FLEETJIT_NVJITLINK", dir, 1), 0);
  fj_runtime* rt = nullptr;
  fj_status* created = fj_runtime_create(nullptr, &rt);
  unsetenv("FLEETJIT_NVJITLINK");
  ASSERT_EQ(Code(created), FJ_OK);
  std::string source = kCaller;
  fj_link_input in{};
  in.struct_size = sizeof(in);
  in.kind = FJ_LINK_SOURCE;
  in.data = source.data();
  in.size = source.size();
  std::string target = "sm_90";
  fj_link_options o{};
  o.struct_size = sizeof(o);
  o.inputs = &in;
  o.num_inputs = 1;
  o.target = S(target);
  fj_module* m = nullptr;
  fj_status* st = fj_module_link(rt, &o, &m);
  EXPECT_EQ(fj_status_code(st), FJ_UNAVAILABLE);
  std::string message = fj_status_message(st, nullptr);
  EXPECT_NE(message.find("libnvJitLink.so.13"), std::string::npos) << message;
  EXPECT_NE(message.find(dir), std::string::npos) << message;
  EXPECT_NE(message.find("FLEETJIT_NVJITLINK"), std::string::npos) << message;
  fj_status_free(st);
  EXPECT_EQ(m, nullptr);
  // A plain build on the same runtime still works: only links need it.
  fj_build_options b{};
  b.struct_size = sizeof(b);
  std::string saxpy = testing::SaxpySource();
  b.source = S(saxpy);
  b.target = S(target);
  FJ_ASSERT_OK(fj_module_build(rt, &b, &m));
  FJ_ASSERT_OK(fj_module_destroy(m));
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  rmdir(dir);
}

// Every bad argument is FJ_INVALID_ARGUMENT (or names the field), before
// any compile.
TEST_F(LinkTest, RefusesBadInput) {
  std::string source = kCaller;
  std::string target = "sm_90";
  fj_link_input good{};
  good.struct_size = sizeof(good);
  good.kind = FJ_LINK_SOURCE;
  good.data = source.data();
  good.size = source.size();
  auto options_of = [&](const fj_link_input* in, size_t n) {
    fj_link_options o{};
    o.struct_size = sizeof(o);
    o.inputs = in;
    o.num_inputs = n;
    o.target = S(target);
    return o;
  };
  fj_module* m = nullptr;
  fj_link_options o = options_of(&good, 1);
  auto expect = [&](const fj_link_options* opts, fj_code code,
                    const std::string& says) {
    fj_status* st = fj_module_link(rt_, opts, &m);
    EXPECT_EQ(fj_status_code(st), code) << says;
    std::string message = fj_status_message(st, nullptr);
    EXPECT_NE(message.find(says), std::string::npos) << message;
    fj_status_free(st);
    EXPECT_EQ(m, nullptr);
  };
  EXPECT_EQ(Code(fj_module_link(nullptr, &o, &m)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_link(rt_, &o, nullptr)), FJ_INVALID_ARGUMENT);
  expect(nullptr, FJ_INVALID_ARGUMENT, "options is NULL");
  fj_link_options small = o;
  small.struct_size = 8;
  expect(&small, FJ_INVALID_ARGUMENT, "struct_size");
  fj_link_options none = options_of(nullptr, 1);
  expect(&none, FJ_INVALID_ARGUMENT, "options->inputs is NULL");
  fj_link_options empty = options_of(&good, 0);
  expect(&empty, FJ_INVALID_ARGUMENT, "options->inputs is empty");

  fj_link_input in = good;
  in.struct_size = 4;
  fj_link_options bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[0].struct_size");
  fj_link_input two[2] = {good, good};
  two[1].struct_size = sizeof(fj_link_input) + 8;
  bad = options_of(two, 2);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[1].struct_size");
  for (int kind : {-1, 6, 99}) {
    in = good;
    in.kind = static_cast<fj_link_input_kind>(kind);
    bad = options_of(&in, 1);
    expect(&bad, FJ_INVALID_ARGUMENT, "options->inputs[0].kind");
  }
  in = good;
  in.data = nullptr;
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[0].data is NULL");
  in = good;
  in.size = 0;
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[0].data is empty");
  std::string with_nul = source;
  with_nul[10] = '\0';
  in = good;
  in.data = with_nul.data();
  in.size = with_nul.size();
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "NUL byte at offset 10");
  std::string opt = "-DX=1";
  fj_str opt_str = S(opt);
  in = good;
  in.kind = FJ_LINK_CUBIN;
  in.nvrtc_options = &opt_str;
  in.num_nvrtc_options = 1;
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "is not a source");
  in = good;
  in.nvrtc_options = nullptr;
  in.num_nvrtc_options = 2;
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[0].nvrtc_options is NULL");
  in = good;
  in.name = fj_str{nullptr, 3};
  bad = options_of(&in, 1);
  expect(&bad, FJ_INVALID_ARGUMENT, "inputs[0].name");

  bad = o;
  bad.flags = 1u << 9;
  expect(&bad, FJ_INVALID_ARGUMENT, "unknown bits");
  std::string compute = "compute_90";
  bad = o;
  bad.target = S(compute);
  expect(&bad, FJ_INVALID_ARGUMENT, "needs an sm_XX target");
  std::string nonsense = "sm_7";
  bad = o;
  bad.target = S(nonsense);
  expect(&bad, FJ_INVALID_ARGUMENT, "options->target");
  std::string empty_option;
  fj_str empty_str = S(empty_option);
  bad = o;
  bad.link_options = &empty_str;
  bad.num_link_options = 1;
  expect(&bad, FJ_INVALID_ARGUMENT, "options->link_options[0] is empty");
  bad = o;
  bad.include_dirs = nullptr;
  bad.num_include_dirs = 1;
  expect(&bad, FJ_INVALID_ARGUMENT, "options->include_dirs is NULL");
  // A binary input nvJitLink cannot read: its error, as a build error.
  std::string junk = "definitely not a cubin";
  in = good;
  in.kind = FJ_LINK_CUBIN;
  in.data = junk.data();
  in.size = junk.size();
  bad = options_of(&in, 1);
  expect(&bad, FJ_BUILD_ERROR, "nvJitLink");
  // A bad nvJitLink option: nvJitLink's refusal, as a build error... or,
  // when refused at creation, an internal error naming the option.
  std::string unknown_option = "-no-such-nvjitlink-option";
  fj_str unknown_str = S(unknown_option);
  bad = o;
  bad.link_options = &unknown_str;
  bad.num_link_options = 1;
  fj_status* st = fj_module_link(rt_, &bad, &m);
  EXPECT_NE(fj_status_code(st), FJ_OK);
  EXPECT_NE(std::string(fj_status_message(st, nullptr)).find(unknown_option),
            std::string::npos)
      << fj_status_message(st, nullptr);
  fj_status_free(st);
}

// The layouts of a linked module's kernels come from PTX on the CPU: the
// -dc sources', and the LTO-IR's own PTX for an LTO link.
TEST(LinkRecord, KernelLayoutsComeFromPtxForEveryKind) {
  auto rt = Runtime::Create(RuntimeOptions{});
  ASSERT_TRUE(rt.ok()) << rt.status();
  const std::string callee = Callee(DrawFactor("KernelLayouts"));
  for (bool lto : {false, true}) {
    SCOPED_TRACE(lto ? "lto" : "dc");
    LinkSpec spec;
    spec.inputs = {{LinkInputSpec::Kind::kSource, "caller.cu", kCaller, {}, {}},
                   {LinkInputSpec::Kind::kSource, "callee.cu", callee, {}, {}}};
    spec.target = *jit::ParseTarget("sm_90");
    spec.lto = lto;
    spec.use_cache = false;
    auto record = (*rt)->LinkRecord(spec);
    ASSERT_TRUE(record.ok()) << record.status();
    const jit::KernelEntry* k = record->artifact->FindKernel("scale_all");
    ASSERT_NE(k, nullptr);
    ASSERT_EQ(k->params.size(), 3u);
    EXPECT_EQ(k->params[0].size, 8u);
    EXPECT_EQ(k->params[1].size, 8u);
    EXPECT_EQ(k->params[2].size, 4u);
    EXPECT_EQ(k->params[2].offset, 16u);
    EXPECT_EQ(k->param_bytes, 20u);
  }
}

// A C++ kernel named by its expression keeps that name after the link.
TEST(LinkRecord, NameExpressionsNameLinkedKernels) {
  auto rt = Runtime::Create(RuntimeOptions{});
  ASSERT_TRUE(rt.ok()) << rt.status();
  const std::string templ =
      "extern \"C\" __device__ float fj_link_scale(float x);\n"
      "template <typename T> __global__ void apply(T* out, int n) {\n"
      "  int i = threadIdx.x; if (i < n) out[i] = fj_link_scale(out[i]);\n"
      "}\n";
  LinkSpec spec;
  spec.inputs = {
      {LinkInputSpec::Kind::kSource, "t.cu", templ, {}, {"apply<float>"}},
      {LinkInputSpec::Kind::kSource,
       "callee.cu",
       Callee(DrawFactor("NameExpressions")),
       {},
       {}}};
  spec.target = *jit::ParseTarget("sm_80");
  spec.use_cache = false;
  auto record = (*rt)->LinkRecord(spec);
  ASSERT_TRUE(record.ok()) << record.status();
  const jit::KernelEntry* k = record->artifact->FindKernel("apply<float>");
  ASSERT_NE(k, nullptr);
  EXPECT_NE(k->lowered_name, "apply<float>");
  ASSERT_EQ(k->params.size(), 2u);
  EXPECT_EQ(k->params[0].kind, jit::ParamKind::kPointer);
  EXPECT_EQ(k->params[1].kind, jit::ParamKind::kSigned);
}

}  // namespace
}  // namespace fleetjit
