// fleetjit build [--target sm_80,sm_90,...] FILE.cu [--emit ptx|cubin]
//                [-o DIR] [--impl sync|cp_async|tma] [--name-expr EXPR]...
//                [-I DIR]... [-D NAME[=VAL]]...
// fleetjit build FILE.cu [FILE.cu...] [--object PATH]... [--lto] [--devrt]
//                [--link-option OPT]... (the same flags: a device link)
// Builds FILE for the live device or for each target (filling the module
// cache: run it on a CPU-only machine to warm a fleet's cache) and writes
// DIR/<stem>.<target>.<ptx|cubin> when -o is given. Several FILEs, an
// --object (a .cubin, .ptx, .fatbin, .ltoir or .a, by its extension), --lto
// or --devrt link them into one cubin with fj_module_link; -D and -I reach
// every source, --name-expr the first. Exit codes: 0 every target built, 1 a
// build failed, 2 usage.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "tools/bundled_kernels.h"
#include "tools/cli_util.h"
#include "tools/commands.h"

namespace fleetjit::cli {
namespace {

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
  std::string targets, emit, out_dir, impl_name;
  std::vector<std::string> files, objects, link_options;
  std::vector<std::string> name_exprs, include_dirs, defines;
  bool lto = false, devrt = false;
  CLI::App app(
      "Builds FILE.cu (a path, or a bundled examples/*.cu) for the live "
      "device or for each named target, filling the module cache (run it on "
      "a CPU-only machine to warm a fleet's cache); with -o writes "
      "DIR/<stem>.<target>.<ptx|cubin>.",
      "fleetjit build");
  // Not ->required(): CLI11 would report a missing FILE before naming an
  // unknown flag.
  app.add_option("file", files,
                 "the CUDA source (required); several are linked into one "
                 "module");
  app.add_option("--object", objects,
                 "link a prebuilt .cubin, .ptx, .fatbin, .ltoir or .a "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_flag("--lto", lto, "link with link-time optimization (-dlto, -lto)");
  app.add_flag("--devrt", devrt,
               "link libcudadevrt (kernels that launch kernels)");
  app.add_option("--link-option", link_options,
                 "an nvJitLink option, e.g. -O3 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--target", targets, "targets, e.g. sm_80,sm_86,sm_90");
  app.add_option("--emit", emit, "the image kind (default: per target)")
      ->check(CLI::IsMember({"ptx", "cubin"}));
  app.add_option("-o", out_dir,
                 "write the images to DIR (created with its parents)");
  app.add_option("--impl", impl_name, "force a copy implementation")
      ->check(CLI::IsMember({"sync", "cp_async", "tma"}));
  bool publish = false;
  app.add_flag("--publish", publish,
               "make sure each module is in the fleet's remote cache "
               "(FLEETJIT_REMOTE_CACHE, FLEETJIT_FLEET_KEY) and wait for it");
  app.add_option("--name-expr", name_exprs,
                 "a name expression to instantiate (repeatable)")
      ->allow_extra_args(false);
  app.add_option("-I", include_dirs,
                 "a folder searched for #include before CUDA's (repeatable)")
      ->allow_extra_args(false);
  app.add_option("-D", defines, "define a macro: NAME or NAME=VAL (repeatable)")
      ->allow_extra_args(false);
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (files.empty()) {
    std::fprintf(stderr, "fleetjit build: no FILE.cu given\n%s",
                 app.help().c_str());
    return kExitUsage;
  }
  const std::string file = files[0];
  const bool link = files.size() > 1 || !objects.empty() || lto || devrt ||
                    !link_options.empty();
  if (link && (emit == "ptx" || !impl_name.empty() || publish)) {
    std::fprintf(stderr,
                 "fleetjit build: a link (several FILEs, --object, --lto, "
                 "--devrt) makes a cubin with the target's copy "
                 "implementation, and is not published: drop --emit ptx, "
                 "--impl and --publish\n");
    return kExitUsage;
  }
  std::vector<std::string> sources(files.size()), object_bytes(objects.size());
  std::vector<fj_link_input_kind> object_kinds;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!LoadKernelSource(files[i], &sources[i])) {
      std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n",
                   files[i].c_str(), std::strerror(errno));
      return kExitFailure;
    }
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    std::optional<fj_link_input_kind> kind = ObjectKind(objects[i]);
    if (!kind.has_value()) {
      std::fprintf(stderr,
                   "fleetjit build: --object '%s': name a .cubin, .ptx, "
                   ".fatbin, .ltoir or .a\n",
                   objects[i].c_str());
      return kExitUsage;
    }
    object_kinds.push_back(*kind);
    if (!ReadFile(objects[i], &object_bytes[i])) {
      std::fprintf(stderr, "fleetjit build: cannot read '%s': %s\n",
                   objects[i].c_str(), std::strerror(errno));
      return kExitFailure;
    }
  }
  fj_output output = FJ_OUTPUT_AUTO;
  if (emit == "ptx") output = FJ_OUTPUT_PTX;
  if (emit == "cubin") output = FJ_OUTPUT_CUBIN;
  fj_copy_impl impl = FJ_COPY_IMPL_AUTO;
  if (!impl_name.empty()) impl = *CopyImplNamed(impl_name);
  const std::string& source = sources[0];
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
  std::vector<std::string> target_list = SplitComma(targets);
  if (!TargetsAreValid(target_list, "fleetjit build")) return kExitUsage;
  if (target_list.empty()) target_list.push_back("");  // the live device
  int rc = kExitOk;
  fj_runtime* rt = publish ? CreatePublishingRuntime(&rc) : CreateRuntime(&rc);
  if (rt == nullptr) return rc;
  std::vector<fj_str> exprs;
  for (const std::string& e : name_exprs) exprs.push_back(Str(e));
  std::vector<std::string> nvrtc_options;
  for (const std::string& d : defines) nvrtc_options.push_back("-D" + d);
  std::vector<fj_str> options, dirs;
  for (const std::string& o : nvrtc_options) options.push_back(Str(o));
  for (const std::string& d : include_dirs) dirs.push_back(Str(d));
  // A link's inputs: the sources (the first with the name expressions),
  // then the objects.
  std::vector<fj_link_input> inputs;
  std::vector<fj_str> link_opts;
  for (const std::string& o : link_options) link_opts.push_back(Str(o));
  for (size_t i = 0; i < sources.size(); ++i) {
    fj_link_input in{};
    in.struct_size = sizeof(in);
    in.kind = FJ_LINK_SOURCE;
    in.name = Str(files[i]);
    in.data = sources[i].data();
    in.size = sources[i].size();
    in.nvrtc_options = options.data();
    in.num_nvrtc_options = options.size();
    if (i == 0) {
      in.name_expressions = exprs.data();
      in.num_name_expressions = exprs.size();
    }
    inputs.push_back(in);
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    fj_link_input in{};
    in.struct_size = sizeof(in);
    in.kind = object_kinds[i];
    in.name = Str(objects[i]);
    in.data = object_bytes[i].data();
    in.size = object_bytes[i].size();
    inputs.push_back(in);
  }
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
    o.nvrtc_options = options.data();
    o.num_nvrtc_options = options.size();
    o.include_dirs = dirs.data();
    o.num_include_dirs = dirs.size();
    fj_link_options lo{};
    lo.struct_size = sizeof(lo);
    lo.inputs = inputs.data();
    lo.num_inputs = inputs.size();
    lo.name = Str(file);
    lo.target = Str(t);
    lo.link_options = link_opts.data();
    lo.num_link_options = link_opts.size();
    lo.include_dirs = dirs.data();
    lo.num_include_dirs = dirs.size();
    lo.flags = (lto ? FJ_LINK_LTO : 0u) | (devrt ? FJ_LINK_DEVRT : 0u);
    fj_module* module = nullptr;
    std::string what = (link ? "linking " : "building ") + file +
                       (t.empty() ? "" : " for " + t);
    if (Failed(link ? fj_module_link(rt, &lo, &module)
                    : fj_module_build(rt, &o, &module),
               what.c_str())) {
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
      out.write(static_cast<const char*>(data),
                static_cast<std::streamsize>(size));
      if (!out) {
        std::fprintf(stderr, "fleetjit build: cannot write '%s'\n",
                     path.c_str());
        rc = kExitFailure;
      }
      written = " -> " + path;
    }
    std::printf(
        "[%zu/%zu] %-12s impl %-9s %8.1f ms  %-10s %7llu B%s\n", i + 1,
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
