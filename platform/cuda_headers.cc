#include "platform/cuda_headers.h"

#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>

namespace fleetjit {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::string Parent(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_ONLYDIR | GLOB_NOSORT, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

class DirList {
 public:
  // Adds `include` (and its cccl/ subfolder) if it holds headers.
  void AddToolkitInclude(const std::string& include,
                         const std::string& origin) {
    if (!IsDir(include)) return;
    Add(include, origin);
    if (IsDir(include + "/cccl")) Add(include + "/cccl", origin + " (CCCL)");
  }
  std::vector<CudaIncludeDir> Take() { return std::move(dirs_); }

 private:
  void Add(const std::string& path, const std::string& origin) {
    std::string real = RealPath(path);
    for (const CudaIncludeDir& d : dirs_) {
      if (RealPath(d.path) == real) return;
    }
    dirs_.push_back({path, origin});
  }
  std::vector<CudaIncludeDir> dirs_;
};

}  // namespace

std::vector<CudaIncludeDir> FindCudaIncludeDirs(
    const CudaHeaderSearch& search) {
  DirList list;
  if (!search.cuda_home.empty()) {
    list.AddToolkitInclude(search.cuda_home + "/include", "CUDA_HOME");
  }
  if (!search.cuda_path.empty()) {
    list.AddToolkitInclude(search.cuda_path + "/include", "CUDA_PATH");
  }
  if (!search.nvrtc_library.empty()) {
    // <root>/lib64/libnvrtc.so.N, <root>/lib/..., or a wheel's
    // nvidia/<pkg>/lib/libnvrtc.so.N: the headers are in <root>/include.
    std::string lib_dir = Parent(RealPath(search.nvrtc_library));
    std::string root = Parent(lib_dir);
    list.AddToolkitInclude(root + "/include",
                           "the toolkit of the NVRTC in use");
    // Debian/Ubuntu multiarch toolkits: <root>/lib/x86_64-linux-gnu. Only
    // there: for /usr/local/cuda/lib64 it would add /usr/local/include.
    if (lib_dir.find("-linux-gnu") != std::string::npos) {
      list.AddToolkitInclude(Parent(root) + "/include",
                             "the toolkit of the NVRTC in use");
    }
  }
  if (!search.default_root.empty()) {
    list.AddToolkitInclude(search.default_root + "/include",
                           search.default_root);
  }
  for (const std::string& packages : search.python_package_dirs) {
    for (const std::string& inc : Glob(packages + "/nvidia/*/include")) {
      list.AddToolkitInclude(inc,
                             "Python wheel " + inc.substr(packages.size() + 1));
    }
  }
  return list.Take();
}

std::vector<std::string> DefaultPythonPackageDirs(
    const std::string& virtual_env, const std::string& conda_prefix) {
  std::vector<std::string> out;
  auto add_prefix = [&](const std::string& prefix) {
    for (const char* kind : {"dist-packages", "site-packages"}) {
      for (const std::string& d : Glob(prefix + "/lib/python3*/" + kind))
        out.push_back(d);
    }
  };
  if (!virtual_env.empty()) add_prefix(virtual_env);
  if (!conda_prefix.empty()) add_prefix(conda_prefix);
  add_prefix("/usr/local");
  add_prefix("/usr");
  if (IsDir("/usr/lib/python3/dist-packages"))
    out.push_back("/usr/lib/python3/dist-packages");
  std::vector<std::string> unique;
  for (const std::string& d : out) {
    if (std::find(unique.begin(), unique.end(), d) == unique.end())
      unique.push_back(d);
  }
  return unique;
}

}  // namespace fleetjit
