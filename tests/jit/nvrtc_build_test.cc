// NVRTC builds on the CPU: named targets need no GPU.
#include "jit/nvrtc_build.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::jit {
namespace {

constexpr const char* kSource = R"(
extern "C" __global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i];
}
template <typename T> __global__ void fill(T* p, T v, unsigned long long n) {
  for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) p[i] = v;
}
)";

class NvrtcBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
  }
  BuildRequest Request(const char* target, CopyImpl impl = CopyImpl::kSync) {
    BuildRequest r;
    r.source = kSource;
    r.name = "scale.cu";
    r.target = *ParseTarget(target);
    r.copy_impl = impl;
    return r;
  }
};

TEST_F(NvrtcBuildTest, BuildsACubinForANamedTarget) {
  auto a = BuildModule(Request("sm_80", CopyImpl::kCpAsync));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->is_ptx);
  ASSERT_GE(a->image.size(), 4u);
  EXPECT_EQ(a->image.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(a->ptx.find(".target sm_80"), std::string::npos);
  EXPECT_EQ(a->copy_impl, CopyImpl::kCpAsync);
  const KernelEntry* k = a->FindKernel("scale");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->params.size(), 4u);
  EXPECT_EQ(k->param_bytes, 24u);
  EXPECT_EQ(k->params[2].kind, ParamKind::kFloat);
}

TEST_F(NvrtcBuildTest, BuildsPtxForComputeTargets) {
  auto a = BuildModule(Request("compute_75"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->is_ptx);
  EXPECT_EQ(a->image, a->ptx);
  EXPECT_NE(a->image.find(".target sm_75"), std::string::npos);
}

// The architectures come from NVRTC (nvrtcGetSupportedArchs): one it does
// not list is refused naming that list, before NVRTC's bare "invalid value
// for --gpu-architecture".
TEST_F(NvrtcBuildTest, TargetsAreCheckedAgainstNvrtcsOwnList) {
  const NvrtcApi& api = **NvrtcLibrary::Default().Get();
  ASSERT_FALSE(api.supported_archs.empty());
  EXPECT_TRUE(
      std::is_sorted(api.supported_archs.begin(), api.supported_archs.end()));
  const int newest = api.supported_archs.back();
  for (const std::string& name :
       {absl::StrCat("sm_", newest), absl::StrCat("compute_", newest)}) {
    EXPECT_TRUE(CheckTargetSupported(api, *ParseTarget(name)).ok()) << name;
  }
  // An architecture below the oldest listed (sm_70 on NVRTC 13) and one no
  // NVRTC has.
  std::vector<std::string> unlisted = {"sm_91"};
  if (api.supported_archs.front() > 70) unlisted.push_back("sm_70");
  for (const std::string& name : unlisted) {
    SCOPED_TRACE(name);
    absl::Status s = CheckTargetSupported(api, *ParseTarget(name));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(SupportedTargetsText(api)),
              absl::string_view::npos)
        << s;
    EXPECT_NE(s.message().find(absl::StrCat("sm_", newest)),
              absl::string_view::npos)
        << s;
    auto built = BuildModule(Request(name.c_str()));
    ASSERT_FALSE(built.ok());
    EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(built.status().message().find("nvrtcGetSupportedArchs"),
              absl::string_view::npos)
        << built.status();
  }
}

TEST_F(NvrtcBuildTest, ArchSpecificTargetsBuild) {
  auto a = BuildModule(Request("sm_90a", CopyImpl::kTma));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(a->ptx.find("sm_90a"), std::string::npos);
}

TEST_F(NvrtcBuildTest, NameExpressionsFindTemplatedKernels) {
  BuildRequest r = Request("sm_90", CopyImpl::kTma);
  r.name_expressions = {"fill<float>", "fill<int>"};
  auto a = BuildModule(r);
  ASSERT_TRUE(a.ok()) << a.status();
  const KernelEntry* f = a->FindKernel("fill<float>");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->lowered_name.substr(0, 2), "_Z");
  ASSERT_EQ(f->params.size(), 3u);
  EXPECT_EQ(f->params[0].kind, ParamKind::kPointer);
  EXPECT_EQ(f->params[1].kind, ParamKind::kFloat);
  EXPECT_EQ(f->params[2].kind, ParamKind::kUnsigned);
  EXPECT_EQ(a->FindKernel("fill<int>")->params[1].kind, ParamKind::kSigned);
  EXPECT_NE(a->FindKernel("scale"), nullptr);  // extern "C" too
}

TEST_F(NvrtcBuildTest, CompileErrorsCarryTheLogOptionsTargetAndImplementation) {
  std::mt19937 rng(std::random_device{}());
  BuildRequest r = Request("sm_80", CopyImpl::kCpAsync);
  std::string ident = absl::StrCat("undeclared_", rng());
  r.source = absl::StrCat("__global__ void k() { ", ident, " = 1; }");
  auto a = BuildModule(r);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  auto log = a.status().GetPayload("fleetjit/build_log");
  ASSERT_TRUE(log.has_value());
  EXPECT_NE(std::string(*log).find(ident), std::string::npos);
  EXPECT_EQ(std::string(*a.status().GetPayload("fleetjit/target")), "sm_80");
  EXPECT_EQ(std::string(*a.status().GetPayload("fleetjit/copy_impl")),
            "cp_async");
  EXPECT_NE(std::string(*a.status().GetPayload("fleetjit/options"))
                .find("-arch=sm_80"),
            std::string::npos);
}

TEST_F(NvrtcBuildTest, TheCopyLayerHeaderIsAvailableWithoutIncludePaths) {
  BuildRequest r = Request("sm_80", CopyImpl::kCpAsync);
  r.source =
      "#include <fleetjit/copy/tensor_param.h>\n"
      "extern \"C\" __global__ void k(int* o) { *o = sizeof(fj::tensor_param); "
      "}";
  auto a = BuildModule(r);
  ASSERT_TRUE(a.ok()) << a.status();
}

// Since ABI 1.3: a name expression that lowers to a variable, not an
// .entry, is a global of the artifact (fj_module_get_global), and a build
// keeps NVRTC's log of warnings.
TEST_F(NvrtcBuildTest, NameExpressionsOfVariablesBecomeGlobals) {
  BuildRequest r = Request("compute_90");
  r.source = R"(
namespace ns { __device__ int value[4]; }
template <typename T> __device__ T tvar[3];
__constant__ float table[8];
template <typename T> __global__ void use(T* out) {
  out[threadIdx.x] = table[threadIdx.x] + ns::value[0] + tvar<T>[1];
}
)";
  r.name_expressions = {"use<double>", "&ns::value", "&tvar<double>"};
  auto a = BuildModule(r);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_NE(a->FindKernel("use<double>"), nullptr);
  EXPECT_EQ(a->FindKernel("&ns::value"), nullptr);
  ASSERT_EQ(a->globals.size(), 2u);
  EXPECT_EQ(a->globals[0].name, "&ns::value");
  EXPECT_EQ(a->globals[0].lowered_name, "_ZN2ns5valueE");
  EXPECT_EQ(a->GlobalSymbol("tvar<double>"), a->globals[1].lowered_name);
  for (const GlobalEntry& g : a->globals) {
    EXPECT_NE(a->ptx.find(g.lowered_name), std::string::npos) << g.name;
  }
  // An unmangled variable needs no name expression: its symbol is its name.
  EXPECT_NE(a->ptx.find(" table[32]"), std::string::npos);
}

TEST_F(NvrtcBuildTest, TheLogOfASuccessfulBuildKeepsItsWarnings) {
  BuildRequest r = Request("sm_90");
  r.source = R"(
extern "C" __global__ void k(int* out) {
  int never_used_variable;
  out[0] = 1;
}
)";
  auto a = BuildModule(r);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(a->log.find("never_used_variable"), std::string::npos) << a->log;
  EXPECT_NE(a->log.find("warning"), std::string::npos) << a->log;
}

}  // namespace
}  // namespace fleetjit::jit
