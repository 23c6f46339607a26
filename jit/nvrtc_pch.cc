#include "jit/nvrtc_pch.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "base/sha256.h"
#include "jit/embedded.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::jit {
namespace {

// At most this many PCHs (about 10 MB each) per process.
constexpr size_t kMaxPchs = 8;

// Appended to every PCH build, creating or using alike (NVRTC refuses a PCH
// created with other options: warning 629). The messages NVRTC writes for
// a PCH it creates or uses are how a build learns that a stored PCH was
// taken; Finish removes them, so the log reads as without a PCH. The
// warnings for a PCH NVRTC cannot use (626 invalid, 629 options, 630
// directives, 20282 heap address) are suppressed: the build goes on
// without it and Finish sees that no "using" line came.
const char* const kPchOptions[] = {"--pch-messages=true",
                                   "-diag-suppress=626,629,630,20282"};

constexpr absl::string_view kUsingMessage =
    ": using precompiled header file \"";
constexpr absl::string_view kCreatingMessage =
    ": creating precompiled header file \"";

struct PchEntry {
  // kLoaded: read from the store, not yet taken by NVRTC in this process.
  enum State { kCreating, kLoaded, kReady, kFailed } state = kCreating;
  int fd = -1;  // the unlinked PCH file, kept open for the process's life
};

// Where the PCH heap of one NVRTC library ended up.
struct HeapPlacement {
  bool placed = false;
  size_t size = 0;
  std::string why;  // when not placed
};

class PchRegistry {
 public:
  static PchRegistry& Get() {
    static PchRegistry* registry = new PchRegistry();  // never destroyed
    return *registry;
  }

  // Takes the one-at-a-time slot; false when another PCH build holds it.
  bool TryAcquire() { return !busy_.exchange(true, std::memory_order_acquire); }
  void Release() { busy_.store(false, std::memory_order_release); }

  absl::Mutex mu;
  std::map<std::string, PchEntry> entries ABSL_GUARDED_BY(mu);
  // By library path; written with the slot held, before any PCH exists.
  std::map<std::string, HeapPlacement> heaps ABSL_GUARDED_BY(mu);
  PchStats stats ABSL_GUARDED_BY(mu);

 private:
  std::atomic<bool> busy_{false};
};

// The digest of every embedded header (a PCH holds their parse).
const std::string& EmbeddedHeadersDigest() {
  static const std::string* digest = [] {
    Sha256 h;
    for (size_t i = 0; i < kEmbeddedHeadersCount; ++i) {
      h.Update(kEmbeddedHeaders[i].path.data(),
               kEmbeddedHeaders[i].path.size() + 1);
      h.Update(kEmbeddedHeaders[i].content.data(),
               kEmbeddedHeaders[i].content.size() + 1);
    }
    return new std::string(Sha256::Hex(h.Finish()));
  }();
  return *digest;
}

struct Mapping {
  uintptr_t begin, end;
  bool stack = false;  // the main thread's stack ("[stack]")
};

// The process's mappings below the 47-bit user limit, in address order.
std::vector<Mapping> ReadMappings() {
  std::vector<Mapping> maps;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return maps;
  std::string text;
  char buffer[8192];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> range =
        absl::StrSplit(line.substr(0, line.find(' ')), '-');
    uint64_t b = 0, e = 0;
    if (range.size() != 2 || !absl::SimpleHexAtoi(range[0], &b) ||
        !absl::SimpleHexAtoi(range[1], &e)) {
      continue;
    }
    maps.push_back({static_cast<uintptr_t>(b), static_cast<uintptr_t>(e),
                    absl::EndsWith(line, "[stack]")});
  }
  return maps;
}

constexpr uintptr_t kUserTop = uintptr_t{0x7ffffffff000};

// Puts `api`'s PCH heap at kPchHeapAddress (see the file comment). Called
// with the slot held and before any PCH build of this library, so no PCH
// lives on the heap that SetPCHHeapSize frees.
HeapPlacement PlaceHeap(const NvrtcApi& api) {
  HeapPlacement out;
  if (api.nvrtcGetPCHHeapSize == nullptr ||
      api.nvrtcSetPCHHeapSize == nullptr) {
    out.why = "this NVRTC cannot size its PCH heap";
    return out;
  }
  size_t size = 0;
  if (api.nvrtcGetPCHHeapSize(&size) != NVRTC_SUCCESS || size == 0) {
    out.why = "nvrtcGetPCHHeapSize failed";
    return out;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size = (size + page - 1) / page * page;
  // Frees a heap an earlier user of this library allocated; the next PCH
  // build allocates a new one.
  if (api.nvrtcSetPCHHeapSize(size) != NVRTC_SUCCESS) {
    out.why = "nvrtcSetPCHHeapSize failed";
    return out;
  }
  out.size = size;
  const uintptr_t want = kPchHeapAddress;
  for (const Mapping& m : ReadMappings()) {
    if (m.begin < want + size && m.end > want) {
      out.why = absl::StrCat("0x", absl::Hex(want), " is taken");
      return out;
    }
  }
  // Reserve every free range above the wanted heap, so that the top-down
  // mmap NVRTC makes lands right below them.
  std::vector<Mapping> reserved;
  uintptr_t cursor = want + size;
  struct rlimit limit;
  uintptr_t stack_room = uintptr_t{1} << 30;  // 1 GiB when unlimited
  if (getrlimit(RLIMIT_STACK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    stack_room = static_cast<uintptr_t>(limit.rlim_cur);
  }
  stack_room += uintptr_t{1} << 20;  // the kernel's stack guard gap
  std::vector<Mapping> maps = ReadMappings();
  maps.push_back({kUserTop, kUserTop});
  for (const Mapping& m : maps) {
    if (m.end <= cursor) continue;
    if (m.begin > cursor) {
      uintptr_t end = std::min(m.begin, kUserTop);
      // Below the main stack, what it may grow into stays free: the stack
      // may grow during the probe build, and the kernel's top-down mmap
      // never uses that range anyway (its base lies below it).
      if (m.stack)
        end = std::min(end, m.end > stack_room ? m.end - stack_room : 0);
      if (end <= cursor) {
        cursor = std::max(cursor, m.end);
        continue;
      }
      void* p = mmap(
          reinterpret_cast<void*>(cursor), end - cursor, PROT_NONE,
          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1,
          0);
      if (p == reinterpret_cast<void*>(cursor)) {
        reserved.push_back({cursor, end});
      } else if (p != MAP_FAILED) {
        munmap(p, end - cursor);  // an old kernel took it as a hint
      }
    }
    cursor = std::max(cursor, m.end);
    if (cursor >= kUserTop) break;
  }
  // A trivial PCH build allocates the heap; its own result does not matter
  // (the PCH it names does not exist).
  nvrtcProgram probe = nullptr;
  if (api.nvrtcCreateProgram(&probe, "__device__ int fj_pch_probe;\n",
                             "fj_pch_probe.cu", 0, nullptr,
                             nullptr) == NVRTC_SUCCESS) {
    std::vector<const char*> options(std::begin(kPchOptions),
                                     std::end(kPchOptions));
    options.push_back("--use-pch=/proc/self/fd/-1");
    (void)api.nvrtcCompileProgram(probe, static_cast<int>(options.size()),
                                  options.data());
    api.nvrtcDestroyProgram(&probe);
  }
  for (const Mapping& r : reserved)
    munmap(reinterpret_cast<void*>(r.begin), r.end - r.begin);
  for (const Mapping& m : ReadMappings()) {
    if (m.begin == want && m.end >= want + size) {
      out.placed = true;
      return out;
    }
  }
  out.why = absl::StrCat("NVRTC's PCH heap did not land at 0x", absl::Hex(want),
                         " (", reserved.size(), " ranges reserved)");
  return out;
}

// An anonymous file holding `bytes`, or -1.
int FileWith(absl::string_view bytes) {
  int fd = memfd_create("fleetjit-pch", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

// The whole file at `fd` (from offset 0), or nullopt if over the limit.
std::optional<std::string> ReadAll(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0 ||
      static_cast<uint64_t>(st.st_size) > kMaxPchFileBytes) {
    return std::nullopt;
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = pread(fd, bytes.data() + done, bytes.size() - done,
                      static_cast<off_t>(done));
    if (n <= 0) return std::nullopt;
    done += static_cast<size_t>(n);
  }
  return bytes;
}

// Removes from `log` the line NVRTC wrote with `message` about `path`;
// true if there was one.
bool RemoveMessage(std::string* log, absl::string_view message,
                   absl::string_view path) {
  if (log == nullptr) return false;
  const std::string needle = absl::StrCat(message, path, "\"");
  size_t at = log->find(needle);
  if (at == std::string::npos) return false;
  size_t begin = log->rfind('\n', at);
  begin = begin == std::string::npos ? 0 : begin + 1;
  size_t end = log->find('\n', at);
  end = end == std::string::npos ? log->size() : end + 1;
  log->erase(begin, end - begin);
  return true;
}

class PchBuildImpl : public PchBuild {
 public:
  enum class Mode { kCreate, kUse, kUseStored };

  PchBuildImpl(const NvrtcApi& api, std::string key, std::string file_key,
               Mode mode, std::string path, std::string dir,
               std::vector<std::string> options, PchFileStore* files)
      : api_(api),
        key_(std::move(key)),
        file_key_(std::move(file_key)),
        mode_(mode),
        path_(std::move(path)),
        dir_(std::move(dir)),
        options_(std::move(options)),
        files_(files) {}

  ~PchBuildImpl() override {
    if (!finished_) Finish(nullptr, false, nullptr);
    PchRegistry::Get().Release();
  }

  const std::vector<std::string>& options() const override { return options_; }

  void Finish(nvrtcProgram program, bool compiled, std::string* log) override {
    if (finished_) return;
    finished_ = true;
    if (mode_ == Mode::kCreate) {
      RemoveMessage(log, kCreatingMessage, path_);
      FinishCreate(program, compiled);
      return;
    }
    const bool used = RemoveMessage(log, kUsingMessage, path_);
    if (mode_ != Mode::kUseStored || program == nullptr) return;
    PchRegistry& registry = PchRegistry::Get();
    std::string message;
    {
      absl::MutexLock lock(&registry.mu);
      auto it = registry.entries.find(key_);
      if (it == registry.entries.end()) return;
      if (used) {
        it->second.state = PchEntry::kReady;
        ++registry.stats.file_used;
      } else if (compiled) {
        // NVRTC compiled without it: corrupt, or from another heap or
        // compiler. The next build of the key creates a new one.
        close(it->second.fd);
        registry.entries.erase(it);
        ++registry.stats.file_rejected;
        message =
            "NVRTC did not take the stored precompiled header; "
            "compiled without it, the next build replaces it";
      }
    }
    if (!message.empty() && files_ != nullptr) {
      files_->Drop(file_key_);
      files_->Log(message);
    }
  }

 private:
  void FinishCreate(nvrtcProgram program, bool compiled) {
    // Whether NVRTC wrote the PCH: SUCCESS, or NO_PCH_CREATE_ATTEMPTED,
    // PCH_CREATE or PCH_CREATE_HEAP_EXHAUSTED (the heap is not resized:
    // that would invalidate the PCHs already made, under running builds).
    const nvrtcResult created = program != nullptr && compiled
                                    ? api_.nvrtcGetPCHCreateStatus(program)
                                    : NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
    int fd = -1;
    if (created == NVRTC_SUCCESS)
      fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
    std::optional<std::string> bytes;
    if (fd >= 0 && files_ != nullptr && !file_key_.empty()) bytes = ReadAll(fd);
    if (bytes.has_value()) files_->Store(file_key_, *bytes);
    PchRegistry& registry = PchRegistry::Get();
    absl::MutexLock lock(&registry.mu);
    PchEntry& entry = registry.entries[key_];
    entry.fd = fd;
    entry.state = fd >= 0 ? PchEntry::kReady : PchEntry::kFailed;
    if (fd >= 0) {
      ++registry.stats.created;
    } else {
      ++registry.stats.create_failed;
    }
    if (bytes.has_value()) ++registry.stats.file_stored;
  }

  const NvrtcApi& api_;
  std::string key_;
  std::string file_key_;  // "" when PCHs stay in this process
  Mode mode_;
  std::string path_;  // the --create-pch / --use-pch file
  std::string dir_;   // kCreate: the mkdtemp directory of `path_`
  std::vector<std::string> options_;
  PchFileStore* files_;
  bool finished_ = false;
};

bool IsBlankOrLineComment(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  return line.empty() || absl::StartsWith(line, "//");
}

}  // namespace

std::string PchIncludePrefix(absl::string_view source) {
  std::vector<std::string> directives;
  bool has_include = false;
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    if (absl::StrContains(line, "/*") || absl::EndsWith(line, "\\")) return "";
    if (IsBlankOrLineComment(line)) continue;
    absl::string_view directive = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(directive, "#")) break;  // the first line of code
    absl::string_view rest =
        absl::StripLeadingAsciiWhitespace(directive.substr(1));
    // A one-line #define or #undef is part of the preprocessor state the
    // PCH records (NVRTC checks it too: warning 630), so it joins the key
    // as written (examples/pipelined_tiles.cu has one after its include).
    if (absl::StartsWith(rest, "define") || absl::StartsWith(rest, "undef")) {
      directives.emplace_back(directive);
      continue;
    }
    if (!absl::StartsWith(rest, "include")) return "";
    // Only the embedded headers (<fleetjit/...>, fixed for the process) go
    // into a PCH: its key names the include lines, not the headers' bytes,
    // so a file on disk edited between builds would be served stale (seen
    // on the H200: CudaHeadersBuildTest.AnEditedUserHeaderRebuilds...).
    absl::string_view name = absl::StripLeadingAsciiWhitespace(rest.substr(7));
    if (!absl::StartsWith(name, "<fleetjit/") &&
        !absl::StartsWith(name, "\"fleetjit/")) {
      return "";  // NVRTC would put this header in the PCH too
    }
    directives.emplace_back(directive);
    has_include = true;
  }
  return has_include ? absl::StrJoin(directives, "\n") : "";
}

bool NvrtcHasPch(const NvrtcApi& api) {
  return (api.major > 12 || (api.major == 12 && api.minor >= 8)) &&
         api.nvrtcGetPCHCreateStatus != nullptr;
}

std::unique_ptr<PchBuild> StartPchBuild(const NvrtcApi& api,
                                        const std::vector<std::string>& options,
                                        absl::string_view source,
                                        PchFileStore* files) {
  if (!NvrtcHasPch(api)) return nullptr;
  const std::string prefix = PchIncludePrefix(source);
  if (prefix.empty()) return nullptr;
  PchRegistry& registry = PchRegistry::Get();
  if (!registry.TryAcquire()) {
    absl::MutexLock lock(&registry.mu);
    ++registry.stats.busy;
    return nullptr;
  }
  // From here the slot is ours: the PchBuild releases it, or we do.
  const std::string key =
      absl::StrCat(api.library_path, "\n", api.major, ".", api.minor, "\n",
                   absl::StrJoin(options, "\n"), "\n--\n", prefix);
  std::vector<std::string> pch_options(std::begin(kPchOptions),
                                       std::end(kPchOptions));
  std::string file_key;
  std::string unplaced;  // why PCHs stay in this process, logged once
  {
    absl::MutexLock lock(&registry.mu);
    if (files != nullptr) {
      auto heap = registry.heaps.find(api.library_path);
      if (heap == registry.heaps.end()) {
        // Only before this library's first PCH: placing frees the heap.
        bool fresh = true;
        for (const auto& [k, e] : registry.entries) {
          fresh = fresh && !absl::StartsWith(k, api.library_path + "\n");
        }
        HeapPlacement placement;
        if (fresh) {
          placement = PlaceHeap(api);
        } else {
          placement.why = "this process made PCHs before";
        }
        heap = registry.heaps.emplace(api.library_path, placement).first;
        if (placement.placed) {
          registry.stats.heap_placed = 1;
        } else {
          registry.stats.heap_unplaced = 1;
          unplaced = placement.why;
        }
      }
      if (heap->second.placed) {
        file_key = absl::StrCat(
            "fleetjit nvrtc pch 1\nheap=0x", absl::Hex(kPchHeapAddress), "+",
            heap->second.size, "\nembedded_headers=", EmbeddedHeadersDigest(),
            "\n", absl::StrJoin(pch_options, "\n"), "\n--\n",
            absl::StrJoin(options, "\n"), "\n--\n", prefix);
      }
    }
  }
  if (!unplaced.empty()) {
    files->Log(
        absl::StrCat("precompiled headers stay in this process: ", unplaced));
  }
  std::optional<std::string> stored;
  for (int pass = 0; pass < 2; ++pass) {
    absl::MutexLock lock(&registry.mu);
    auto it = registry.entries.find(key);
    if (it != registry.entries.end()) {
      if (it->second.state != PchEntry::kReady &&
          it->second.state != PchEntry::kLoaded) {
        ++registry.stats.skipped;
        registry.Release();
        return nullptr;
      }
      ++registry.stats.used;
      const bool verify = it->second.state == PchEntry::kLoaded;
      std::string path = absl::StrCat("/proc/self/fd/", it->second.fd);
      pch_options.push_back(absl::StrCat("--use-pch=", path));
      return std::make_unique<PchBuildImpl>(
          api, key, file_key,
          verify ? PchBuildImpl::Mode::kUseStored : PchBuildImpl::Mode::kUse,
          std::move(path), "", std::move(pch_options), files);
    }
    if (registry.entries.size() >= kMaxPchs) {
      ++registry.stats.skipped;
      registry.Release();
      return nullptr;
    }
    if (pass == 1 || file_key.empty()) {
      registry.entries[key].state = PchEntry::kCreating;
      break;
    }
    // Not in this process: the store may have it (read without the lock;
    // the slot keeps other PCH builds out meanwhile).
    registry.mu.Unlock();
    stored = files->Load(file_key);
    int fd = -1;
    if (stored.has_value() && stored->size() <= kMaxPchFileBytes)
      fd = FileWith(*stored);
    registry.mu.Lock();
    if (fd >= 0) {
      PchEntry& entry = registry.entries[key];
      entry.state = PchEntry::kLoaded;
      entry.fd = fd;
      ++registry.stats.file_loaded;
    }
  }
  const char* tmp = getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                 "/fleetjit-pch-XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    absl::MutexLock lock(&registry.mu);
    registry.entries[key].state = PchEntry::kFailed;
    ++registry.stats.create_failed;
    registry.Release();
    return nullptr;
  }
  std::string path = absl::StrCat(dir, "/h.pch");
  pch_options.push_back(absl::StrCat("--create-pch=", path));
  return std::make_unique<PchBuildImpl>(
      api, key, std::move(file_key), PchBuildImpl::Mode::kCreate,
      std::move(path), std::move(dir), std::move(pch_options), files);
}

PchStats GetPchStats() {
  PchRegistry& registry = PchRegistry::Get();
  absl::MutexLock lock(&registry.mu);
  return registry.stats;
}

}  // namespace fleetjit::jit
