#include "platform/nvrtc_locate.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "platform/lazy_library.h"

namespace fleetjit {
namespace {

#if defined(__x86_64__)
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#elif defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
constexpr const char* kMultiarch = "";
#endif

constexpr const char* kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};

std::vector<std::string> ListDirectory(const std::string& dir) {
  std::vector<std::string> names;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d.get())) names.emplace_back(e->d_name);
  std::sort(names.begin(), names.end());
  return names;
}

// Directories named in /etc/ld.so.conf.d/*.conf, in file order (the
// loader's cache is built from the same lists).
void AppendLdSoConfDirs(std::vector<std::string>& dirs) {
  const std::string conf_dir = "/etc/ld.so.conf.d";
  for (const std::string& name : ListDirectory(conf_dir)) {
    if (!absl::EndsWith(name, ".conf")) continue;
    std::ifstream in(absl::StrCat(conf_dir, "/", name));
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view dir = absl::StripAsciiWhitespace(
          absl::string_view(line).substr(0, line.find('#')));
      if (absl::StartsWith(dir, "/")) dirs.emplace_back(dir);
    }
  }
}

std::vector<std::string> SearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LD_LIBRARY_PATH")) {
    for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      dirs.emplace_back(dir);
    }
  }
  AppendLdSoConfDirs(dirs);
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/lib");
  if (*kMultiarch != '\0') {
    dirs.push_back(absl::StrCat("/lib/", kMultiarch));
    dirs.push_back(absl::StrCat("/usr/lib/", kMultiarch));
  }
  for (const char* dir : {"/lib64", "/usr/lib64", "/lib", "/usr/lib"}) {
    dirs.push_back(dir);
  }
  std::vector<std::string> unique;
  for (std::string& dir : dirs) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (std::find(unique.begin(), unique.end(), dir) == unique.end()) {
      unique.push_back(std::move(dir));
    }
  }
  return unique;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// "13.0.88" -> {13, 0, 88}; empty if `s` is not dot-separated numbers.
std::vector<int> ParseVersion(absl::string_view s) {
  std::vector<int> parts;
  for (absl::string_view part : absl::StrSplit(s, '.')) {
    int v;
    if (part.empty() || part.size() > 6 ||
        !std::all_of(part.begin(), part.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(part, &v)) {
      return {};
    }
    parts.push_back(v);
  }
  return parts;
}

// The version after `prefix` in a file name ("libnvrtc.so." + "13.0.88").
std::vector<int> VersionAfter(absl::string_view name,
                              absl::string_view prefix) {
  if (!absl::StartsWith(name, prefix)) return {};
  return ParseVersion(name.substr(prefix.size()));
}

}  // namespace

std::vector<std::string> LibrarySearchDirs() { return SearchDirs(); }

absl::StatusOr<std::string> ResolveNvrtcLibrary(
    const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (IsRegularFile(explicit_path)) return explicit_path;
    return absl::UnavailableError(absl::StrCat(
        "NVRTC library '", explicit_path,
        "' does not exist or is not a file; install the CUDA toolkit's NVRTC "
        "or point FLEETJIT_LIBNVRTC (libnvrtc_path) at libnvrtc.so.13 or .12"));
  }
  std::vector<std::string> dirs = SearchDirs();
  if (std::string path = FindLibraryIn(kSonames, dirs); !path.empty()) {
    return path;
  }
  return absl::UnavailableError(absl::StrCat(
      "NVRTC (", absl::StrJoin(kSonames, " or "), ") not found in ",
      absl::StrJoin(dirs, ":"),
      "; install the CUDA toolkit's NVRTC (e.g. the cuda-nvrtc package) or "
      "set FLEETJIT_LIBNVRTC"));
}

absl::StatusOr<std::string> CompilerIdentity(
    const std::string& resolved_nvrtc_path) {
  struct stat st;
  if (!IsRegularFile(resolved_nvrtc_path, &st)) {
    return absl::NotFoundError(absl::StrCat(
        "NVRTC library '", resolved_nvrtc_path, "' is not a regular file"));
  }
  std::string real = resolved_nvrtc_path;
  if (char* r = ::realpath(resolved_nvrtc_path.c_str(), nullptr)) {
    real = r;
    ::free(r);
  }
  const std::string given_name = Basename(resolved_nvrtc_path);
  const std::string real_name = Basename(real);

  // 1. The fully versioned real file: libnvrtc.so.13.0.88.
  std::vector<int> version = VersionAfter(real_name, "libnvrtc.so.");
  if (version.size() < 2) {
    std::vector<int> given = VersionAfter(given_name, "libnvrtc.so.");
    if (given.size() > version.size()) version = given;
  }
  // 2. Else libnvrtc-builtins.so.MAJOR.MINOR beside it (same major).
  if (version.size() == 1) {
    std::vector<int> best;
    for (const std::string& dir :
         {Dirname(real), Dirname(resolved_nvrtc_path)}) {
      for (const std::string& name : ListDirectory(dir)) {
        std::vector<int> v = VersionAfter(name, "libnvrtc-builtins.so.");
        if (v.size() >= 2 && v[0] == version[0] && v > best) best = v;
      }
    }
    if (!best.empty()) version = best;
  }

  std::string version_text =
      version.empty() ? "unknown" : absl::StrJoin(version, ".");
  std::string soname =
      version.empty() ? real_name : absl::StrCat("libnvrtc.so.", version[0]);
  return absl::StrCat("nvrtc ", version_text, " ", soname,
                      " size=", static_cast<uint64_t>(st.st_size));
}

}  // namespace fleetjit
