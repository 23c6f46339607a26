#include "tools/cache_command.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/hmac_sha256.h"
#include "runtime/cache/cache_bundle.h"
#include "runtime/cache/module_cache.h"
#include "runtime/cache/redis_client.h"
#include "runtime/runtime.h"
#include "tools/cli_app.h"

namespace fleetjit {
namespace {

using cli::DumpJson;
using cli::kExitFailure;
using cli::kExitOk;
using cli::kExitUsage;
using Json = nlohmann::ordered_json;

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? absl::StrCat(bytes, " B")
                : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string LocalTime(int64_t unix_seconds) {
  if (unix_seconds == 0) return "-";  // a bundle's entry: never used here
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm;
  char buffer[32];
  if (::localtime_r(&t, &tm) == nullptr ||
      std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
    return "?";
  }
  return buffer;
}

struct Options {
  std::string verb = "stats";
  std::string file;  // export: the bundle to write
  std::string dir;
  std::string bundle;   // ls, verify: a bundle to list instead
  std::string targets;  // export: only these targets
  bool json = false;
};

// The cache configuration the runtime would use: the FLEETJIT_* variables
// read by the runtime's own parser (ApplyEnvironment), then --dir. The
// disk tier is inspected even when FLEETJIT_CACHE=0 turns it off.
absl::StatusOr<CacheConfig> ConfigFor(const Options& o) {
  RuntimeOptions runtime_options;
  absl::Status status = ApplyEnvironment(runtime_options);
  if (!status.ok()) return status;
  CacheConfig config = runtime_options.cache;
  if (!o.dir.empty()) config.dir = o.dir;
  config.disk = true;
  return config;
}

// The remote tier's URL with the password redacted, or "none".
std::string RemoteName(const CacheConfig& config) {
  if (config.remote.url.empty()) return "none";
  absl::StatusOr<RedisUrl> url = ParseRedisUrl(config.remote.url);
  return url.ok() ? url->Redacted() : RedactUrl(config.remote.url);
}

int Stats(const ModuleCache& cache, const CacheConfig& config, bool json,
          std::FILE* out) {
  CacheStats s = cache.stats();
  // The scan counts nothing in a directory the disk tier refuses (a file,
  // another user's folder): ask List, which says why, as ls does. Only
  // then: it reads each entry's header.
  if (s.disk_entries == 0) {
    absl::Status usable = cache.List(/*verify=*/false).status();
    if (!usable.ok()) {
      std::fprintf(stderr, "fleetjit cache: %s\n",
                   std::string(usable.message()).c_str());
      return kExitFailure;
    }
  }
  if (json) {
    const Json j = {{"dir", cache.dir()},
                    {"max_bytes", config.max_bytes},
                    {"disk_entries", s.disk_entries},
                    {"disk_bytes", s.disk_bytes},
                    {"memory_hits", s.memory_hits},
                    {"disk_hits", s.disk_hits},
                    {"misses", s.misses},
                    {"compiles", s.compiles},
                    {"compile_ms_total", s.compile_ms_total},
                    {"evictions", s.evictions},
                    {"rejected_entries", s.rejected_entries},
                    {"remote", RemoteName(config)},
                    {"remote_state", s.remote_state},
                    {"remote_hits", s.remote_hits},
                    {"remote_misses", s.remote_misses},
                    {"remote_errors", s.remote_errors},
                    {"remote_rejected", s.remote_rejected},
                    {"remote_writes", s.remote_writes},
                    {"remote_breaker_opens", s.remote_breaker_opens}};
    std::fprintf(out, "%s\n", DumpJson(j).c_str());
    return kExitOk;
  }
  std::fprintf(out, "directory     %s\n", cache.dir().c_str());
  std::fprintf(out, "entries       %llu\n",
               static_cast<unsigned long long>(s.disk_entries));
  std::fprintf(out, "size          %s (%llu bytes) of a %s cap\n",
               HumanBytes(s.disk_bytes).c_str(),
               static_cast<unsigned long long>(s.disk_bytes),
               HumanBytes(config.max_bytes).c_str());
  std::fprintf(out,
               "this process  %llu memory hits, %llu disk hits, %llu misses, "
               "%llu compiles (a runtime's own counters: fj_cache_stats_get)\n",
               static_cast<unsigned long long>(s.memory_hits),
               static_cast<unsigned long long>(s.disk_hits),
               static_cast<unsigned long long>(s.misses),
               static_cast<unsigned long long>(s.compiles));
  std::fprintf(out, "remote        %s: %s\n", RemoteName(config).c_str(),
               s.remote_state.c_str());
  if (s.remote_state != "off" && s.remote_state.rfind("unavailable", 0) != 0) {
    std::fprintf(out,
                 "              this process: %llu hits, %llu misses, %llu "
                 "errors, %llu rejected, %llu writes, breaker opened %llu "
                 "times\n",
                 static_cast<unsigned long long>(s.remote_hits),
                 static_cast<unsigned long long>(s.remote_misses),
                 static_cast<unsigned long long>(s.remote_errors),
                 static_cast<unsigned long long>(s.remote_rejected),
                 static_cast<unsigned long long>(s.remote_writes),
                 static_cast<unsigned long long>(s.remote_breaker_opens));
  }
  return kExitOk;
}

int ListEntries(const ModuleCache& cache, const std::string& bundle,
                bool verify, bool json, std::FILE* out) {
  // A bundle is listed through the runtime's own checks (its seal under
  // the fleet key, or its owner), every entry read as a hit reads it.
  absl::StatusOr<std::vector<CacheEntryInfo>> list =
      bundle.empty() ? cache.List(verify)
      : cache.bundle() != nullptr
          ? absl::StatusOr<std::vector<CacheEntryInfo>>(cache.bundle()->List())
          : absl::StatusOr<std::vector<CacheEntryInfo>>(cache.bundle_status());
  const std::string where = bundle.empty() ? cache.dir() : bundle;
  if (!list.ok()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 std::string(list.status().message()).c_str());
    return kExitFailure;
  }
  std::vector<CacheEntryInfo>& entries = *list;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.last_used_unix != b.last_used_unix
               ? a.last_used_unix > b.last_used_unix
               : a.path < b.path;
  });
  size_t bad = 0;
  uint64_t bytes = 0;
  for (const CacheEntryInfo& e : entries) {
    bad += !e.problem.empty();
    bytes += e.bytes;
  }
  if (json) {
    Json list = Json::array();
    for (const CacheEntryInfo& e : entries) {
      list.push_back({{"digest", e.digest},
                      {"path", e.path},
                      {"target", e.target},
                      {"copy_impl", e.copy_impl},
                      {"kind", e.kind},
                      {"compiler", e.compiler},
                      {"bytes", e.bytes},
                      {"last_used_unix", e.last_used_unix},
                      {"problem", e.problem}});
    }
    const Json j = {{bundle.empty() ? "dir" : "bundle", where},
                    {"verified", verify},
                    {"entries", std::move(list)},
                    {"bad", bad}};
    std::fprintf(out, "%s\n", DumpJson(j).c_str());
    return verify && bad > 0 ? kExitFailure : kExitOk;
  }
  if (!verify || bad > 0) {
    std::fprintf(out, "%-16s  %-12s %-8s %10s  %-19s  %s\n", "DIGEST", "TARGET",
                 "IMPL", "BYTES", "LAST USED", verify ? "PROBLEM" : "COMPILER");
  }
  for (const CacheEntryInfo& e : entries) {
    if (verify && e.problem.empty()) continue;
    std::string digest = e.digest.empty() ? e.path : e.digest.substr(0, 16);
    std::string detail = !e.problem.empty() ? "BAD: " + e.problem
                         : e.kind == "tune" ? "(tuning result)"
                                            : e.compiler;
    // A precompiled header entry (jit/nvrtc_pch.h) is named in TARGET.
    // So is a tuning result (fj_tune, runtime/tune/tune_record.h).
    const std::string target = e.kind == "pch"    ? e.target + " pch"
                               : e.kind == "tune" ? e.target + " tune"
                                                  : e.target;
    std::fprintf(out, "%-16s  %-12s %-8s %10llu  %-19s  %s\n", digest.c_str(),
                 target.c_str(), e.copy_impl.c_str(),
                 static_cast<unsigned long long>(e.bytes),
                 LocalTime(e.last_used_unix).c_str(), detail.c_str());
  }
  std::fprintf(out, "%zu entries, %s, %zu bad%s, in %s\n", entries.size(),
               HumanBytes(bytes).c_str(), bad,
               verify || !bundle.empty() ? " (fully verified)" : "",
               where.c_str());
  return verify && bad > 0 ? kExitFailure : kExitOk;
}

int Clear(ModuleCache& cache, bool json, std::FILE* out) {
  CacheStats before = cache.stats();
  absl::Status status = cache.Clear();
  if (!status.ok()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 std::string(status.message()).c_str());
    return kExitFailure;
  }
  CacheStats after = cache.stats();
  const uint64_t entries =
      before.disk_entries - std::min(before.disk_entries, after.disk_entries);
  const uint64_t bytes =
      before.disk_bytes - std::min(before.disk_bytes, after.disk_bytes);
  if (json) {
    const Json j = {{"dir", cache.dir()},
                    {"deleted_entries", entries},
                    {"deleted_bytes", bytes}};
    std::fprintf(out, "%s\n", DumpJson(j).c_str());
  } else {
    std::fprintf(out, "deleted %llu entries (%s) from %s\n",
                 static_cast<unsigned long long>(entries),
                 HumanBytes(bytes).c_str(), cache.dir().c_str());
  }
  return kExitOk;
}

// `fleetjit cache export FILE`: the folder's entries (modules and tuning
// results, not precompiled headers: they serve only a compiling host), each
// read and checked as `verify` checks it, into one bundle, signed with the
// fleet key when one is set.
int Export(const ModuleCache& cache, const CacheConfig& config,
           const Options& o, std::FILE* out) {
  absl::StatusOr<std::vector<CacheEntryInfo>> list = cache.List(false);
  if (!list.ok()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 std::string(list.status().message()).c_str());
    return kExitFailure;
  }
  std::string key;
  if (!config.remote.fleet_key.empty()) {
    absl::StatusOr<std::string> parsed = ParseFleetKey(config.remote.fleet_key);
    if (!parsed.ok()) {
      std::fprintf(stderr, "fleetjit cache: FLEETJIT_FLEET_KEY: %s\n",
                   std::string(parsed.status().message()).c_str());
      return kExitUsage;
    }
    key = *std::move(parsed);
  }
  std::vector<std::string> wanted;
  for (absl::string_view t : absl::StrSplit(o.targets, ',', absl::SkipEmpty()))
    wanted.emplace_back(t);
  DiskCache disk(cache.dir(), config.max_bytes, config.log);
  std::vector<std::string> entries;
  std::vector<std::string> targets;
  uint64_t bytes = 0;
  size_t skipped = 0;
  std::sort(list->begin(), list->end(),
            [](const auto& a, const auto& b) { return a.digest < b.digest; });
  for (const CacheEntryInfo& e : *list) {
    if (e.kind == "pch" || e.digest.empty()) continue;
    if (!wanted.empty() &&
        std::find(wanted.begin(), wanted.end(), e.target) == wanted.end()) {
      continue;
    }
    absl::StatusOr<std::string> entry = disk.ReadEntryBytes(e.digest);
    if (!entry.ok()) {
      std::fprintf(stderr, "fleetjit cache: skipping %s: %s\n", e.path.c_str(),
                   std::string(entry.status().message()).c_str());
      ++skipped;
      continue;
    }
    bytes += entry->size();
    entries.push_back(*std::move(entry));
    if (std::find(targets.begin(), targets.end(), e.target) == targets.end()) {
      targets.push_back(e.target);
    }
  }
  std::sort(targets.begin(), targets.end());
  if (entries.empty()) {
    std::fprintf(stderr,
                 "fleetjit cache: nothing to export from %s%s (build into it "
                 "first: fleetjit build --target LIST FILE.cu)\n",
                 cache.dir().c_str(),
                 wanted.empty()
                     ? ""
                     : absl::StrCat(" for --target ", o.targets).c_str());
    return kExitFailure;
  }
  if (absl::Status written = WriteCacheBundle(o.file, entries, key);
      !written.ok()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 std::string(written.message()).c_str());
    return kExitFailure;
  }
  if (o.json) {
    const Json j = {{"bundle", o.file},          {"dir", cache.dir()},
                    {"entries", entries.size()}, {"bytes", bytes},
                    {"targets", targets},        {"signed", !key.empty()},
                    {"skipped", skipped}};
    std::fprintf(out, "%s\n", DumpJson(j).c_str());
  } else {
    std::fprintf(out, "exported %zu entries (%s) for %s from %s to %s, %s\n",
                 entries.size(), HumanBytes(bytes).c_str(),
                 absl::StrJoin(targets, ", ").c_str(), cache.dir().c_str(),
                 o.file.c_str(),
                 key.empty() ? "unsigned (FLEETJIT_FLEET_KEY signs it)"
                             : "signed with the fleet key");
  }
  return skipped == 0 ? kExitOk : kExitFailure;
}

}  // namespace

int RunCacheCommand(const std::vector<std::string>& args, std::FILE* out) {
  std::vector<std::string> words = args;
  if (!words.empty() && words[0] == "cache") words.erase(words.begin());
  Options options;
  CLI::App app(
      "Inspect and manage the module cache's disk directory: --dir, else "
      "the runtime's default (FLEETJIT_CACHE_DIR, XDG_CACHE_HOME/fleetjit, "
      "~/.cache/fleetjit).\n"
      "  stats   entries and bytes on disk, the cap "
      "(FLEETJIT_CACHE_MAX_BYTES)\n"
      "  ls      every entry, with any problem the cheap checks find\n"
      "  verify  ls with full checks; exit 1 if any entry is bad\n"
      "  clear   delete every entry\n"
      "  export FILE  write the entries (modules and tuning results, of "
      "every target or --target's) into one bundle FILE for servers "
      "(FLEETJIT_CACHE_BUNDLE=FILE); signed with FLEETJIT_FLEET_KEY when it "
      "is set",
      "fleetjit cache");
  app.add_option("verb", options.verb,
                 "stats (default), ls, verify, clear or export")
      ->check(CLI::IsMember({"stats", "ls", "verify", "clear", "export"}));
  app.add_option("file", options.file, "export: the bundle to write");
  app.add_flag("--json", options.json, "print one JSON object");
  app.add_option("--dir", options.dir, "the cache directory");
  app.add_option("--target", options.targets,
                 "export: only entries for these targets, e.g. sm_80,sm_90");
  app.add_option("--bundle", options.bundle,
                 "ls, verify: list this bundle's entries instead, checked as "
                 "a runtime checks them");
  if (auto rc = cli::ParseCommandLine(app, words, out)) return *rc;
  if ((options.verb == "export") != !options.file.empty()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 options.verb == "export"
                     ? "export needs the bundle FILE to write"
                     : "only export takes a FILE");
    return kExitUsage;
  }
  if (!options.targets.empty() && options.verb != "export") {
    std::fprintf(stderr, "fleetjit cache: --target is export's option\n");
    return kExitUsage;
  }
  if (!options.bundle.empty() && options.verb != "ls" &&
      options.verb != "verify") {
    std::fprintf(stderr, "fleetjit cache: --bundle is for ls and verify\n");
    return kExitUsage;
  }
  absl::StatusOr<CacheConfig> config = ConfigFor(options);
  if (!config.ok()) {
    std::fprintf(stderr, "fleetjit cache: %s\n",
                 std::string(config.status().message()).c_str());
    return kExitUsage;
  }
  // The bundle the runtime would serve is not what `cache` inspects, but
  // for --bundle.
  config->bundle = options.bundle;
  ModuleCache cache(*config);
  if (cache.dir().empty()) {
    std::fprintf(stderr,
                 "fleetjit cache: no cache directory (set FLEETJIT_CACHE_DIR "
                 "or HOME, or pass --dir)\n");
    return kExitFailure;
  }
  if (options.verb == "stats") return Stats(cache, *config, options.json, out);
  if (options.verb == "ls") {
    return ListEntries(cache, options.bundle, false, options.json, out);
  }
  if (options.verb == "verify") {
    return ListEntries(cache, options.bundle, true, options.json, out);
  }
  if (options.verb == "export") return Export(cache, *config, options, out);
  return Clear(cache, options.json, out);
}

}  // namespace fleetjit
