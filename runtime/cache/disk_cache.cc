#include "runtime/cache/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/files.h"
#include "base/sha256.h"
#include "runtime/cache/cache_entry.h"

namespace fleetjit {
namespace {

using files::ErrnoText;
using files::Fd;

constexpr absl::string_view kEntrySuffix = ".fjc";
constexpr absl::string_view kTempPrefix = ".tmp-";
constexpr absl::string_view kRejectedPrefix = ".rejected-";
constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 32;  // larger is damage
constexpr int64_t kTouchIntervalSeconds = 60;
constexpr int64_t kStaleTempSeconds = 600;

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

bool IsShardName(absl::string_view name) {
  return name.size() == 2 && IsHex(name[0]) && IsHex(name[1]);
}

bool IsEntryName(absl::string_view name) {
  return name.size() == 64 + kEntrySuffix.size() &&
         name.substr(64) == kEntrySuffix && IsCacheDigest(name.substr(0, 64));
}

int ShardIndex(absl::string_view digest) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  return v(digest[0]) * 16 + v(digest[1]);
}

int64_t NowUnix() { return static_cast<int64_t>(::time(nullptr)); }

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// A unique temp name: pid + per-process counter + clock, retried on EEXIST.
std::string TempName(absl::string_view digest) {
  static std::atomic<uint64_t> counter{0};
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return absl::StrFormat("%s%s-%d-%x-%x", kTempPrefix, digest.substr(0, 16),
                         ::getpid(), counter.fetch_add(1),
                         static_cast<uint32_t>(ts.tv_nsec));
}

// Opens the cache directory, refusing one that is not ours.
Fd OpenRoot(const DiskCache& cache, bool create,
            const std::function<void(absl::string_view)>& refuse) {
  const std::string& dir = cache.dir();
  if (dir.empty()) return Fd();
  Fd root(
      files::OpenAt(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root.ok() && errno == ENOENT && create) {
    absl::Status made = files::MakeDirs(dir);
    if (!made.ok()) {
      refuse(absl::StrCat(made.message(), "; not saving to disk"));
      return Fd();
    }
    root = Fd(files::OpenAt(AT_FDCWD, dir.c_str(),
                            O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  if (!root.ok()) {
    if (errno != ENOENT) {
      refuse(absl::StrCat("cannot open cache directory ", dir, ": ",
                          ErrnoText(errno), "; the disk cache is off"));
    }
    return Fd();
  }
  struct stat st;
  if (::fstat(root.get(), &st) != 0) return Fd();
  if (std::string problem = files::OwnershipProblem(st); !problem.empty()) {
    refuse(absl::StrCat("refusing cache directory ", dir, ": ", problem,
                        "; the disk cache is off"));
    return Fd();
  }
  return root;
}

// Opens shard directory `name` under `root`, creating it if asked. A shard
// that is a symlink, not a directory, or not ours is logged and moved aside
// (then recreated when creating).
Fd OpenShard(int root, const std::string& name, bool create,
             const std::string& dir,
             const std::function<void(absl::string_view)>& log) {
  // At most: refuse and move aside, create, open.
  for (int attempt = 0; attempt < 3; ++attempt) {
    Fd shard(files::OpenAt(root, name.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    std::string problem;
    if (shard.ok()) {
      struct stat st;
      if (::fstat(shard.get(), &st) != 0) return Fd();
      problem = files::OwnershipProblem(st);
      if (problem.empty()) return shard;
    } else if (errno == ENOENT) {
      if (!create) return Fd();
      if (files::MkdirAt(root, name.c_str(), 0700) != 0 && errno != EEXIST) {
        return Fd();
      }
      continue;
    } else if (errno == ELOOP || errno == ENOTDIR) {
      problem = "a symbolic link or not a directory";
    } else {
      return Fd();
    }
    shard.Reset();
    std::string aside = absl::StrFormat("%s%s-%d-%x", kRejectedPrefix, name,
                                        ::getpid(), NowUnix());
    bool moved = ::renameat(root, name.c_str(), root, aside.c_str()) == 0;
    log(absl::StrCat("refusing directory ", dir, "/", name, ": ", problem,
                     moved ? "; moved aside, rebuilding"
                           : "; cannot move it aside, not using it"));
    if (!moved) return Fd();
    files::RemoveTree(root, aside);
    if (!create) return Fd();
  }
  return Fd();
}

}  // namespace

std::string ResolveCacheDir(absl::string_view configured,
                            absl::string_view xdg_cache_home,
                            absl::string_view home_dir) {
  std::string dir(configured);
  if (dir.empty() && !xdg_cache_home.empty() && xdg_cache_home[0] == '/') {
    dir = absl::StrCat(xdg_cache_home, "/fleetjit");
  }
  if (dir.empty()) {
    std::string home(home_dir);
    if (home.empty()) {
      struct passwd pw, *result = nullptr;
      char buffer[4096];
      if (::getpwuid_r(::geteuid(), &pw, buffer, sizeof(buffer), &result) ==
              0 &&
          result != nullptr && result->pw_dir != nullptr) {
        home = result->pw_dir;
      }
    }
    if (!home.empty()) dir = home + "/.cache/fleetjit";
  }
  if (dir.empty()) return dir;
  if (dir[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return "";
    dir = absl::StrCat(cwd, "/", dir);
  }
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

DiskCache::DiskCache(std::string dir, uint64_t max_bytes, CacheLogger log)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes == 0 ? kDefaultMaxBytes : max_bytes),
      log_(std::move(log)) {
  std::fill(std::begin(shard_bytes_), std::end(shard_bytes_), -1);
}

std::string DiskCache::EntryPath(absl::string_view digest) const {
  return absl::StrCat(dir_, "/", digest.substr(0, 2), "/", digest,
                      kEntrySuffix);
}

void CacheLog(const Logger& log, LogLevel level, absl::string_view message) {
  // The library writes nothing to stderr: without a sink, nothing.
  if (log.Enabled(level)) log.Log(level, absl::StrCat("cache: ", message));
}

void DiskCache::Log(absl::string_view message, LogLevel level) const {
  CacheLog(log_, level, message);
}

void DiskCache::ReadFailure(const std::string& path, absl::string_view why) {
  read_failures_.fetch_add(1);
  if (read_failure_logged_.exchange(true)) return;
  Log(absl::StrCat("cannot read cache entry ", path, ": ", why,
                   "; rebuilding (further read failures are not logged)"));
}

void DiskCache::Reject(int shard_fd, const std::string& name,
                       const std::string& path, absl::string_view reason,
                       const struct stat* opened) {
  rejected_.fetch_add(1);
  // Delete only the file that was judged: another process may have just
  // published a good entry under the same name.
  struct stat now;
  bool same =
      ::fstatat(shard_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      (opened == nullptr || SameFile(now, *opened));
  std::string outcome = "already replaced";
  if (same) {
    outcome = files::RemoveTree(shard_fd, name)
                  ? "deleted"
                  : absl::StrCat("cannot delete it: ", ErrnoText(errno));
  }
  Log(absl::StrCat("rejected entry ", path, ": ", reason, "; ", outcome,
                   ", rebuilding"));
}

std::optional<jit::Artifact> DiskCache::Load(const CacheKey& key) {
  if (!IsCacheDigest(key.digest)) return std::nullopt;
  auto log = [this](absl::string_view m) { Log(m); };
  auto refuse = [this](absl::string_view m) {
    if (!dir_refusal_logged_.exchange(true)) Log(m);
  };
  Fd root = OpenRoot(*this, /*create=*/false, refuse);
  if (!root.ok()) return std::nullopt;
  Fd shard = OpenShard(root.get(), key.digest.substr(0, 2), false, dir_, log);
  if (!shard.ok()) return std::nullopt;

  const std::string name = absl::StrCat(key.digest, kEntrySuffix);
  const std::string path = EntryPath(key.digest);
  // O_NONBLOCK: a FIFO planted under an entry's name must not block open.
  Fd file(files::OpenAt(shard.get(), name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file.ok()) {
    int err = errno;
    if (err == ELOOP) {
      Reject(shard.get(), name, path, "is a symbolic link", nullptr);
    } else if (err != ENOENT) {
      // Unreadable now (EACCES, EIO, EMFILE, ...): a miss, not a verdict on
      // the entry; a rebuild's store replaces it.
      ReadFailure(path, absl::StrCat("cannot open it: ", ErrnoText(err)));
    }
    return std::nullopt;  // ENOENT: a plain miss
  }

  struct stat st;
  if (::fstat(file.get(), &st) != 0) {
    ReadFailure(path, absl::StrCat("fstat: ", ErrnoText(errno)));
    return std::nullopt;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string problem =
      S_ISREG(st.st_mode) ? files::OwnershipProblem(st) : "not a regular file";
  if (problem.empty() && size > kMaxEntryBytes) {
    problem = absl::StrCat("implausibly large (", size, " bytes)");
  }
  if (problem.empty() && size < kCacheEntryHeaderBytes) {
    problem =
        absl::StrCat("truncated: ", size, " bytes, shorter than the header");
  }
  if (!problem.empty()) {
    Reject(shard.get(), name, path, problem, &st);
    return std::nullopt;
  }

  absl::StatusOr<files::FileContents> bytes =
      files::FileContents::Load(file.get(), size);
  if (!bytes.ok()) {
    // An I/O error (e.g. a stale NFS handle) is a miss, not a verdict.
    if (bytes.status().code() == absl::StatusCode::kDataLoss) {
      Reject(shard.get(), name, path, bytes.status().message(), &st);
    } else {
      ReadFailure(path, bytes.status().message());
    }
    return std::nullopt;
  }
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(bytes->data());
  if (!entry.ok()) {
    Reject(shard.get(), name, path, entry.status().message(), &st);
    return std::nullopt;
  }
  if (entry->key != key.canonical) {
    Reject(shard.get(), name, path,
           "holds a different key (misplaced or damaged entry)", &st);
    return std::nullopt;
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload);
  if (!artifact.ok()) {
    Reject(shard.get(), name, path, artifact.status().message(), &st);
    return std::nullopt;
  }
  if (NowUnix() - static_cast<int64_t>(st.st_mtim.tv_sec) >
      kTouchIntervalSeconds) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::futimens(file.get(), times);  // best effort: a read-only copy still hits
  }
  return std::move(*artifact);
}

absl::Status DiskCache::Store(const CacheKey& key,
                              const jit::Artifact& artifact) {
  if (!IsCacheDigest(key.digest)) {
    return absl::InvalidArgumentError("cache key digest is not 64 hex digits");
  }
  const std::string payload = jit::SerializeArtifact(artifact);
  const std::string header = EncodeCacheEntryHeader(key.canonical, payload);
  const uint64_t entry_bytes =
      header.size() + key.canonical.size() + payload.size();
  if (entry_bytes > max_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("entry of ", entry_bytes,
                     " bytes is larger than the cache cap of ", max_bytes_));
  }
  std::string refusal;
  Fd root = OpenRoot(*this, /*create=*/true, [&](absl::string_view m) {
    refusal = std::string(m);
    if (!dir_refusal_logged_.exchange(true)) Log(m);
  });
  if (!root.ok()) {
    if (!refusal.empty()) return absl::FailedPreconditionError(refusal);
    return absl::UnavailableError(
        absl::StrCat("cannot open cache directory ", dir_));
  }
  auto log = [this](absl::string_view m) { Log(m); };
  const std::string shard_name = key.digest.substr(0, 2);
  const std::string name = absl::StrCat(key.digest, kEntrySuffix);

  Fd shard;
  Fd file;
  std::string temp;
  int err = 0;
  for (int attempt = 0; attempt < 4 && !file.ok(); ++attempt) {
    // ENOENT: a concurrent Clear removed the shard; reopen it.
    if (!shard.ok() || err == ENOENT) {
      shard = OpenShard(root.get(), shard_name, true, dir_, log);
      if (!shard.ok()) {
        return absl::UnavailableError(
            absl::StrCat("cannot use shard directory ", dir_, "/", shard_name,
                         ": ", ErrnoText(errno)));
      }
    }
    temp = TempName(key.digest);
    file = Fd(files::OpenAt(
        shard.get(), temp.c_str(),
        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    err = file.ok() ? 0 : errno;
  }
  if (!file.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot create a file in ", dir_,
                                               "/", shard_name, ": ",
                                               ErrnoText(err)));
  }

  absl::Status status = files::WriteFully(file.get(), header);
  if (status.ok()) status = files::WriteFully(file.get(), key.canonical);
  if (status.ok()) status = files::WriteFully(file.get(), payload);
  if (status.ok() && files::Fsync(file.get()) != 0) {
    status = absl::UnavailableError(absl::StrCat("fsync: ", ErrnoText(errno)));
  }
  if (status.ok() && files::Close(file.Release()) != 0) {
    status = absl::UnavailableError(absl::StrCat("close: ", ErrnoText(errno)));
  }
  if (status.ok() && files::RenameAt(shard.get(), temp.c_str(), shard.get(),
                                     name.c_str()) != 0) {
    status = absl::UnavailableError(absl::StrCat("rename: ", ErrnoText(errno)));
  }
  if (!status.ok()) {
    file.Reset();
    ::unlinkat(shard.get(), temp.c_str(), 0);
    return absl::UnavailableError(absl::StrCat("cannot write cache entry ",
                                               EntryPath(key.digest), ": ",
                                               status.message()));
  }
  // Make the rename durable; the entry is already visible and complete.
  ::fsync(shard.get());
  AfterStore(ShardIndex(key.digest), shard.get());
  return absl::OkStatus();
}

void DiskCache::AfterStore(int shard, int shard_fd) {
  int64_t bytes = 0;
  const int64_t now = NowUnix();
  for (const std::string& name : files::ListNames(shard_fd)) {
    struct stat st;
    if (::fstatat(shard_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    if (absl::StartsWith(name, kTempPrefix) &&
        now - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTempSeconds) {
      ::unlinkat(shard_fd, name.c_str(), 0);  // left by a crashed writer
      continue;
    }
    // Entries only: the temp files of killed writers (until they are stale)
    // must not push the estimate over the cap, or every store would evict
    // every entry while they last (a SIGKILL test found it).
    if (IsEntryName(name)) bytes += st.st_size;
  }
  uint64_t estimate;
  {
    absl::MutexLock lock(&mu_);
    shard_bytes_[shard] = bytes;
    uint64_t sum = 0, known = 0;
    for (int64_t b : shard_bytes_) {
      if (b >= 0) sum += static_cast<uint64_t>(b), ++known;
    }
    // Digests are uniform, so unseen shards hold about the average.
    estimate = sum / known * 256 + sum % known * 256 / known;
  }
  if (estimate > max_bytes_ && !evicting_.exchange(true)) {
    Evict();
    evicting_.store(false);
  }
}

namespace {

struct ScannedEntry {
  int64_t mtime_sec, mtime_nsec;
  std::string shard, name;
  uint64_t bytes;
  bool operator<(const ScannedEntry& o) const {
    return std::tie(mtime_sec, mtime_nsec, shard, name) <
           std::tie(o.mtime_sec, o.mtime_nsec, o.shard, o.name);
  }
};

// Calls fn(shard_name, shard_fd, name, lstat) for every file in every
// shard directory (symlinked or foreign shards are skipped).
template <typename Fn>
void ForEachShardFile(int root, Fn fn) {
  for (const std::string& shard_name : files::ListNames(root)) {
    if (!IsShardName(shard_name)) continue;
    Fd shard(::openat(root, shard_name.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (!shard.ok() || ::fstat(shard.get(), &st) != 0 ||
        !files::OwnershipProblem(st).empty()) {
      continue;
    }
    for (const std::string& name : files::ListNames(shard.get())) {
      if (::fstatat(shard.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        fn(shard_name, shard.get(), name, st);
      }
    }
  }
}

}  // namespace

void DiskCache::Evict() {
  Fd root = OpenRoot(*this, false, [](absl::string_view) {});
  if (!root.ok()) return;
  std::vector<ScannedEntry> entries;
  int64_t per_shard[256] = {};
  uint64_t total = 0;
  const int64_t now = NowUnix();
  ForEachShardFile(
      root.get(), [&](const std::string& shard_name, int shard_fd,
                      const std::string& name, const struct stat& st) {
        if (!S_ISREG(st.st_mode)) return;
        const bool temp = absl::StartsWith(name, kTempPrefix);
        if (temp &&
            now - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTempSeconds) {
          ::unlinkat(shard_fd, name.c_str(), 0);
          return;
        }
        if (temp || !IsEntryName(name)) return;  // temps: see AfterStore
        total += st.st_size;
        per_shard[ShardIndex(shard_name)] += st.st_size;
        entries.push_back({st.st_mtim.tv_sec, st.st_mtim.tv_nsec, shard_name,
                           name, static_cast<uint64_t>(st.st_size)});
      });

  if (total > max_bytes_) {
    const uint64_t target = max_bytes_ - max_bytes_ / 10;
    const uint64_t before = total;
    std::sort(entries.begin(), entries.end());
    uint64_t evicted = 0, freed = 0;
    for (const ScannedEntry& e : entries) {
      if (total <= target) break;
      Fd shard(::openat(root.get(), e.shard.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!shard.ok()) continue;
      struct stat st;
      if (::fstatat(shard.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) ==
              0 &&
          (st.st_mtim.tv_sec != e.mtime_sec ||
           st.st_mtim.tv_nsec != e.mtime_nsec)) {
        continue;  // used or replaced since the scan: no longer the oldest
      }
      if (::unlinkat(shard.get(), e.name.c_str(), 0) == 0) {
        ++evicted;
        freed += e.bytes;
      } else if (errno != ENOENT) {
        continue;
      }
      total -= e.bytes;
      per_shard[ShardIndex(e.shard)] -= e.bytes;
    }
    evictions_.fetch_add(evicted);
    if (evicted > 0) {
      Log(absl::StrCat("evicted ", evicted, " least recently used entries (",
                       freed, " bytes): ", dir_, " held ", before,
                       " bytes, over its cap of ", max_bytes_),
          LogLevel::kInfo);
    }
  }
  absl::MutexLock lock(&mu_);
  std::copy(std::begin(per_shard), std::end(per_shard), shard_bytes_);
}

DiskCache::Usage DiskCache::Scan() const {
  Usage usage;
  Fd root = OpenRoot(*this, false, [](absl::string_view) {});
  if (!root.ok()) return usage;
  ForEachShardFile(root.get(),
                   [&](const std::string&, int, const std::string& name,
                       const struct stat& st) {
                     if (S_ISREG(st.st_mode) && IsEntryName(name)) {
                       ++usage.entries;
                       usage.bytes += st.st_size;
                     }
                   });
  return usage;
}

absl::Status DiskCache::Clear() {
  std::string refusal;
  Fd root = OpenRoot(*this, false,
                     [&](absl::string_view m) { refusal = std::string(m); });
  if (!root.ok()) {
    if (refusal.empty()) return absl::OkStatus();  // no directory, no entries
    return absl::FailedPreconditionError(refusal);
  }
  absl::Status status;
  for (const std::string& name : files::ListNames(root.get())) {
    if (absl::StartsWith(name, kRejectedPrefix)) {
      files::RemoveTree(root.get(), name);
      continue;
    }
    if (!IsShardName(name)) continue;
    Fd shard(::openat(root.get(), name.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!shard.ok()) {
      // A symlink or file where a shard belongs: remove the name only.
      if (errno == ELOOP || errno == ENOTDIR)
        ::unlinkat(root.get(), name.c_str(), 0);
      continue;
    }
    for (const std::string& file : files::ListNames(shard.get())) {
      if (!IsEntryName(file) && !absl::StartsWith(file, kTempPrefix)) continue;
      if (::unlinkat(shard.get(), file.c_str(), 0) != 0 && errno != ENOENT &&
          status.ok()) {
        status = absl::PermissionDeniedError(
            absl::StrCat("cannot delete ", dir_, "/", name, "/", file, ": ",
                         ErrnoText(errno)));
      }
    }
    ::unlinkat(root.get(), name.c_str(), AT_REMOVEDIR);  // if now empty
  }
  absl::MutexLock lock(&mu_);
  std::fill(std::begin(shard_bytes_), std::end(shard_bytes_), 0);
  return status;
}

namespace {

// Fills `info` from the file open at `fd` (already checked for type and
// owner); returns the problem, or "".
std::string InspectEntry(int fd, const struct stat& st, bool verify,
                         CacheEntryInfo& info) {
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kMaxEntryBytes) return "implausibly large";
  absl::StatusOr<std::string> head =
      files::ReadFully(fd, std::min<uint64_t>(size, kCacheEntryHeaderBytes));
  if (!head.ok()) return std::string(head.status().message());
  absl::StatusOr<CacheEntryHeader> header = DecodeCacheEntryHeader(*head, size);
  if (!header.ok()) return std::string(header.status().message());
  if (header->key_bytes > (1u << 20)) return "key implausibly large";
  absl::StatusOr<std::string> bytes = files::ReadFully(
      fd, verify ? size : kCacheEntryHeaderBytes + header->key_bytes);
  if (!bytes.ok()) return std::string(bytes.status().message());
  absl::string_view key = absl::string_view(*bytes).substr(
      kCacheEntryHeaderBytes, header->key_bytes);
  info.target = CanonicalKeyField(key, "target");
  info.copy_impl = CanonicalKeyField(key, "copy_impl");
  info.compiler = CanonicalKeyField(key, "compiler");
  const std::string marker = CanonicalKeyField(key, "name_expression");
  info.kind = marker == kPchNameExpression    ? "pch"
              : marker == kTuneNameExpression ? "tune"
                                              : "module";
  if (!ParseCanonicalKey(key).ok()) return "key is malformed";
  if (!verify) return "";
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(*bytes);
  if (!entry.ok()) return std::string(entry.status().message());
  if (Sha256::Hex(Sha256::Hash(entry->key)) != info.digest) {
    return "key does not hash to the file name (misplaced or damaged)";
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload);
  if (!artifact.ok()) return std::string(artifact.status().message());
  return "";
}

}  // namespace

absl::StatusOr<std::vector<CacheEntryInfo>> DiskCache::List(bool verify) const {
  std::vector<CacheEntryInfo> infos;
  std::string refusal;
  Fd root = OpenRoot(*this, false,
                     [&](absl::string_view m) { refusal = std::string(m); });
  if (!root.ok()) {
    if (refusal.empty()) return infos;
    return absl::FailedPreconditionError(refusal);
  }
  for (const std::string& shard_name : files::ListNames(root.get())) {
    if (!IsShardName(shard_name)) continue;
    const std::string shard_path = absl::StrCat(dir_, "/", shard_name);
    Fd shard(::openat(root.get(), shard_name.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    std::string problem;
    if (!shard.ok()) {
      problem = "shard directory is a symbolic link or not a directory";
    } else if (::fstat(shard.get(), &st) == 0) {
      problem = files::OwnershipProblem(st);
      if (!problem.empty()) problem = absl::StrCat("shard directory ", problem);
    }
    if (!problem.empty()) {
      CacheEntryInfo info;
      info.path = shard_path;
      info.problem = problem;
      infos.push_back(std::move(info));
      continue;
    }
    for (const std::string& name : files::ListNames(shard.get())) {
      if (!IsEntryName(name)) continue;
      CacheEntryInfo info;
      info.digest = name.substr(0, 64);
      info.path = absl::StrCat(shard_path, "/", name);
      if (::fstatat(shard.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;  // deleted meanwhile
      }
      info.bytes = st.st_size;
      info.last_used_unix = st.st_mtim.tv_sec;
      if (S_ISLNK(st.st_mode)) {
        info.problem = "is a symbolic link";
      } else if (!S_ISREG(st.st_mode)) {
        info.problem = "not a regular file";
      } else if (std::string p = files::OwnershipProblem(st); !p.empty()) {
        info.problem = p;
      } else {
        Fd file(::openat(shard.get(), name.c_str(),
                         O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        if (!file.ok() || ::fstat(file.get(), &st) != 0) {
          info.problem = absl::StrCat("cannot be opened: ", ErrnoText(errno));
        } else {
          info.problem = InspectEntry(file.get(), st, verify, info);
        }
      }
      infos.push_back(std::move(info));
    }
  }
  return infos;
}

}  // namespace fleetjit
