// Reading images built elsewhere (jit/image_reader.h), on the CPU: images
// come from NVRTC for named targets, then are sniffed, listed and fuzzed.
#include "jit/image_reader.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "jit/nvrtc_build.h"
#include "platform/nvrtc_library.h"
#include "tests/common/seed.h"

namespace fleetjit::jit {
namespace {

// Two kernels and a device function that must not be listed.
constexpr char kSource[] = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
__device__ __noinline__ float helper(float v) { return v * 2.0f; }
extern "C" __global__ void twice(float* y) { y[threadIdx.x] = helper(y[threadIdx.x]); }
template <typename T> __global__ void scale(T* p, T s) { p[threadIdx.x] *= s; }
)";

class ImageReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto api = NvrtcLibrary::Default().Get();
    if (!api.ok()) GTEST_SKIP() << "NVRTC is not installed: " << api.status();
  }
  static Artifact Build(const char* target) {
    BuildRequest r;
    r.source = kSource;
    r.name = "image_reader_test.cu";
    r.target = *ParseTarget(target);
    r.name_expressions = {"scale<float>"};
    auto a = BuildModule(r);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *std::move(a) : Artifact{};
  }
};

// A fatbin entry as nvcc writes one: a 64-byte header (kind 1 PTX or 2
// cubin, version 0x0101, header size, payload size; flags at 40, 0x8000
// for a zstd-compressed payload), then the payload.
std::string FatbinEntry(uint16_t kind, absl::string_view payload,
                        uint64_t flags = 0x11) {
  std::string entry(64, '\0');
  const uint16_t version = 0x0101;
  const uint32_t header_bytes = 64;
  const uint64_t payload_bytes = payload.size();
  std::memcpy(&entry[0], &kind, 2);
  std::memcpy(&entry[2], &version, 2);
  std::memcpy(&entry[4], &header_bytes, 4);
  std::memcpy(&entry[8], &payload_bytes, 8);
  std::memcpy(&entry[40], &flags, 8);
  return entry.append(payload.data(), payload.size());
}

// A fatbin container: the 16-byte header (magic, version 1, header size
// 16, the bytes of entries that follow), then `entries`.
std::string Fatbin(absl::string_view entries) {
  std::string fatbin("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  const uint64_t bytes = entries.size();
  fatbin.append(reinterpret_cast<const char*>(&bytes), 8);
  return fatbin.append(entries.data(), entries.size());
}

std::vector<std::string> Names(const Artifact& a) {
  std::vector<std::string> names;
  for (const KernelEntry& k : a.kernels) names.push_back(k.lowered_name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(ImageReaderTest, SniffsEachKind) {
  Artifact cubin = Build("sm_90");
  Artifact ptx = Build("compute_90");
  EXPECT_EQ(*SniffImageKind(cubin.image), ImageKind::kCubin);
  EXPECT_EQ(*SniffImageKind(ptx.image), ImageKind::kPtx);
  EXPECT_EQ(*SniffImageKind("  \n.version 8.0\n.target sm_90\n"),
            ImageKind::kPtx);
  std::string fatbin("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  EXPECT_EQ(*SniffImageKind(fatbin), ImageKind::kFatbin);
  for (absl::string_view bad :
       {absl::string_view(""),
        absl::string_view("\x7f"
                          "EL"),
        absl::string_view("hello"), absl::string_view("/ x")}) {
    EXPECT_EQ(SniffImageKind(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_F(ImageReaderTest, ListsTheKernelsOfACubinFromItsSymbolTable) {
  Artifact built = Build("sm_90");
  auto names = CubinKernelNames(built.image);
  ASSERT_TRUE(names.ok()) << names.status();
  std::sort(names->begin(), names->end());
  EXPECT_EQ(*names, Names(built));  // saxpy, twice, scale<float>; not helper
  auto target = CubinTarget(built.image);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->Name(), "sm_90");

  auto artifact =
      ArtifactFromImage(built.image, ImageKind::kAuto, std::nullopt);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_FALSE(artifact->is_ptx);
  EXPECT_EQ(Names(*artifact), Names(built));
  for (const KernelEntry& k : artifact->kernels)
    EXPECT_TRUE(k.params.empty());  // driver's
}

TEST_F(ImageReaderTest, ReadsPtxLayoutsAsABuildDoes) {
  Artifact built = Build("compute_90");
  auto artifact =
      ArtifactFromImage(built.image, ImageKind::kAuto, std::nullopt);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_TRUE(artifact->is_ptx);
  EXPECT_EQ(artifact->target.Name(), "compute_90");
  ASSERT_EQ(Names(*artifact), Names(built));
  for (const KernelEntry& k : built.kernels) {
    const KernelEntry* loaded = nullptr;
    for (const KernelEntry& l : artifact->kernels) {
      if (l.lowered_name == k.lowered_name) loaded = &l;
    }
    ASSERT_NE(loaded, nullptr);
    ASSERT_EQ(loaded->params.size(), k.params.size()) << k.name;
    for (size_t i = 0; i < k.params.size(); ++i) {
      EXPECT_EQ(loaded->params[i].offset, k.params[i].offset);
      EXPECT_EQ(loaded->params[i].size, k.params[i].size);
      EXPECT_EQ(loaded->params[i].kind, k.params[i].kind);
    }
    EXPECT_EQ(loaded->param_bytes, k.param_bytes);
  }
  // A target hint wins over the text's.
  auto hinted = ArtifactFromImage(built.image, ImageKind::kPtx,
                                  *ParseTarget("compute_80"));
  ASSERT_TRUE(hinted.ok());
  EXPECT_EQ(hinted->target.Name(), "compute_80");
}

TEST_F(ImageReaderTest, ReadsTheCubinsInsideAFatbin) {
  Artifact built = Build("sm_90");
  Artifact ptx = Build("compute_90");
  // nvcc's layout: the PTX entry, then the cubin.
  const std::string fatbin =
      Fatbin(FatbinEntry(1, ptx.image) + FatbinEntry(2, built.image));
  auto artifact = ArtifactFromImage(fatbin, ImageKind::kAuto, std::nullopt);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(Names(*artifact), Names(built));
  // Containers one after another (8-byte aligned): their cubins' names,
  // each once.
  std::string two = Fatbin(FatbinEntry(2, built.image + "x"));
  two.resize((two.size() + 7) / 8 * 8, '\0');
  two += fatbin;
  artifact = ArtifactFromImage(two, ImageKind::kFatbin, std::nullopt);
  ASSERT_TRUE(artifact.ok()) << artifact.status();
  EXPECT_EQ(Names(*artifact), Names(built));
  // Well-formed, but nothing readable inside: compressed entries only.
  const std::string compressed =
      Fatbin(FatbinEntry(2, std::string(256, 'z'), 0x8011) +
             FatbinEntry(1, std::string(100, 'z'), 0x8011));
  absl::Status status =
      ArtifactFromImage(compressed, ImageKind::kAuto, std::nullopt).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "2 compressed")) << status;
}

// fleetjit.h: a malformed image is FJ_INVALID_ARGUMENT; only a well-formed
// fatbin without an uncompressed cubin is FAILED_PRECONDITION. No NVRTC
// needed.
TEST(FatbinReaderTest, AMalformedFatbinIsInvalidArgument) {
  auto status_of = [](const std::string& image) {
    return ArtifactFromImage(image, ImageKind::kFatbin, std::nullopt).status();
  };
  auto expect_invalid = [&](const std::string& image, const char* fragment) {
    absl::Status s = status_of(image);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), fragment))
        << "want '" << fragment << "' in: " << s;
  };
  // A header claiming 2^63 bytes of entries in a 64-byte image.
  std::string huge("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  huge.append("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  huge.resize(64, '\0');
  expect_invalid(huge, "claims 9223372036854775807 bytes");
  // PTX text, or an ELF, named a fatbin.
  expect_invalid(".version 8.0\n.target sm_80\n.address_size 64\n",
                 "not a fatbin");
  expect_invalid(std::string("\x7f"
                             "ELF\x02\x01\x01\x00",
                             8) +
                     std::string(120, '\0'),
                 "not a fatbin");
  expect_invalid(std::string("\x50\xed\x55\xba", 4), "not a fatbin");
  // A header and nothing after it; one whose header size is too small.
  expect_invalid(Fatbin(""), "no entries");
  std::string small_header = Fatbin(FatbinEntry(2, "x"));
  small_header[6] = 8;
  expect_invalid(small_header, "a header of 8 bytes");
  // An entry cut short, and one whose payload runs past the container.
  expect_invalid(Fatbin(std::string(40, '\0')), "entry 0 is cut short");
  std::string overrun = FatbinEntry(2, std::string(32, '\0'));
  const uint64_t claimed = 4096;
  std::memcpy(&overrun[8], &claimed, 8);
  expect_invalid(Fatbin(overrun), "overruns its container");
  // An uncompressed cubin entry that is no cubin.
  expect_invalid(Fatbin(FatbinEntry(2, std::string(128, 'z'))),
                 "entry 0 (a cubin): malformed cubin");
  // The bytes that used to pass as a fatbin: the magic, then noise.
  std::string noise("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  noise.append(256, 'z');
  expect_invalid(noise, "claims");
  // Well-formed with PTX only: nothing malformed, nothing to list.
  absl::Status ptx_only = status_of(Fatbin(FatbinEntry(1, ".version 8.0\n")));
  EXPECT_EQ(ptx_only.code(), absl::StatusCode::kFailedPrecondition) << ptx_only;
  EXPECT_TRUE(absl::StrContains(ptx_only.message(), "1 PTX")) << ptx_only;
}

// A malformed image is a status, never a crash (ASan builds check reads).
// 64 floats live at once: more than 32 registers unless capped.
constexpr char kHungry[] = R"(
extern "C" __global__ void hungry(const float4* in, float4* out) {
  float4 v[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) v[i] = in[threadIdx.x + i * 256];
  float4 s = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    s.x += v[i].x * v[(i + 1) % 16].y;
    s.y += v[i].y * v[(i + 3) % 16].z;
    s.z += v[i].z * v[(i + 5) % 16].w;
    s.w += v[i].w * v[(i + 7) % 16].x;
  }
  out[threadIdx.x] = s;
}
)";

TEST_F(ImageReaderTest, RegisterCountsFollowTheCompilersRegisterCap) {
  auto count_of = [](const std::vector<std::string>& options) {
    BuildRequest r;
    r.source = kHungry;
    r.name = "hungry.cu";
    r.target = *ParseTarget("sm_90");
    r.options = options;
    auto a = BuildModule(r);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return -1;
    auto counts = CubinRegisterCounts(a->image);
    EXPECT_TRUE(counts.ok()) << counts.status();
    if (!counts.ok()) return -1;
    for (const auto& [name, regs] : *counts) {
      if (name == "hungry") return regs;
    }
    ADD_FAILURE() << "no register count for 'hungry'";
    return -1;
  };
  const int free = count_of({});
  const int capped = count_of({"-maxrregcount=32"});
  EXPECT_GT(free, 32);
  EXPECT_GT(capped, 0);
  EXPECT_LE(capped, 32);
  // A cubin without the record (PTX-only builds have no cubin) and a
  // non-ELF image.
  EXPECT_FALSE(CubinRegisterCounts("not an image").ok());
}

TEST_F(ImageReaderTest, MalformedImagesAreStatusesNeverCrashes) {
  std::mt19937_64 rng =
      testing::SeededRng("MalformedImagesAreStatusesNeverCrashes");
  Artifact cubin = Build("sm_90");
  Artifact ptx = Build("compute_90");
  auto check = [](const std::string& image, ImageKind kind) {
    auto a = ArtifactFromImage(image, kind, std::nullopt);
    if (!a.ok()) {
      EXPECT_NE(a.status().code(), absl::StatusCode::kInternal) << a.status();
    }
    auto regs = CubinRegisterCounts(image);
    if (!regs.ok()) {
      EXPECT_EQ(regs.status().code(), absl::StatusCode::kInvalidArgument)
          << regs.status();
    }
  };
  // Every truncation of the ELF header and section table, then a sample.
  for (size_t n = 0; n < cubin.image.size(); n += (n < 1024 ? 1 : 97)) {
    check(cubin.image.substr(0, n), ImageKind::kAuto);
    check(cubin.image.substr(0, n), ImageKind::kCubin);
  }
  for (size_t n = 0; n < ptx.image.size(); n += 61)
    check(ptx.image.substr(0, n), ImageKind::kPtx);
  // Random byte flips, a few at a time.
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 3000; ++round) {
    std::string image = cubin.image;
    int flips = 1 + round % 8;
    for (int f = 0; f < flips; ++f) {
      // Bias towards the header and section table, where offsets live.
      size_t limit =
          (round % 2) ? std::min<size_t>(image.size(), 256) : image.size();
      image[rng() % limit] = static_cast<char>(byte(rng));
    }
    check(image, ImageKind::kCubin);
  }
  // Pure noise, with and without a valid magic.
  for (int round = 0; round < 500; ++round) {
    std::string image(rng() % 4096, '\0');
    for (char& c : image) c = static_cast<char>(byte(rng));
    check(image, ImageKind::kAuto);
    if (image.size() >= 64) {
      std::memcpy(image.data(),
                  "\x7f"
                  "ELF\x02\x01",
                  6);
      check(image, ImageKind::kCubin);
      std::memcpy(image.data(), "\x50\xed\x55\xba", 4);
      check(image, ImageKind::kFatbin);
    }
  }
}

}  // namespace
}  // namespace fleetjit::jit
