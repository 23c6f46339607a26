#include "platform/lazy_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "platform/nvrtc_locate.h"

namespace fleetjit {

bool IsRegularFile(const std::string& path, struct stat* st) {
  struct stat local;
  if (st == nullptr) st = &local;
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string FindLibraryIn(absl::Span<const char* const> sonames,
                          const std::vector<std::string>& dirs) {
  for (const char* soname : sonames) {
    for (const std::string& dir : dirs) {
      std::string path = absl::StrCat(dir, "/", soname);
      if (IsRegularFile(path)) return path;
    }
  }
  return "";
}

LibrarySearch FindLibraryBesideNvrtc(const std::string& explicit_path,
                                     const std::string& nvrtc_library,
                                     absl::Span<const char* const> sonames) {
  LibrarySearch search;
  if (!explicit_path.empty()) {
    if (IsRegularFile(explicit_path)) {
      search.path = explicit_path;
      return search;
    }
    if (!IsDirectory(explicit_path)) {
      search.neither_file_nor_folder = true;
      return search;
    }
    search.dirs.push_back(explicit_path);
  } else {
    search.dirs = LibrarySearchDirs();
    const size_t slash = nvrtc_library.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      std::string beside = nvrtc_library.substr(0, slash);
      bool known = false;
      for (const std::string& d : search.dirs) known = known || d == beside;
      if (!known) search.dirs.push_back(std::move(beside));
    }
  }
  search.path = FindLibraryIn(sonames, search.dirs);
  return search;
}

void* OpenLibrary(const std::string& path, std::string* error) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    *error = err != nullptr ? err : path;
  }
  return handle;
}

void* SymbolResolver::Lookup(const char* name) const {
  return dlsym(handle_, name);
}

std::string SymbolResolver::missing() const {
  return absl::StrJoin(missing_names_, ", ");
}

}  // namespace fleetjit
