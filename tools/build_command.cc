// fleetjit build [--target sm_80,sm_90,...] FILE.cu [--emit ptx|cubin|fatbin]
//                [-o DIR] [-j N] [--json] [--impl sync|cp_async|tma]
//                [--name-expr EXPR]... [-I DIR]... [-D NAME[=VAL]]...
// fleetjit build FILE.cu [FILE.cu...] [--object PATH]... [--lto] [--devrt]
//                [--link-option OPT]... (the same flags: a device link)
// Builds FILE for the live device or for each target (filling the module
// cache: run it on a CPU-only machine to warm a fleet's cache) and writes
// DIR/<stem>.<target>.<ptx|cubin> when -o is given; --emit fatbin writes
// one DIR/<stem>.fatbin (default DIR: the current folder) with each sm_XX
// target's cubin and PTX for the newest (nvFatbin). Several FILEs, an
// --object (a .cubin, .ptx, .fatbin, .ltoir or .a, by its extension), --lto
// or --devrt link them into one cubin with fj_module_link; -D and -I reach
// every source, --name-expr the first. Exit codes: 0 every target built, 1 a
// build failed, 2 usage.
//
// Several targets build in parallel, -j N at once (default: the cores this
// process may run on). NVRTC serialises the compiles of one process (a lock
// inside libnvrtc: a second thread's nvrtcCompileProgram waits on it), so a
// parallel build runs N worker processes, `fleetjit build --worker` with
// the same flags, each loading NVRTC once and building the targets the
// parent hands it over a pipe, one line each way per target, into the same
// cache; the parent prints one line per target as it finishes (a progress
// bar on stderr when that is a terminal) or, with --json, one object.

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "jit/fatbin.h"
#include "jit/image_reader.h"
#include "jit/target.h"
#include "platform/nvfatbin_library.h"
#include "platform/nvrtc_locate.h"
#include "reference/bundled_kernels.h"
#include "runtime/config.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

struct PublishCounts {
  unsigned long long published = 0, already = 0;
};

// Waits for the remote publications and reports them (on stdout unless
// `quiet`; what failed always on stderr).
int FinishPublishing(fj_runtime* rt, bool quiet, PublishCounts* counts) {
  if (Failed(fj_cache_flush(rt, 30000), "publishing to the remote cache")) {
    return kExitFailure;
  }
  fj_cache_stats s{};
  s.struct_size = sizeof(s);
  if (Failed(fj_cache_stats_get(rt, &s), "reading the cache stats")) {
    return kExitFailure;
  }
  counts->published = s.remote_writes;
  counts->already = s.remote_hits;
  if (!quiet) {
    std::printf("published %llu module(s), %llu already in the remote cache\n",
                counts->published, counts->already);
  }
  if (s.remote_state != FJ_REMOTE_CLOSED || s.remote_write_drops != 0 ||
      s.remote_writes < s.compiles) {
    std::fprintf(stderr,
                 "fleetjit build: not everything was published (remote tier "
                 "%s, %llu dropped, %llu errors; see the log above)\n",
                 s.remote_state == FJ_REMOTE_UNAVAILABLE ? "unavailable"
                 : s.remote_state == FJ_REMOTE_OFF       ? "off"
                                                         : "failing",
                 static_cast<unsigned long long>(s.remote_write_drops),
                 static_cast<unsigned long long>(s.remote_errors));
    return kExitFailure;
  }
  return kExitOk;
}

// A runtime for --publish: the disk tier is skipped, so a module is either
// found remotely or compiled and published. nullptr (and *exit_code) on
// error.
fj_runtime* CreatePublishingRuntime(int* exit_code) {
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
  fj_runtime* rt = CreateRuntime(exit_code, &ro);
  if (rt == nullptr) return nullptr;
  // The runtime read FLEETJIT_REMOTE_CACHE (runtime/config.h): off means
  // it is not set.
  fj_cache_stats stats{};
  stats.struct_size = sizeof(stats);
  if (Failed(fj_cache_stats_get(rt, &stats), "reading the cache state")) {
    fj_status_free(fj_runtime_destroy(rt));
    *exit_code = kExitFailure;
    return nullptr;
  }
  if (stats.remote_state == FJ_REMOTE_OFF) {
    std::fprintf(stderr,
                 "fleetjit build: --publish needs a remote cache: set "
                 "FLEETJIT_REMOTE_CACHE and FLEETJIT_FLEET_KEY\n");
    fj_status_free(fj_runtime_destroy(rt));
    *exit_code = kExitFailure;
    return nullptr;
  }
  return rt;
}

std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

// The fj_link_input_kind of a prebuilt object, by its file name.
std::optional<fj_link_input_kind> ObjectKind(const std::string& path) {
  auto ends = [&](const char* suffix) {
    size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (ends(".cubin") || ends(".o")) return FJ_LINK_CUBIN;
  if (ends(".ptx")) return FJ_LINK_PTX;
  if (ends(".fatbin")) return FJ_LINK_FATBIN;
  if (ends(".ltoir") || ends(".lto")) return FJ_LINK_LTOIR;
  if (ends(".a")) return FJ_LINK_LIBRARY;
  return std::nullopt;
}

// The cores this process may run on (its affinity mask), at least 1.
int DefaultJobs() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// The command line's flags, everything a child build needs again.
struct BuildFlags {
  std::vector<std::string> files, objects, link_options;
  std::vector<std::string> name_exprs, include_dirs, defines;
  std::string impl_name;
  bool lto = false, devrt = false, publish = false;
  bool link() const {
    return files.size() > 1 || !objects.empty() || lto || devrt ||
           !link_options.empty();
  }
};

// One target to build: as named ("" = the live device) and the image kind
// asked for it ("", "ptx" or "cubin").
struct TargetJob {
  std::string target;
  std::string emit;
};

// What building one target gave.
struct TargetRow {
  std::string asked;   // the target as named
  std::string target;  // as built (fj_module_info)
  std::string impl, cache, path, error;
  double build_ms = 0, seconds = 0;
  unsigned long long bytes = 0;
  bool ok = false;
  int exit_code = kExitOk;  // a child's, else kExitOk or kExitFailure
  PublishCounts published;
  std::string diagnostics;  // what failed, as stderr gets it
  std::string image;        // kept for a fatbin
};

nlohmann::ordered_json RowJson(const TargetRow& r) {
  nlohmann::ordered_json j = {{"target", r.asked.empty() ? r.target : r.asked},
                              {"ok", r.ok}};
  if (r.ok) {
    j["built_for"] = r.target;
    j["impl"] = r.impl;
    j["build_ms"] = r.build_ms;
    j["cache"] = r.cache;
    j["image_bytes"] = r.bytes;
    if (!r.path.empty()) j["path"] = r.path;
  } else {
    j["error"] = r.error;
  }
  j["seconds"] = r.seconds;
  return j;
}

// "CODE: message" of `status`, which stays the caller's.
std::string StatusText(fj_status* status) {
  return absl::StrCat(fj_code_name(fj_status_code(status)), ": ",
                      fj_status_message(status, nullptr));
}

// Builds (or links) one target in this process.
class InProcessBuilder {
 public:
  InProcessBuilder(fj_runtime* rt, const BuildFlags& flags,
                   const std::vector<std::string>& sources,
                   const std::vector<std::string>& object_bytes,
                   const std::vector<fj_link_input_kind>& object_kinds)
      : rt_(rt), flags_(flags) {
    for (const std::string& e : flags.name_exprs) exprs_.push_back(Str(e));
    for (const std::string& d : flags.defines) {
      nvrtc_options_.push_back("-D" + d);
    }
    for (const std::string& o : nvrtc_options_) options_.push_back(Str(o));
    for (const std::string& d : flags.include_dirs) dirs_.push_back(Str(d));
    for (const std::string& o : flags.link_options) {
      link_opts_.push_back(Str(o));
    }
    source_ = &sources[0];
    // A link's inputs: the sources (the first with the name expressions),
    // then the objects.
    for (size_t i = 0; i < sources.size(); ++i) {
      fj_link_input in{};
      in.struct_size = sizeof(in);
      in.kind = FJ_LINK_SOURCE;
      in.name = Str(flags.files[i]);
      in.data = sources[i].data();
      in.size = sources[i].size();
      in.nvrtc_options = options_.data();
      in.num_nvrtc_options = options_.size();
      if (i == 0) {
        in.name_expressions = exprs_.data();
        in.num_name_expressions = exprs_.size();
      }
      inputs_.push_back(in);
    }
    for (size_t i = 0; i < object_bytes.size(); ++i) {
      fj_link_input in{};
      in.struct_size = sizeof(in);
      in.kind = object_kinds[i];
      in.name = Str(flags.objects[i]);
      in.data = object_bytes[i].data();
      in.size = object_bytes[i].size();
      inputs_.push_back(in);
    }
  }

  // Builds `job`; writes the image under `out_dir` when it is not empty;
  // keeps it in the row when `keep_image`. What failed goes to
  // row.diagnostics, and to stderr unless `quiet`.
  TargetRow Build(const TargetJob& job, const std::string& out_dir,
                  bool keep_image, bool quiet = false) {
    const auto t0 = std::chrono::steady_clock::now();
    TargetRow row;
    row.asked = job.target;
    const std::string& file = flags_.files[0];
    const std::string& t = job.target;
    fj_output output = FJ_OUTPUT_AUTO;
    if (job.emit == "ptx") output = FJ_OUTPUT_PTX;
    if (job.emit == "cubin") output = FJ_OUTPUT_CUBIN;
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = Str(*source_);
    o.name = Str(file);
    o.target = Str(t);
    o.copy_impl = flags_.impl_name.empty() ? FJ_COPY_IMPL_AUTO
                                           : *CopyImplNamed(flags_.impl_name);
    o.output = output;
    o.name_expressions = exprs_.data();
    o.num_name_expressions = exprs_.size();
    o.nvrtc_options = options_.data();
    o.num_nvrtc_options = options_.size();
    o.include_dirs = dirs_.data();
    o.num_include_dirs = dirs_.size();
    fj_link_options lo{};
    lo.struct_size = sizeof(lo);
    lo.inputs = inputs_.data();
    lo.num_inputs = inputs_.size();
    lo.name = Str(file);
    lo.target = Str(t);
    lo.link_options = link_opts_.data();
    lo.num_link_options = link_opts_.size();
    lo.include_dirs = dirs_.data();
    lo.num_include_dirs = dirs_.size();
    lo.flags =
        (flags_.lto ? FJ_LINK_LTO : 0u) | (flags_.devrt ? FJ_LINK_DEVRT : 0u);
    fj_module* module = nullptr;
    const bool link = flags_.link();
    const std::string what = (link ? "linking " : "building ") + file +
                             (t.empty() ? "" : " for " + t);
    fj_status* status = link ? fj_module_link(rt_, &lo, &module)
                             : fj_module_build(rt_, &o, &module);
    auto finish = [&] {
      row.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      return row;
    };
    if (status != nullptr) {
      row.error = StatusText(status);
      row.exit_code = kExitFailure;
      row.diagnostics = FailureText(status, what.c_str());
      fj_status_free(status);
      if (!quiet) std::fputs(row.diagnostics.c_str(), stderr);
      return finish();
    }
    fj_module_info info{};
    info.struct_size = sizeof(info);
    fj_module_info_get(module, &info);
    row.target = info.target;
    row.impl = fj_copy_impl_name(info.copy_impl);
    row.build_ms = info.build_ms;
    row.cache = CacheResultName(info.cache_result);
    row.bytes = info.image_bytes;
    row.ok = true;
    const void* data = nullptr;
    size_t size = 0;
    fj_module_image(module, &data, &size);
    if (keep_image) row.image.assign(static_cast<const char*>(data), size);
    if (!out_dir.empty()) {
      row.path = out_dir + "/" + Stem(file) + "." + info.target +
                 (info.output == FJ_OUTPUT_PTX ? ".ptx" : ".cubin");
      std::ofstream out(row.path, std::ios::binary);
      out.write(static_cast<const char*>(data),
                static_cast<std::streamsize>(size));
      if (!out) {
        row.error = "cannot write '" + row.path + "'";
        row.diagnostics = "fleetjit build: " + row.error + "\n";
        if (!quiet) std::fputs(row.diagnostics.c_str(), stderr);
        row.ok = false;
        row.exit_code = kExitFailure;
      }
    }
    fj_module_destroy(module);
    return finish();
  }

 private:
  fj_runtime* rt_;
  const BuildFlags& flags_;
  const std::string* source_ = nullptr;
  std::vector<fj_str> exprs_, options_, dirs_, link_opts_;
  std::vector<std::string> nvrtc_options_;
  std::vector<fj_link_input> inputs_;
};

// The words of a worker: `fleetjit build --worker` with the same flags,
// building the targets it reads from stdin.
std::vector<std::string> WorkerArgs(const BuildFlags& f,
                                    const std::string& out_dir) {
  std::vector<std::string> a = {"/proc/self/exe", "build", "--worker"};
  if (!out_dir.empty()) a.insert(a.end(), {"-o", out_dir});
  if (!f.impl_name.empty()) a.insert(a.end(), {"--impl", f.impl_name});
  if (f.publish) a.push_back("--publish");
  if (f.lto) a.push_back("--lto");
  if (f.devrt) a.push_back("--devrt");
  for (const std::string& v : f.objects) a.insert(a.end(), {"--object", v});
  for (const std::string& v : f.link_options) {
    a.push_back("--link-option=" + v);  // one word: it starts with '-'
  }
  for (const std::string& v : f.name_exprs) {
    a.insert(a.end(), {"--name-expr", v});
  }
  for (const std::string& v : f.include_dirs) a.insert(a.end(), {"-I", v});
  for (const std::string& v : f.defines) a.insert(a.end(), {"-D", v});
  a.push_back("--");
  for (const std::string& v : f.files) a.push_back(v);
  return a;
}

// One line of the worker protocol: the job, "TARGET EMIT" ("-" for empty).
std::string JobLine(const TargetJob& job) {
  return absl::StrCat(job.target.empty() ? "-" : job.target, " ",
                      job.emit.empty() ? "-" : job.emit, "\n");
}

// The worker side: builds the job of each line of stdin in this one
// process (NVRTC loaded once) and answers each with one line of JSON,
// {"row": ...}; at the end of its input, with --publish, one more line,
// {"published": ...}. Exit status as a build's.
int RunWorker(const BuildFlags& flags, const std::vector<std::string>& sources,
              const std::vector<std::string>& object_bytes,
              const std::vector<fj_link_input_kind>& object_kinds,
              const std::string& out_dir) {
  int rc = kExitOk;
  fj_runtime* rt =
      flags.publish ? CreatePublishingRuntime(&rc) : CreateRuntime(&rc);
  if (rt == nullptr) return rc;
  InProcessBuilder builder(rt, flags, sources, object_bytes, object_kinds);
  std::string line;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), stdin) != nullptr) {
    line = buffer;
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.pop_back();
    }
    const size_t space = line.find(' ');
    TargetJob job{line.substr(0, space),
                  space == std::string::npos ? "-" : line.substr(space + 1)};
    if (job.target == "-") job.target.clear();
    if (job.emit == "-") job.emit.clear();
    TargetRow row = builder.Build(job, out_dir, /*keep_image=*/false,
                                  /*quiet=*/true);
    if (!row.ok) rc = kExitFailure;
    nlohmann::ordered_json j = RowJson(row);
    j["diagnostics"] = row.diagnostics;
    std::printf("%s\n", DumpJson({{"row", std::move(j)}}).c_str());
    std::fflush(stdout);
  }
  if (flags.publish && rc == kExitOk) {
    PublishCounts counts;
    rc = FinishPublishing(rt, /*quiet=*/true, &counts);
    std::printf("%s\n", DumpJson({{"published",
                                   {{"modules", counts.published},
                                    {"already", counts.already}}}})
                            .c_str());
    std::fflush(stdout);
  }
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  return rc;
}

// The parent side of one worker: a `fleetjit build --worker` child, its
// stdin and stdout piped to this process, its stderr shared.
class Worker {
 public:
  // Starts one; nullptr with *error set when it cannot.
  static std::unique_ptr<Worker> Start(const std::vector<std::string>& argv,
                                       std::string* error) {
    int to_child[2], from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0) {
      *error = absl::StrCat("pipe: ", std::strerror(errno));
      return nullptr;
    }
    if (::pipe2(from_child, O_CLOEXEC) != 0) {
      *error = absl::StrCat("pipe: ", std::strerror(errno));
      ::close(to_child[0]);
      ::close(to_child[1]);
      return nullptr;
    }
    std::vector<std::string> args = argv;
    std::vector<char*> ptrs;
    for (std::string& a : args) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid == 0) {  // async-signal-safe calls only until exec
      ::dup2(to_child[0], STDIN_FILENO);
      ::dup2(from_child[1], STDOUT_FILENO);
      ::execv(ptrs[0], ptrs.data());
      const char* msg = "fleetjit build: cannot start a worker process\n";
      (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    if (pid < 0) {
      *error = absl::StrCat("fork: ", std::strerror(errno));
      ::close(to_child[1]);
      ::close(from_child[0]);
      return nullptr;
    }
    auto w = std::unique_ptr<Worker>(new Worker());
    w->pid_ = pid;
    w->in_ = to_child[1];
    w->out_ = ::fdopen(from_child[0], "r");
    return w;
  }

  ~Worker() { (void)Finish(); }

  // Sends `line` and reads the worker's one-line answer; false when the
  // worker is gone (its exit status then in exit_code()).
  bool Ask(const std::string& line, std::string* answer) {
    if (in_ < 0 || out_ == nullptr) return false;
    if (!WriteAll(line)) return false;
    return ReadLine(answer);
  }

  // Closes its input; returns the lines it still wrote (the publication)
  // and waits for it. Idempotent.
  std::vector<std::string> Finish() {
    std::vector<std::string> rest;
    if (in_ >= 0) ::close(in_);
    in_ = -1;
    if (out_ != nullptr) {
      std::string line;
      while (ReadLine(&line)) rest.push_back(line);
      std::fclose(out_);
      out_ = nullptr;
    }
    if (pid_ > 0) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      pid_ = -1;
    }
    return rest;
  }

  int exit_code() const { return exit_code_; }
  std::string StatusText() const {
    return signal_ != 0 ? absl::StrCat("signal ", signal_)
                        : absl::StrCat("status ", exit_code_);
  }

 private:
  Worker() = default;
  bool WriteAll(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(in_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;  // EPIPE: the worker is gone
      done += static_cast<size_t>(n);
    }
    return true;
  }
  bool ReadLine(std::string* line) {
    line->clear();
    int c;
    while ((c = std::fgetc(out_)) != EOF) {
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
    return false;
  }

  pid_t pid_ = -1;
  int in_ = -1;
  std::FILE* out_ = nullptr;
  int exit_code_ = 0, signal_ = 0;
};

// A row from a worker's answer ({"row": ...}); false if it is not one.
bool ParseWorkerRow(const std::string& answer, TargetRow* row) {
  const nlohmann::json j =
      nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("row") || !j["row"].is_object()) {
    return false;
  }
  const nlohmann::json& r = j["row"];
  row->ok = r.value("ok", false);
  row->target = r.value("built_for", "");
  row->impl = r.value("impl", "");
  row->cache = r.value("cache", "");
  row->build_ms = r.value("build_ms", 0.0);
  row->bytes = r.value("image_bytes", 0ull);
  row->path = r.value("path", "");
  row->error = r.value("error", "");
  row->diagnostics = r.value("diagnostics", "");
  row->exit_code = row->ok ? kExitOk : kExitFailure;
  return true;
}

// The finished-line printer and, on a terminal, the progress bar on stderr.
class BuildReporter {
 public:
  BuildReporter(size_t total, bool lines)
      : total_(total),
        lines_(lines),
        bar_(::isatty(STDERR_FILENO) == 1),
        t0_(std::chrono::steady_clock::now()) {}

  void Started(const std::string& target) {
    std::lock_guard<std::mutex> lock(mu_);
    running_.push_back(target.empty() ? "live device" : target);
    DrawBar();
  }

  void Finished(const TargetRow& r, const std::string& diagnostics) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    const std::string name = r.asked.empty() ? "live device" : r.asked;
    for (size_t i = 0; i < running_.size(); ++i) {
      if (running_[i] == name) {
        running_.erase(running_.begin() + static_cast<long>(i));
        break;
      }
    }
    ClearBar();
    if (!diagnostics.empty()) {
      std::fputs(diagnostics.c_str(), stderr);
      std::fflush(stderr);
    }
    if (lines_) {
      if (r.ok) {
        const std::string written = r.path.empty() ? "" : " -> " + r.path;
        std::printf("[%zu/%zu] %-12s impl %-9s %8.1f ms  %-10s %7llu B%s\n",
                    done_, total_, r.target.c_str(), r.impl.c_str(), r.build_ms,
                    r.cache.c_str(), r.bytes, written.c_str());
      } else {
        std::printf("[%zu/%zu] %-12s failed\n", done_, total_, name.c_str());
      }
      std::fflush(stdout);
    }
    DrawBar();
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    ClearBar();
  }

 private:
  void ClearBar() {
    if (!bar_ || !drawn_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
  }
  void DrawBar() {
    if (!bar_ || done_ == total_) return;
    constexpr size_t kWidth = 24;
    const size_t filled = total_ == 0 ? 0 : done_ * kWidth / total_;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_)
            .count();
    std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu  %.1f s  building %s",
                 std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done_, total_, s,
                 absl::StrJoin(running_, " ").c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  std::mutex mu_;
  const size_t total_;
  const bool lines_, bar_;
  const std::chrono::steady_clock::time_point t0_;
  size_t done_ = 0;
  bool drawn_ = false;
  std::vector<std::string> running_;
};

// A scratch folder under $TMPDIR (or /tmp), removed with its contents.
class ScratchFolder {
 public:
  ScratchFolder() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base ? base : "/tmp") +
        "/fleetjit-build.XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchFolder() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The fatbin's jobs: a cubin per sm_XX target and PTX for each compute_XX
// one; with no compute_XX named, PTX for the newest sm_XX too, without its
// a/f suffix (arch-specific PTX runs on that architecture alone), which the
// driver compiles on a device newer than every cubin.
std::vector<TargetJob> FatbinJobs(const std::vector<std::string>& targets) {
  std::vector<TargetJob> jobs;
  std::optional<jit::Target> newest;
  bool has_ptx = false;
  for (const std::string& name : targets) {
    absl::StatusOr<jit::Target> t = jit::ParseTarget(name);
    if (!t.ok()) continue;  // TargetsAreValid refused it already
    has_ptx = has_ptx || t->ptx;
    jobs.push_back({name, t->ptx ? "ptx" : "cubin"});
    if (!t->ptx && (!newest.has_value() || t->arch > newest->arch)) {
      newest = *t;
    }
  }
  if (!has_ptx && newest.has_value()) {
    jit::Target ptx = *newest;
    ptx.ptx = true;
    ptx.suffix = '\0';
    jobs.push_back({ptx.Name(), "ptx"});
  }
  return jobs;
}

// Makes the fatbin of `rows` (their images, or the files they wrote) at
// `path`; reports it on stdout unless `quiet`. Errors on stderr.
int WriteFatbin(const std::vector<TargetRow>& rows, const std::string& file,
                const std::string& path, bool quiet,
                nlohmann::ordered_json* json) {
  std::vector<jit::FatbinInput> inputs;
  for (const TargetRow& r : rows) {
    jit::FatbinInput in;
    absl::StatusOr<jit::Target> t = jit::ParseTarget(r.target);
    if (!t.ok()) {
      std::fprintf(stderr, "fleetjit build: fatbin: target '%s': %s\n",
                   r.target.c_str(), std::string(t.status().message()).c_str());
      return kExitFailure;
    }
    in.target = *t;
    in.image = r.image;
    if (in.image.empty() && !ReadFile(r.path, &in.image)) {
      std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n",
                   r.path.c_str(), std::strerror(errno));
      return kExitFailure;
    }
    inputs.push_back(std::move(in));
  }
  // nvFatbin as the runtime would find NVRTC: the same folders, then NVRTC's.
  RuntimeOptions options;
  (void)ApplyEnvironment(options);  // the runtime already refused bad values
  absl::StatusOr<std::string> nvrtc =
      ResolveNvrtcLibrary(options.libnvrtc_path);
  absl::StatusOr<std::string> library =
      ResolveNvFatbinLibrary("", nvrtc.ok() ? *nvrtc : "");
  absl::StatusOr<std::string> fatbin = absl::UnknownError("no nvFatbin");
  if (library.ok()) {
    NvFatbinLibrary nvfatbin(*library);
    fatbin = jit::MakeFatbin(nvfatbin, inputs, file);
  } else {
    fatbin = library.status();
  }
  if (!fatbin.ok()) {
    std::fprintf(stderr, "fleetjit build: %s: %s\n",
                 absl::StatusCodeToString(fatbin.status().code()).c_str(),
                 std::string(fatbin.status().message()).c_str());
    return kExitFailure;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(fatbin->data(), static_cast<std::streamsize>(fatbin->size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fleetjit build: cannot write '%s'\n", path.c_str());
    return kExitFailure;
  }
  std::vector<std::string> parts;
  for (const jit::FatbinInput& in : inputs) {
    parts.push_back(
        absl::StrCat(in.target.Name(), in.target.ptx ? " (PTX)" : " (cubin)"));
  }
  if (!quiet) {
    std::printf("fatbin %s: %zu B, %s\n", path.c_str(), fatbin->size(),
                absl::StrJoin(parts, ", ").c_str());
  }
  (*json)["fatbin"] = {
      {"path", path}, {"bytes", fatbin->size()}, {"entries", parts}};
  return kExitOk;
}

}  // namespace

// Reads FILE from disk, or the bundled copy of that path (examples/...).
bool LoadKernelSource(const std::string& file, std::string* source) {
  if (ReadFile(file, source)) return true;
  if (const bundled::BundledKernel* f = bundled::FindBundledKernel(file)) {
    source->assign(f->content.data(), f->content.size());
    return true;
  }
  return false;
}

int RunBuild(std::vector<std::string> args) {
  BuildFlags flags;
  std::string targets, emit, out_dir;
  int jobs = 0;
  bool json = false, worker = false;
  CLI::App app(
      "Builds FILE.cu (a path, or a bundled examples/*.cu) for the live "
      "device or for each named target, filling the module cache (run it on "
      "a CPU-only machine to warm a fleet's cache); with -o writes "
      "DIR/<stem>.<target>.<ptx|cubin>; --emit fatbin writes one "
      "<stem>.fatbin (in DIR, default the current folder) holding each "
      "sm_XX target's cubin and PTX for the newest, made with nvFatbin "
      "(libnvfatbin, CUDA 12.4 or later). Several targets build in "
      "parallel, in -j worker processes (NVRTC compiles one program at a "
      "time per process).",
      "fleetjit build");
  // Not ->required(): CLI11 would report a missing FILE before naming an
  // unknown flag.
  app.add_option("file", flags.files,
                 "the CUDA source (required); several are linked into one "
                 "module");
  app.add_option("--object", flags.objects,
                 "link a prebuilt .cubin, .ptx, .fatbin, .ltoir or .a "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--lto", flags.lto,
               "link with link-time optimization (-dlto, -lto)");
  app.add_flag("--devrt", flags.devrt,
               "link libcudadevrt (kernels that launch kernels)");
  app.add_option("--link-option", flags.link_options,
                 "an nvJitLink option, e.g. -O3 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--target", targets, "targets, e.g. sm_80,sm_86,sm_90");
  app.add_option("--emit", emit,
                 "the image kind (default: per target); fatbin: one file of "
                 "every target")
      ->check(CLI::IsMember({"ptx", "cubin", "fatbin"}));
  app.add_option("-o", out_dir,
                 "write the images to DIR (created with its parents)");
  app.add_option("-j,--jobs", jobs,
                 "targets built at once, each in its own process (default: "
                 "the cores this process may use)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--json", json,
               "print one JSON object, a row per target, instead of lines");
  // Internal: a parallel build's worker process (RunWorker).
  app.add_flag("--worker", worker)->group("");
  app.add_option("--impl", flags.impl_name, "force a copy implementation")
      ->check(CLI::IsMember({"sync", "cp_async", "tma"}));
  app.add_flag("--publish", flags.publish,
               "make sure each module is in the fleet's remote cache "
               "(FLEETJIT_REMOTE_CACHE, FLEETJIT_FLEET_KEY) and wait for it");
  app.add_option("--name-expr", flags.name_exprs,
                 "a name expression to instantiate (repeatable)")
      ->allow_extra_args(false);
  app.add_option("-I", flags.include_dirs,
                 "a folder searched for #include before CUDA's (repeatable)")
      ->allow_extra_args(false);
  app.add_option("-D", flags.defines,
                 "define a macro: NAME or NAME=VAL (repeatable)")
      ->allow_extra_args(false);
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (flags.files.empty()) {
    std::fprintf(stderr, "fleetjit build: no FILE.cu given\n%s",
                 app.help().c_str());
    return kExitUsage;
  }
  const std::string file = flags.files[0];
  const bool link = flags.link();
  const bool fatbin = emit == "fatbin";
  if (link &&
      (emit == "ptx" || fatbin || !flags.impl_name.empty() || flags.publish)) {
    std::fprintf(stderr,
                 "fleetjit build: a link (several FILEs, --object, --lto, "
                 "--devrt) makes a cubin with the target's copy "
                 "implementation, and is not published: drop --emit "
                 "ptx|fatbin, --impl and --publish\n");
    return kExitUsage;
  }
  std::vector<std::string> target_list = SplitComma(targets);
  if (fatbin && target_list.empty()) {
    std::fprintf(stderr,
                 "fleetjit build: --emit fatbin needs --target, e.g. "
                 "--target sm_80,sm_90\n");
    return kExitUsage;
  }
  std::vector<std::string> sources(flags.files.size()),
      object_bytes(flags.objects.size());
  std::vector<fj_link_input_kind> object_kinds;
  for (size_t i = 0; i < flags.files.size(); ++i) {
    if (!LoadKernelSource(flags.files[i], &sources[i])) {
      std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n",
                   flags.files[i].c_str(), std::strerror(errno));
      return kExitFailure;
    }
  }
  for (size_t i = 0; i < flags.objects.size(); ++i) {
    std::optional<fj_link_input_kind> kind = ObjectKind(flags.objects[i]);
    if (!kind.has_value()) {
      std::fprintf(stderr,
                   "fleetjit build: --object '%s': name a .cubin, .ptx, "
                   ".fatbin, .ltoir or .a\n",
                   flags.objects[i].c_str());
      return kExitUsage;
    }
    object_kinds.push_back(*kind);
    if (!ReadFile(flags.objects[i], &object_bytes[i])) {
      std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n",
                   flags.objects[i].c_str(), std::strerror(errno));
      return kExitFailure;
    }
  }
  if (!out_dir.empty()) {  // created with its parents, as mkdir -p
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (!ec && !std::filesystem::is_directory(out_dir, ec)) {
      ec = std::make_error_code(std::errc::not_a_directory);
    }
    if (ec) {
      std::fprintf(stderr, "fleetjit build: cannot create '%s': %s\n",
                   out_dir.c_str(), ec.message().c_str());
      return kExitFailure;
    }
  }
  if (worker) {
    return RunWorker(flags, sources, object_bytes, object_kinds, out_dir);
  }
  if (!TargetNamesAreValid(target_list, "fleetjit build")) return kExitUsage;
  std::vector<TargetJob> job_list;
  if (fatbin) {
    job_list = FatbinJobs(target_list);
  } else {
    if (target_list.empty()) target_list.push_back("");  // the live device
    for (const std::string& t : target_list) job_list.push_back({t, emit});
  }
  if (jobs == 0) jobs = DefaultJobs();
  const bool parallel = jobs > 1 && job_list.size() > 1;
  // Which targets the NVRTC builds: checked here before a serial build; in
  // a parallel one while the workers start (each loads NVRTC too), which
  // then wait for the answer before they build anything.
  if (!parallel && !TargetsBuildWithNvrtc(target_list, "fleetjit build")) {
    return kExitUsage;
  }
  // The images of a fatbin: kept in memory in this process, or written by
  // the children to a scratch folder (or -o).
  std::optional<ScratchFolder> scratch;
  std::string image_dir = fatbin ? "" : out_dir;
  if (fatbin && parallel) {
    scratch.emplace();
    if (scratch->path().empty()) {
      std::fprintf(stderr, "fleetjit build: cannot make a scratch folder: %s\n",
                   std::strerror(errno));
      return kExitFailure;
    }
    image_dir = scratch->path();
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TargetRow> rows(job_list.size());
  BuildReporter reporter(job_list.size(), !json);
  int rc = kExitOk;
  PublishCounts published;
  bool usage_error = false, worker_failed = false;
  if (parallel) {
    // Check the FLEETJIT_* variables once here, not once per child.
    RuntimeOptions probe;
    if (absl::Status env = ApplyEnvironment(probe); !env.ok()) {
      std::fprintf(stderr, "fleetjit build: %s\n",
                   std::string(env.message()).c_str());
      return kExitUsage;
    }
    // A worker process per job slot: each loads NVRTC once and builds the
    // targets it is handed, one at a time, as slots free up.
    const std::vector<std::string> argv = WorkerArgs(flags, image_dir);
    struct sigaction ignore {
    }, old_pipe{};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old_pipe);  // a worker that died: EPIPE
    std::shared_future<bool> supported =
        std::async(std::launch::async, [&target_list] {
          return TargetsBuildWithNvrtc(target_list, "fleetjit build");
        }).share();
    std::atomic<size_t> next{0};
    std::mutex counts_mu;
    std::vector<std::thread> threads;
    const size_t n =
        std::min<size_t>(static_cast<size_t>(jobs), job_list.size());
    for (size_t w = 0; w < n; ++w) {
      threads.emplace_back([&] {
        std::unique_ptr<Worker> worker;
        // Ends the worker; says how it ended ("status 0", "signal 9").
        auto finish = [&]() -> std::string {
          if (worker == nullptr) return "";
          for (const std::string& line : worker->Finish()) {
            const nlohmann::json j =
                nlohmann::json::parse(line, nullptr, false);
            if (j.is_object() && j.contains("published")) {
              std::lock_guard<std::mutex> lock(counts_mu);
              published.published += j["published"].value("modules", 0ull);
              published.already += j["published"].value("already", 0ull);
            }
          }
          if (worker->exit_code() == kExitUsage) {
            std::lock_guard<std::mutex> lock(counts_mu);
            usage_error = true;
          } else if (worker->exit_code() != kExitOk) {
            std::lock_guard<std::mutex> lock(counts_mu);
            worker_failed = true;
          }
          std::string ended = worker->StatusText();
          worker.reset();
          return ended;
        };
        std::string start_error;
        worker = Worker::Start(argv, &start_error);
        if (!supported.get()) {  // said on stderr; nothing is built
          (void)finish();
          return;
        }
        for (size_t i = next++; i < job_list.size(); i = next++) {
          reporter.Started(job_list[i].target);
          const auto t0 = std::chrono::steady_clock::now();
          TargetRow& row = rows[i];
          row.asked = job_list[i].target;
          std::string answer;
          if (worker == nullptr) worker = Worker::Start(argv, &start_error);
          if (worker == nullptr) {
            row.error = "cannot start a build process: " + start_error;
            row.diagnostics = "fleetjit build: " + row.error + "\n";
            row.exit_code = kExitFailure;
          } else if (!worker->Ask(JobLine(job_list[i]), &answer) ||
                     !ParseWorkerRow(answer, &row)) {
            // Gone: the next job starts another.
            row.ok = false;
            row.error =
                "the build process ended (" + finish() + ") before it answered";
            row.exit_code = kExitFailure;
          }
          row.seconds = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
          reporter.Finished(row, row.diagnostics);
        }
        (void)finish();
      });
    }
    for (std::thread& t : threads) t.join();
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    if (!supported.get()) {
      reporter.Close();
      return kExitUsage;
    }
    for (const TargetRow& r : rows) {
      if (!r.ok && rc == kExitOk) rc = kExitFailure;
    }
    if (worker_failed && rc == kExitOk) rc = kExitFailure;
    if (usage_error) rc = kExitUsage;
    if (flags.publish && rc == kExitOk && !json) {
      std::printf(
          "published %llu module(s), %llu already in the remote cache\n",
          published.published, published.already);
    }
  } else {
    fj_runtime* rt =
        flags.publish ? CreatePublishingRuntime(&rc) : CreateRuntime(&rc);
    if (rt == nullptr) return rc;
    InProcessBuilder builder(rt, flags, sources, object_bytes, object_kinds);
    for (size_t i = 0; i < job_list.size(); ++i) {
      reporter.Started(job_list[i].target);
      rows[i] = builder.Build(job_list[i], image_dir, fatbin);
      reporter.Finished(rows[i], "");
      if (!rows[i].ok) rc = kExitFailure;
    }
    if (flags.publish && rc == kExitOk) {
      rc = FinishPublishing(rt, json, &published);
    }
    Failed(fj_runtime_destroy(rt), "destroying the runtime");
  }
  reporter.Close();

  nlohmann::ordered_json out = {{"file", file}, {"jobs", parallel ? jobs : 1}};
  if (fatbin && rc == kExitOk) {
    const std::string path = (out_dir.empty() ? std::string(".") : out_dir) +
                             "/" + Stem(file) + ".fatbin";
    rc = WriteFatbin(rows, file, path, json, &out);
  }
  if (json) {
    out["seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const TargetRow& r : rows) list.push_back(RowJson(r));
    out["targets"] = std::move(list);
    if (flags.publish) {
      out["published"] = {{"modules", published.published},
                          {"already", published.already}};
    }
    std::printf("%s\n", DumpJson(out).c_str());
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace fleetjit::cli
