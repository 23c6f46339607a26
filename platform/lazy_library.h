// What platform/'s lazily loaded libraries share (NVRTC, nvJitLink,
// nvFatbin, hiredis): finding a library's file without loading it, opening
// it, resolving its table of entry points while naming the ones it lacks,
// and loading the table once per owner, from any thread, keeping the
// outcome. Each library keeps its own messages (what it is needed for, what
// to install) and its own choice of closing a library that failed; none of
// this reads the environment: a variable's override (FLEETJIT_NVJITLINK,
// FLEETJIT_LIBHIREDIS, ...) arrives as the path the runtime's configuration
// parsed (runtime/config.cc).
#ifndef FLEETJIT_PLATFORM_LAZY_LIBRARY_H_
#define FLEETJIT_PLATFORM_LAZY_LIBRARY_H_

#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace fleetjit {

// Whether `path` names a regular file (its stat in `st` when given).
bool IsRegularFile(const std::string& path, struct stat* st = nullptr);
bool IsDirectory(const std::string& path);

// The first `dir`/`soname` that is a regular file, sonames outermost (the
// first soname in any folder wins over the second); "" when none is.
std::string FindLibraryIn(absl::Span<const char* const> sonames,
                          const std::vector<std::string>& dirs);

// Where a library that ships beside NVRTC is (nvJitLink, nvFatbin).
struct LibrarySearch {
  std::string path;               // the file found, or ""
  std::vector<std::string> dirs;  // the folders searched
  // `explicit_path` named neither a file nor a folder (nothing searched).
  bool neither_file_nor_folder = false;
};
// `explicit_path` (the override): a file is used as is; a folder is the only
// place searched. Empty: LibrarySearchDirs() (platform/nvrtc_locate.h), then
// the folder of `nvrtc_library` when it is not among them.
LibrarySearch FindLibraryBesideNvrtc(const std::string& explicit_path,
                                     const std::string& nvrtc_library,
                                     absl::Span<const char* const> sonames);

// dlopen(path, RTLD_NOW | RTLD_LOCAL). nullptr when it does not load, with
// `error` set to dlerror()'s text (`path` when there is none).
void* OpenLibrary(const std::string& path, std::string* error);

// Resolves a table's entry points from one open library (dlsym), noting the
// required ones it lacks:
//   SymbolResolver resolve(handle);
//   resolve(api.nvFatbinCreate, "nvFatbinCreate");
//   if (!resolve.missing().empty()) ...
class SymbolResolver {
 public:
  explicit SymbolResolver(void* handle) : handle_(handle) {}

  // Sets `slot` to the entry point `name` (nullptr when the library lacks
  // it); a required one that is lacking is noted.
  template <typename Fn>
  void operator()(Fn& slot, const char* name, bool required = true) {
    slot = reinterpret_cast<Fn>(Lookup(name));
    if (slot == nullptr && required) missing_names_.push_back(name);
  }

  // The required entry points lacking, in table order, and joined by ", "
  // ("" when none).
  const std::vector<const char*>& missing_names() const {
    return missing_names_;
  }
  std::string missing() const;

 private:
  void* Lookup(const char* name) const;

  void* handle_;
  std::vector<const char*> missing_names_;
};

// A table of `Api` loaded once: the first Get() runs `load` (under the lock:
// other callers wait), and its outcome, the table or the error, is what
// every later Get() returns.
template <typename Api>
class LazyTable {
 public:
  absl::StatusOr<const Api*> Get(
      absl::FunctionRef<absl::StatusOr<Api>()> load) {
    absl::MutexLock lock(&mu_);
    if (!tried_) {
      tried_ = true;
      absl::StatusOr<Api> api = load();
      if (api.ok()) {
        api_ = std::move(*api);
      } else {
        error_ = api.status();
      }
    }
    if (!error_.ok()) return error_;
    return &api_;
  }

  // Whether a Get() has loaded the table.
  bool loaded() const {
    absl::MutexLock lock(&mu_);
    return tried_ && error_.ok();
  }

 private:
  mutable absl::Mutex mu_;
  bool tried_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  Api api_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_LAZY_LIBRARY_H_
