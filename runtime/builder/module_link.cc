// ModuleBuilder::LinkRecord: device links (since 1.3).
//
// 1. The target and copy implementation are resolved as for a build
//    (module_builder.cc), and must name an sm_XX target.
// 2. The cache key covers every input of the link (see LinkManifest): each
//    source with its full NVRTC option list and the digest of every header
//    it may read from disk, each binary input's SHA-256, libcudadevrt's
//    SHA-256 when linked, the nvJitLink options, the target, the copy
//    implementation and the identities of NVRTC (when a source is linked)
//    and of nvJitLink. A hit loads neither NVRTC nor nvJitLink.
// 3. On a miss each source is compiled by NVRTC (-dc, or -dlto for an LTO
//    link) and everything is linked by nvJitLink (jit/link_build.h). Kernels
//    whose parameters no PTX describes (those of prebuilt cubins or
//    fatbins) are read from the driver on a device the target runs on.
// 4. The artifact is cached in the memory and disk tiers like a build's, and
//    its launch thunks are generated in the background like a build's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/exit_gate.h"
#include "base/files.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "jit/link_build.h"
#include "platform/nvrtc_locate.h"
#include "runtime/builder/image_import.h"
#include "runtime/builder/module_builder.h"
#include "runtime/load/param_relayout.h"

namespace fleetjit {
namespace {

// Appends one record of the manifest: "<field>=<length>:<value>\n", the
// canonical key's own framing, so no value can forge another record.
void Record(std::string& out, absl::string_view field,
            absl::string_view value) {
  absl::StrAppend(&out, field, "=", value.size(), ":", value, "\n");
}

std::string Digest(absl::string_view bytes) {
  return Sha256::Hex(Sha256::Hash(bytes));
}

const char* KindName(LinkInputSpec::Kind kind) {
  switch (kind) {
    case LinkInputSpec::Kind::kSource:
      return "source";
    case LinkInputSpec::Kind::kCubin:
      return "cubin";
    case LinkInputSpec::Kind::kPtx:
      return "ptx";
    case LinkInputSpec::Kind::kFatbin:
      return "fatbin";
    case LinkInputSpec::Kind::kLtoIr:
      return "ltoir";
    case LinkInputSpec::Kind::kLibrary:
      return "library";
  }
  return "unknown";
}

jit::LinkObject::Kind ObjectKind(LinkInputSpec::Kind kind) {
  switch (kind) {
    case LinkInputSpec::Kind::kCubin:
      return jit::LinkObject::Kind::kCubin;
    case LinkInputSpec::Kind::kPtx:
      return jit::LinkObject::Kind::kPtx;
    case LinkInputSpec::Kind::kFatbin:
      return jit::LinkObject::Kind::kFatbin;
    case LinkInputSpec::Kind::kLtoIr:
      return jit::LinkObject::Kind::kLtoIr;
    case LinkInputSpec::Kind::kLibrary:
    case LinkInputSpec::Kind::kSource:
      break;
  }
  return jit::LinkObject::Kind::kLibrary;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path));
  }
  struct stat st;
  absl::StatusOr<std::string> bytes =
      ::fstat(fd, &st) == 0
          ? files::ReadFully(fd, static_cast<uint64_t>(st.st_size))
          : absl::UnavailableError(absl::StrCat("cannot stat ", path));
  ::close(fd);
  return bytes;
}

}  // namespace

void ModuleBuilder::ResolveLinker() {
  absl::call_once(linker_once_, [this] {
    // nvJitLink ships beside NVRTC: its folder is searched too.
    absl::StatusOr<std::string> nvrtc =
        ResolveNvrtcLibrary(options_.libnvrtc_path);
    absl::StatusOr<std::string> path = ResolveNvJitLinkLibrary(
        options_.libnvjitlink_path, nvrtc.ok() ? *nvrtc : std::string());
    if (!path.ok()) {
      linker_identity_ = path.status();
      return;
    }
    linker_identity_ = LinkerIdentity(*path);
    nvjitlink_ = std::make_unique<NvJitLinkLibrary>(*path);
  });
}

// libcudadevrt.a: $CUDA_HOME/lib64, $CUDA_PATH/lib64, the toolkit of the
// NVRTC in use, /usr/local/cuda/lib64 (the first that exists).
static absl::StatusOr<std::string> FindCudaDevrt(
    const RuntimeOptions& options) {
  std::vector<std::string> dirs;
  for (const std::string& root :
       {options.cuda_headers.cuda_home, options.cuda_headers.cuda_path}) {
    if (!root.empty()) dirs.push_back(absl::StrCat(root, "/lib64"));
  }
  absl::StatusOr<std::string> nvrtc =
      ResolveNvrtcLibrary(options.libnvrtc_path);
  if (nvrtc.ok()) {
    size_t slash = nvrtc->rfind('/');
    if (slash != std::string::npos && slash > 0) {
      dirs.push_back(nvrtc->substr(0, slash));
    }
  }
  dirs.push_back(absl::StrCat(options.cuda_headers.default_root, "/lib64"));
  for (const std::string& dir : dirs) {
    std::string path = absl::StrCat(dir, "/libcudadevrt.a");
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return absl::UnavailableError(absl::StrCat(
      "libcudadevrt.a (needed for dynamic parallelism) not found in ",
      absl::StrJoin(dirs, ":"),
      "; install the CUDA toolkit's cudart development files or set "
      "CUDA_HOME"));
}

absl::StatusOr<ModuleRecord> ModuleBuilder::LinkRecord(const LinkSpec& spec) {
  FJ_ASSIGN_OR_RETURN(ExitGate::Pass pass, ExitGate::Enter("linking"),
                      absl::StrCat("linking '", spec.name, "'"));
  auto start = std::chrono::steady_clock::now();
  const std::string context = absl::StrCat("linking '", spec.name, "'");
  if (spec.inputs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": no inputs"));
  }
  // 1. Target and copy implementation, as BuildRecord resolves them.
  FJ_ASSIGN_OR_RETURN(jit::Target target,
                      ResolveTarget(spec.target, spec.device, "link"));
  if (target.ptx) {
    return absl::InvalidArgumentError(
        absl::StrCat(context,
                     ": a link produces a cubin, so it needs an "
                     "sm_XX target, not ",
                     target.Name()));
  }
  std::optional<jit::CopyImpl> forced =
      jit::RuntimeOverrideFor(target, options_.copy_impl_override);
  FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, jit::MakeCopyPlan(target, forced),
                      context);
  bool lto = spec.lto;
  bool has_source = false;
  for (const LinkInputSpec& in : spec.inputs) {
    lto = lto || in.kind == LinkInputSpec::Kind::kLtoIr;
    has_source = has_source || in.kind == LinkInputSpec::Kind::kSource;
  }

  // The tools: NVRTC when a source is linked, nvJitLink always.
  ResolveLinker();
  const absl::StatusOr<std::string>& compiler = compiler_identity();
  if (has_source && !compiler.ok()) return Annotate(compiler.status(), context);
  if (!linker_identity_.ok())
    return Annotate(linker_identity_.status(), context);

  // Each source's request (its full option list is part of the key).
  const std::vector<jit::IncludeDir>& cuda_dirs = cuda_include_dirs();
  std::vector<jit::BuildRequest> requests(spec.inputs.size());
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const LinkInputSpec& in = spec.inputs[i];
    if (in.kind != LinkInputSpec::Kind::kSource) continue;
    FJ_RETURN_IF_ERROR(
        jit::CheckBuildInputs(in.data, in.options,
                              absl::StrCat("inputs[", i, "].nvrtc_options")),
        context);
    jit::BuildRequest& r = requests[i];
    r.source = in.data;
    r.name = in.name;
    r.target = target;
    r.copy_impl = plan.impl;
    r.options = in.options;
    r.name_expressions = in.name_expressions;
    r.device_code =
        lto ? jit::DeviceCode::kLtoIr : jit::DeviceCode::kRelocatable;
    for (const std::string& dir : spec.include_dirs) {
      r.include_dirs.push_back({dir, "include_dirs"});
    }
    r.include_dirs.insert(r.include_dirs.end(), cuda_dirs.begin(),
                          cuda_dirs.end());
  }
  std::string devrt;
  if (spec.devrt) {
    FJ_ASSIGN_OR_RETURN(std::string devrt_path, FindCudaDevrt(options_),
                        context);
    FJ_ASSIGN_OR_RETURN(devrt, ReadWholeFile(devrt_path), context);
  }
  jit::LinkRequest link;
  link.name = spec.name;
  link.target = target;
  link.copy_impl = plan.impl;
  link.options = spec.link_options;
  link.lto = lto;

  int layout_device = -1;
  for (int d : {spec.device, 0}) {
    if (d >= 0 && d < devices_.count() &&
        jit::TargetRunsOn(target, devices_.get(d).facts().arch())) {
      layout_device = d;
      break;
    }
  }
  auto compile = [&]() -> absl::StatusOr<jit::Artifact> {
    FJ_ASSIGN_OR_RETURN(const NvJitLinkApi* api, nvjitlink_->Get(), context);
    (void)api;
    jit::LinkRequest request = link;
    double compile_ms = 0;
    // The sources compile in parallel (NVRTC is thread-safe): a link of
    // several waits for its slowest compile, not for their sum.
    std::vector<std::optional<absl::StatusOr<jit::Artifact>>> built(
        spec.inputs.size());
    {
      std::vector<std::thread> threads;
      bool first = true;
      for (size_t i = 0; i < spec.inputs.size(); ++i) {
        if (spec.inputs[i].kind != LinkInputSpec::Kind::kSource) continue;
        if (first) {
          first = false;
          continue;  // compiled on this thread below
        }
        threads.emplace_back([&, i] {
          built[i].emplace(jit::BuildModule(*nvrtc_, requests[i]));
        });
      }
      for (size_t i = 0; i < spec.inputs.size(); ++i) {
        if (spec.inputs[i].kind != LinkInputSpec::Kind::kSource) continue;
        built[i].emplace(jit::BuildModule(*nvrtc_, requests[i]));
        break;
      }
      for (std::thread& t : threads) t.join();
    }
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const LinkInputSpec& in = spec.inputs[i];
      jit::LinkObject object;
      object.name = in.name;
      if (in.kind == LinkInputSpec::Kind::kSource) {
        FJ_ASSIGN_OR_RETURN(jit::Artifact built_source, std::move(*built[i]),
                            context);
        jit::Artifact& built = built_source;
        compile_ms = std::max(compile_ms, built.compile_ms);
        object.kind =
            lto ? jit::LinkObject::Kind::kLtoIr : jit::LinkObject::Kind::kCubin;
        object.bytes = std::move(built.image);
        object.ptx = std::move(built.ptx);
        object.named_kernels = std::move(built.kernels);
      } else {
        object.kind = ObjectKind(in.kind);
        object.bytes = in.data;
        if (in.kind == LinkInputSpec::Kind::kPtx) object.ptx = in.data;
      }
      request.objects.push_back(std::move(object));
    }
    if (spec.devrt) {
      jit::LinkObject object;
      object.kind = jit::LinkObject::Kind::kLibrary;
      object.name = "libcudadevrt.a";
      object.bytes = devrt;
      request.objects.push_back(std::move(object));
    }
    FJ_ASSIGN_OR_RETURN(jit::LinkResult linked,
                        jit::LinkModule(*nvjitlink_, request));
    jit::Artifact artifact = std::move(linked.artifact);
    artifact.compile_ms += compile_ms;
    if (compiler.ok()) {
      artifact.compiler = absl::StrCat(*compiler, "; ", *linker_identity_);
    } else {
      artifact.compiler = *linker_identity_;
    }
    if (!linked.unresolved_kernels.empty()) {
      // Kernels of prebuilt cubins: the driver says their parameters.
      if (layout_device < 0 || driver_ == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            context, ": no PTX describes the parameters of ",
            absl::StrJoin(linked.unresolved_kernels, ", "),
            " (a prebuilt cubin's or fatbin's kernels), and no device here "
            "runs ",
            target.Name(),
            " to read them from the driver; add the PTX "
            "instead, or link on a GPU host"));
      }
      jit::Artifact probe;
      probe.image = artifact.image;
      probe.target = artifact.target;
      for (const std::string& lowered : linked.unresolved_kernels) {
        jit::KernelEntry entry;
        entry.name = entry.lowered_name = lowered;
        probe.kernels.push_back(std::move(entry));
      }
      FJ_RETURN_IF_ERROR(
          ReadDriverParams(*driver_, devices_.get(layout_device), probe),
          context);
      for (const jit::KernelEntry& read : probe.kernels) {
        for (jit::KernelEntry& k : artifact.kernels) {
          if (k.lowered_name == read.lowered_name) {
            k.params = read.params;
            k.param_bytes = read.param_bytes;
          }
        }
      }
    }
    if (layout_device >= 0) {
      FJ_RETURN_IF_ERROR(AdoptDeviceParamLayouts(
                             *driver_, devices_.get(layout_device), artifact),
                         context);
    }
    return artifact;
  };

  ModuleRecord record;
  record.name = spec.name;
  if (!spec.use_cache) {
    FJ_ASSIGN_OR_RETURN(jit::Artifact artifact, compile());
    record.artifact =
        std::make_shared<const jit::Artifact>(std::move(artifact));
    {
      absl::MutexLock lock(&uncached_mu_);
      record.key = absl::StrCat("uncached-", ++uncached_counter_);
    }
    ScheduleFollowUp(std::nullopt, record.key, record.artifact, false);
  } else {
    // 2. The key: every input of the link, framed as the canonical key is.
    std::string manifest;
    Record(manifest, "link_inputs", absl::StrCat(spec.inputs.size()));
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const LinkInputSpec& in = spec.inputs[i];
      Record(manifest, "input_kind", KindName(in.kind));
      Record(manifest, "input_name", in.name);
      Record(manifest, "input_sha256", Digest(in.data));
      if (in.kind != LinkInputSpec::Kind::kSource) continue;
      for (const std::string& o : jit::BuildOptions(requests[i])) {
        Record(manifest, "input_option", o);
      }
      for (const std::string& e : in.name_expressions) {
        Record(manifest, "input_name_expression", e);
      }
      std::vector<std::string> paths;
      for (jit::IncludeDir& d : jit::SearchedDirs(requests[i])) {
        paths.push_back(std::move(d.path));
      }
      std::shared_ptr<const jit::IncludeScan> scan =
          scanner_.Scan(requests[i].source, paths);
      for (const auto& [include, digest] : scan->key_records) {
        Record(manifest, "input_disk_header",
               absl::StrCat(digest, " ", include));
      }
    }
    if (spec.devrt) Record(manifest, "libcudadevrt_sha256", Digest(devrt));
    CacheKeyInputs inputs;
    inputs.source = manifest;
    inputs.headers = {{"fleetjit embedded headers (sha256)", headers_digest_}};
    inputs.options = jit::LinkOptions(link);
    inputs.target = target.Name();
    inputs.copy_impl = std::string(jit::CopyImplName(plan.impl));
    inputs.compiler = has_source
                          ? absl::StrCat(*compiler, "; ", *linker_identity_)
                          : *linker_identity_;
    // Marks the key as a link's: no build's key can equal it.
    inputs.name_expressions = {"<device link>"};
    CacheKey key = MakeCacheKey(inputs);
    FJ_ASSIGN_OR_RETURN(
        ModuleCache::Result result,
        cache_.GetOrBuild(key, compile,
                          options_.cache.memory
                              ? ModuleCache::DiskStore::kDeferred
                              : ModuleCache::DiskStore::kNow));
    record.artifact = std::move(result.artifact);
    record.source = result.source;
    record.key = key.digest;
    ScheduleFollowUp(std::move(key), record.key, record.artifact,
                     result.disk_store_pending, std::move(result.build_lock));
  }
  record.build_ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  return record;
}

}  // namespace fleetjit
