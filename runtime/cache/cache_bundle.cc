#include "runtime/cache/cache_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/hmac_sha256.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "runtime/cache/cache_entry.h"

namespace fleetjit {
namespace {

using files::ErrnoText;
using files::Fd;

constexpr absl::string_view kMagic{"FJBUNDL\0", 8};
constexpr absl::string_view kSealContext = "fleetjit bundle\n";
constexpr uint32_t kFlagKeyed = 1;
constexpr uint64_t kMaxEntries = uint64_t{1} << 24;
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 32;  // as the disk tier

void PutLe(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetLe(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  }
  return v;
}

// 64 lowercase hex digits (IsCacheDigest) into 32 bytes.
void HexToRaw(absl::string_view hex, uint8_t out[32]) {
  auto v = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (int i = 0; i < 32; ++i) {
    out[i] = static_cast<uint8_t>(v(hex[2 * i]) * 16 + v(hex[2 * i + 1]));
  }
}

std::string RawToHex(const uint8_t raw[32]) {
  Sha256::Digest d;
  std::memcpy(d.data(), raw, 32);
  return Sha256::Hex(d);
}

// The seal of a bundle's header (its first 32 bytes) and index.
std::string Seal(absl::string_view key, absl::string_view header32,
                 absl::string_view index) {
  Sha256::Digest d;
  if (key.empty()) {
    Sha256 h;
    h.Update(kSealContext);
    h.Update(header32);
    h.Update(index);
    d = h.Finish();
  } else {
    HmacSha256 mac(key);
    mac.Update(kSealContext);
    mac.Update(header32);
    mac.Update(index);
    d = mac.Finish();
  }
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

// Reads exactly `size` bytes at `offset`; DATA_LOSS when the file is
// shorter, UNAVAILABLE on an error.
absl::StatusOr<std::string> PreadFully(int fd, uint64_t offset, uint64_t size) {
  std::string out(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out.data() + done, size - done,
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::UnavailableError(absl::StrCat("read: ", ErrnoText(errno)));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat("truncated: ", offset + done,
                                              " bytes where ", offset + size,
                                              " were expected"));
    }
    done += static_cast<uint64_t>(n);
  }
  return out;
}

// Whether the file open at `fd` is a bundle (for replacing it).
bool IsBundle(int fd) {
  char magic[8];
  return ::pread(fd, magic, sizeof(magic), 0) ==
             static_cast<ssize_t>(sizeof(magic)) &&
         absl::string_view(magic, sizeof(magic)) == kMagic;
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status WriteCacheBundle(const std::string& path,
                              const std::vector<std::string>& entries,
                              absl::string_view fleet_key) {
  struct Item {
    std::string digest;  // raw
    std::string agnostic;
    std::string payload_sha;
    const std::string* bytes;
  };
  std::vector<Item> items;
  items.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    absl::StatusOr<CacheEntryView> view = DecodeCacheEntry(entries[i]);
    if (!view.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", i, ": ", view.status().message()));
    }
    absl::StatusOr<CacheKey> agnostic = CompilerAgnosticKeyOf(view->key);
    if (!agnostic.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", i, ": ", agnostic.status().message()));
    }
    if (absl::Status parsed = jit::DeserializeArtifact(view->payload).status();
        !parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("entry ", i, ": ", parsed.message()));
    }
    Item item;
    Sha256::Digest d = Sha256::Hash(view->key);
    item.digest.assign(reinterpret_cast<const char*>(d.data()), d.size());
    uint8_t raw[32];
    HexToRaw(agnostic->digest, raw);
    item.agnostic.assign(reinterpret_cast<const char*>(raw), 32);
    item.payload_sha = entries[i].substr(32, 32);
    item.bytes = &entries[i];
    items.push_back(std::move(item));
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.digest < b.digest; });
  items.erase(std::unique(items.begin(), items.end(),
                          [](const Item& a, const Item& b) {
                            return a.digest == b.digest;
                          }),
              items.end());

  std::string index;
  index.reserve(items.size() * kBundleIndexRecordBytes);
  uint64_t offset = kBundleHeaderBytes;
  for (const Item& item : items) {
    char record[kBundleIndexRecordBytes];
    std::memcpy(record, item.digest.data(), 32);
    std::memcpy(record + 32, item.agnostic.data(), 32);
    std::memcpy(record + 64, item.payload_sha.data(), 32);
    PutLe(record + 96, offset, 8);
    PutLe(record + 104, item.bytes->size(), 8);
    index.append(record, sizeof(record));
    offset += item.bytes->size();
  }
  std::string header(kBundleHeaderBytes, '\0');
  std::memcpy(header.data(), kMagic.data(), kMagic.size());
  PutLe(header.data() + 8, kBundleFormatVersion, 4);
  PutLe(header.data() + 12, fleet_key.empty() ? 0 : kFlagKeyed, 4);
  PutLe(header.data() + 16, items.size(), 8);
  PutLe(header.data() + 24, offset, 8);
  const std::string seal =
      Seal(fleet_key, absl::string_view(header).substr(0, 32), index);
  std::memcpy(header.data() + 32, seal.data(), seal.size());

  // Written beside `path`, then renamed into place.
  const std::string dir = Dirname(path);
  const std::string base = path.substr(path.rfind('/') + 1);
  if (base.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' names a folder, not a file"));
  }
  Fd dir_fd(
      files::OpenAt(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot open folder ", dir, ": ", ErrnoText(errno)));
  }
  static std::atomic<uint32_t> counter{0};
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::string temp =
      absl::StrFormat(".%s.tmp-%d-%x-%x", base, ::getpid(),
                      counter.fetch_add(1), static_cast<uint32_t>(ts.tv_nsec));
  Fd file(files::OpenAt(dir_fd.get(), temp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0644));
  if (!file.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", dir, "/", temp, ": ", ErrnoText(errno)));
  }
  absl::Status status = files::WriteFully(file.get(), header);
  for (size_t i = 0; status.ok() && i < items.size(); ++i) {
    status = files::WriteFully(file.get(), *items[i].bytes);
  }
  if (status.ok()) status = files::WriteFully(file.get(), index);
  // The mode asked for, whatever the umask: a bundle is read by services.
  if (status.ok() && ::fchmod(file.get(), 0644) != 0) {
    status = absl::UnavailableError(absl::StrCat("chmod: ", ErrnoText(errno)));
  }
  if (status.ok() && files::Fsync(file.get()) != 0) {
    status = absl::UnavailableError(absl::StrCat("fsync: ", ErrnoText(errno)));
  }
  if (status.ok() && files::Close(file.Release()) != 0) {
    status = absl::UnavailableError(absl::StrCat("close: ", ErrnoText(errno)));
  }
  if (status.ok() && files::RenameAt(dir_fd.get(), temp.c_str(), dir_fd.get(),
                                     base.c_str(), RENAME_NOREPLACE) != 0) {
    if (errno != EEXIST) {
      status = absl::UnavailableError(
          absl::StrCat("rename to ", path, ": ", ErrnoText(errno)));
    } else {
      // Replace a bundle (an earlier export), never another file.
      Fd old(files::OpenAt(dir_fd.get(), base.c_str(),
                           O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
      struct stat st;
      if (!old.ok() || ::fstat(old.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
          !IsBundle(old.get())) {
        status = absl::FailedPreconditionError(
            absl::StrCat("not replacing ", path,
                         ": it is not a fleetjit bundle (remove it, or "
                         "export to another name)"));
      } else if (files::RenameAt(dir_fd.get(), temp.c_str(), dir_fd.get(),
                                 base.c_str()) != 0) {
        status = absl::UnavailableError(
            absl::StrCat("rename to ", path, ": ", ErrnoText(errno)));
      }
    }
  }
  if (!status.ok()) {
    file.Reset();
    ::unlinkat(dir_fd.get(), temp.c_str(), 0);  // ours: made above
    return status;
  }
  ::fsync(dir_fd.get());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CacheBundle>> CacheBundle::Open(
    const std::string& path, absl::string_view fleet_key, CacheLogger log) {
  std::string key;
  if (!fleet_key.empty()) {
    absl::StatusOr<std::string> parsed = ParseFleetKey(fleet_key);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot check bundle ", path, ": ", parsed.status().message()));
    }
    key = *std::move(parsed);
  }
  auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing bundle ", path, ": ", why));
  };
  // The path is configuration (trusted: docs/security.md), so a link is
  // followed (a deployment may link the current bundle); the file itself
  // is judged below. O_NONBLOCK: a FIFO does not hang the runtime.
  Fd fd(
      files::OpenAt(AT_FDCWD, path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot open bundle ", path, ": ", ErrnoText(errno)));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot stat bundle ", path, ": ", ErrnoText(errno)));
  }
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  if (key.empty()) {
    // Nothing but the file's owner vouches for it.
    if (st.st_uid != ::geteuid() && st.st_uid != 0) {
      return refuse(absl::StrCat(
          "owned by uid ", st.st_uid, ", neither this user (", ::geteuid(),
          ") nor root; set the fleet key (FLEETJIT_FLEET_KEY) to serve a "
          "bundle sealed with it whoever owns the file"));
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return refuse(absl::StrFormat(
          "writable by %s (mode %04o): chmod go-w it, or set the fleet key",
          (st.st_mode & S_IWOTH) != 0 ? "others" : "its group",
          st.st_mode & 07777));
    }
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  absl::StatusOr<std::string> header =
      PreadFully(fd.get(), 0, std::min<uint64_t>(size, kBundleHeaderBytes));
  if (!header.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot read bundle ", path, ": ", header.status().message()));
  }
  if (header->size() < kBundleHeaderBytes ||
      absl::string_view(*header).substr(0, 8) != kMagic) {
    return refuse("not a fleetjit bundle (bad magic)");
  }
  const uint64_t version = GetLe(header->data() + 8, 4);
  if (version != kBundleFormatVersion) {
    return refuse(absl::StrCat("format version ", version,
                               ", this build reads ", kBundleFormatVersion,
                               " (export it again with this fleetjit)"));
  }
  const uint64_t flags = GetLe(header->data() + 12, 4);
  if ((flags & ~uint64_t{kFlagKeyed}) != 0) {
    return refuse(absl::StrCat("unknown flags ", flags));
  }
  const bool keyed = (flags & kFlagKeyed) != 0;
  if (!key.empty() && !keyed) {
    return refuse(
        "it is not signed, and a fleet key is set (export it with "
        "FLEETJIT_FLEET_KEY set)");
  }
  const uint64_t count = GetLe(header->data() + 16, 8);
  const uint64_t index_offset = GetLe(header->data() + 24, 8);
  if (count > kMaxEntries || index_offset < kBundleHeaderBytes ||
      index_offset > size ||
      size - index_offset != count * kBundleIndexRecordBytes) {
    return refuse(absl::StrCat("damaged: the header's layout (", count,
                               " entries, index at ", index_offset,
                               ") does not fit its ", size, " bytes"));
  }
  absl::StatusOr<std::string> index =
      PreadFully(fd.get(), index_offset, count * kBundleIndexRecordBytes);
  if (!index.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot read bundle ", path,
                                               ": ", index.status().message()));
  }
  if (keyed && key.empty()) {
    // Sealed with a key this host does not have: trusted by its owner
    // alone (checked above), as an unsealed one is.
    CacheLog(log, LogLevel::kInfo,
             absl::StrCat("bundle ", path,
                          " is signed, and no fleet key is set here: its "
                          "signature is not checked"));
  } else {
    const std::string seal =
        Seal(key, absl::string_view(*header).substr(0, 32), *index);
    if (!ConstantTimeEquals(seal, absl::string_view(*header).substr(32, 32))) {
      return refuse(keyed ? "its signature does not match the fleet key "
                            "(another fleet's key, or damaged)"
                          : "damaged (its checksum does not match)");
    }
  }
  std::vector<Record> records(count);
  for (uint64_t i = 0; i < count; ++i) {
    const char* r = index->data() + i * kBundleIndexRecordBytes;
    Record& rec = records[i];
    std::memcpy(rec.digest, r, 32);
    std::memcpy(rec.agnostic, r + 32, 32);
    std::memcpy(rec.payload_sha, r + 64, 32);
    rec.offset = GetLe(r + 96, 8);
    rec.length = GetLe(r + 104, 8);
    if (rec.offset < kBundleHeaderBytes ||
        rec.length < kCacheEntryHeaderBytes || rec.length > kMaxEntryBytes ||
        rec.offset > index_offset || rec.length > index_offset - rec.offset ||
        (i > 0 && std::memcmp(records[i - 1].digest, rec.digest, 32) >= 0)) {
      return refuse(absl::StrCat("damaged: index record ", i, " is malformed"));
    }
  }
  return std::unique_ptr<CacheBundle>(new CacheBundle(
      path, std::move(fd), size, keyed, std::move(records), std::move(log)));
}

CacheBundle::CacheBundle(std::string path, Fd fd, uint64_t file_bytes,
                         bool keyed, std::vector<Record> records,
                         CacheLogger log)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      file_bytes_(file_bytes),
      keyed_(keyed),
      records_(std::move(records)),
      log_(std::move(log)) {
  by_agnostic_.resize(records_.size());
  for (uint32_t i = 0; i < by_agnostic_.size(); ++i) by_agnostic_[i] = i;
  std::stable_sort(
      by_agnostic_.begin(), by_agnostic_.end(), [this](uint32_t a, uint32_t b) {
        return std::memcmp(records_[a].agnostic, records_[b].agnostic, 32) < 0;
      });
}

absl::StatusOr<CacheBundle::Entry> CacheBundle::ReadEntry(
    const Record& record) const {
  Entry entry;
  FJ_ASSIGN_OR_RETURN(entry.bytes,
                      PreadFully(fd_.get(), record.offset, record.length));
  absl::StatusOr<CacheEntryView> view = DecodeCacheEntry(entry.bytes);
  if (!view.ok()) return view.status();
  // The entry's own checksum matched its payload; the index's digests bind
  // the payload and the key to the seal.
  if (std::memcmp(entry.bytes.data() + 32, record.payload_sha, 32) != 0) {
    return absl::DataLossError("its payload is not the one the index seals");
  }
  Sha256::Digest key_digest = Sha256::Hash(view->key);
  if (std::memcmp(key_digest.data(), record.digest, 32) != 0) {
    return absl::DataLossError("its key does not hash to the index's digest");
  }
  entry.key_bytes = view->key.size();
  return entry;
}

std::nullopt_t CacheBundle::Reject(const Record& record,
                                   absl::string_view why) {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  CacheLog(
      log_, LogLevel::kWarn,
      absl::StrCat("rejected entry ", RawToHex(record.digest).substr(0, 16),
                   "... of bundle ", path_, ": ", why,
                   "; not served (the bundle is read-only: export it "
                   "again)"));
  return std::nullopt;
}

std::optional<jit::Artifact> CacheBundle::Load(const CacheKey& key) {
  if (!IsCacheDigest(key.digest)) return std::nullopt;
  uint8_t digest[32];
  HexToRaw(key.digest, digest);
  auto it = std::lower_bound(records_.begin(), records_.end(), digest,
                             [](const Record& r, const uint8_t* d) {
                               return std::memcmp(r.digest, d, 32) < 0;
                             });
  if (it == records_.end() || std::memcmp(it->digest, digest, 32) != 0) {
    return std::nullopt;
  }
  absl::StatusOr<Entry> entry = ReadEntry(*it);
  if (!entry.ok()) return Reject(*it, entry.status().message());
  if (entry->key() != key.canonical) {
    return Reject(*it, "holds a different key (damaged or colliding)");
  }
  absl::StatusOr<jit::Artifact> artifact =
      jit::DeserializeArtifact(entry->payload());
  if (!artifact.ok()) return Reject(*it, artifact.status().message());
  return std::move(*artifact);
}

std::optional<CacheBundle::Published> CacheBundle::LoadPublished(
    const CacheKey& agnostic,
    absl::FunctionRef<absl::Status(absl::string_view compiler)> accept) {
  if (!IsCacheDigest(agnostic.digest)) return std::nullopt;
  uint8_t digest[32];
  HexToRaw(agnostic.digest, digest);
  auto less = [this](uint32_t i, const uint8_t* d) {
    return std::memcmp(records_[i].agnostic, d, 32) < 0;
  };
  for (auto it = std::lower_bound(by_agnostic_.begin(), by_agnostic_.end(),
                                  digest, less);
       it != by_agnostic_.end() &&
       std::memcmp(records_[*it].agnostic, digest, 32) == 0;
       ++it) {
    const Record& record = records_[*it];
    absl::StatusOr<Entry> entry = ReadEntry(record);
    if (!entry.ok()) {
      Reject(record, entry.status().message());
      continue;
    }
    absl::StatusOr<CacheKey> emptied = CompilerAgnosticKeyOf(entry->key());
    if (!emptied.ok() || emptied->canonical != agnostic.canonical) {
      // Not a collision of SHA-256 but a damaged or forged index: refused.
      Reject(record, "its key is not the one its agnostic digest names");
      continue;
    }
    const std::string compiler = CanonicalKeyField(entry->key(), "compiler");
    if (absl::Status ok = accept(compiler); !ok.ok()) {
      CacheLog(log_, LogLevel::kInfo,
               absl::StrCat("bundle ", path_, ": not using entry ",
                            RawToHex(record.digest).substr(0, 16),
                            "...: ", ok.message()));
      continue;
    }
    absl::StatusOr<jit::Artifact> artifact =
        jit::DeserializeArtifact(entry->payload());
    if (!artifact.ok()) {
      Reject(record, artifact.status().message());
      continue;
    }
    Published out;
    out.key.digest = RawToHex(record.digest);
    out.key.canonical = std::string(entry->key());
    out.artifact = *std::move(artifact);
    return out;
  }
  return std::nullopt;
}

std::vector<CacheEntryInfo> CacheBundle::List() const {
  std::vector<CacheEntryInfo> infos;
  infos.reserve(records_.size());
  for (const Record& record : records_) {
    CacheEntryInfo info;
    info.digest = RawToHex(record.digest);
    info.path = absl::StrCat(path_, "#", info.digest.substr(0, 16));
    info.bytes = record.length;
    info.kind = "module";
    absl::StatusOr<Entry> entry = ReadEntry(record);
    if (!entry.ok()) {
      info.problem = std::string(entry.status().message());
      infos.push_back(std::move(info));
      continue;
    }
    info.target = CanonicalKeyField(entry->key(), "target");
    info.copy_impl = CanonicalKeyField(entry->key(), "copy_impl");
    info.compiler = CanonicalKeyField(entry->key(), "compiler");
    const std::string marker =
        CanonicalKeyField(entry->key(), "name_expression");
    info.kind = marker == kPchNameExpression    ? "pch"
                : marker == kTuneNameExpression ? "tune"
                                                : "module";
    if (absl::Status parsed =
            jit::DeserializeArtifact(entry->payload()).status();
        !parsed.ok()) {
      info.problem = std::string(parsed.message());
    }
    infos.push_back(std::move(info));
  }
  return infos;
}

}  // namespace fleetjit
