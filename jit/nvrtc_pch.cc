#include "jit/nvrtc_pch.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::jit {
namespace {

// At most this many PCHs (about 10 MB each) per process.
constexpr size_t kMaxPchs = 8;

// Keep the log identical to a build without a PCH: no "creating/using
// precompiled header" lines, and none of the warnings NVRTC gives for a PCH
// it cannot use (629 options, 630 directives, 20282 heap address), which
// the key is meant to rule out anyway.
const char* const kQuietOptions[] = {"--pch-messages=false",
                                     "-diag-suppress=629,630,20282"};

struct PchEntry {
  enum State { kCreating, kReady, kFailed } state = kCreating;
  int fd = -1;  // the unlinked PCH file, kept open for the process's life
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
  PchStats stats ABSL_GUARDED_BY(mu);

 private:
  std::atomic<bool> busy_{false};
};

class PchBuildImpl : public PchBuild {
 public:
  PchBuildImpl(const NvrtcApi& api, std::string key, bool creating,
               std::string dir, std::vector<std::string> options)
      : api_(api),
        key_(std::move(key)),
        creating_(creating),
        dir_(std::move(dir)),
        options_(std::move(options)) {}

  ~PchBuildImpl() override {
    if (creating_ && !finished_) Finish(nullptr, false);
    PchRegistry::Get().Release();
  }

  const std::vector<std::string>& options() const override { return options_; }

  void Finish(nvrtcProgram program, bool compiled) override {
    if (finished_) return;
    finished_ = true;
    if (!creating_) return;
    // Whether NVRTC wrote the PCH: SUCCESS, or NO_PCH_CREATE_ATTEMPTED,
    // PCH_CREATE or PCH_CREATE_HEAP_EXHAUSTED (the heap is not resized:
    // that would invalidate the PCHs already made, under running builds).
    const nvrtcResult created = program != nullptr && compiled
                                    ? api_.nvrtcGetPCHCreateStatus(program)
                                    : NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED;
    const std::string path = absl::StrCat(dir_, "/h.pch");
    int fd = -1;
    if (created == NVRTC_SUCCESS) fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    unlink(path.c_str());
    rmdir(dir_.c_str());
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
  }

 private:
  const NvrtcApi& api_;
  std::string key_;
  bool creating_;
  std::string dir_;
  std::vector<std::string> options_;
  bool finished_ = false;
};

bool IsBlankOrLineComment(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  return line.empty() || absl::StartsWith(line, "//");
}

}  // namespace

std::string PchIncludePrefix(absl::string_view source) {
  std::vector<std::string> includes;
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    if (absl::StrContains(line, "/*") || absl::EndsWith(line, "\\")) return "";
    if (IsBlankOrLineComment(line)) continue;
    absl::string_view directive = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(directive, "#")) break;  // the first line of code
    absl::string_view rest =
        absl::StripLeadingAsciiWhitespace(directive.substr(1));
    if (!absl::StartsWith(rest, "include")) return "";
    // Only the embedded headers (<fleetjit/...>, fixed for the process) go
    // into a PCH: its key names the include lines, not the headers' bytes,
    // so a file on disk edited between builds would be served stale (seen
    // on the H200: CudaHeadersBuildTest.AnEditedUserHeaderRebuilds...).
    absl::string_view name = absl::StripLeadingAsciiWhitespace(rest.substr(7));
    if (!absl::StartsWith(name, "<fleetjit/") && !absl::StartsWith(name, "\"fleetjit/")) {
      return "";  // NVRTC would put this header in the PCH too
    }
    includes.emplace_back(directive);
  }
  return absl::StrJoin(includes, "\n");
}

bool NvrtcHasPch(const NvrtcApi& api) {
  return (api.major > 12 || (api.major == 12 && api.minor >= 8)) &&
         api.nvrtcGetPCHCreateStatus != nullptr;
}

std::unique_ptr<PchBuild> StartPchBuild(const NvrtcApi& api,
                                        const std::vector<std::string>& options,
                                        absl::string_view source) {
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
  std::vector<std::string> pch_options(std::begin(kQuietOptions),
                                       std::end(kQuietOptions));
  {
    absl::MutexLock lock(&registry.mu);
    auto it = registry.entries.find(key);
    if (it != registry.entries.end()) {
      if (it->second.state != PchEntry::kReady) {
        ++registry.stats.skipped;
        registry.Release();
        return nullptr;
      }
      ++registry.stats.used;
      pch_options.push_back(
          absl::StrCat("--use-pch=/proc/self/fd/", it->second.fd));
      return std::make_unique<PchBuildImpl>(api, key, /*creating=*/false, "",
                                            std::move(pch_options));
    }
    if (registry.entries.size() >= kMaxPchs) {
      ++registry.stats.skipped;
      registry.Release();
      return nullptr;
    }
    registry.entries[key].state = PchEntry::kCreating;
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
  pch_options.push_back(absl::StrCat("--create-pch=", dir, "/h.pch"));
  return std::make_unique<PchBuildImpl>(api, key, /*creating=*/true,
                                        std::move(dir), std::move(pch_options));
}

PchStats GetPchStats() {
  PchRegistry& registry = PchRegistry::Get();
  absl::MutexLock lock(&registry.mu);
  return registry.stats;
}

}  // namespace fleetjit::jit
