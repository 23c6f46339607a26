#include "runtime/cache/disk_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <tuple>

#include "absl/base/call_once.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "runtime/cache/cache_entry.h"

namespace fleetjit {
namespace {

using files::ErrnoText;
using files::Fd;

constexpr absl::string_view kEntrySuffix = ".fjc";
constexpr absl::string_view kTempPrefix = ".tmp-";
constexpr absl::string_view kRejectedPrefix = ".rejected-";  // before 1.4
// The cache directory's mark (the Cache Directory Tagging convention, so
// backup tools skip it too). fleetjit deletes files only under a directory
// that carries it, and only files it wrote: entries (by name and magic) and
// its own temp files.
constexpr absl::string_view kTagName = "CACHEDIR.TAG";
constexpr absl::string_view kTagText =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This directory is a fleetjit module cache, made by fleetjit.\n"
    "# fleetjit deletes only the files it wrote here: see fleetjit's\n"
    "# docs/security.md. `fleetjit cache clear` empties it.\n";
constexpr absl::string_view kEntryMagic{"FJCACHE\0", 8};
// The folder's lock file (DiskCache::LockKey) and what fleetjit writes in
// it: a file of ours under that name holding this text, or a prefix of it
// (a creator killed while writing), is fleetjit's.
constexpr absl::string_view kLockName = ".fleetjit-lock";
constexpr absl::string_view kLockText =
    "fleetjit build lock: processes building one kernel into this cache "
    "take turns on a byte of this file (fcntl). Empty on purpose.\n";
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

bool IsDecimal(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

bool IsHexRun(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsHex);
}

// Exactly the names TempName makes: ".tmp-" 16 hex "-" pid "-" hex "-" hex.
bool IsTempName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kTempPrefix)) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  return parts.size() == 4 && parts[0].size() == 16 && IsHexRun(parts[0]) &&
         IsDecimal(parts[1]) && IsHexRun(parts[2]) && IsHexRun(parts[3]);
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

// Whether the regular file `name` under `dir_fd` is one fleetjit wrote: owned
// by this user, and starting with a cache entry's magic (or empty, where
// `empty_ok`: a temp file a killed writer left may be). Its mode does not
// matter: a loosened entry is refused for loading, but is still fleetjit's
// to delete. Never follows a link.
bool IsOurFile(int dir_fd, const std::string& name, bool empty_ok) {
  Fd file(files::OpenAt(dir_fd, name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!file.ok() || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid()) {
    return false;
  }
  if (st.st_size == 0) return empty_ok;
  char magic[8];
  return ::pread(file.get(), magic, sizeof(magic), 0) ==
             static_cast<ssize_t>(sizeof(magic)) &&
         absl::string_view(magic, sizeof(magic)) == kEntryMagic;
}

// Unlinks `name` under `dir_fd` when fleetjit wrote it (IsOurFile).
bool UnlinkOurs(int dir_fd, const std::string& name, bool empty_ok) {
  return IsOurFile(dir_fd, name, empty_ok) &&
         ::unlinkat(dir_fd, name.c_str(), 0) == 0;
}

// Whether `fd` (opened without following links) is a lock file fleetjit
// wrote: a regular file of ours, not group- or world-writable, holding
// kLockText or a prefix of it. Else the problem.
std::string LockFileProblem(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoText(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (std::string problem = files::OwnershipProblem(st); !problem.empty()) {
    return problem;
  }
  if (static_cast<uint64_t>(st.st_size) > kLockText.size()) {
    return "not fleetjit's lock file (too long)";
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  if (::pread(fd, text.data(), text.size(), 0) !=
          static_cast<ssize_t>(text.size()) ||
      !absl::StartsWith(kLockText, text)) {
    return "not fleetjit's lock file";
  }
  return "";
}

bool IsOurLockFile(int dir_fd, const std::string& name) {
  if (name != kLockName) return false;
  Fd file(files::OpenAt(dir_fd, name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  return file.ok() && LockFileProblem(file.get()).empty();
}

// The names WriteTag gives its temp file: ".tag-" pid "-" hex.
bool IsTagTempName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, ".tag-")) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  return parts.size() == 2 && IsDecimal(parts[0]) && IsHexRun(parts[1]);
}

// Whether `name` under `root` is a tag temp file of ours: a regular file of
// this user holding a prefix of the tag's text.
bool IsOurTagTemp(int root, const std::string& name) {
  Fd file(files::OpenAt(root, name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  if (!file.ok() || ::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::geteuid() ||
      static_cast<uint64_t>(st.st_size) > kTagText.size()) {
    return false;
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  return ::pread(file.get(), text.data(), text.size(), 0) ==
             static_cast<ssize_t>(text.size()) &&
         absl::StartsWith(kTagText, text);
}

enum class Tag { kOurs, kAbsent, kForeign, kUnreadable };

// Whether `root` carries fleetjit's tag; kUnreadable (with the reason in
// *why) when one of ours is there but cannot be read now.
Tag ReadTag(int root, std::string* why) {
  Fd tag(files::OpenAt(root, std::string(kTagName).c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!tag.ok()) return errno == ENOENT ? Tag::kAbsent : Tag::kForeign;
  struct stat st;
  if (::fstat(tag.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      !files::OwnershipProblem(st).empty() ||
      static_cast<uint64_t>(st.st_size) != kTagText.size()) {
    return Tag::kForeign;
  }
  absl::StatusOr<std::string> text =
      files::ReadFully(tag.get(), kTagText.size());
  if (!text.ok()) {
    *why = std::string(text.status().message());
    return Tag::kUnreadable;
  }
  return *text == kTagText ? Tag::kOurs : Tag::kForeign;
}

bool HasOurTag(int root) {
  std::string why;
  return ReadTag(root, &why) == Tag::kOurs;
}

// Writes the tag; "" or why it could not be written.
std::string WriteTag(int root) {
  // Threads of one process may mark a new folder at once: each its own
  // temp file (the pid, then the time and a per-process count, in hex).
  static std::atomic<uint32_t> count{0};
  std::string temp;
  Fd file;
  for (int attempt = 0; attempt < 8 && !file.ok(); ++attempt) {
    temp = absl::StrFormat(".tag-%d-%x%08x", ::getpid(),
                           static_cast<uint32_t>(NowUnix()),
                           count.fetch_add(1, std::memory_order_relaxed));
    file = Fd(files::OpenAt(
        root, temp.c_str(),
        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!file.ok() && errno != EEXIST) break;
  }
  if (!file.ok()) return ErrnoText(errno);
  absl::Status status = files::WriteFully(file.get(), kTagText);
  if (status.ok() && files::Fsync(file.get()) != 0) {
    status = absl::UnavailableError(absl::StrCat("fsync: ", ErrnoText(errno)));
  }
  file.Reset();
  // Never replaces a file: a tag another process wrote meanwhile is as good.
  if (status.ok() &&
      files::RenameAt(root, temp.c_str(), root, std::string(kTagName).c_str(),
                      RENAME_NOREPLACE) != 0 &&
      errno != EEXIST) {
    status = absl::UnavailableError(absl::StrCat("rename: ", ErrnoText(errno)));
  }
  if (!status.ok()) {
    ::unlinkat(root, temp.c_str(), 0);
    return std::string(status.message());
  }
  ::unlinkat(root, temp.c_str(), 0);  // (still there after an EEXIST)
  return HasOurTag(root) ? "" : "another file took its name";
}

// Whether everything under `root` is what fleetjit writes (a cache made
// before the tag): shard directories of ours holding entries and temp
// files, and directories fleetjit moved aside. Else names the first thing
// that is not in *foreign.
bool LooksLikeOurCache(int root, std::string* foreign) {
  for (const std::string& name : files::ListNames(root)) {
    struct stat st;
    if (::fstatat(root, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    // Another process writing the tag of a folder just made (processes
    // starting together on a new cache folder), or the build lock.
    if (IsTagTempName(name) && IsOurTagTemp(root, name)) continue;
    if (IsOurLockFile(root, name)) continue;
    const bool dir = S_ISDIR(st.st_mode) && files::OwnershipProblem(st).empty();
    if (dir && absl::StartsWith(name, kRejectedPrefix)) continue;
    if (dir && IsShardName(name)) {
      Fd shard(files::OpenAt(root, name.c_str(),
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      bool clean = shard.ok();
      for (const std::string& f : shard.ok() ? files::ListNames(shard.get())
                                             : std::vector<std::string>()) {
        if (!((IsEntryName(f) && IsOurFile(shard.get(), f, false)) ||
              (IsTempName(f) && IsOurFile(shard.get(), f, true)))) {
          *foreign = absl::StrCat(name, "/", f);
          return false;
        }
      }
      if (clean) continue;
    }
    *foreign = name;
    return false;
  }
  return true;
}

// Opens shard directory `name` under `root`, creating it (0700) if asked.
// A shard that is a symbolic link, not a directory, or not ours is refused
// (`refuse` says why, then null) and left as it is: fleetjit never moves or
// deletes what it did not write.
Fd OpenShard(int root, const std::string& name, bool create,
             const std::function<void(absl::string_view)>& refuse) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Fd shard(files::OpenAt(root, name.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (shard.ok()) {
      struct stat st;
      if (::fstat(shard.get(), &st) != 0) return Fd();
      std::string problem = files::OwnershipProblem(st);
      if (problem.empty()) return shard;
      refuse(problem);
      return Fd();
    }
    if (errno == ELOOP || errno == ENOTDIR) {
      refuse("a symbolic link or not a directory");
      return Fd();
    }
    if (errno != ENOENT || !create) return Fd();
    if (files::MkdirAt(root, name.c_str(), 0700) != 0 && errno != EEXIST) {
      return Fd();
    }
  }
  return Fd();
}

}  // namespace

int DiskCache::OpenRoot(bool create,
                        const std::function<void(absl::string_view)>& refuse,
                        bool* tagged, std::string* untagged) const {
  *tagged = false;
  if (dir_.empty()) return -1;
  Fd root(files::OpenAt(AT_FDCWD, dir_.c_str(),
                        O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  bool made = false;
  if (!root.ok() && errno == ENOENT && create) {
    absl::Status status = files::MakeDirs(dir_);
    if (!status.ok()) {
      refuse(absl::StrCat(status.message(), "; not saving to disk"));
      return -1;
    }
    root = Fd(files::OpenAt(AT_FDCWD, dir_.c_str(),
                            O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    made = true;
  }
  if (!root.ok()) {
    if (errno != ENOENT) {
      refuse(absl::StrCat("cannot open cache directory ", dir_, ": ",
                          ErrnoText(errno), "; the disk cache is off"));
    }
    return -1;
  }
  struct stat st;
  if (::fstat(root.get(), &st) != 0) return -1;
  if (std::string problem = files::OwnershipProblem(st); !problem.empty()) {
    refuse(absl::StrCat("refusing cache directory ", dir_, ": ", problem,
                        " (make it private: chmod 700 ", dir_,
                        "); the disk cache is off"));
    return -1;
  }
  if (tagged_dev_.load(std::memory_order_relaxed) == st.st_dev &&
      tagged_ino_.load(std::memory_order_relaxed) == st.st_ino) {
    *tagged = true;
    return root.Release();
  }
  std::string foreign, why;
  const Tag tag = ReadTag(root.get(), &why);
  if (tag == Tag::kOurs) {
    *tagged = true;
  } else if (tag == Tag::kUnreadable) {
    // Ours by all that shows, but unreadable now (an I/O error): read, never
    // swept or written to.
    ReadFailure(absl::StrCat(dir_, "/", kTagName), why);
    if (untagged != nullptr) {
      *untagged = absl::StrCat("cannot read ", kTagName);
    }
  } else if (made ||
             (tag == Tag::kAbsent && LooksLikeOurCache(root.get(), &foreign))) {
    // A directory fleetjit just made, an empty one, or a cache made before
    // the tag: marked now. Read-only, it is still read, never swept.
    why = WriteTag(root.get());
    *tagged = why.empty();
    if (untagged != nullptr && !why.empty()) {
      *untagged = absl::StrCat("cannot write ", kTagName, ": ", why);
    }
  } else {
    if (foreign.empty()) foreign = std::string(kTagName);
    refuse(absl::StrCat(
        "refusing cache directory ", dir_, ": it is not a fleetjit cache (no ",
        kTagName, " written by fleetjit, and it holds '", foreign,
        "', which fleetjit did not write); the disk cache is off: point "
        "cache_dir or FLEETJIT_CACHE_DIR at an empty or new folder"));
    return -1;
  }
  if (*tagged) {
    tagged_dev_.store(st.st_dev, std::memory_order_relaxed);
    tagged_ino_.store(st.st_ino, std::memory_order_relaxed);
  }
  return root.Release();
}

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

void DiskCache::ReadFailure(const std::string& path,
                            absl::string_view why) const {
  read_failures_.fetch_add(1);
  if (read_failure_logged_.exchange(true)) return;
  Log(absl::StrCat("cannot read cache entry ", path, ": ", why,
                   "; rebuilding (further read failures are not logged)"));
}

void DiskCache::Reject(int shard_fd, const std::string& name,
                       const std::string& path, absl::string_view reason,
                       const struct stat* opened, bool tagged) {
  rejected_.fetch_add(1);
  // Delete only the file that was judged (another process may have just
  // published a good entry under the same name), and only one fleetjit
  // wrote, under a directory marked as fleetjit's.
  struct stat now;
  bool same =
      ::fstatat(shard_fd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      (opened == nullptr || SameFile(now, *opened));
  std::string outcome = "already replaced, rebuilding";
  if (same && !tagged) {
    outcome =
        "left in place (the directory is not marked as a fleetjit "
        "cache it may write), rebuilding";
  } else if (same && !IsOurFile(shard_fd, name, /*empty_ok=*/false)) {
    outcome =
        "left in place: fleetjit did not write it (not caching this "
        "key until it is removed)";
  } else if (same) {
    outcome = ::unlinkat(shard_fd, name.c_str(), 0) == 0
                  ? "deleted, rebuilding"
                  : absl::StrCat("cannot delete it: ", ErrnoText(errno));
  }
  Log(absl::StrCat("rejected entry ", path, ": ", reason, "; ", outcome));
}

std::optional<jit::Artifact> DiskCache::Load(const CacheKey& key,
                                             bool* present) {
  if (present != nullptr) *present = false;
  if (!IsCacheDigest(key.digest)) return std::nullopt;
  auto refuse = [this](absl::string_view m) {
    if (!dir_refusal_logged_.exchange(true)) Log(m);
  };
  bool tagged;
  Fd root(OpenRoot(/*create=*/false, refuse, &tagged));
  if (!root.ok()) return std::nullopt;
  const std::string shard_name = key.digest.substr(0, 2);
  Fd shard = OpenShard(root.get(), shard_name, false, [&](absl::string_view p) {
    RefuseShard(shard_name, p);
  });
  if (!shard.ok()) return std::nullopt;

  const std::string name = absl::StrCat(key.digest, kEntrySuffix);
  const std::string path = EntryPath(key.digest);
  // O_NONBLOCK: a FIFO planted under an entry's name must not block open.
  Fd file(files::OpenAt(shard.get(), name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (present != nullptr) *present = file.ok() || errno != ENOENT;
  if (!file.ok()) {
    int err = errno;
    if (err == ELOOP) {
      Reject(shard.get(), name, path, "is a symbolic link", nullptr, tagged);
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
    Reject(shard.get(), name, path, problem, &st, tagged);
    return std::nullopt;
  }

  absl::StatusOr<files::FileContents> bytes =
      files::FileContents::Load(file.get(), size);
  if (!bytes.ok()) {
    // An I/O error (e.g. a stale NFS handle) is a miss, not a verdict.
    if (bytes.status().code() == absl::StatusCode::kDataLoss) {
      Reject(shard.get(), name, path, bytes.status().message(), &st, tagged);
    } else {
      ReadFailure(path, bytes.status().message());
    }
    return std::nullopt;
  }
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(bytes->data());
  if (!entry.ok()) {
    Reject(shard.get(), name, path, entry.status().message(), &st, tagged);
    return std::nullopt;
  }
  if (entry->key != key.canonical) {
    Reject(shard.get(), name, path,
           "holds a different key (misplaced or damaged entry)", &st, tagged);
    return std::nullopt;
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload);
  if (!artifact.ok()) {
    Reject(shard.get(), name, path, artifact.status().message(), &st, tagged);
    return std::nullopt;
  }
  if (NowUnix() - static_cast<int64_t>(st.st_mtim.tv_sec) >
      kTouchIntervalSeconds) {
    const struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::futimens(file.get(), times);  // best effort: a read-only copy still hits
  }
  return std::move(*artifact);
}

void DiskCache::RefuseShard(const std::string& shard, absl::string_view why) {
  const int index = ShardIndex(shard);
  if (shard_refusal_logged_[index].exchange(true)) return;
  Log(absl::StrCat("refusing directory ", dir_, "/", shard, ": ", why,
                   "; left as it is, and the entries it would hold are not "
                   "cached (remove it, or use another cache folder)"));
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
  std::string refusal, untagged;
  bool tagged;
  Fd root(OpenRoot(
      /*create=*/true,
      [&](absl::string_view m) {
        refusal = std::string(m);
        if (!dir_refusal_logged_.exchange(true)) Log(m);
      },
      &tagged, &untagged));
  if (!root.ok()) {
    if (!refusal.empty()) return absl::FailedPreconditionError(refusal);
    return absl::UnavailableError(
        absl::StrCat("cannot open cache directory ", dir_));
  }
  if (!tagged) {
    return absl::UnavailableError(
        absl::StrCat("cannot mark ", dir_, " as a fleetjit cache (", untagged,
                     "); not saving to disk"));
  }
  const std::string shard_name = key.digest.substr(0, 2);
  const std::string name = absl::StrCat(key.digest, kEntrySuffix);
  std::string shard_problem;
  auto refuse_shard = [&](absl::string_view p) {
    shard_problem = std::string(p);
    RefuseShard(shard_name, p);
  };

  Fd shard;
  Fd file;
  std::string temp;
  int err = 0;
  for (int attempt = 0; attempt < 4 && !file.ok(); ++attempt) {
    // ENOENT: a concurrent Clear removed the shard; reopen it.
    if (!shard.ok() || err == ENOENT) {
      shard = OpenShard(root.get(), shard_name, true, refuse_shard);
      if (!shard.ok()) {
        return absl::UnavailableError(absl::StrCat(
            "cannot use shard directory ", dir_, "/", shard_name, ": ",
            shard_problem.empty() ? ErrnoText(errno) : shard_problem));
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
  if (status.ok()) status = Publish(shard.get(), temp, name);
  if (!status.ok()) {
    file.Reset();
    ::unlinkat(shard.get(), temp.c_str(), 0);  // ours: made above
    return absl::UnavailableError(absl::StrCat("cannot write cache entry ",
                                               EntryPath(key.digest), ": ",
                                               status.message()));
  }
  // Make the rename durable; the entry is already visible and complete.
  ::fsync(shard.get());
  AfterStore(ShardIndex(key.digest), shard.get());
  return absl::OkStatus();
}

absl::Status DiskCache::Publish(int shard_fd, const std::string& temp,
                                const std::string& name) {
  // Replaces an entry fleetjit wrote (another process's, or a damaged one),
  // never a file of someone else's that sits under the entry's name.
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (files::RenameAt(shard_fd, temp.c_str(), shard_fd, name.c_str(),
                        RENAME_NOREPLACE) == 0) {
      return absl::OkStatus();
    }
    if (errno != EEXIST) {
      return absl::UnavailableError(absl::StrCat("rename: ", ErrnoText(errno)));
    }
    if (!IsOurFile(shard_fd, name, /*empty_ok=*/false)) {
      struct stat st;
      if (::fstatat(shard_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 &&
          errno == ENOENT) {
        continue;  // gone meanwhile
      }
      return absl::FailedPreconditionError(
          absl::StrCat("not replacing ", name, ": fleetjit did not write it"));
    }
    if (files::RenameAt(shard_fd, temp.c_str(), shard_fd, name.c_str()) == 0) {
      return absl::OkStatus();
    }
    return absl::UnavailableError(absl::StrCat("rename: ", ErrnoText(errno)));
  }
  return absl::UnavailableError("rename: the entry's name kept changing");
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
    if (IsTempName(name) &&
        now - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTempSeconds) {
      UnlinkOurs(shard_fd, name, /*empty_ok=*/true);  // a killed writer's
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
  bool tagged;
  Fd root(OpenRoot(
      false, [](absl::string_view) {}, &tagged));
  if (!root.ok() || !tagged) return;
  std::vector<ScannedEntry> entries;
  int64_t per_shard[256] = {};
  uint64_t total = 0;
  const int64_t now = NowUnix();
  ForEachShardFile(
      root.get(), [&](const std::string& shard_name, int shard_fd,
                      const std::string& name, const struct stat& st) {
        if (!S_ISREG(st.st_mode)) return;
        const bool temp = IsTempName(name);
        if (temp &&
            now - static_cast<int64_t>(st.st_mtim.tv_sec) > kStaleTempSeconds) {
          UnlinkOurs(shard_fd, name, /*empty_ok=*/true);
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
      if (UnlinkOurs(shard.get(), e.name, /*empty_ok=*/false)) {
        ++evicted;
        freed += e.bytes;
      } else if (::fstatat(shard.get(), e.name.c_str(), &st,
                           AT_SYMLINK_NOFOLLOW) == 0) {
        continue;  // not ours, or not deletable: it still counts
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
  bool tagged;
  Fd root(OpenRoot(
      false, [](absl::string_view) {}, &tagged));
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

absl::Status DiskCache::Health() const {
  std::string refusal;
  bool tagged;
  Fd root(OpenRoot(
      false, [&](absl::string_view m) { refusal = std::string(m); }, &tagged));
  if (!refusal.empty()) {
    if (!dir_refusal_logged_.exchange(true)) Log(refusal);
    return absl::FailedPreconditionError(refusal);
  }
  return absl::OkStatus();
}

absl::Status DiskCache::Clear() {
  std::string refusal;
  bool tagged;
  Fd root(OpenRoot(
      false, [&](absl::string_view m) { refusal = std::string(m); }, &tagged));
  if (!root.ok()) {
    if (refusal.empty()) return absl::OkStatus();  // no directory, no entries
    return absl::FailedPreconditionError(
        absl::StrCat(refusal, "; nothing deleted"));
  }
  if (!tagged) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mark ", dir_, " as a fleetjit cache (", kTagName,
                     "); nothing deleted"));
  }
  // Entries and temp files that fleetjit wrote, in shard directories of
  // ours; a shard left empty goes too. Nothing else, whatever its name.
  absl::Status status;
  for (const std::string& name : files::ListNames(root.get())) {
    if (!IsShardName(name)) continue;
    Fd shard(::openat(root.get(), name.c_str(),
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (!shard.ok() || ::fstat(shard.get(), &st) != 0 ||
        !files::OwnershipProblem(st).empty()) {
      continue;  // a link, a file or a folder not ours: left alone
    }
    for (const std::string& file : files::ListNames(shard.get())) {
      const bool entry = IsEntryName(file);
      if (!entry && !IsTempName(file)) continue;
      if (!IsOurFile(shard.get(), file, /*empty_ok=*/!entry)) continue;
      if (::unlinkat(shard.get(), file.c_str(), 0) != 0 && errno != ENOENT &&
          status.ok()) {
        status = absl::PermissionDeniedError(
            absl::StrCat("cannot delete ", dir_, "/", name, "/", file, ": ",
                         ErrnoText(errno)));
      }
    }
    ::unlinkat(root.get(), name.c_str(), AT_REMOVEDIR);  // if now empty
  }
  // The build lock goes too, if ours: a build holding it keeps its
  // descriptor and finishes; a later one makes a new file (LockKey checks
  // that the file it locked is still the folder's).
  const std::string lock_name(kLockName);
  if (IsOurLockFile(root.get(), lock_name)) {
    ::unlinkat(root.get(), lock_name.c_str(), 0);
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
  bool tagged;
  Fd root(OpenRoot(
      false, [&](absl::string_view m) { refusal = std::string(m); }, &tagged));
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

absl::StatusOr<std::string> DiskCache::ReadEntryBytes(
    absl::string_view digest) const {
  if (!IsCacheDigest(digest)) {
    return absl::InvalidArgumentError("not a cache digest");
  }
  std::string refusal;
  bool tagged;
  Fd root(OpenRoot(
      false, [&](absl::string_view m) { refusal = std::string(m); }, &tagged));
  if (!root.ok()) {
    if (refusal.empty()) return absl::NotFoundError("no cache directory");
    return absl::FailedPreconditionError(refusal);
  }
  const std::string shard_name(digest.substr(0, 2));
  std::string shard_problem;
  Fd shard = OpenShard(root.get(), shard_name, false, [&](absl::string_view p) {
    shard_problem = std::string(p);
  });
  if (!shard.ok()) {
    if (shard_problem.empty()) return absl::NotFoundError("no such entry");
    return absl::FailedPreconditionError(
        absl::StrCat("shard directory ", shard_name, ": ", shard_problem));
  }
  const std::string name = absl::StrCat(digest, kEntrySuffix);
  Fd file(files::OpenAt(shard.get(), name.c_str(),
                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file.ok()) {
    if (errno == ENOENT) return absl::NotFoundError("no such entry");
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open it: ", ErrnoText(errno)));
  }
  struct stat st;
  if (::fstat(file.get(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat("fstat: ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError("not a regular file");
  }
  if (std::string p = files::OwnershipProblem(st); !p.empty()) {
    return absl::FailedPreconditionError(p);
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes) {
    return absl::DataLossError("implausibly large");
  }
  FJ_ASSIGN_OR_RETURN(std::string bytes,
                      files::ReadFully(file.get(), st.st_size));
  absl::StatusOr<CacheEntryView> entry = DecodeCacheEntry(bytes);
  if (!entry.ok()) return entry.status();
  if (Sha256::Hex(Sha256::Hash(entry->key)) != digest) {
    return absl::DataLossError(
        "key does not hash to the file name (misplaced or damaged)");
  }
  absl::Status parsed = jit::DeserializeArtifact(entry->payload).status();
  if (!parsed.ok()) return absl::DataLossError(parsed.message());
  return bytes;
}

namespace {

// The descriptors of the key locks this process holds. A child made by
// fork() shares their open file descriptions, so it would hold the locks
// until it exits: it closes its copies at once (the parent keeps its own).
pthread_mutex_t held_locks_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<int>* held_locks = nullptr;  // guarded by held_locks_mu

void LockHeldLocks() { pthread_mutex_lock(&held_locks_mu); }
void UnlockHeldLocks() { pthread_mutex_unlock(&held_locks_mu); }
void CloseHeldLocksInChild() {
  if (held_locks != nullptr) {
    for (int fd : *held_locks) ::close(fd);
    held_locks->clear();
  }
  pthread_mutex_unlock(&held_locks_mu);
}

void NoteHeldLock(int fd) {
  DiskCache::RegisterForkHandlers();
  pthread_mutex_lock(&held_locks_mu);
  if (held_locks == nullptr) held_locks = new std::vector<int>();
  held_locks->push_back(fd);
  pthread_mutex_unlock(&held_locks_mu);
}

// The byte of the lock file that `digest` locks: the digest's first 60
// bits (offsets past the end of a file may be locked).
off_t LockByte(absl::string_view digest) {
  uint64_t v = 0;
  for (char c : digest.substr(0, 15)) {
    v = v * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return static_cast<off_t>(v);
}

// Opens the lock file of the cache folder open at `root`, creating it when
// absent. -1 and *problem when the name holds something not ours.
Fd OpenLockFile(int root, std::string* problem) {
  const std::string name(kLockName);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Fd fd(files::OpenAt(root, name.c_str(),
                        O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.ok()) {
      *problem = LockFileProblem(fd.get());
      return problem->empty() ? std::move(fd) : Fd();
    }
    if (errno == ELOOP) {
      *problem = "a symbolic link";
      return Fd();
    }
    if (errno != ENOENT) {
      *problem = ErrnoText(errno);
      return Fd();
    }
    fd = Fd(files::OpenAt(root, name.c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0600));
    if (!fd.ok()) {
      if (errno == EEXIST) continue;  // another process made it: open it
      *problem = ErrnoText(errno);
      return Fd();
    }
    // A reader meanwhile sees a prefix of the text: also fleetjit's.
    (void)files::WriteFully(fd.get(), kLockText);
    return fd;
  }
  *problem = "its name kept changing";
  return Fd();
}

}  // namespace

void DiskCache::RegisterForkHandlers() {
  static absl::once_flag registered;
  absl::call_once(registered, [] {
    pthread_atfork(&LockHeldLocks, &UnlockHeldLocks, &CloseHeldLocksInChild);
  });
}

DiskCache::KeyLock::KeyLock(int fd) : fd_(fd), pid_(::getpid()) {
  NoteHeldLock(fd);
}

DiskCache::KeyLock::~KeyLock() {
  pthread_mutex_lock(&held_locks_mu);
  // In a forked child the descriptor was closed at the fork (and its
  // number may have been reused since): nothing to do.
  if (pid_ == ::getpid() && held_locks != nullptr) {
    auto it = std::find(held_locks->begin(), held_locks->end(), fd_);
    if (it != held_locks->end()) {
      held_locks->erase(it);
      ::close(fd_);  // releases the lock
    }
  }
  pthread_mutex_unlock(&held_locks_mu);
}

DiskCache::LockResult DiskCache::LockKey(absl::string_view digest,
                                         absl::Time deadline) {
  LockResult result;
  if (!IsCacheDigest(digest)) {
    result.why_none = "not a cache digest";
    return result;
  }
  std::string refusal;
  bool tagged = false;
  Fd root(OpenRoot(
      /*create=*/true,
      [&](absl::string_view m) {
        refusal = std::string(m);
        if (!dir_refusal_logged_.exchange(true)) Log(m);
      },
      &tagged));
  if (!root.ok() || !tagged) {
    result.why_none =
        refusal.empty() ? "the cache folder is not usable" : refusal;
    return result;
  }
  struct flock range = {};
  range.l_type = F_WRLCK;
  range.l_whence = SEEK_SET;
  range.l_start = LockByte(digest);
  range.l_len = 1;
  auto delay = std::chrono::microseconds(500);
  for (;;) {
    std::string problem;
    Fd fd = OpenLockFile(root.get(), &problem);
    if (!fd.ok()) {
      // A cache this process may only read stores nothing, so there is
      // nothing to share: no lock, and the store's own line says why.
      const bool read_only =
          ::faccessat(root.get(), ".", W_OK, AT_EACCESS) != 0 &&
          (errno == EACCES || errno == EROFS || errno == EPERM);
      if (!read_only && !lock_refusal_logged_.exchange(true)) {
        Log(absl::StrCat("not locking builds in ", dir_, ": its ", kLockName,
                         ": ", problem,
                         "; processes may compile the same kernel at once "
                         "(remove the file to restore the lock)"));
      }
      result.why_none = problem;
      return result;
    }
    // Wait while another process holds the byte, until the deadline.
    for (;;) {
      if (::fcntl(fd.get(), F_OFD_SETLK, &range) == 0) break;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EACCES) {
        const std::string why = absl::StrCat("the file system refuses locks (",
                                             ErrnoText(errno), ")");
        if (!lock_refusal_logged_.exchange(true)) {
          Log(absl::StrCat("not locking builds in ", dir_, ": ", why,
                           "; processes may compile the same kernel at once"),
              LogLevel::kInfo);
        }
        result.why_none = why;
        return result;
      }
      result.waited = true;
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        result.why_none = "another process is still building it";
        return result;
      }
      std::this_thread::sleep_for(
          std::min(delay, absl::ToChronoMicroseconds(deadline - now) +
                              std::chrono::microseconds(1)));
      delay = std::min(delay * 2, std::chrono::microseconds(20000));
    }
    // Locked. Clear may have deleted the file meanwhile (and another
    // process made a new one, locked by others): then lock that one.
    struct stat locked, named;
    if (::fstat(fd.get(), &locked) == 0 &&
        ::fstatat(root.get(), std::string(kLockName).c_str(), &named,
                  AT_SYMLINK_NOFOLLOW) == 0 &&
        SameFile(locked, named)) {
      result.lock.reset(new KeyLock(fd.Release()));
      return result;
    }
    if (absl::Now() >= deadline) {
      result.why_none = "the lock file kept changing";
      return result;
    }
  }
}

}  // namespace fleetjit
