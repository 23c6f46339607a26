#include "tools/cache_command.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/cache/module_cache.h"

namespace fleetjit {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr char kUsage[] =
    "usage: fleetjit cache stats|ls|clear|verify [--json] [--dir DIR]\n";

std::string Json(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? absl::StrCat(bytes, " B")
                : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string LocalTime(int64_t unix_seconds) {
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
  std::string verb;
  std::string dir;
  bool json = false;
};

// Parses [verb] [--json] [--dir DIR | --dir=DIR] in any order.
bool ParseArgs(std::vector<std::string> args, Options& o) {
  if (!args.empty() && args[0] == "cache") args.erase(args.begin());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      o.json = true;
    } else if (a == "--dir" && i + 1 < args.size()) {
      o.dir = args[++i];
    } else if (a.rfind("--dir=", 0) == 0) {
      o.dir = a.substr(6);
    } else if (o.verb.empty() && !a.empty() && a[0] != '-') {
      o.verb = a;
    } else {
      std::fprintf(stderr, "fleetjit cache: unexpected argument '%s'\n",
                   a.c_str());
      return false;
    }
  }
  if (o.verb.empty()) o.verb = "stats";
  return o.verb == "stats" || o.verb == "ls" || o.verb == "clear" ||
         o.verb == "verify";
}

CacheConfig ConfigFor(const Options& o) {
  CacheConfig config;
  config.dir = o.dir;
  std::vector<std::string> ignored;
  ApplyRemoteCacheEnvironment(config.remote, ignored);
  uint64_t max_bytes = 0;
  if (const char* v = std::getenv("FLEETJIT_CACHE_MAX_BYTES");
      v != nullptr && absl::SimpleAtoi(v, &max_bytes) && max_bytes > 0) {
    config.max_bytes = max_bytes;
  }
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
  if (json) {
    std::fprintf(out,
                 "{\"dir\":%s,\"max_bytes\":%llu,\"disk_entries\":%llu,"
                 "\"disk_bytes\":%llu,\"memory_hits\":%llu,\"disk_hits\":%llu,"
                 "\"misses\":%llu,\"compiles\":%llu,\"compile_ms_total\":%.3f,"
                 "\"evictions\":%llu,\"rejected_entries\":%llu,"
                 "\"remote\":%s,\"remote_state\":%s,\"remote_hits\":%llu,"
                 "\"remote_misses\":%llu,\"remote_errors\":%llu,"
                 "\"remote_rejected\":%llu,\"remote_writes\":%llu,"
                 "\"remote_breaker_opens\":%llu}\n",
                 Json(cache.dir()).c_str(),
                 static_cast<unsigned long long>(config.max_bytes),
                 static_cast<unsigned long long>(s.disk_entries),
                 static_cast<unsigned long long>(s.disk_bytes),
                 static_cast<unsigned long long>(s.memory_hits),
                 static_cast<unsigned long long>(s.disk_hits),
                 static_cast<unsigned long long>(s.misses),
                 static_cast<unsigned long long>(s.compiles),
                 s.compile_ms_total,
                 static_cast<unsigned long long>(s.evictions),
                 static_cast<unsigned long long>(s.rejected_entries),
                 Json(RemoteName(config)).c_str(), Json(s.remote_state).c_str(),
                 static_cast<unsigned long long>(s.remote_hits),
                 static_cast<unsigned long long>(s.remote_misses),
                 static_cast<unsigned long long>(s.remote_errors),
                 static_cast<unsigned long long>(s.remote_rejected),
                 static_cast<unsigned long long>(s.remote_writes),
                 static_cast<unsigned long long>(s.remote_breaker_opens));
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

int ListEntries(const ModuleCache& cache, bool verify, bool json,
                std::FILE* out) {
  absl::StatusOr<std::vector<CacheEntryInfo>> list = cache.List(verify);
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
    std::fprintf(out, "{\"dir\":%s,\"verified\":%s,\"entries\":[",
                 Json(cache.dir()).c_str(), verify ? "true" : "false");
    for (size_t i = 0; i < entries.size(); ++i) {
      const CacheEntryInfo& e = entries[i];
      std::fprintf(
          out,
          "%s{\"digest\":%s,\"path\":%s,\"target\":%s,\"copy_impl\":%s,"
          "\"compiler\":%s,\"bytes\":%llu,\"last_used_unix\":%lld,"
          "\"problem\":%s}",
          i ? "," : "", Json(e.digest).c_str(), Json(e.path).c_str(),
          Json(e.target).c_str(), Json(e.copy_impl).c_str(),
          Json(e.compiler).c_str(), static_cast<unsigned long long>(e.bytes),
          static_cast<long long>(e.last_used_unix), Json(e.problem).c_str());
    }
    std::fprintf(out, "],\"bad\":%zu}\n", bad);
    return verify && bad > 0 ? kExitFailure : kExitOk;
  }
  if (!verify || bad > 0) {
    std::fprintf(out, "%-16s  %-12s %-8s %10s  %-19s  %s\n", "DIGEST", "TARGET",
                 "IMPL", "BYTES", "LAST USED", verify ? "PROBLEM" : "COMPILER");
  }
  for (const CacheEntryInfo& e : entries) {
    if (verify && e.problem.empty()) continue;
    std::string digest = e.digest.empty() ? e.path : e.digest.substr(0, 16);
    std::string detail = e.problem.empty() ? e.compiler : "BAD: " + e.problem;
    std::fprintf(out, "%-16s  %-12s %-8s %10llu  %-19s  %s\n", digest.c_str(),
                 e.target.c_str(), e.copy_impl.c_str(),
                 static_cast<unsigned long long>(e.bytes),
                 LocalTime(e.last_used_unix).c_str(), detail.c_str());
  }
  std::fprintf(out, "%zu entries, %s, %zu bad%s, in %s\n", entries.size(),
               HumanBytes(bytes).c_str(), bad,
               verify ? " (fully verified)" : "", cache.dir().c_str());
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
    std::fprintf(
        out, "{\"dir\":%s,\"deleted_entries\":%llu,\"deleted_bytes\":%llu}\n",
        Json(cache.dir()).c_str(), static_cast<unsigned long long>(entries),
        static_cast<unsigned long long>(bytes));
  } else {
    std::fprintf(out, "deleted %llu entries (%s) from %s\n",
                 static_cast<unsigned long long>(entries),
                 HumanBytes(bytes).c_str(), cache.dir().c_str());
  }
  return kExitOk;
}

}  // namespace

int RunCacheCommand(const std::vector<std::string>& args, std::FILE* out) {
  Options options;
  if (!ParseArgs(args, options)) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  const CacheConfig config = ConfigFor(options);
  ModuleCache cache(config);
  if (cache.dir().empty()) {
    std::fprintf(stderr,
                 "fleetjit cache: no cache directory (set FLEETJIT_CACHE_DIR "
                 "or HOME, or pass --dir)\n");
    return kExitFailure;
  }
  if (options.verb == "stats") return Stats(cache, config, options.json, out);
  if (options.verb == "ls") return ListEntries(cache, false, options.json, out);
  if (options.verb == "verify")
    return ListEntries(cache, true, options.json, out);
  return Clear(cache, options.json, out);
}

}  // namespace fleetjit
