// The "In a server" part of the C ABI (since 1.1) on a machine without a
// GPU: fj_stream_wrap's refusals, log lines through the caller's callback
// (a refused disk-cache entry at warn; nothing under FLEETJIT_LOG=off),
// FLEETJIT_LOG and the options' validation, and preopen_devices.
#include <stdlib.h>
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

namespace {

namespace fs = std::filesystem;

using fleetjit::testing::Code;
using fleetjit::testing::S;

std::string Message(fj_status* st) {
  std::string m = fj_status_message(st, nullptr);
  fj_status_free(st);
  return m;
}

// Restores an environment variable on scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

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
        << bad << ": " << fj_code_name(c) << " " << fj_status_message(st, nullptr);
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
  EXPECT_TRUE(c == FJ_NOT_FOUND || c == FJ_UNAVAILABLE) << fj_code_name(c) << " " << m;
  EXPECT_NE(m.find("preopen_devices names device " + std::to_string(n + 3)), std::string::npos)
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
class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "fj_server_test_XXXXXX").string();
    path_ = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

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
  const std::string source = "extern \"C\" __global__ void k(int* p) { p[0] = " +
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
      std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "not an entry";
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

}  // namespace
