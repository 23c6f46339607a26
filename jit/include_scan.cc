#include "jit/include_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <set>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "base/sha256.h"

namespace fleetjit::jit {
namespace {

int64_t Ns(const struct timespec& t) {
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

int64_t NowNs() {
  struct timespec t;
  ::clock_gettime(CLOCK_REALTIME, &t);
  return Ns(t);
}

// What one file contributes, valid while its identity is unchanged and the
// read was not racy.
struct FileFacts {
  FileIdentity identity;
  bool racy = false;
  std::string sha256;
  std::vector<std::pair<bool, std::string>> includes;
  int computed = 0;
};

class FactsMemo {
 public:
  // The facts of the regular file at `path`, whose stat() said `identity`;
  // null if it cannot be read.
  std::shared_ptr<const FileFacts> Get(const std::string& path,
                                       const FileIdentity& identity,
                                       int64_t racy_window_ns) {
    {
      absl::MutexLock lock(&mu_);
      auto it = facts_.find(path);
      if (it != facts_.end() && !it->second->racy &&
          it->second->identity == identity) {
        return it->second;
      }
    }
    // The clock is read before the file: a change after it is either seen
    // by this read or stamps the file with a later time.
    const int64_t read_at = NowNs();
    files::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.ok()) return nullptr;
    auto content =
        files::ReadFully(fd.get(), static_cast<uint64_t>(identity.size));
    if (!content.ok()) return nullptr;
    auto f = std::make_shared<FileFacts>();
    f->identity = identity;
    f->racy = std::max(identity.mtime_ns, identity.ctime_ns) + racy_window_ns >
              read_at;
    f->sha256 = Sha256::Hex(Sha256::Hash(*content));
    f->includes = IncludeDirectives(*content, &f->computed);
    absl::MutexLock lock(&mu_);
    facts_[path] = f;
    return f;
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const FileFacts>> facts_
      ABSL_GUARDED_BY(mu_);
};

FactsMemo& Memo() {
  static FactsMemo* memo = new FactsMemo();  // never destroyed: used at exit
  return *memo;
}

std::string DirOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Nothing at all at `path`, not even a dangling symbolic link (whose
// target could appear without its folder changing).
bool NothingAt(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
}

// Replaces each probe that found no file by the deepest folder above it
// that exists, when nothing at all is at the path's next component below
// that folder (so only an entry added to the folder can make the path
// appear) and the folder's times are older than the racy window (a folder
// changed just now may change again within its clock's tick). Keeps the
// probe itself otherwise. Folders are listed once.
void VouchForMissingPaths(IncludeScan& scan, int64_t racy_window_ns) {
  const int64_t now = NowNs();
  absl::flat_hash_map<std::string, FileIdentity> folders;  // path -> identity
  std::vector<std::pair<std::string, FileIdentity>> kept;
  std::vector<std::string> vouching;  // folders relied on, in first-use order
  for (auto& [path, identity] : scan.probes) {
    if (identity.kind != FileIdentity::kAbsent) {
      kept.emplace_back(std::move(path), identity);
      continue;
    }
    std::string child = path;
    bool vouched = false;
    for (;;) {
      const size_t slash = child.find_last_of('/');
      if (slash == std::string::npos || slash == 0) break;
      std::string folder = child.substr(0, slash);
      auto [it, inserted] = folders.try_emplace(folder);
      if (inserted) it->second = IdentityOf(folder);
      const FileIdentity& f = it->second;
      if (f.kind == FileIdentity::kDirectory) {
        if (std::max(f.mtime_ns, f.ctime_ns) + racy_window_ns <= now &&
            NothingAt(child)) {
          if (inserted || std::find(vouching.begin(), vouching.end(), folder) ==
                              vouching.end()) {
            vouching.push_back(folder);
          }
          vouched = true;
        }
        break;
      }
      if (f.kind != FileIdentity::kAbsent)
        break;  // a file where a folder would be
      child = std::move(folder);
    }
    if (!vouched) kept.emplace_back(std::move(path), identity);
  }
  for (std::string& folder : vouching) {
    const FileIdentity id = folders[folder];
    kept.emplace_back(std::move(folder), id);
  }
  scan.probes = std::move(kept);
}

}  // namespace

FileIdentity IdentityOf(const std::string& path) {
  FileIdentity id;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return id;
  id.kind = S_ISREG(st.st_mode)   ? FileIdentity::kFile
            : S_ISDIR(st.st_mode) ? FileIdentity::kDirectory
                                  : FileIdentity::kOther;
  id.dev = st.st_dev;
  id.ino = st.st_ino;
  id.size = st.st_size;
  id.mtime_ns = Ns(st.st_mtim);
  id.ctime_ns = Ns(st.st_ctim);
  return id;
}

std::vector<std::pair<bool, std::string>> IncludeDirectives(
    absl::string_view text, int* computed) {
  std::vector<std::pair<bool, std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line =
        absl::StripLeadingAsciiWhitespace(text.substr(pos, end - pos));
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
  for (auto& [angled, name] :
       IncludeDirectives(request.source, &scan.computed_includes)) {
    queue.push_back({angled, name, ""});
  }
  // Each path is looked at once per scan, and each directive resolved once:
  // the same name from the same folder always finds the same file.
  absl::flat_hash_map<std::string, size_t>
      probed;  // path -> index in scan.probes
  auto probe = [&](const std::string& path) -> const FileIdentity& {
    auto [it, inserted] = probed.try_emplace(path, scan.probes.size());
    if (inserted) scan.probes.emplace_back(path, IdentityOf(path));
    return scan.probes[it->second].second;
  };
  absl::flat_hash_set<std::string> resolved;  // "<name", or "\"dir\0name"
  std::set<std::string> seen_paths, seen_absent;
  while (!queue.empty()) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    if (request.is_embedded && request.is_embedded(p.name)) continue;
    const bool absolute = !p.name.empty() && p.name[0] == '/';
    const bool relative_first = !absolute && !p.angled && !p.from_dir.empty();
    if (!resolved
             .insert(relative_first ? absl::StrCat("\"", p.from_dir,
                                                   std::string(1, '\0'), p.name)
                                    : absl::StrCat("<", p.name))
             .second) {
      continue;
    }
    std::vector<std::string> candidates;
    if (absolute) {
      candidates.push_back(p.name);
    } else {
      if (relative_first) candidates.push_back(p.from_dir + "/" + p.name);
      for (const std::string& dir : request.dirs)
        candidates.push_back(dir + "/" + p.name);
    }
    std::shared_ptr<const FileFacts> facts;
    std::string found;
    for (const std::string& c : candidates) {
      const FileIdentity& id = probe(c);
      if (!id.regular()) continue;
      facts = Memo().Get(c, id, request.racy_window_ns);
      if (facts != nullptr) {
        found = c;
        break;
      }
    }
    if (found.empty()) {
      if (seen_absent.insert(p.name).second)
        scan.headers.push_back({p.name, "", ""});
      continue;
    }
    if (!seen_paths.insert(found).second) continue;
    scan.racy |= facts->racy;
    scan.headers.push_back({p.name, found, facts->sha256});
    scan.computed_includes += facts->computed;
    for (const auto& [angled, name] : facts->includes) {
      queue.push_back({angled, name, DirOf(found)});
    }
  }
  for (const ScannedHeader& h : scan.headers) {
    scan.key_records.emplace_back(h.name,
                                  h.sha256.empty() ? "absent" : h.sha256);
  }
  VouchForMissingPaths(scan, request.racy_window_ns);
  std::sort(scan.key_records.begin(), scan.key_records.end());
  return scan;
}

bool StillValid(const IncludeScan& scan) {
  for (const auto& [path, identity] : scan.probes) {
    if (!(IdentityOf(path) == identity)) return false;
  }
  return true;
}

// ----------------------------------------------------------------
// IncludeScanner

IncludeScanner::IncludeScanner(
    std::function<bool(absl::string_view)> is_embedded, int64_t racy_window_ns)
    : is_embedded_(std::move(is_embedded)),
      racy_window_ns_(racy_window_ns),
      shards_(new CacheLinePadded<Shard>[kThreadShards]) {}

IncludeScanner::~IncludeScanner() = default;

size_t IncludeScanner::KeyOf(absl::string_view source,
                             const std::vector<std::string>& dirs) {
  return absl::HashOf(source, dirs);
}

uint64_t IncludeScanner::reused() const {
  uint64_t n = 0;
  for (int i = 0; i < kThreadShards; ++i)
    n += shards_[i]->reused.load(std::memory_order_relaxed);
  return n;
}

std::shared_ptr<const IncludeScan> IncludeScanner::Scan(
    absl::string_view source, const std::vector<std::string>& dirs) {
  // 1. A source naming only embedded headers reads nothing from disk.
  int computed = 0;
  bool on_disk = false;
  for (const auto& [angled, name] : IncludeDirectives(source, &computed)) {
    if (!is_embedded_ || !is_embedded_(name)) on_disk = true;
  }
  if (!on_disk) {
    auto empty = std::make_shared<IncludeScan>();
    empty->computed_includes = computed;
    return empty;
  }
  // 2. This thread's shard: its scan of the key, if still valid.
  const size_t key = KeyOf(source, dirs);
  auto matches = [&](const Entry& e) {
    return e.source == source && e.dirs == dirs;
  };
  auto usable = [](const IncludeScan& s) { return !s.racy && StillValid(s); };
  Shard& shard = *shards_[ThisThreadShard()];
  ShardLock shard_lock(&shard.mu);
  auto it = shard.entries.find(key);
  const IncludeScan* mine = nullptr;
  if (it != shard.entries.end() && matches(it->second)) {
    mine = it->second.scan.get();
    if (usable(*mine)) {
      shard.reused.fetch_add(1, std::memory_order_relaxed);
      return it->second.scan;
    }
  }
  // 3. A newer scan another thread made, if valid.
  std::shared_ptr<const IncludeScan> scan;
  {
    absl::MutexLock lock(&mu_);
    auto latest = latest_.find(key);
    if (latest != latest_.end() && matches(latest->second) &&
        latest->second.scan.get() != mine) {
      scan = latest->second.scan;
    }
  }
  if (scan != nullptr && usable(*scan)) {
    shard.reused.fetch_add(1, std::memory_order_relaxed);
  } else {
    // 4. Scan again, and publish it.
    IncludeScanRequest request;
    request.source = source;
    request.dirs = dirs;
    request.is_embedded = is_embedded_;
    request.racy_window_ns = racy_window_ns_;
    scan = std::make_shared<const IncludeScan>(ScanIncludes(request));
    scanned_.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    latest_[key] = Entry{std::string(source), dirs, scan};
  }
  std::shared_ptr<const IncludeScan> local = LocalReference(std::move(scan));
  shard.entries[key] = Entry{std::string(source), dirs, local};
  return local;
}

}  // namespace fleetjit::jit
