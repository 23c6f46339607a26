// FJ_RUNTIME_PRELOAD_NVRTC: NVRTC is mapped once fj_runtime_create returns
// (its own process: no other test may have loaded NVRTC first).
#include <fstream>
#include <sstream>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

bool NvrtcMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream all;
  all << maps.rdbuf();
  return all.str().find("libnvrtc") != std::string::npos;
}

TEST(PreloadTest, NvrtcIsMappedAfterCreate) {
  ASSERT_FALSE(NvrtcMapped()) << "NVRTC loaded before the test";
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  fj_runtime* rt = nullptr;
  // Without the flag nothing loads NVRTC.
  ASSERT_EQ(fj_runtime_create(&o, &rt), nullptr);
  EXPECT_FALSE(NvrtcMapped());
  ASSERT_EQ(fj_runtime_destroy(rt), nullptr);
  o.flags = FJ_RUNTIME_PRELOAD_NVRTC;
  fj_status* st = fj_runtime_create(&o, &rt);
  if (fj_status_code(st) == FJ_UNAVAILABLE) {
    std::string m = fj_status_message(st, nullptr);
    fj_status_free(st);
    GTEST_SKIP() << "no NVRTC on this host: " << m;
  }
  ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
  EXPECT_TRUE(NvrtcMapped());
  ASSERT_EQ(fj_runtime_destroy(rt), nullptr);
}

}  // namespace
