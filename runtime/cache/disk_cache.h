// The module cache's disk tier: one self-checking file per entry (see
// cache_entry.h) under a private directory that several processes share.
//
// Layout: <dir>/<first two hex digits of the digest>/<digest>.fjc, 256
// shards so no directory grows huge. Writers publish with a temp file in
// the same shard (".tmp-..."), fsync, rename over the final name and fsync
// the shard, so a reader sees either no entry or a complete one, never a
// partial write, whatever happens to the writer.
//
// Trust. The cache holds executable code, so an entry is used only if
//  - the directory is ours (owner = effective uid) and not group- or
//    world-writable; the shard directory and the entry are not symlinks
//    (opened with O_NOFOLLOW) and are ours, and the entry is not group- or
//    world-writable (checked with fstat on the opened descriptor);
//  - its stored key equals the key looked up, its payload checksum
//    matches, and the payload parses.
// An entry failing any check is logged with the reason and reported as
// absent, so the caller rebuilds; it is deleted if fleetjit wrote it.
// Key material reaches the file system only as its SHA-256 digest.
//
// Ownership. fleetjit deletes, replaces or moves only what it wrote, so a
// cache folder pointed at a user's files loses none of them:
//  - the directory carries fleetjit's CACHEDIR.TAG, written when fleetjit
//    made it or found it empty (or holding only a cache from before the
//    tag). A non-empty folder without it is refused, and the disk tier is
//    off (logged at warn);
//  - a shard that is a link, a file or a folder not ours is refused and
//    left as it is (its entries are not cached);
//  - a file is deleted or replaced only if it is a regular file of ours
//    named as an entry (or temp file) that starts with the entry magic;
//  - the build lock file (LockKey) is made O_EXCL | O_NOFOLLOW 0600 under
//    a tagged folder, and used or deleted (by Clear) only if it is a
//    regular file of ours holding fleetjit's lock text. While another
//    process writes the tag of a new folder, its temp file (".tag-PID-HEX",
//    ours, a prefix of the tag's text) does not make the folder foreign.
//
// LRU by modification time. A hit sets the entry's mtime to now (at most
// once a minute per entry, to spare metadata writes when a fleet starts);
// atime is not used because relatime/noatime mounts do not keep it.
// Each store rescans its own shard (cheap: about 1/256 of the entries) and
// estimates the directory's total from the shards this process has seen,
// since digests spread entries evenly. When the estimate passes the cap,
// the store scans the whole directory and deletes least-recently-used
// entries until the total is under 90% of the cap. The cap counts entries
// only: temp files that killed writers left are deleted once ten minutes
// old (by the store that rescans their shard, or the eviction scan), and
// until then must not make every store evict every entry.
//
// Several processes may evict at once: unlink only removes a name, so a
// reader that already opened an entry reads it to the end, and one that has
// not gets "absent" and rebuilds. An entry whose mtime changed since the
// scan (a hit in another process) is skipped. The cap can be exceeded
// transiently by what other processes wrote to shards this one has not
// rescanned since.
#ifndef FLEETJIT_RUNTIME_CACHE_DISK_CACHE_H_
#define FLEETJIT_RUNTIME_CACHE_DISK_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/log.h"
#include "jit/artifact.h"
#include "runtime/cache/cache_key.h"

struct stat;

namespace fleetjit {

// The cache logs through base/log.h's Logger, each line at its own level:
// refused or unwritable entries and remote-tier trouble at warn, evictions
// and a remote tier that answers again at info. A default Logger drops
// them (the runtime passes its own).
using CacheLogger = Logger;

// Sends "cache: " + message to `log` at `level`.
void CacheLog(const Logger& log, LogLevel level, absl::string_view message);

// The directory a cache uses: `configured` if non-empty, else
// `xdg_cache_home`/fleetjit (if absolute), else `home`/.cache/fleetjit (the
// password database's home when `home` is empty). Made absolute. "" if none
// can be found (the disk tier is then off). Reads no environment: the
// values come from the caller (runtime/config.h, ApplyEnvironment).
std::string ResolveCacheDir(absl::string_view configured,
                            absl::string_view xdg_cache_home,
                            absl::string_view home);

struct CacheEntryInfo {
  std::string digest, path, target, copy_impl, compiler;
  // "module", "pch" (a precompiled header) or "tune" (a tuning result).
  std::string kind;
  uint64_t bytes = 0;
  int64_t last_used_unix = 0;  // the entry's mtime
  std::string problem;         // "" if valid
};

class DiskCache {
 public:
  // `dir` must already be resolved. max_bytes 0 means the default, 1 GiB.
  // Does no I/O.
  DiskCache(std::string dir, uint64_t max_bytes, CacheLogger log);

  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  // The artifact stored under `key`, or nullopt if there is none or it was
  // rejected (then deleted and logged). Never an error: a cache that cannot
  // be read is a cache that misses (the first such failure is logged; the
  // entry stays, and the rebuild's Store replaces it).
  // *present (optional) says whether a file stood under the entry's name
  // (a hit, or one refused or unreadable) rather than none.
  std::optional<jit::Artifact> Load(const CacheKey& key,
                                    bool* present = nullptr);

  // Publishes `artifact` under `key` (replacing any entry), creating the
  // directory (0700) if needed, then evicts if over the cap.
  // FAILED_PRECONDITION: the directory was refused (and that was logged);
  // RESOURCE_EXHAUSTED: the entry alone exceeds the cap; UNAVAILABLE: an
  // I/O error.
  absl::Status Store(const CacheKey& key, const jit::Artifact& artifact);

  struct Usage {
    uint64_t entries = 0;
    uint64_t bytes = 0;
  };
  // Entries and bytes on disk now (a directory scan).
  Usage Scan() const;

  // Deletes every entry and temp file fleetjit wrote in this directory (no
  // other file, whatever its name), and the shard directories left empty.
  // FAILED_PRECONDITION (nothing deleted) when the directory is not a
  // fleetjit cache (see "Ownership").
  absl::Status Clear();

  // OK when the directory is usable or not made yet; else why it is refused
  // (logged at warn, once, like a refusal at a Load or Store). Reads only.
  absl::Status Health() const;

  // Every entry with its metadata; with `verify`, also checks each
  // entry's checksum, payload and that its key hashes to its file name.
  absl::StatusOr<std::vector<CacheEntryInfo>> List(bool verify) const;

  // The bytes of the entry named `digest`, checked as `fleetjit cache
  // verify` checks it: a regular file of ours, not group- or
  // world-writable, whose header, lengths and payload checksum are right,
  // whose key hashes to `digest` and whose payload parses. For `fleetjit
  // cache export`. NOT_FOUND when there is no such entry; DATA_LOSS or
  // FAILED_PRECONDITION names the problem.
  absl::StatusOr<std::string> ReadEntryBytes(absl::string_view digest) const;

  // Cross-process single flight: the processes that build one key into
  // this folder take turns on a lock, so one compiles and the others find
  // its entry. The lock is an open-file-description byte-range lock
  // (fcntl F_OFD_SETLK) on the byte of the folder's lock file that the
  // digest names (its first 60 bits): a lock per key, in one file. The
  // kernel drops it when the holder's descriptor closes, however the
  // process ends: a holder killed with SIGKILL frees its waiters at once.
  //
  // The lock file, <dir>/.fleetjit-lock, follows the folder's ownership
  // rules: created O_EXCL | O_NOFOLLOW, mode 0600, only under a tagged
  // folder, and used (or deleted, by Clear) only when it is a regular file
  // of ours holding fleetjit's lock text (or a prefix of it: a creator
  // killed while writing it). Any other file under that name is left alone
  // and builds go without the lock (logged once). Eviction leaves it.
  class KeyLock {
   public:
    ~KeyLock();
    KeyLock(const KeyLock&) = delete;
    KeyLock& operator=(const KeyLock&) = delete;

   private:
    friend class DiskCache;
    explicit KeyLock(int fd);
    int fd_;
    int pid_;
  };
  struct LockResult {
    std::unique_ptr<KeyLock> lock;  // null: building without the lock
    bool waited = false;            // another process held it at first
    std::string why_none;           // why there is no lock ("" if locked)
  };
  // Takes the lock of `digest`, waiting (polling every few milliseconds)
  // while another process holds it, until `deadline`; past it, returns no
  // lock (why_none says so) and the caller builds anyway. No lock either
  // when the folder or shard is refused, the lock file is not ours, or
  // the file system refuses such locks.
  LockResult LockKey(absl::string_view digest, absl::Time deadline);
  // Registers (once) the fork handlers of the key locks a process holds:
  // before fork() their list is locked, in the child its descriptors are
  // closed. Code whose own fork handlers may release a KeyLock (a queued
  // job holding one) calls this before registering them, so that these
  // run inside theirs: prepare last, child first (pthread_atfork's order).
  static void RegisterForkHandlers();

  uint64_t evictions() const { return evictions_.load(); }
  uint64_t rejected_entries() const { return rejected_.load(); }
  // Loads that missed because an entry could not be read (an I/O error,
  // EACCES): logged once per cache, then only counted.
  uint64_t read_failures() const { return read_failures_.load(); }
  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // Path of the entry for `digest` (a valid digest).
  std::string EntryPath(absl::string_view digest) const;

 private:
  // Opens the cache directory (creating it when `create`), or -1 after
  // `refuse` said why: not ours, not private, or not a fleetjit cache.
  // *tagged: it carries fleetjit's tag (written now for a directory fleetjit
  // made, an empty one or a cache from before the tag); files are deleted
  // only under a tagged directory.
  // *untagged (optional): why it is not tagged.
  int OpenRoot(bool create,
               const std::function<void(absl::string_view)>& refuse,
               bool* tagged, std::string* untagged = nullptr) const;
  void Log(absl::string_view message, LogLevel level = LogLevel::kWarn) const;
  // Logs the first entry that could not be read (later ones are counted).
  void ReadFailure(const std::string& path, absl::string_view why) const;
  // Counts and logs a refused entry; deletes it only when `tagged` and
  // fleetjit wrote it.
  void Reject(int shard_fd, const std::string& name, const std::string& path,
              absl::string_view reason, const struct stat* opened, bool tagged);
  // Logs, once per shard, that shard directory `shard` is not usable.
  void RefuseShard(const std::string& shard, absl::string_view why);
  // Renames `temp` to entry `name` in the shard, replacing only an entry
  // fleetjit wrote.
  absl::Status Publish(int shard_fd, const std::string& temp,
                       const std::string& name);
  // Rescans shard `shard` (open at `shard_fd`) and evicts if the estimate
  // of the whole directory passes the cap.
  void AfterStore(int shard, int shard_fd);
  void Evict();

  const std::string dir_;
  const uint64_t max_bytes_;
  const CacheLogger log_;

  std::atomic<uint64_t> evictions_{0};
  std::atomic<uint64_t> rejected_{0};
  mutable std::atomic<uint64_t> read_failures_{0};
  mutable std::atomic<bool> read_failure_logged_{false};
  mutable std::atomic<bool> dir_refusal_logged_{false};
  std::atomic<bool> shard_refusal_logged_[256] = {};
  mutable std::atomic<bool> lock_refusal_logged_{false};
  std::atomic<bool> evicting_{false};
  // The directory last found tagged (st_dev, st_ino): a hit skips reading
  // the tag again.
  mutable std::atomic<uint64_t> tagged_dev_{~uint64_t{0}};
  mutable std::atomic<uint64_t> tagged_ino_{~uint64_t{0}};

  absl::Mutex mu_;
  // Bytes per shard as last scanned; -1 = not seen by this process.
  int64_t shard_bytes_[256] ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_DISK_CACHE_H_
