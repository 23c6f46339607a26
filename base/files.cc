#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleetjit::files {
namespace {

// Constant-initialised: no global constructor, no cost beyond one relaxed
// load per operation while no test installs a hook.
std::atomic<FileFaultHook> fault_hook{nullptr};
std::atomic<void*> fault_user{nullptr};

// The errno a test wants `op` to fail with, or 0.
int InjectedErrno(FileOp op) {
  FileFaultHook hook = fault_hook.load(std::memory_order_acquire);
  return hook == nullptr ? 0
                         : hook(op, fault_user.load(std::memory_order_acquire));
}

}  // namespace

const char* FileOpName(FileOp op) {
  switch (op) {
    case FileOp::kOpen:
      return "open";
    case FileOp::kCreate:
      return "create";
    case FileOp::kMkdir:
      return "mkdir";
    case FileOp::kRead:
      return "read";
    case FileOp::kMap:
      return "map";
    case FileOp::kWrite:
      return "write";
    case FileOp::kFsync:
      return "fsync";
    case FileOp::kClose:
      return "close";
    case FileOp::kRename:
      return "rename";
  }
  return "unknown";
}

void SetFileFaultHookForTesting(FileFaultHook hook, void* user) {
  fault_user.store(user, std::memory_order_release);
  fault_hook.store(hook, std::memory_order_release);
}

int OpenAt(int dir_fd, const char* name, int flags, mode_t mode) {
  if (int err =
          InjectedErrno((flags & O_CREAT) ? FileOp::kCreate : FileOp::kOpen)) {
    errno = err;
    return -1;
  }
  return ::openat(dir_fd, name, flags, mode);
}

int MkdirAt(int dir_fd, const char* name, mode_t mode) {
  if (int err = InjectedErrno(FileOp::kMkdir)) {
    errno = err;
    return -1;
  }
  return ::mkdirat(dir_fd, name, mode);
}

int Fsync(int fd) {
  if (int err = InjectedErrno(FileOp::kFsync)) {
    errno = err;
    return -1;
  }
  return ::fsync(fd);
}

int Close(int fd) {
  if (int err = InjectedErrno(FileOp::kClose)) {
    ::close(fd);  // a close that fails still releases the descriptor
    errno = err;
    return -1;
  }
  return ::close(fd);
}

int RenameAt(int from_dir_fd, const char* from, int to_dir_fd, const char* to,
             unsigned flags) {
  if (int err = InjectedErrno(FileOp::kRename)) {
    errno = err;
    return -1;
  }
  if (flags == 0) return ::renameat(from_dir_fd, from, to_dir_fd, to);
  if (::renameat2(from_dir_fd, from, to_dir_fd, to, flags) == 0) return 0;
  if ((errno != EINVAL && errno != ENOSYS) || flags != RENAME_NOREPLACE) {
    return -1;
  }
  // A file system without RENAME_NOREPLACE: a hard link fails the same way
  // when `to` exists.
  if (::linkat(from_dir_fd, from, to_dir_fd, to, 0) != 0) return -1;
  ::unlinkat(from_dir_fd, from, 0);
  return 0;
}

void Fd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string ErrnoText(int err) {
  char buffer[128];
  // GNU strerror_r returns the message, which may not be in `buffer`.
  return ::strerror_r(err, buffer, sizeof(buffer));
}

std::string OwnershipProblem(const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return absl::StrCat("owned by uid ", st.st_uid, ", not ", ::geteuid());
  }
  const unsigned mode = st.st_mode & 07777;
  if (st.st_mode & S_IWOTH)
    return absl::StrFormat("world-writable (mode %04o)", mode);
  if (st.st_mode & S_IWGRP)
    return absl::StrFormat("group-writable (mode %04o)", mode);
  return "";
}

std::vector<std::string> ListNames(int dir_fd) {
  std::vector<std::string> names;
  int fd = ::dup(dir_fd);
  if (fd < 0) return names;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return names;
  }
  ::rewinddir(dir);
  while (struct dirent* e = ::readdir(dir)) {
    absl::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status MakeDirs(const std::string& path) {
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (MkdirAt(AT_FDCWD, prefix.c_str(), 0700) == 0) {
      ::chmod(prefix.c_str(), 0700);  // exactly 0700, whatever the umask
    } else if (errno != EEXIST) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot create directory ", prefix, ": ", ErrnoText(errno)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFully(int fd, uint64_t size) {
  if (int err = InjectedErrno(FileOp::kRead)) {
    return absl::UnavailableError(
        absl::StrCat("read failed: ", ErrnoText(err)));
  }
  std::string data(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, data.data() + done, size - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(
          absl::StrCat("read failed: ", ErrnoText(errno)));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat("truncated: ended after ", done,
                                              " of ", size, " bytes"));
    }
    done += static_cast<uint64_t>(n);
  }
  return data;
}

namespace {

// Network and user-space file systems, whose files are read, not mapped
// (statfs f_type values from linux/magic.h and the file systems' sources).
bool IsNetworkFileSystem(int fd) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0) return true;  // unknown: the safe choice
  switch (static_cast<uint64_t>(fs.f_type)) {
    case 0x6969:      // NFS
    case 0x0BD00BD0:  // Lustre
    case 0xFF534D42:  // CIFS
    case 0xFE534D42:  // SMB2
    case 0x517B:      // SMB
    case 0x65735546:  // FUSE
    case 0x01021997:  // 9p
    case 0x00C36400:  // Ceph
    case 0x47504653:  // GPFS
    case 0x013111A8:  // IBRIX
    case 0x5346414F:  // AFS
    case 0x6B414653:  // kAFS
      return true;
    default:
      return false;
  }
}

// True when every page of the mapping at `p` is in memory (mincore).
bool AllResident(void* p, uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  if (::mincore(p, size, resident.data()) != 0) return false;
  for (unsigned char r : resident) {
    if ((r & 1) == 0) return false;
  }
  return true;
}

}  // namespace

FileContents::FileContents(FileContents&& other) noexcept
    : mapping_(std::exchange(other.mapping_, nullptr)),
      mapping_size_(other.mapping_size_),
      read_(std::move(other.read_)),
      data_(mapping_ != nullptr ? other.data_ : absl::string_view(read_)) {}

FileContents::~FileContents() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
}

absl::StatusOr<FileContents> FileContents::Load(int fd, uint64_t size) {
  FileContents contents;
  if (size > 0 && !IsNetworkFileSystem(fd) &&
      InjectedErrno(FileOp::kMap) == 0) {
    void* p =
        ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED && !AllResident(p, size)) {
      // MAP_POPULATE does not report errors: a page it could not read
      // (an I/O error) would raise SIGBUS when touched. Read instead, which
      // reports the error.
      ::munmap(p, size);
      p = MAP_FAILED;
    }
    if (p != MAP_FAILED) {
      contents.mapping_ = p;
      contents.mapping_size_ = size;
      contents.data_ = absl::string_view(static_cast<const char*>(p), size);
      return contents;
    }
  }
  absl::StatusOr<std::string> bytes = ReadFully(fd, size);
  if (!bytes.ok()) return bytes.status();
  contents.read_ = std::move(*bytes);
  contents.data_ = contents.read_;
  return contents;
}

namespace {

absl::Status WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(
          absl::StrCat("write failed: ", ErrnoText(errno)));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFully(int fd, absl::string_view data) {
  if (int err = InjectedErrno(FileOp::kWrite)) {
    // As a full disk does: part of the data lands, then the error.
    (void)WriteAll(fd, data.substr(0, data.size() / 2));
    return absl::UnavailableError(
        absl::StrCat("write failed: ", ErrnoText(err)));
  }
  return WriteAll(fd, data);
}

}  // namespace fleetjit::files
