// The "In a server" part of the C ABI (since 1.1) on a machine without a
// GPU: fj_stream_wrap's refusals, log lines through the caller's callback
// (a refused disk-cache entry at warn; nothing under FLEETJIT_LOG=off),
// FLEETJIT_LOG and the options' validation, and preopen_devices; and
// fj_cache_flush's deadline (since 1.2).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"
#include "tests/common/env.h"
#include "tests/common/temp_dir.h"

namespace {

using ::fleetjit::testing::ScopedEnv;

namespace fs = std::filesystem;

using fleetjit::testing::Code;
using fleetjit::testing::S;

std::string Message(fj_status* st) {
  std::string m = fj_status_message(st, nullptr);
  fj_status_free(st);
  return m;
}

// What a log callback received.
struct Captured {
  std::mutex mu;
  std::vector<std::pair<int32_t, std::string>> lines;
};

void Capture(void* user, int32_t level, fj_str message) {
  auto* c = static_cast<Captured*>(user);
  std::lock_guard<std::mutex> lock(c->mu);
  c->lines.emplace_back(level, std::string(message.data, message.size));
}

fj_runtime_options BaseOptions() {
  fj_runtime_options o{};
  o.struct_size = sizeof(o);
  return o;
}

TEST(StreamWrapTest, RefusesBadInput) {
  fj_stream* s = nullptr;
  EXPECT_EQ(Code(fj_stream_wrap(nullptr, 0, 0, &s)), FJ_INVALID_ARGUMENT);
  fj_runtime* rt = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &rt)), FJ_OK);
  EXPECT_EQ(Code(fj_stream_wrap(rt, 0, 0, nullptr)), FJ_INVALID_ARGUMENT);
  int32_t n = 0;
  ASSERT_EQ(Code(fj_device_count(rt, &n)), FJ_OK);
  // A device that does not exist: no GPU (UNAVAILABLE) or out of range.
  for (int32_t bad : {-1, n, n + 3}) {
    fj_status* st = fj_stream_wrap(rt, bad, 0, &s);
    fj_code c = fj_status_code(st);
    EXPECT_TRUE(c == FJ_NOT_FOUND || c == FJ_UNAVAILABLE)
        << bad << ": " << fj_code_name(c) << " "
        << fj_status_message(st, nullptr);
    fj_status_free(st);
  }
  EXPECT_EQ(s, nullptr);  // outputs untouched on error
  if (n == 0) {
    // Not even the legacy stream can be wrapped without a device.
    EXPECT_EQ(Code(fj_stream_wrap(rt, 0, 0, &s)), FJ_UNAVAILABLE);
  }
  ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  // A destroyed runtime is a stale handle.
  EXPECT_EQ(Code(fj_stream_wrap(rt, 0, 0, &s)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
}

TEST(RuntimeOptionsTest, LogOptionsAreValidated) {
  Captured captured;
  fj_runtime_options o = BaseOptions();
  o.log_fn = Capture;
  o.log_user = &captured;
  o.log_level = 7;
  fj_runtime* rt = nullptr;
  EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_INVALID_ARGUMENT);
  o.log_level = -1;
  EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  {
    ScopedEnv env("FLEETJIT_LOG", "loud");
    o.log_level = FJ_LOG_INFO;
    std::string m = Message(fj_runtime_create(&o, &rt));
    EXPECT_NE(m.find("FLEETJIT_LOG"), std::string::npos) << m;
    EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_INVALID_ARGUMENT);
    EXPECT_EQ(rt, nullptr);
  }
  // A 1.1 caller compiled before these fields (struct_size up to fleet_key).
  fj_runtime_options old = BaseOptions();
  old.struct_size = offsetof(fj_runtime_options, log_fn);
  old.log_level = 99;  // beyond the caller's struct: ignored
  ASSERT_EQ(Code(fj_runtime_create(&old, &rt)), FJ_OK);
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
}

TEST(RuntimeOptionsTest, PreopenDevices) {
  fj_runtime* rt = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &rt)), FJ_OK);
  int32_t n = 0;
  ASSERT_EQ(Code(fj_device_count(rt, &n)), FJ_OK);
  ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);

  fj_runtime_options o = BaseOptions();
  const int32_t all[] = {-1};
  o.preopen_devices = all;
  o.num_preopen_devices = 1;
  // Every device: with none, nothing to do and no error.
  ASSERT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
  ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);

  rt = nullptr;
  const int32_t missing[] = {n + 3};
  o.preopen_devices = missing;
  fj_status* st = fj_runtime_create(&o, &rt);
  fj_code c = fj_status_code(st);
  std::string m = fj_status_message(st, nullptr);
  fj_status_free(st);
  EXPECT_TRUE(c == FJ_NOT_FOUND || c == FJ_UNAVAILABLE)
      << fj_code_name(c) << " " << m;
  EXPECT_NE(m.find("preopen_devices names device " + std::to_string(n + 3)),
            std::string::npos)
      << m;
  EXPECT_EQ(rt, nullptr);

  const int32_t negative[] = {-2};
  o.preopen_devices = negative;
  EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_INVALID_ARGUMENT);
  o.preopen_devices = nullptr;
  EXPECT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
}

// A fresh temporary directory, removed on scope exit.
using ::fleetjit::testing::TempDir;

// Builds a module with a fresh random constant (a new cache key) for a
// named target; returns the status code.
fj_code BuildOnce(fj_runtime* rt, const std::string& source) {
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = S(source);
  std::string target = "sm_90";
  b.target = S(target);
  fj_module* m = nullptr;
  fj_status* st = fj_module_build(rt, &b, &m);
  fj_code c = fj_status_code(st);
  if (c != FJ_OK) ADD_FAILURE() << fj_status_message(st, nullptr);
  fj_status_free(st);
  fj_module_destroy(m);
  return c;
}

TEST(LogTest, RefusedCacheEntryReachesTheCallbackAtWarnAndNothingAtOff) {
  TempDir dir;
  ScopedEnv cache_env("FLEETJIT_CACHE_DIR", dir.path().c_str());
  ScopedEnv log_env("FLEETJIT_LOG", nullptr);
  std::mt19937_64 rng(std::random_device{}());
  const std::string source =
      "extern \"C\" __global__ void k(int* p) { p[0] = " +
      std::to_string(rng() % 1000000) + "; }";
  // 1. Build once, so the entry is on disk.
  fj_runtime* rt = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &rt)), FJ_OK);
  if (BuildOnce(rt, source) != FJ_OK) {
    fj_runtime_destroy(rt);
    GTEST_SKIP() << "no NVRTC here";
  }
  ASSERT_EQ(Code(fj_cache_flush(rt, 1000)), FJ_OK);
  ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  // 2. Corrupt every entry.
  auto corrupt = [&] {
    int entries = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir.path())) {
      if (e.path().extension() != ".fjc") continue;
      std::ofstream(e.path(), std::ios::binary | std::ios::trunc)
          << "not an entry";
      ++entries;
    }
    return entries;
  };
  ASSERT_GT(corrupt(), 0) << "no entry written under " << dir.path();
  // 3. A runtime with a callback (default level warn) refuses it and says so.
  Captured captured;
  fj_runtime_options o = BaseOptions();
  o.log_fn = Capture;
  o.log_user = &captured;
  ASSERT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
  ASSERT_EQ(BuildOnce(rt, source), FJ_OK);
  ASSERT_EQ(Code(fj_cache_flush(rt, 1000)), FJ_OK);
  ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  {
    std::lock_guard<std::mutex> lock(captured.mu);
    ASSERT_FALSE(captured.lines.empty());
    bool refused = false;
    for (const auto& [level, line] : captured.lines) {
      EXPECT_LE(level, FJ_LOG_WARN) << line;
      EXPECT_EQ(line.find('\n'), std::string::npos) << line;
      if (level == FJ_LOG_WARN && line.rfind("cache: ", 0) == 0) refused = true;
    }
    EXPECT_TRUE(refused) << captured.lines[0].second;
    captured.lines.clear();
  }
  // 4. FLEETJIT_LOG=off silences the callback.
  ASSERT_GT(corrupt(), 0);
  {
    ScopedEnv off("FLEETJIT_LOG", "off");
    ASSERT_EQ(Code(fj_runtime_create(&o, &rt)), FJ_OK);
    ASSERT_EQ(BuildOnce(rt, source), FJ_OK);
    ASSERT_EQ(Code(fj_cache_flush(rt, 1000)), FJ_OK);
    ASSERT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  }
  std::lock_guard<std::mutex> lock(captured.mu);
  EXPECT_TRUE(captured.lines.empty()) << captured.lines[0].second;
}

// fj_cache_flush (since 1.2): a remote tier that never answers keeps the
// publication of a build queued past timeout_ms, and the C ABI says
// FJ_DEADLINE_EXCEEDED, as the header promises (not FJ_INTERNAL, "a bug in
// fleetjit"). With time enough the write ends (it fails, bounded by the
// tier's timeouts) and the flush succeeds.
TEST(CacheFlushTest,
     PublicationsStillQueuedAfterTheTimeoutAreDeadlineExceeded) {
  // A Redis that accepts connections (the kernel's backlog) and never
  // replies: each command waits for the tier's command timeout.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
            0);
  ASSERT_EQ(listen(listener, 64), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url =
      "redis://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  std::mt19937_64 rng(std::random_device{}());
  char key[65];
  std::snprintf(key, sizeof(key), "%016llx%016llx%016llx%016llx",
                static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  TempDir dir;
  ScopedEnv cache_env("FLEETJIT_CACHE_DIR", dir.path().c_str());
  ScopedEnv remote_env("FLEETJIT_REMOTE_CACHE", url.c_str());
  ScopedEnv key_env("FLEETJIT_FLEET_KEY", key);
  ScopedEnv log_env("FLEETJIT_LOG", nullptr);
  fj_runtime* rt = nullptr;
  ASSERT_EQ(Code(fj_runtime_create(nullptr, &rt)), FJ_OK);
  fj_cache_stats stats{};
  stats.struct_size = sizeof(stats);
  ASSERT_EQ(Code(fj_cache_stats_get(rt, &stats)), FJ_OK);
  if (stats.remote_state == FJ_REMOTE_UNAVAILABLE) {
    fj_runtime_destroy(rt);
    close(listener);
    GTEST_SKIP() << "no hiredis here: the remote tier is off";
  }
  ASSERT_EQ(stats.remote_state, FJ_REMOTE_CLOSED);
  const std::string source =
      "extern \"C\" __global__ void k(int* p) { p[0] = " +
      std::to_string(rng() % 1000000) + "; }";
  if (BuildOnce(rt, source) != FJ_OK) {
    fj_runtime_destroy(rt);
    close(listener);
    GTEST_SKIP() << "no NVRTC here";
  }
  // The publication waits on a server that never answers: 0 ms is too
  // little.
  fj_status* st = fj_cache_flush(rt, 0);
  EXPECT_EQ(fj_status_code(st), FJ_DEADLINE_EXCEEDED)
      << fj_status_message(st, nullptr);
  EXPECT_STREQ(fj_code_name(fj_status_code(st)), "DEADLINE_EXCEEDED");
  EXPECT_NE(std::string(fj_status_message(st, nullptr))
                .find("still queued after 0 ms"),
            std::string::npos)
      << fj_status_message(st, nullptr);
  fj_status_free(st);
  // Time enough: the write ends (failed, counted) and nothing is queued.
  EXPECT_EQ(Code(fj_cache_flush(rt, 10000)), FJ_OK);
  ASSERT_EQ(Code(fj_cache_stats_get(rt, &stats)), FJ_OK);
  EXPECT_GE(stats.remote_errors, 1u);
  EXPECT_EQ(stats.remote_writes, 0u);
  EXPECT_EQ(Code(fj_runtime_destroy(rt)), FJ_OK);
  close(listener);
}

}  // namespace
