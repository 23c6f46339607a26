// The C ABI under bad input: every entry answers with a status, never a
// crash. Runs on a machine with no GPU (named targets only).
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;

class CapiTest : public fleetjit::testing::CapiRuntimeTest<> {};

constexpr const char* kKernel =
    "extern \"C\" __global__ void k(int* p, int v) { p[threadIdx.x] = v; }";

TEST(CapiLayoutTest, TensorIsLayoutIdenticalToDLPack) {
  static_assert(sizeof(fj_tensor) == sizeof(DLTensor));
  static_assert(offsetof(fj_tensor, data) == offsetof(DLTensor, data));
  static_assert(offsetof(fj_tensor, device) == offsetof(DLTensor, device));
  static_assert(offsetof(fj_tensor, ndim) == offsetof(DLTensor, ndim));
  static_assert(offsetof(fj_tensor, dtype) == offsetof(DLTensor, dtype));
  static_assert(offsetof(fj_tensor, shape) == offsetof(DLTensor, shape));
  static_assert(offsetof(fj_tensor, strides) == offsetof(DLTensor, strides));
  static_assert(offsetof(fj_tensor, byte_offset) ==
                offsetof(DLTensor, byte_offset));
  static_assert(sizeof(fj_dl_dtype) == sizeof(DLDataType));
  static_assert(sizeof(fj_dl_device) == sizeof(DLDevice));
  EXPECT_EQ(kDLCUDA, 2);
}

TEST(CapiStatusTest, NullStatusIsOk) {
  EXPECT_EQ(fj_status_code(nullptr), FJ_OK);
  EXPECT_STREQ(fj_status_message(nullptr, nullptr), "");
  EXPECT_EQ(fj_status_detail(nullptr, S("build_log"), nullptr), nullptr);
  fj_status_free(nullptr);
  EXPECT_STREQ(fj_code_name(static_cast<fj_code>(77)), "UNKNOWN");
  EXPECT_STREQ(fj_copy_impl_name(static_cast<fj_copy_impl>(9)), "unknown");
  EXPECT_STREQ(fj_feature_name(static_cast<fj_feature>(-1)), "unknown");
}

// fj_tensor_arg_check (no runtime, no GPU) names a box's mistakes: a box
// of more dimensions than the tensor, and a box past the tensor under
// FJ_OOB_PROMISE_IN_BOUNDS; with a fill the same box is valid.
TEST(CapiTensorCheckTest, BoxMistakesAreNamed) {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 20; ++round) {
    int64_t shape[2] = {static_cast<int64_t>(2 + rng() % 60),
                        static_cast<int64_t>(64 * (1 + rng() % 4))};
    fj_tensor t{reinterpret_cast<void*>(uintptr_t{0x7f0000000000}),
                {2, 0},
                2,
                {2, 32, 1},
                shape,
                nullptr,
                0};
    fj_tensor_arg a{};
    a.struct_size = sizeof(a);
    a.tensor = &t;
    a.box[0] = 1 + rng() % shape[0];
    a.box[1] = 64;
    fj_tensor_check check{};
    check.struct_size = sizeof(check);
    fj_status* st = fj_tensor_arg_check(&a, &check);
    ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
    EXPECT_EQ(check.tma, 1) << check.reason;

    a.box[2] = 1 + rng() % 8;  // a rank-3 box
    st = fj_tensor_arg_check(&a, &check);
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
    std::string m = fj_status_message(st, nullptr);
    EXPECT_NE(m.find("rank-3 box"), std::string::npos) << m;
    EXPECT_NE(m.find("rank-2 tensor"), std::string::npos) << m;
    fj_status_free(st);
    a.box[2] = 0;

    a.box[0] = static_cast<uint32_t>(shape[0] + 1 + rng() % 16);
    st = fj_tensor_arg_check(&a, &check);
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
    m = fj_status_message(st, nullptr);
    EXPECT_NE(m.find("exceeds shape[0] = " + std::to_string(shape[0])),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("outermost-first"), std::string::npos) << m;
    fj_status_free(st);
    a.oob = FJ_OOB_ZEROS;
    st = fj_tensor_arg_check(&a, &check);
    EXPECT_EQ(st, nullptr) << fj_status_message(st, nullptr);
    fj_status_free(st);
  }
}

TEST_F(CapiTest, NullArgumentsAreStatuses) {
  int32_t n = 0;
  EXPECT_EQ(Code(fj_runtime_create(nullptr, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_device_count(nullptr, &n)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_device_count(rt_, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_device_info_get(rt_, 0, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_build(rt_, nullptr, nullptr)), FJ_INVALID_ARGUMENT);
  fj_module* m = nullptr;
  EXPECT_EQ(Code(fj_module_build(rt_, nullptr, &m)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);  // outputs untouched on error
  EXPECT_EQ(Code(fj_module_info_get(nullptr, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_get_kernel(nullptr, S("k"), 0, nullptr)),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_launch(nullptr, nullptr, nullptr, 0)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_kernel_info_get(nullptr, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_mem_alloc(nullptr, 0, 16, nullptr)), FJ_INVALID_ARGUMENT);
  // A negative size cast to uint64_t is bad input, not out-of-memory, with
  // or without a GPU.
  for (int64_t negative : {int64_t{-1}, int64_t{-4096}, INT64_MIN}) {
    uint64_t p = 7;
    EXPECT_EQ(Code(fj_mem_alloc(rt_, 0, static_cast<uint64_t>(negative), &p)),
              FJ_INVALID_ARGUMENT);
    EXPECT_EQ(p, 7u);
  }
  EXPECT_EQ(Code(fj_memcpy_htod(rt_, 0, nullptr, 16, nullptr)),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_stream_synchronize(nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_stream_destroy(nullptr)), FJ_OK);
  EXPECT_EQ(Code(fj_cache_stats_get(rt_, nullptr)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(
      Code(fj_copy_plan_for_target(S("sm_80"), FJ_COPY_IMPL_AUTO, nullptr)),
      FJ_INVALID_ARGUMENT);
  fj_copy_plan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_EQ(Code(fj_copy_plan_for_target(fj_str{nullptr, 5}, FJ_COPY_IMPL_AUTO,
                                         &plan)),
            FJ_INVALID_ARGUMENT);
}

TEST_F(CapiTest, ShortAndZeroStructSizesAreRefused) {
  for (size_t size :
       {size_t{0}, size_t{8}, offsetof(fj_build_options, include_dirs) - 1}) {
    fj_build_options o = BuildOptions(kKernel, "sm_80");
    o.struct_size = size;
    fj_module* m = nullptr;
    EXPECT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_INVALID_ARGUMENT) << size;
  }
  fj_runtime_options ro{};
  ro.struct_size = 0;
  fj_runtime* rt = nullptr;
  EXPECT_EQ(Code(fj_runtime_create(&ro, &rt)), FJ_INVALID_ARGUMENT);
  fj_copy_plan plan{};
  plan.struct_size = 3;
  EXPECT_EQ(Code(fj_copy_plan_for_target(S("sm_80"), FJ_COPY_IMPL_AUTO, &plan)),
            FJ_INVALID_ARGUMENT);
  fj_cache_stats stats{};
  EXPECT_EQ(Code(fj_cache_stats_get(rt_, &stats)), FJ_INVALID_ARGUMENT);
}

TEST_F(CapiTest, LongerStructsFromNewerCallersAreAccepted) {
  struct Longer {
    fj_build_options o;
    uint64_t future_field;
  } longer{};
  longer.o = BuildOptions(kKernel, "sm_80");
  longer.o.struct_size = sizeof(Longer);
  longer.future_field = 0xdeadbeef;
  fj_module* m = nullptr;
  ASSERT_EQ(Code(fj_module_build(rt_, &longer.o, &m)), FJ_OK);
  EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
}

TEST_F(CapiTest, DestroyedAndForgedHandlesAreRefused) {
  fj_build_options o = BuildOptions(kKernel, "sm_80");
  fj_module* m = nullptr;
  ASSERT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_OK);
  ASSERT_EQ(Code(fj_module_destroy(m)), FJ_OK);
  fj_module_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(Code(fj_module_info_get(m, &info)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_destroy(m)), FJ_INVALID_ARGUMENT);
  // A runtime handle passed as a module, and random forged values.
  EXPECT_EQ(Code(fj_module_info_get(reinterpret_cast<fj_module*>(rt_), &info)),
            FJ_INVALID_ARGUMENT);
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    auto forged =
        reinterpret_cast<fj_runtime*>(static_cast<uintptr_t>(rng() | 1));
    int32_t n = 0;
    EXPECT_EQ(Code(fj_device_count(forged, &n)), FJ_INVALID_ARGUMENT);
    EXPECT_EQ(Code(fj_stream_synchronize(reinterpret_cast<fj_stream*>(forged))),
              FJ_INVALID_ARGUMENT);
  }
  fj_runtime* other = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &other)), FJ_OK);
  ASSERT_EQ(Code(fj_runtime_destroy(other)), FJ_OK);
  int32_t n = 0;
  EXPECT_EQ(Code(fj_device_count(other, &n)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_runtime_destroy(other)), FJ_INVALID_ARGUMENT);
}

TEST_F(CapiTest, EnumValuesOutOfRangeAreRefused) {
  fj_build_options o = BuildOptions(kKernel, "sm_80");
  fj_module* m = nullptr;
  o.copy_impl = static_cast<fj_copy_impl>(7);
  EXPECT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_INVALID_ARGUMENT);
  o.copy_impl = FJ_COPY_IMPL_AUTO;
  o.output = static_cast<fj_output>(-1);
  EXPECT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_INVALID_ARGUMENT);
  o.output = FJ_OUTPUT_AUTO;
  o.flags = 0x80;
  EXPECT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_INVALID_ARGUMENT);
  fj_copy_plan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_EQ(Code(fj_copy_plan_for_target(S("sm_80"),
                                         static_cast<fj_copy_impl>(4), &plan)),
            FJ_INVALID_ARGUMENT);
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.flags = 1u << 30;
  fj_runtime* rt = nullptr;
  EXPECT_EQ(Code(fj_runtime_create(&ro, &rt)), FJ_INVALID_ARGUMENT);
}

TEST_F(CapiTest, UnknownTargetsAndForcedImplementationsAreClear) {
  fj_build_options o = BuildOptions(kKernel, "sm_33");
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt_, &o, &m);
  EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fj_status_message(st, nullptr)).find("sm_33"),
            std::string::npos);
  fj_status_free(st);
  o = BuildOptions(kKernel, "sm_80");
  o.copy_impl = FJ_COPY_IMPL_TMA;
  EXPECT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_FAILED_PRECONDITION);
}

TEST_F(CapiTest, CompileErrorsCarryTheBuildLog) {
  fj_build_options o =
      BuildOptions("__global__ void k() { no_such_thing(); }", "sm_80");
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt_, &o, &m);
  ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR);
  size_t n = 0;
  const char* log = fj_status_detail(st, S("build_log"), &n);
  ASSERT_NE(log, nullptr);
  EXPECT_NE(std::string(log, n).find("no_such_thing"), std::string::npos);
  EXPECT_STREQ(fj_status_detail(st, S("target"), nullptr), "sm_80");
  EXPECT_STREQ(fj_status_detail(st, S("copy_impl"), nullptr), "cp_async");
  EXPECT_EQ(fj_status_detail(st, S("no_such_detail"), nullptr), nullptr);
  fj_status_free(st);
}

// An fj::tensor copied in device code (a by-value parameter of a device
// function) is a compile error on every implementation: TMA needs the
// __grid_constant__ parameter's own address. Passed by reference, the same
// kernel builds.
TEST_F(CapiTest, ATensorCopiedInDeviceCodeDoesNotCompile) {
  const std::string body =
      "__device__ float first(PARAM t) { return t.data()[0]; }\n"
      "extern \"C\" __global__ void k(FJ_TENSOR(float, 2) t, float* o) {\n"
      "  o[threadIdx.x] = first(t);\n"
      "}\n";
  auto with = [&](const char* param) {
    std::string src = "#include <fleetjit/copy.cuh>\n" + body;
    src.replace(src.find("PARAM"), 5, param);
    return src;
  };
  const std::string by_value = with("fj::tensor<float, 2>");
  const std::string by_ref = with("const fj::tensor<float, 2>&");
  for (const char* target : {"sm_80", "sm_90", "compute_80"}) {
    for (fj_copy_impl impl : {FJ_COPY_IMPL_AUTO, FJ_COPY_IMPL_SYNC}) {
      fj_build_options o = BuildOptions(by_value.c_str(), target);
      o.copy_impl = impl;
      o.flags = FJ_BUILD_NO_CACHE;
      fj_module* m = nullptr;
      fj_status* st = fj_module_build(rt_, &o, &m);
      ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR) << target;
      size_t n = 0;
      const char* log = fj_status_detail(st, S("build_log"), &n);
      ASSERT_NE(log, nullptr);
      EXPECT_NE(std::string(log, n).find("deleted function"), std::string::npos)
          << std::string(log, n);
      fj_status_free(st);
      o = BuildOptions(by_ref.c_str(), target);
      o.copy_impl = impl;
      o.flags = FJ_BUILD_NO_CACHE;
      st = fj_module_build(rt_, &o, &m);
      ASSERT_EQ(st, nullptr)
          << target << ": " << fj_status_message(st, nullptr);
      fj_module_destroy(m);
    }
  }
}

// Mistakes that compiled under one implementation and failed deep inside
// another's header now fail alike everywhere, with the message at the
// call: a barrier array for one stage's barrier, a non-scope as the scope,
// and a const element type; the right form of each builds.
TEST_F(CapiTest, LayerMistakesFailAlikeUnderEveryImplementation) {
  const std::string body =
      "extern \"C\" __global__ void k(FJ_TENSOR(float, 2) t, "
      "const int* idx) {\n"
      "  __shared__ float buf[4 * 64];\n"
      "  __shared__ fj::barrier full[2];\n"
      "  if (threadIdx.x == 0) { full[0].init(1); full[1].init(1); }\n"
      "  __syncthreads();\n"
      "  fj::coords cs[2] = {fj::at(0, 0), fj::at(0, 1)};\n"
      "  CALL;\n"
      "}\n";
  auto with = [&](const char* call, const char* element = "float") {
    std::string src = "#include <fleetjit/copy.cuh>\n" + body;
    src.replace(src.find("CALL"), 4, call);
    src.replace(src.find("FJ_TENSOR(float"), 15,
                std::string("FJ_TENSOR(") + element);
    return src;
  };
  const struct {
    std::string source;
    const char* says;  // empty: builds
  } cases[] = {
      {with("fj::load_tiles(buf, t, cs, 2, full)"), "full[p.stage()]"},
      {with("fj::gather_tiles(fj::warp, buf, t, fj::at(0, 0), 1, idx, 2, "
            "full)"),
       "full[p.stage()]"},
      {with("fj::load_tiles(3, buf, t, cs, 2, full[0])"),
       "a scope is fj::block or fj::warp"},
      {with("fj::load_tiles(buf, t, cs, 2, full[0])", "const float"),
       "the element type is T"},
      {with("fj::load_tiles(buf, t, cs, 2, full[0])"), ""},
      {with("fj::gather_tiles(fj::warp, buf, t, fj::at(0, 0), 1, idx, 2, "
            "fj::in_group)"),
       ""},
  };
  for (const char* target : {"sm_90", "sm_80"}) {
    for (fj_copy_impl impl : {FJ_COPY_IMPL_AUTO, FJ_COPY_IMPL_SYNC}) {
      for (const auto& c : cases) {
        fj_build_options o = BuildOptions(c.source.c_str(), target);
        o.copy_impl = impl;
        o.flags = FJ_BUILD_NO_CACHE;
        fj_module* m = nullptr;
        fj_status* st = fj_module_build(rt_, &o, &m);
        if (*c.says == '\0') {
          EXPECT_EQ(st, nullptr) << target << " " << impl << ": "
                                 << fj_status_message(st, nullptr);
          fj_status_free(st);
          fj_module_destroy(m);
          continue;
        }
        ASSERT_EQ(fj_status_code(st), FJ_BUILD_ERROR) << target << c.says;
        size_t n = 0;
        const char* log = fj_status_detail(st, S("build_log"), &n);
        ASSERT_NE(log, nullptr);
        EXPECT_NE(std::string(log, n).find(c.says), std::string::npos)
            << target << " " << impl << ":\n"
            << std::string(log, n);
        fj_status_free(st);
      }
    }
  }
}

TEST_F(CapiTest, AMissingKernelNameIsNotFound) {
  fj_build_options o = BuildOptions(kKernel, "sm_80");
  fj_module* m = nullptr;
  ASSERT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_OK);
  fj_kernel* k = nullptr;
  fj_status* st = fj_module_get_kernel(m, S("not_there"), 0, &k);
  EXPECT_EQ(fj_status_code(st), FJ_NOT_FOUND);
  EXPECT_NE(std::string(fj_status_message(st, nullptr)).find("it has: k"),
            std::string::npos);
  fj_status_free(st);
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
}

// What NVRTC would take silently (a source cut at a NUL, an -arch that
// contradicts the target the module then reports, a last -D that eats
// fleetjit's own next option) is refused before anything compiles, and a
// good build works after.
TEST_F(CapiTest, SourcesAndOptionsNvrtcWouldMisreadAreRefused) {
  const std::string cut = std::string(kKernel) + std::string("\0 {{{", 5);
  const struct {
    std::string source;
    std::vector<std::string> options;
    const char* says;
  } bad[] = {
      {cut, {}, "NUL byte at offset"},
      {kKernel,
       {std::string("-DX=1\0 --junk", 13)},
       "nvrtc_options[0] has a NUL"},
      {kKernel, {"-arch=sm_80"}, "sets the target"},
      {kKernel, {"-DA=1", "--gpu-architecture", "sm_80"}, "nvrtc_options[1]"},
      {kKernel, {"-DA=1", "-D"}, "is the last option but takes a value"},
      {kKernel, {"-I"}, "is the last option but takes a value"},
      {kKernel, {""}, "nvrtc_options[0] is empty"},
      {kKernel, {"-DFJ_COPY_IMPL=0"}, "sets FJ_COPY_IMPL"},
      {kKernel, {"-DA=1", "-D", "FJ_COPY_IMPL"}, "nvrtc_options[1]"},
      {kKernel, {"--undefine-macro=FJ_COPY_IMPL"}, "sets FJ_COPY_IMPL"},
  };
  for (const auto& b : bad) {
    std::vector<fj_str> options;
    for (const std::string& o : b.options)
      options.push_back({o.data(), o.size()});
    fj_build_options o = BuildOptions(kKernel, "sm_80");
    o.source = {b.source.data(), b.source.size()};
    o.nvrtc_options = options.data();
    o.num_nvrtc_options = options.size();
    fj_module* m = nullptr;
    fj_status* st = fj_module_build(rt_, &o, &m);
    EXPECT_EQ(fj_status_code(st), FJ_INVALID_ARGUMENT) << b.says;
    EXPECT_NE(std::string(fj_status_message(st, nullptr)).find(b.says),
              std::string::npos)
        << fj_status_message(st, nullptr);
    fj_status_free(st);
    EXPECT_EQ(m, nullptr);
  }
  // A value in the next entry is fine.
  const std::string d = "-D", v = "FJ_CAPI_TEST_VALUE=1";
  fj_str pair[] = {{d.data(), d.size()}, {v.data(), v.size()}};
  fj_build_options o = BuildOptions(kKernel, "sm_80");
  o.nvrtc_options = pair;
  o.num_nvrtc_options = 2;
  fj_module* m = nullptr;
  ASSERT_EQ(Code(fj_module_build(rt_, &o, &m)), FJ_OK);
  EXPECT_EQ(Code(fj_module_destroy(m)), FJ_OK);
}

TEST_F(CapiTest, DeviceCallsWithoutAGpuAreUnavailable) {
  int32_t n = -1;
  ASSERT_EQ(Code(fj_device_count(rt_, &n)), FJ_OK);
  if (n > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU answers";
  fj_device_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(Code(fj_device_info_get(rt_, 0, &info)), FJ_UNAVAILABLE);
  uint64_t p = 0;
  EXPECT_EQ(Code(fj_mem_alloc(rt_, 0, 64, &p)), FJ_UNAVAILABLE);
  fj_stream* s = nullptr;
  EXPECT_EQ(Code(fj_stream_create(rt_, 0, &s)), FJ_UNAVAILABLE);
  EXPECT_NE(std::string(fj_runtime_driver_error(rt_)), "");
  // Building for the live device needs one, and says to name a target.
  fj_build_options o = BuildOptions(kKernel, "");
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt_, &o, &m);
  EXPECT_EQ(fj_status_code(st), FJ_UNAVAILABLE);
  EXPECT_NE(std::string(fj_status_message(st, nullptr)).find("name a target"),
            std::string::npos);
  fj_status_free(st);
}

TEST_F(CapiTest, UnknownAddressesAreRefused) {
  EXPECT_EQ(Code(fj_mem_free(rt_, 0)), FJ_OK);
  EXPECT_EQ(Code(fj_mem_free(rt_, 0x7f0000001000ull)), FJ_INVALID_ARGUMENT);
  int v = 5;
  EXPECT_EQ(
      Code(fj_memcpy_htod(rt_, 0x7f0000001000ull, &v, sizeof(v), nullptr)),
      FJ_INVALID_ARGUMENT);
}

}  // namespace
