// Fatbins made with nvFatbin (jit/fatbin.h), checked without a GPU: the
// entries of a fatbin for sm_80 and sm_90 with PTX for the newest, and that
// the image reader (fj_module_load's) accepts it. Skips, saying why, where
// NVRTC or nvFatbin is not installed (scripts/dev/install-deps installs
// Debian's libnvfatbin12).
#include "jit/fatbin.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "jit/image_reader.h"
#include "jit/nvrtc_build.h"
#include "platform/nvfatbin_library.h"
#include "platform/nvrtc_library.h"
#include "tests/common/corpus.h"

namespace fleetjit::jit {
namespace {

class FatbinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto nvrtc = NvrtcLibrary::Default().Get();
    if (!nvrtc.ok()) GTEST_SKIP() << "no NVRTC: " << nvrtc.status();
    auto path = ResolveNvFatbinLibrary("", (*nvrtc)->library_path);
    if (!path.ok()) GTEST_SKIP() << path.status();
    library_ = std::make_unique<NvFatbinLibrary>(*path);
  }
  FatbinInput Built(const char* target, CopyImpl impl) {
    BuildRequest r;
    r.source = testing::SaxpySource();
    r.name = "saxpy.cu";
    r.target = *ParseTarget(target);
    r.copy_impl = impl;
    r.emit_ptx = r.target.ptx;
    auto a = BuildModule(r);
    EXPECT_TRUE(a.ok()) << a.status();
    return {r.target, a.ok() ? a->image : std::string()};
  }
  std::unique_ptr<NvFatbinLibrary> library_;
};

TEST_F(FatbinTest, HoldsEachTargetsCubinAndPtxForTheNewest) {
  std::vector<FatbinInput> inputs = {Built("sm_80", CopyImpl::kCpAsync),
                                     Built("sm_90", CopyImpl::kTma),
                                     Built("compute_90", CopyImpl::kTma)};
  auto fatbin = MakeFatbin(*library_, inputs, "saxpy.cu");
  ASSERT_TRUE(fatbin.ok()) << fatbin.status();
  auto kind = SniffImageKind(*fatbin);
  ASSERT_TRUE(kind.ok()) << kind.status();
  EXPECT_EQ(*kind, ImageKind::kFatbin);

  auto entries = FatbinEntries(*fatbin);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 3u);
  const struct {
    FatbinEntry::Kind kind;
    int arch;
  } want[] = {{FatbinEntry::Kind::kCubin, 80},
              {FatbinEntry::Kind::kCubin, 90},
              {FatbinEntry::Kind::kPtx, 90}};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ((*entries)[i].kind, want[i].kind);
    EXPECT_EQ((*entries)[i].arch, want[i].arch);
    EXPECT_FALSE((*entries)[i].compressed);  // the reader needs the cubins
    EXPECT_GT((*entries)[i].payload_bytes, 0u);
  }
  // The cubin entries are the images given, byte for byte.
  EXPECT_NE(fatbin->find(inputs[0].image), std::string::npos);
  EXPECT_NE(fatbin->find(inputs[1].image), std::string::npos);

  // What fj_module_load reads: the kernels, from the cubins.
  auto names = FatbinKernelNames(*fatbin);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_NE(std::find(names->begin(), names->end(), "saxpy"), names->end());
  auto artifact = ArtifactFromImage(*fatbin, ImageKind::kAuto, std::nullopt);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_NE(artifact->FindKernel("saxpy"), nullptr);
}

TEST_F(FatbinTest, ArchSpecificTargetsKeepTheirSuffix) {
  EXPECT_EQ(NvFatbinArch(*ParseTarget("sm_90a")), "90a");
  EXPECT_EQ(NvFatbinArch(*ParseTarget("compute_100f")), "100f");
  auto fatbin =
      MakeFatbin(*library_, {Built("sm_90a", CopyImpl::kTma)}, "saxpy.cu");
  ASSERT_TRUE(fatbin.ok()) << fatbin.status();
  auto entries = FatbinEntries(*fatbin);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ((*entries)[0].arch, 90);
}

TEST_F(FatbinTest, RefusalsCarryNvFatbinsMessage) {
  // Not a cubin: nvFatbin refuses it, and says so in its own words.
  FatbinInput junk{*ParseTarget("sm_90"), std::string(256, 'x')};
  auto fatbin = MakeFatbin(*library_, {junk}, "junk.cu");
  ASSERT_FALSE(fatbin.ok());
  EXPECT_EQ(fatbin.status().code(), absl::StatusCode::kInternal);
  const std::string message(fatbin.status().message());
  EXPECT_NE(message.find("nvFatbinAddCubin: "), std::string::npos) << message;
  EXPECT_NE(message.find("sm_90"), std::string::npos) << message;
  // Inputs fleetjit can refuse itself.
  EXPECT_EQ(MakeFatbin(*library_, {}, "x.cu").status().code(),
            absl::StatusCode::kInvalidArgument);
  FatbinInput empty{*ParseTarget("sm_90"), ""};
  EXPECT_EQ(MakeFatbin(*library_, {empty}, "x.cu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// No GPU, no nvFatbin needed: a missing library says what to install.
TEST(FatbinLibraryTest, AMissingLibraryIsUnavailableAndSaysWhatToInstall) {
  auto path = ResolveNvFatbinLibrary("/nonexistent/fleetjit", "");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(path.status().message().find("install"), absl::string_view::npos)
      << path.status();
  NvFatbinLibrary missing("/nonexistent/libnvfatbin.so.12");
  auto api = missing.Get();
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("nvFatbin"), absl::string_view::npos);
  EXPECT_NE(api.status().message().find("libnvfatbin12"),
            absl::string_view::npos)
      << api.status();
  // An empty folder is searched, and the answer names it.
  auto in_folder = ResolveNvFatbinLibrary("/", "");
  ASSERT_FALSE(in_folder.ok());
  EXPECT_NE(in_folder.status().message().find("libnvfatbin.so.12"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace fleetjit::jit
