// fleetjit build [--target sm_80,sm_90,...] FILE.cu [--emit ptx|cubin]
//                [-o DIR] [--impl sync|cp_async|tma] [--name-expr EXPR]...
//                [--publish]
// Builds FILE for the live device or for each target (filling the module
// cache: run it on a CPU-only machine to warm a fleet's cache) and writes
// DIR/<stem>.<target>.<ptx|cubin> when -o is given. --publish makes sure
// each module is in the fleet's remote cache (FLEETJIT_REMOTE_CACHE,
// FLEETJIT_FLEET_KEY): the local disk tier is skipped, so a module is
// either found remotely or compiled and published, and the command waits
// for the publications and fails if they did not all go out.
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "tools/bundled_kernels.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

const char* CacheResultName(fj_cache_result r) {
  switch (r) {
    case FJ_CACHE_COMPILED: return "compiled";
    case FJ_CACHE_MEMORY_HIT: return "memory hit";
    case FJ_CACHE_DISK_HIT: return "disk hit";
    case FJ_CACHE_REMOTE_HIT: return "remote hit";
  }
  return "?";
}

std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

// Waits for the remote publications and reports them.
int FinishPublishing(fj_runtime* rt) {
  if (Failed(fj_cache_flush(rt, 30000), "publishing to the remote cache")) {
    return kExitFailure;
  }
  fj_cache_stats s{};
  s.struct_size = sizeof(s);
  if (Failed(fj_cache_stats_get(rt, &s), "reading the cache stats")) {
    return kExitFailure;
  }
  std::printf("published %llu module(s), %llu already in the remote cache\n",
              static_cast<unsigned long long>(s.remote_writes),
              static_cast<unsigned long long>(s.remote_hits));
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

}  // namespace

// Reads FILE from disk, or the bundled copy of that path (examples/...).
bool LoadKernelSource(const std::string& file, std::string* source) {
  if (ReadFile(file, source)) return true;
  if (const BundledKernel* f = FindBundledKernel(file)) {
    source->assign(f->content.data(), f->content.size());
    return true;
  }
  return false;
}

int RunBuild(std::vector<std::string> args) {
  std::string targets = TakeFlag(args, "--target");
  std::string emit = TakeFlag(args, "--emit");
  std::string out_dir = TakeFlag(args, "-o");
  std::string impl_name = TakeFlag(args, "--impl");
  bool publish = false;
  for (auto it = args.begin(); it != args.end();) {
    if (*it == "--publish") {
      publish = true;
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<std::string> name_exprs;
  for (bool present = true; present;) {
    std::string e = TakeFlag(args, "--name-expr", &present);
    if (present) name_exprs.push_back(e);
  }
  if (args.size() != 1 || args[0].empty() || args[0][0] == '-') {
    std::fprintf(stderr,
                 "usage: fleetjit build [--target sm_80,sm_90,...] FILE.cu [--emit ptx|cubin] "
                 "[-o DIR] [--impl sync|cp_async|tma] [--name-expr EXPR]... "
                 "[--publish]\n");
    return kExitUsage;
  }
  const std::string file = args[0];
  fj_output output = FJ_OUTPUT_AUTO;
  if (emit == "ptx") {
    output = FJ_OUTPUT_PTX;
  } else if (emit == "cubin") {
    output = FJ_OUTPUT_CUBIN;
  } else if (!emit.empty()) {
    std::fprintf(stderr, "fleetjit build: --emit must be ptx or cubin\n");
    return kExitUsage;
  }
  fj_copy_impl impl = FJ_COPY_IMPL_AUTO;
  if (!impl_name.empty()) {
    for (int i = FJ_COPY_IMPL_SYNC; i <= FJ_COPY_IMPL_LAST; ++i) {
      if (impl_name == fj_copy_impl_name(static_cast<fj_copy_impl>(i))) {
        impl = static_cast<fj_copy_impl>(i);
      }
    }
    if (impl == FJ_COPY_IMPL_AUTO) {
      std::fprintf(stderr, "fleetjit build: --impl must be sync, cp_async or tma\n");
      return kExitUsage;
    }
  }
  std::string source;
  if (!LoadKernelSource(file, &source)) {
    std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n", file.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  if (!out_dir.empty() && mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "fleetjit build: cannot create '%s': %s\n", out_dir.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  fj_runtime* rt = nullptr;
  if (publish) {
    const char* url = std::getenv("FLEETJIT_REMOTE_CACHE");
    if (url == nullptr || *url == '\0') {
      std::fprintf(stderr,
                   "fleetjit build: --publish needs a remote cache: set "
                   "FLEETJIT_REMOTE_CACHE and FLEETJIT_FLEET_KEY\n");
      return kExitUsage;
    }
    fj_runtime_options ro{};
    ro.struct_size = sizeof(ro);
    ro.flags = FJ_RUNTIME_DISABLE_DISK_CACHE;
    if (Failed(fj_runtime_create(&ro, &rt), "creating the runtime")) {
      return kExitFailure;
    }
  } else {
    rt = CreateRuntime();
  }
  if (rt == nullptr) return kExitFailure;
  std::vector<std::string> target_list = SplitComma(targets);
  if (target_list.empty()) target_list.push_back("");  // the live device
  std::vector<fj_str> exprs;
  for (const std::string& e : name_exprs) exprs.push_back(Str(e));
  int rc = kExitOk;
  for (size_t i = 0; i < target_list.size(); ++i) {
    const std::string& t = target_list[i];
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = Str(source);
    o.name = Str(file);
    o.target = Str(t);
    o.copy_impl = impl;
    o.output = output;
    o.name_expressions = exprs.data();
    o.num_name_expressions = exprs.size();
    fj_module* module = nullptr;
    std::string what = "building " + file + (t.empty() ? "" : " for " + t);
    if (Failed(fj_module_build(rt, &o, &module), what.c_str())) {
      rc = kExitFailure;
      continue;
    }
    fj_module_info info{};
    info.struct_size = sizeof(info);
    fj_module_info_get(module, &info);
    std::string written;
    if (!out_dir.empty()) {
      const void* data = nullptr;
      size_t size = 0;
      fj_module_image(module, &data, &size);
      std::string path = out_dir + "/" + Stem(file) + "." + info.target +
                         (info.output == FJ_OUTPUT_PTX ? ".ptx" : ".cubin");
      std::ofstream out(path, std::ios::binary);
      out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
      if (!out) {
        std::fprintf(stderr, "fleetjit build: cannot write '%s'\n", path.c_str());
        rc = kExitFailure;
      }
      written = " -> " + path;
    }
    std::printf("[%zu/%zu] %-12s impl %-9s %8.1f ms  %-10s %7llu B%s\n", i + 1,
                target_list.size(), info.target, fj_copy_impl_name(info.copy_impl),
                info.build_ms, CacheResultName(info.cache_result),
                static_cast<unsigned long long>(info.image_bytes), written.c_str());
    std::fflush(stdout);
    fj_module_destroy(module);
  }
  if (publish && rc == kExitOk) rc = FinishPublishing(rt);
  Failed(fj_runtime_destroy(rt), "destroying the runtime");
  return rc;
}

}  // namespace fleetjit::cli
