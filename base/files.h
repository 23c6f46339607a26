// Small POSIX file helpers for the disk cache: an owning descriptor,
// directory listing relative to a descriptor, and the ownership checks.
// Everything works on descriptors (openat family) so a path component can
// not be swapped between a check and its use.
//
// The disk cache's reads and writes go through the wrappers at the end
// (OpenAt, MkdirAt, Fsync, Close, RenameAt, ReadFully, WriteFully,
// FileContents::Load), so tests can make any of them fail with an errno of
// their choosing (ENOSPC, EIO, EACCES, EROFS, ...), SQLite-style:
//
//   files::SetFileFaultHookForTesting(
//       [](files::FileOp op, void*) { return op == files::FileOp::kWrite ?
//       ENOSPC : 0; }, nullptr);
#ifndef FLEETJIT_BASE_FILES_H_
#define FLEETJIT_BASE_FILES_H_

#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit::files {

// Owns a file descriptor; -1 when empty.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~Fd() { Reset(); }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  void Reset(int fd = -1);
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// strerror text for `err`.
std::string ErrnoText(int err);

// "" if a file or directory may be trusted with cached code: owned by the
// effective user and neither group- nor world-writable. Else the reason,
// e.g. "owned by uid 65534, not 1000" or "group-writable (mode 0664)".
std::string OwnershipProblem(const struct stat& st);

// Names in the directory open at `dir_fd` (not "." or ".."), sorted.
std::vector<std::string> ListNames(int dir_fd);

// Creates `path` and any missing parents with mode 0700.
absl::Status MakeDirs(const std::string& path);

// Reads `size` bytes from offset 0. DATA_LOSS on a short file, UNAVAILABLE
// on an I/O error.
absl::StatusOr<std::string> ReadFully(int fd, uint64_t size);
// A file's bytes, mapped or read. Mapping saves a copy and the page faults
// of a fresh buffer (about 1 ms per MB on some hosts), but a mapped file
// that shrinks underneath raises SIGBUS, so only files on local file
// systems are mapped (pages populated up front), where nothing truncates
// cache entries: writers publish new files by rename and never modify
// them. Network file systems (NFS, Lustre, CIFS, FUSE, ...) are read.
class FileContents {
 public:
  FileContents() = default;
  FileContents(FileContents&& other) noexcept;
  FileContents& operator=(FileContents&& other) = delete;
  ~FileContents();
  absl::string_view data() const { return data_; }
  bool mapped() const { return mapping_ != nullptr; }

  // The first `size` bytes of the file open at `fd` (which must hold at
  // least 1 byte). Errors as ReadFully.
  static absl::StatusOr<FileContents> Load(int fd, uint64_t size);

 private:
  void* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  std::string read_;
  absl::string_view data_;
};

// Writes all of `data`; the errno text on failure.
absl::Status WriteFully(int fd, absl::string_view data);

// ---------------------------------------------------------------------------
// File operations with a fault-injection seam. Each behaves as its POSIX
// namesake (-1 and errno on failure) unless a test hook says otherwise.

enum class FileOp {
  kOpen,    // open/openat of an existing file or directory
  kCreate,  // open/openat with O_CREAT
  kMkdir,   // mkdir/mkdirat (MakeDirs too)
  kRead,    // ReadFully
  kMap,     // FileContents::Load's mmap (on failure it reads instead)
  kWrite,   // WriteFully: half of the data is written, then the error
  kFsync,
  kClose,  // Close (a close that reports an error)
  kRename,
};
const char* FileOpName(FileOp op);

// Returns the errno `op` fails with, or 0 to run it. May do more (delete a
// directory, count calls); called on any thread, without locks held.
using FileFaultHook = int (*)(FileOp op, void* user);
// Installs `hook` (nullptr: none, the production state) for every later
// operation in this process. For tests only.
void SetFileFaultHookForTesting(FileFaultHook hook, void* user);

int OpenAt(int dir_fd, const char* name, int flags, mode_t mode = 0);
int MkdirAt(int dir_fd, const char* name, mode_t mode);
int Fsync(int fd);
// Closes `fd` (taken from an Fd with Release()).
int Close(int fd);
// renameat, or renameat2 with `flags` (RENAME_NOREPLACE: EEXIST when `to`
// exists; emulated with a hard link where the file system lacks it).
int RenameAt(int from_dir_fd, const char* from, int to_dir_fd, const char* to,
             unsigned flags = 0);

}  // namespace fleetjit::files

#endif  // FLEETJIT_BASE_FILES_H_
