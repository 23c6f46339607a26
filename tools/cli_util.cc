#include "tools/cli_util.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"

namespace fleetjit::cli {

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }
fj_str Str(const char* s) { return fj_str{s, std::strlen(s)}; }

bool Failed(fj_status* status, const char* what) {
  if (status == nullptr) return false;
  std::fprintf(stderr, "fleetjit: %s: %s: %s\n", what,
               fj_code_name(fj_status_code(status)),
               fj_status_message(status, nullptr));
  fj_status_free(status);
  return true;
}

const char* CacheResultName(fj_cache_result result) {
  switch (result) {
    case FJ_CACHE_COMPILED:
      return "compiled";
    case FJ_CACHE_MEMORY_HIT:
      return "memory hit";
    case FJ_CACHE_DISK_HIT:
      return "disk hit";
    case FJ_CACHE_REMOTE_HIT:
      return "remote hit";
  }
  return "unknown";
}

fj_runtime* CreateRuntime() {
  fj_runtime* rt = nullptr;
  if (Failed(fj_runtime_create(nullptr, &rt), "creating the runtime")) {
    return nullptr;
  }
  return rt;
}

std::optional<fj_copy_impl> CopyImplNamed(const std::string& name) {
  for (int i = FJ_COPY_IMPL_SYNC; i <= FJ_COPY_IMPL_LAST; ++i) {
    const auto impl = static_cast<fj_copy_impl>(i);
    if (name == fj_copy_impl_name(impl)) return impl;
  }
  return std::nullopt;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::string VersionText() {
  const uint32_t v = fj_version();
  return absl::StrFormat(
      "fleetjit CLI %s\nlibfleetjit %u.%u (fj_version(); built against header "
      "%d.%d)\n",
      FJ_CLI_VERSION, v >> 16, v & 0xffff, FJ_VERSION_MAJOR, FJ_VERSION_MINOR);
}

}  // namespace fleetjit::cli
