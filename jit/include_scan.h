// The headers a build may read, found without compiling: the cache key's
// view of `#include`.
//
// NVRTC reports no dependencies, so ScanIncludes follows the #include
// directives of the source, and of every header they name, through the same
// folders NVRTC is given (the caller's -I folders first, then CUDA's), and
// returns each header's path and SHA-256. The scan over-approximates: it
// ignores #if, so a header behind a false condition is covered too, and a
// name it cannot find is recorded as absent (creating that file later
// changes the key, as it may change the build). Names NVRTC serves from
// memory (<fleetjit/copy.cuh> and its parts) are skipped: their content is
// in the key already. `#include MACRO` cannot be followed; such lines are
// counted in `computed_includes`.
//
// Repeated scans are cheap at two levels:
//  - each file is read and hashed once per process while its identity
//    (device, inode, size, mtime, ctime) stays the same;
//  - IncludeScanner keeps whole scans per (source, folders) and reuses one
//    while every path it looked at still finds the same: each header the
//    same identity, each absent path still absent (checked through the
//    folder above it: one stat() covers every name missing from it). That
//    costs one stat() per header plus a few, and reads nothing.
// Identity alone misses an edit that keeps the size inside one tick of the
// file system's clock (Linux stamps files with a coarse clock, a jiffy or
// worse): a file changed within `racy_window` of being hashed is therefore
// "racy", and is read and hashed again on each scan until it is older
// (git's "racily clean" rule). Network file systems whose clock runs behind
// this host's can defeat that rule; so can a file edited by hand to keep
// its mtime.
#ifndef FLEETJIT_JIT_INCLUDE_SCAN_H_
#define FLEETJIT_JIT_INCLUDE_SCAN_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/thread_shards.h"

namespace fleetjit::jit {

// How long after its last change a file's identity is not trusted to
// stand for its content (see the file comment).
inline constexpr int64_t kDefaultRacyWindowNs = int64_t{2} * 1000 * 1000 * 1000;

struct IncludeScanRequest {
  absl::string_view source;
  std::vector<std::string> dirs;  // search order, as passed to NVRTC with -I
  // True for names served from memory (not looked up on disk).
  std::function<bool(absl::string_view)> is_embedded;
  int64_t racy_window_ns = kDefaultRacyWindowNs;
};

struct ScannedHeader {
  std::string name;    // as written in the directive, e.g. "cuda_fp16.h"
  std::string path;    // the file it resolved to ("" when absent)
  std::string sha256;  // hex digest of its content ("" when absent)
};

// What stat() said of a path. A directory's times change whenever an
// entry is added to it, removed or renamed, so an unchanged directory
// vouches that its missing names are still missing.
struct FileIdentity {
  enum Kind : uint8_t { kAbsent, kFile, kDirectory, kOther };
  Kind kind = kAbsent;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool regular() const { return kind == kFile; }
  bool operator==(const FileIdentity& o) const {
    return kind == o.kind &&
           (kind == kAbsent ||
            (dev == o.dev && ino == o.ino && size == o.size &&
             mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns));
  }
};
// stat() of `path` (following symbolic links).
FileIdentity IdentityOf(const std::string& path);

struct IncludeScan {
  std::vector<ScannedHeader> headers;  // in discovery order, each path once
  int computed_includes = 0;
  // (name, content digest) of every header, sorted by name, "absent" as
  // the digest of an absent one: what a cache key records.
  std::vector<std::pair<std::string, std::string>> key_records;
  // What vouches for the scan, each path once: every header found, with
  // its identity; for a path found missing, the deepest folder above it
  // that exists (unless that folder changed within the racy window: then
  // the path itself, absent).
  std::vector<std::pair<std::string, FileIdentity>> probes;
  // Some header read was racy (see the file comment): its identity says
  // nothing, so the scan cannot be reused.
  bool racy = false;
};

IncludeScan ScanIncludes(const IncludeScanRequest& request);

// True while every probe of `scan` finds what it found (one stat() each):
// each header the same identity, each folder unchanged, each path absent.
bool StillValid(const IncludeScan& scan);

// The `#include` names of `text`, in order: (true, name) for <name>,
// (false, name) for "name". Exposed for tests.
std::vector<std::pair<bool, std::string>> IncludeDirectives(
    absl::string_view text, int* computed = nullptr);

// ScanIncludes with memory, for one fixed set of embedded names: a scan of
// (source, dirs) is reused while StillValid, else done again. Thread-safe; a
// reuse takes only this thread's shard lock (base/thread_shards.h).
class IncludeScanner {
 public:
  explicit IncludeScanner(std::function<bool(absl::string_view)> is_embedded,
                          int64_t racy_window_ns = kDefaultRacyWindowNs);
  ~IncludeScanner();

  // The scan of `source` through `dirs`. A source that names no header on
  // disk gets an empty scan without any lookup.
  std::shared_ptr<const IncludeScan> Scan(absl::string_view source,
                                          const std::vector<std::string>& dirs);

  // Scans reused, and scans done (first time, or no longer valid).
  uint64_t reused() const;
  uint64_t scanned() const { return scanned_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::string source;
    std::vector<std::string> dirs;
    std::shared_ptr<const IncludeScan> scan;
  };
  struct Shard {
    ShardMutex mu;
    // Hash of (source, dirs) -> an entry with this shard's own reference.
    absl::flat_hash_map<size_t, Entry> entries ABSL_GUARDED_BY(mu);
    std::atomic<uint64_t> reused{0};
  };
  static size_t KeyOf(absl::string_view source,
                      const std::vector<std::string>& dirs);

  const std::function<bool(absl::string_view)> is_embedded_;
  const int64_t racy_window_ns_;
  std::unique_ptr<CacheLinePadded<Shard>[]> shards_;
  // The latest scan of each key, for shards that have none or a stale one.
  absl::Mutex mu_;
  absl::flat_hash_map<size_t, Entry> latest_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> scanned_{0};
};

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_INCLUDE_SCAN_H_
