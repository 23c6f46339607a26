#include "jit/include_scan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "base/files.h"
#include "base/sha256.h"

namespace fleetjit::jit {
namespace {

// What one file contributes, valid while its identity is unchanged.
struct FileFacts {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  std::string sha256;
  std::vector<std::pair<bool, std::string>> includes;
  int computed = 0;
};

int64_t Ns(const struct timespec& t) { return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec; }

class FactsMemo {
 public:
  // The facts of the regular file at `path`, or false if there is none.
  bool Get(const std::string& path, FileFacts& out) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
    {
      absl::MutexLock lock(&mu_);
      auto it = facts_.find(path);
      if (it != facts_.end() && Same(it->second, st)) {
        out = it->second;
        return true;
      }
    }
    files::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.ok()) return false;
    auto content = files::ReadFully(fd.get(), static_cast<uint64_t>(st.st_size));
    if (!content.ok()) return false;
    FileFacts f;
    f.dev = st.st_dev;
    f.ino = st.st_ino;
    f.size = st.st_size;
    f.mtime_ns = Ns(st.st_mtim);
    f.ctime_ns = Ns(st.st_ctim);
    f.sha256 = Sha256::Hex(Sha256::Hash(*content));
    f.includes = IncludeDirectives(*content, &f.computed);
    absl::MutexLock lock(&mu_);
    facts_[path] = f;
    out = std::move(f);
    return true;
  }

 private:
  static bool Same(const FileFacts& f, const struct stat& st) {
    return f.dev == st.st_dev && f.ino == st.st_ino && f.size == st.st_size &&
           f.mtime_ns == Ns(st.st_mtim) && f.ctime_ns == Ns(st.st_ctim);
  }
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, FileFacts> facts_ ABSL_GUARDED_BY(mu_);
};

FactsMemo& Memo() {
  static FactsMemo* memo = new FactsMemo();  // never destroyed: used at exit
  return *memo;
}

std::string DirOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

std::vector<std::pair<bool, std::string>> IncludeDirectives(absl::string_view text,
                                                            int* computed) {
  std::vector<std::pair<bool, std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = absl::StripLeadingAsciiWhitespace(text.substr(pos, end - pos));
    pos = end + 1;
    if (line.empty() || line[0] != '#') continue;
    line = absl::StripLeadingAsciiWhitespace(line.substr(1));
    if (line.substr(0, 7) != "include") continue;
    line = absl::StripLeadingAsciiWhitespace(line.substr(7));
    if (line.empty()) continue;
    const char open = line[0];
    const char close = open == '<' ? '>' : open == '"' ? '"' : '\0';
    size_t stop = close == '\0' ? absl::string_view::npos : line.find(close, 1);
    if (stop == absl::string_view::npos || stop == 1) {
      if (computed != nullptr) ++*computed;
      continue;
    }
    out.emplace_back(open == '<', std::string(line.substr(1, stop - 1)));
  }
  return out;
}

IncludeScan ScanIncludes(const IncludeScanRequest& request) {
  IncludeScan scan;
  struct Pending {
    bool angled;
    std::string name;
    std::string from_dir;  // folder of the including file ("" for the source)
  };
  std::deque<Pending> queue;
  for (auto& [angled, name] : IncludeDirectives(request.source, &scan.computed_includes)) {
    queue.push_back({angled, name, ""});
  }
  std::set<std::string> seen_paths, seen_absent;
  while (!queue.empty()) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    if (request.is_embedded && request.is_embedded(p.name)) continue;
    std::vector<std::string> candidates;
    if (!p.name.empty() && p.name[0] == '/') {
      candidates.push_back(p.name);
    } else {
      if (!p.angled && !p.from_dir.empty()) candidates.push_back(p.from_dir + "/" + p.name);
      for (const std::string& dir : request.dirs) candidates.push_back(dir + "/" + p.name);
    }
    FileFacts facts;
    std::string found;
    for (const std::string& c : candidates) {
      if (Memo().Get(c, facts)) {
        found = c;
        break;
      }
    }
    if (found.empty()) {
      if (seen_absent.insert(p.name).second) scan.headers.push_back({p.name, "", ""});
      continue;
    }
    if (!seen_paths.insert(found).second) continue;
    scan.headers.push_back({p.name, found, facts.sha256});
    scan.computed_includes += facts.computed;
    for (auto& [angled, name] : facts.includes) queue.push_back({angled, name, DirOf(found)});
  }
  return scan;
}

}  // namespace fleetjit::jit
