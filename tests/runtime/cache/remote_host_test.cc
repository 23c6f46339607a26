// Two "hosts" (processes with separate disk caches) share one Redis. The
// first compiles saxpy for sm_90 (no GPU needed) and publishes; the second
// has no NVRTC (FLEETJIT_LIBNVRTC=/nonexistent), never compiles, and gets
// the same cubin bytes through the compiler-agnostic pointer. A third
// process with NVRTC hits the full key remotely; a fourth without hiredis
// still builds, reporting the tier unavailable.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/common/redis_server.h"
#include "tests/common/test_paths.h"
#include "tests/runtime/cache/cache_test_util.h"

namespace fleetjit {
namespace {

using ::fleetjit::testing::ReadFile;
using ::fleetjit::testing::RedisServer;
using ::fleetjit::testing::Spawn;
using ::fleetjit::testing::TempDir;
using ::fleetjit::testing::Wait;

const std::string kHelper = fleetjit::testing::BesideExecutable(
    "remote_host_helper", FJ_REMOTE_HOST_HELPER);
constexpr char kFleetKey[] =
    "hex:5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

struct HostRun {
  int exit_code;
  std::string report, cubin;
};

HostRun RunHost(const TempDir& tmp, const std::string& name,
                const std::string& url, std::vector<std::string> env = {}) {
  const std::string prefix = tmp.Sub(name);
  env.push_back("FLEETJIT_CACHE_DIR=" + tmp.Sub(name + "-cache"));
  env.push_back("FLEETJIT_REMOTE_CACHE=" + url);
  env.push_back(std::string("FLEETJIT_FLEET_KEY=") + kFleetKey);
  int code = Wait(Spawn({kHelper, prefix}, env));
  return {code, ReadFile(prefix + ".txt"), ReadFile(prefix + ".cubin")};
}

TEST(RemoteHostTest, HostWithoutNvrtcGetsWhatTheCompilingHostPublished) {
  std::string skip;
  auto server = RedisServer::Start(&skip);
  if (server == nullptr) GTEST_SKIP() << skip;
  TempDir tmp;

  HostRun builder = RunHost(tmp, "builder", server->tcp_url());
  if (builder.exit_code != 0 || builder.report.empty()) {
    GTEST_SKIP() << "the compiling host could not build (no NVRTC here?)";
  }
  EXPECT_TRUE(absl::StrContains(builder.report, "source=compiled compiles=1"))
      << builder.report;
  ASSERT_GT(builder.cubin.size(), 100u);
  ASSERT_EQ(builder.cubin.substr(0, 4),
            "\x7f"
            "ELF");

  HostRun driver_only =
      RunHost(tmp, "driver-only", server->unix_url(),
              {"FLEETJIT_LIBNVRTC=/nonexistent/libnvrtc.so.13"});
  ASSERT_EQ(driver_only.exit_code, 0) << "see stderr";
  EXPECT_TRUE(absl::StrContains(driver_only.report,
                                "source=remote compiles=0 remote_hits=1"))
      << driver_only.report;
  EXPECT_TRUE(absl::StrContains(driver_only.report, "nvrtc_mapped=0"))
      << driver_only.report;
  EXPECT_EQ(driver_only.cubin, builder.cubin) << "the same bytes";

  // Its disk now serves it with Redis gone.
  server->Kill();
  HostRun again = RunHost(tmp, "driver-only", server->unix_url(),
                          {"FLEETJIT_LIBNVRTC=/nonexistent/libnvrtc.so.13"});
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(again.report, "source=disk compiles=0"))
      << again.report;
  EXPECT_EQ(again.cubin, builder.cubin);
  ASSERT_TRUE(server->Restart());  // empty now: nothing persisted

  // A host without hiredis builds normally; the tier says why it is off.
  HostRun no_hiredis = RunHost(tmp, "no-hiredis", server->tcp_url(),
                               {"FLEETJIT_LIBHIREDIS=/nonexistent.so"});
  ASSERT_EQ(no_hiredis.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(no_hiredis.report, "source=compiled"));
  EXPECT_TRUE(absl::StrContains(
      no_hiredis.report, "remote_state=unavailable: cannot load hiredis"))
      << no_hiredis.report;
}

TEST(RemoteHostTest, CompilingHostHitsTheFullKeyRemotely) {
  std::string skip;
  auto server = RedisServer::Start(&skip);
  if (server == nullptr) GTEST_SKIP() << skip;
  TempDir tmp;
  HostRun first = RunHost(tmp, "first", server->tcp_url());
  if (first.exit_code != 0) GTEST_SKIP() << "no NVRTC here";
  HostRun second = RunHost(tmp, "second", server->tcp_url());
  ASSERT_EQ(second.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(second.report, "source=remote compiles=0"))
      << second.report;
  EXPECT_EQ(second.cubin, first.cubin);
}

}  // namespace
}  // namespace fleetjit
