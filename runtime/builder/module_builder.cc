#include "runtime/builder/module_builder.h"

#include <chrono>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/exit_gate.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "jit/embedded.h"
#include "jit/include_scan.h"
#include "jit/nvrtc_build.h"
#include "jit/nvrtc_pch.h"
#include "platform/cuda_headers.h"
#include "platform/nvrtc_locate.h"
#include "runtime/cache/published_compiler.h"
#include "runtime/load/module_loader.h"
#include "runtime/load/param_relayout.h"

namespace fleetjit {
namespace {

// Whether NVRTC `options` define or undefine macro `name`: -DNAME[=V],
// -UNAME, --define-macro=NAME[=V], --undefine-macro=NAME, or NAME[=V]
// standing alone (the value of a lone -D or -U before it).
bool OptionsNameMacro(const std::vector<std::string>& options,
                      absl::string_view name) {
  for (absl::string_view o : options) {
    for (absl::string_view prefix :
         {"--define-macro=", "--undefine-macro=", "-D", "-U"}) {
      if (absl::ConsumePrefix(&o, prefix)) break;
    }
    if (o.substr(0, o.find('=')) == name) return true;
  }
  return false;
}

bool IsEmbeddedHeader(absl::string_view name) {
  for (size_t i = 0; i < jit::kEmbeddedHeadersCount; ++i) {
    if (jit::kEmbeddedHeaders[i].path == name) return true;
  }
  return false;
}

// The folders a build searches, in NVRTC's order: what the include scan
// follows.
std::vector<std::string> SearchedPaths(const jit::BuildRequest& request) {
  std::vector<std::string> paths;
  for (jit::IncludeDir& d : jit::SearchedDirs(request))
    paths.push_back(std::move(d.path));
  return paths;
}

// Precompiled headers in the module cache's disk tier (jit/nvrtc_pch.h): an
// entry per PCH, keyed by jit's key material plus the compiler identity,
// the target, the copy implementation and the embedded headers' digest;
// its image is the PCH. The disk tier checks it (owner, key, checksum),
// counts it in the byte cap and evicts it like any entry.
class CachePchStore : public jit::PchFileStore {
 public:
  CachePchStore(ModuleCache& cache, const RuntimeOptions& options,
                const jit::BuildRequest& request, std::string compiler,
                std::string headers_digest)
      : cache_(cache),
        options_(options),
        request_(request),
        compiler_(std::move(compiler)),
        headers_digest_(std::move(headers_digest)) {}

  std::optional<std::string> Load(const std::string& key) override {
    std::optional<jit::Artifact> found = cache_.LoadDiskOnly(Key(key));
    // An empty image is what Drop leaves: absent.
    if (!found.has_value() || found->image.empty()) return std::nullopt;
    if (found->image.size() > jit::kMaxPchFileBytes) {
      Log("a stored precompiled header has an implausible size; ignored");
      return std::nullopt;
    }
    return std::move(found->image);
  }

  void Drop(const std::string& key) override { Store(key, ""); }

  void Store(const std::string& key, absl::string_view pch) override {
    jit::Artifact artifact;
    artifact.target = request_.target;
    artifact.copy_impl = request_.copy_impl;
    artifact.compiler = compiler_;
    artifact.image = std::string(pch);
    absl::Status stored = cache_.StoreDiskOnly(Key(key), artifact);
    if (!stored.ok()) {
      Log(absl::StrCat("precompiled header not stored: ", stored.message()));
    }
  }

  void Log(absl::string_view message) override {
    LoggerFor(options_).Log(LogLevel::kInfo, absl::StrCat("pch: ", message));
  }

 private:
  CacheKey Key(const std::string& material) const {
    CacheKeyInputs inputs;
    inputs.source = material;
    inputs.headers = {{"fleetjit embedded headers (sha256)", headers_digest_}};
    inputs.options = jit::BuildOptions(request_);
    inputs.target = request_.target.Name();
    inputs.copy_impl = std::string(jit::CopyImplName(request_.copy_impl));
    inputs.compiler = compiler_;
    inputs.name_expressions = {kPchNameExpression};
    return MakeCacheKey(inputs);
  }

  ModuleCache& cache_;
  const RuntimeOptions& options_;
  const jit::BuildRequest& request_;
  const std::string compiler_;
  const std::string headers_digest_;
};

}  // namespace

ModuleBuilder::ModuleBuilder(const RuntimeOptions& options,
                             const DriverApi* driver, const DeviceList& devices,
                             ModuleCache& cache, LaunchThunks& thunks,
                             ModuleLoader& loader)
    : options_(options),
      driver_(driver),
      devices_(devices),
      cache_(cache),
      thunks_(thunks),
      loader_(loader),
      scanner_(IsEmbeddedHeader),
      background_(std::make_unique<BackgroundWorker>()) {
  // The embedded headers never change within a build of the library: hash
  // them once so a cache key costs one hash of the user's source.
  Sha256 headers;
  for (size_t i = 0; i < jit::kEmbeddedHeadersCount; ++i) {
    const jit::EmbeddedFile& f = jit::kEmbeddedHeaders[i];
    headers.Update(f.path.data(), f.path.size() + 1);  // with the NUL
    headers.Update(f.content.data(), f.content.size() + 1);
  }
  headers_digest_ = Sha256::Hex(headers.Finish());
}

ModuleBuilder::~ModuleBuilder() {
  closing_.store(true, std::memory_order_release);
  background_.reset();
}

void ModuleBuilder::ResolveCompiler() {
  // Once: later calls read the results without writing anything shared.
  absl::call_once(identity_once_, [this] {
    auto path = ResolveNvrtcLibrary(options_.libnvrtc_path);
    CudaHeaderSearch search = options_.cuda_headers;
    search.nvrtc_library = path.ok() ? *path : "";
    for (CudaIncludeDir& d : FindCudaIncludeDirs(search)) {
      cuda_dirs_.push_back({std::move(d.path), std::move(d.origin)});
    }
    if (path.ok()) {
      identity_ = CompilerIdentity(*path);
      // "nvrtc 13.0.88 libnvrtc.so.13 size=N": the library must report the
      // version its cache key names.
      std::vector<std::string> words = identity_.ok()
                                           ? absl::StrSplit(*identity_, ' ')
                                           : std::vector<std::string>{};
      nvrtc_ = std::make_unique<NvrtcLibrary>(std::vector<std::string>{*path},
                                              words.size() > 1 ? words[1] : "");
    } else {
      identity_ = path.status();
    }
  });
}

const absl::StatusOr<std::string>& ModuleBuilder::compiler_identity() {
  ResolveCompiler();
  return identity_;
}

const std::vector<jit::IncludeDir>& ModuleBuilder::cuda_include_dirs() {
  ResolveCompiler();
  return cuda_dirs_;
}

absl::StatusOr<jit::Target> ModuleBuilder::ResolveTarget(
    const std::optional<jit::Target>& named, int device, const char* verb) {
  if (named.has_value()) return *named;
  if (options_.target_override.has_value()) return *options_.target_override;
  FJ_ASSIGN_OR_RETURN(
      Device * d, devices_.at(device),
      absl::StrCat(verb, "ing for the live device (name a target to ", verb,
                   " without a GPU)"));
  return jit::TargetForDevice(d->facts().cc_major, d->facts().cc_minor);
}

absl::StatusOr<jit::BuildRequest> ModuleBuilder::ResolveRequest(
    const BuildSpec& spec) {
  FJ_RETURN_IF_ERROR(
      jit::CheckBuildInputs(spec.source, spec.options, "nvrtc_options"));
  // 1. The target: explicit, else the runtime's override, else the device.
  FJ_ASSIGN_OR_RETURN(jit::Target target,
                      ResolveTarget(spec.target, spec.device, "build"));
  // The forced target yields to a build's own copy implementation that it
  // lacks: such a build gets the device's target, as without the override
  // (a rehearsal under FLEETJIT_TARGET=compute_80 does not fail a suite's
  // explicit tma build). Without a device MakeCopyPlan refuses it below.
  if (!spec.target.has_value() && options_.target_override.has_value() &&
      spec.copy_impl.has_value() &&
      !jit::TargetHasCopyImpl(target, *spec.copy_impl)) {
    const jit::Target forced_target = target;
    if (absl::StatusOr<Device*> d = devices_.at(spec.device); d.ok()) {
      target =
          jit::TargetForDevice((*d)->facts().cc_major, (*d)->facts().cc_minor);
      LoggerFor(options_).Log(
          LogLevel::kInfo,
          absl::StrCat("building '", spec.name, "' for ", target.Name(),
                       " (the device's target): the forced target ",
                       forced_target.Name(),
                       " lacks the build's copy "
                       "implementation ",
                       jit::CopyImplName(*spec.copy_impl)));
    }
  }
  // 2. The copy implementation: the build's own, checked against the
  // target's hardware; else the runtime's forced one where the target has
  // it (jit::RuntimeOverrideFor), else the target's best.
  std::optional<jit::CopyImpl> forced = spec.copy_impl;
  if (!forced.has_value()) {
    forced = jit::RuntimeOverrideFor(target, options_.copy_impl_override);
    if (!forced.has_value() && options_.copy_impl_override.has_value()) {
      LoggerFor(options_).Log(
          LogLevel::kInfo,
          absl::StrCat("building '", spec.name, "' for ", target.Name(),
                       " with ",
                       jit::CopyImplName(jit::ChooseCopyImplementation(target)),
                       ": the forced copy implementation ",
                       jit::CopyImplName(*options_.copy_impl_override),
                       " needs a newer target"));
    }
  }
  FJ_ASSIGN_OR_RETURN(jit::CopyPlan plan, jit::MakeCopyPlan(target, forced),
                      absl::StrCat("building '", spec.name, "'"));

  jit::BuildRequest request;
  request.source = spec.source;
  request.name = spec.name;
  request.target = target;
  request.copy_impl = plan.impl;
  request.emit_ptx = spec.output == BuildSpec::Output::kPtx;
  request.options = spec.options;
  if (options_.check && spec.checkable &&
      !OptionsNameMacro(spec.options, "FJ_CHECK")) {
    // The copy layer's checked mode, unless the build says otherwise.
    request.options.push_back("-DFJ_CHECK=1");
  }
  if (spec.checkable) {
    // FLEETJIT_COPY_DEFINES, each unless the build says otherwise.
    for (const std::string& d : options_.copy_defines) {
      const absl::string_view name =
          absl::string_view(d).substr(2, d.find('=') - 2);  // "-D" NAME "="
      if (!OptionsNameMacro(spec.options, name)) request.options.push_back(d);
    }
  }
  request.name_expressions = spec.name_expressions;
  request.use_pch = options_.pch;
  for (const std::string& dir : spec.include_dirs) {
    request.include_dirs.push_back({dir, "include_dirs"});
  }
  const std::vector<jit::IncludeDir>& cuda_dirs = cuda_include_dirs();
  request.include_dirs.insert(request.include_dirs.end(), cuda_dirs.begin(),
                              cuda_dirs.end());
  if (spec.output == BuildSpec::Output::kCubin && target.ptx) {
    return absl::InvalidArgumentError(
        absl::StrCat("a cubin needs an sm_XX target, not ", target.Name()));
  }
  return request;
}

CacheKeyInputs ModuleBuilder::BuildKeyInputs(const jit::BuildRequest& request,
                                             const std::string& compiler) {
  CacheKeyInputs inputs;
  inputs.source = request.source;
  inputs.headers = {{"fleetjit embedded headers (sha256)", headers_digest_}};
  // Every header the build may read from disk (the caller's and CUDA's),
  // by include name and content digest, never by path: machines with the
  // same headers in other folders share keys, and an edited, added or
  // removed header changes the key.
  std::shared_ptr<const jit::IncludeScan> scan =
      scanner_.Scan(request.source, SearchedPaths(request));
  inputs.disk_headers = scan->key_records;
  inputs.options = jit::BuildOptions(request);
  inputs.target = request.target.Name();
  inputs.copy_impl = std::string(jit::CopyImplName(request.copy_impl));
  inputs.compiler = compiler;
  inputs.name_expressions = request.name_expressions;
  inputs.emit_ptx = request.emit_ptx;
  return inputs;
}

absl::StatusOr<ModuleRecord> ModuleBuilder::BuildRecord(const BuildSpec& spec) {
  // exit() waits for the build (NVRTC, the driver's module loads, the disk
  // cache) before any library's exit handlers run (base/exit_gate.h).
  FJ_ASSIGN_OR_RETURN(ExitGate::Pass pass, ExitGate::Enter("building"),
                      absl::StrCat("building '", spec.name, "'"));
  auto start = std::chrono::steady_clock::now();
  FJ_ASSIGN_OR_RETURN(jit::BuildRequest request, ResolveRequest(spec));
  const jit::Target& target = request.target;

  // 3. Fetch or compile. Without NVRTC only a published entry can serve.
  const absl::StatusOr<std::string>& compiler = compiler_identity();
  if (!compiler.ok() && !spec.use_cache) {
    return Annotate(compiler.status(),
                    absl::StrCat("building '", spec.name, "'"));
  }
  // PCHs outlive the process in the disk tier when the build may use it.
  std::optional<CachePchStore> pch_store;
  if (request.use_pch && spec.use_cache && compiler.ok() && cache_.has_disk()) {
    pch_store.emplace(cache_, options_, request, *compiler, headers_digest_);
    request.pch_files = &*pch_store;
  }
  ModuleRecord record;
  record.name = spec.name;
  int layout_device = -1;
  // A relocatable image (-dc, -rdc=true, -dlto) loads only once linked
  // (fj_module_link): its layout comes from its PTX, not from a load.
  for (int d : {spec.device, 0}) {
    if (jit::IsRelocatableBuild(spec.options)) break;
    if (d >= 0 && d < devices_.count() &&
        jit::TargetRunsOn(target, devices_.get(d).facts().arch())) {
      layout_device = d;
      break;
    }
  }
  auto compile = [&]() -> absl::StatusOr<jit::Artifact> {
    // The layer's slow paths from their library when it is built (else
    // compiled here, and the library built in the background for later
    // builds: slow_paths.cc).
    std::optional<jit::Artifact> separate;
    if (spec.use_cache && compiler.ok()) {
      FJ_ASSIGN_OR_RETURN(separate,
                          BuildWithSlowPathLibrary(spec, request, *compiler));
    }
    FJ_ASSIGN_OR_RETURN(jit::Artifact artifact,
                        separate.has_value()
                            ? std::move(*separate)
                            : jit::BuildModule(*nvrtc_, request));
    // Parameter offsets are the driver's to choose (64-byte-aligned tensor
    // parameters move with the architecture's parameter bank). When the
    // image runs on a device here, take its layout now, so the thunks and
    // the cached artifact match what a load will find.
    if (layout_device >= 0) {
      FJ_RETURN_IF_ERROR(AdoptDeviceParamLayouts(
                             *driver_, devices_.get(layout_device), artifact),
                         absl::StrCat("building '", spec.name, "'"));
    }
    // The launch thunks travel in the artifact, so the cache stores them and
    // a hit runs no LLVM; they are generated after Build returns (see
    // ScheduleFollowUp), not here.
    return artifact;
  };
  if (spec.use_cache) {
    CacheKeyInputs inputs =
        BuildKeyInputs(request, compiler.ok() ? *compiler : "");
    if (!compiler.ok()) {
      // No NVRTC here: the rule of runtime/cache/cache_key.h ("Hosts
      // without a compiler") picks what another host published.
      int driver_version = 0;
      if (driver_ != nullptr)
        (void)driver_->cuDriverGetVersion(&driver_version);
      CacheKey agnostic = CompilerAgnosticKey(inputs);
      absl::StatusOr<ModuleCache::Result> published =
          cache_.GetPublished(agnostic, [&](absl::string_view recorded) {
            return CheckPublishedCompiler(recorded, inputs.target,
                                          driver_version);
          });
      if (!published.ok()) {
        return Annotate(
            compiler.status(),
            absl::StrCat("building '", spec.name, "' (and without a compiler: ",
                         published.status().message(), ")"));
      }
      record.artifact = std::move(published->artifact);
      record.source = published->source;
      record.key = agnostic.digest;
      ScheduleFollowUp(std::nullopt, record.key, record.artifact, false);
      record.build_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
      return record;
    }
    CacheKey key = MakeCacheKey(inputs);
    // A module linked against the slow-path library runs slower than a
    // whole build of the same source in some kernels, so it lives under a
    // key of its own: processes with the option off never load one. With
    // the option on, a whole build in any tier still serves as it is
    // (docs/slow-path-library.md, "Cache keys").
    std::optional<ModuleCache::Result> result;
    if (SlowPathLibraryApplies(spec, request)) {
      absl::StatusOr<ModuleCache::Result> whole = cache_.Find(key);
      if (whole.ok()) {
        result = *std::move(whole);
      } else {
        inputs.options.push_back(kSlowPathsLinkedKeyOption);
        key = MakeCacheKey(inputs);
      }
    }
    // The disk store waits for the thunk object: one write, off the path.
    // Only with a memory tier, which serves the key meanwhile; without one
    // the entry is written now, or the next Build of the key could compile
    // again before the background write.
    if (!result.has_value()) {
      FJ_ASSIGN_OR_RETURN(
          result, cache_.GetOrBuild(key, compile,
                                    options_.cache.memory
                                        ? ModuleCache::DiskStore::kDeferred
                                        : ModuleCache::DiskStore::kNow));
    }
    record.artifact = std::move(result->artifact);
    record.source = result->source;
    record.key = key.digest;
    ScheduleFollowUp(std::move(key), record.key, record.artifact,
                     result->disk_store_pending, std::move(result->build_lock));
  } else {
    FJ_ASSIGN_OR_RETURN(jit::Artifact artifact, compile());
    record.artifact =
        std::make_shared<const jit::Artifact>(std::move(artifact));
    {
      absl::MutexLock lock(&uncached_mu_);
      record.key = absl::StrCat("uncached-", ++uncached_counter_);
    }
    ScheduleFollowUp(std::nullopt, record.key, record.artifact, false);
  }
  record.build_ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  return record;
}

void ModuleBuilder::ScheduleFollowUp(
    std::optional<CacheKey> key, const std::string& record_key,
    std::shared_ptr<const jit::Artifact> artifact, bool disk_pending,
    std::shared_ptr<DiskCache::KeyLock> build_lock) {
  bool need_thunk = false;
  if (thunks_.enabled() && artifact->thunk_object.empty()) {
    // Once per record key: memory hits of a module whose thunk is being
    // generated (or failed) queue nothing more.
    absl::MutexLock lock(&thunk_jobs_mu_);
    need_thunk = thunk_jobs_.try_emplace(record_key).second;
  }
  if (!need_thunk && !disk_pending) return;
  // The lock goes with the job, released when the job is done (or
  // dropped, at exit).
  background_->Post([this, key = std::move(key), record_key,
                     artifact = std::move(artifact), need_thunk, disk_pending,
                     build_lock = std::move(build_lock)] {
    RunFollowUp(key, record_key, artifact, need_thunk, disk_pending);
    (void)build_lock;  // held to here
  });
}

void ModuleBuilder::RunFollowUp(
    const std::optional<CacheKey>& key, const std::string& record_key,
    const std::shared_ptr<const jit::Artifact>& artifact, bool need_thunk,
    bool disk_pending) {
  std::shared_ptr<const jit::Artifact> published = artifact;
  if (need_thunk) {
    // 1. The thunk object, on a copy: callers may be reading `artifact`.
    // A failure leaves launches on the generic path (as ever).
    auto with_thunk = std::make_shared<jit::Artifact>(*artifact);
    absl::Status generated = thunks_.AddThunkObject(*with_thunk);
    if (generated.ok() && !with_thunk->thunk_object.empty()) {
      published = std::move(with_thunk);
    } else if (!generated.ok()) {
      LoggerFor(options_).Log(
          LogLevel::kWarn,
          absl::StrCat(
              "background: launch thunk for ", record_key,
              " not generated (launches stay generic): ", generated.message()));
    }
    // 2. Attach it to the kernels loaded meanwhile. LoadKernel inserts a
    // kernel before it reads the job's state, and we mark the job done
    // before we list the kernels: each kernel is seen by one side or both
    // (Attach is idempotent).
    {
      absl::MutexLock lock(&thunk_jobs_mu_);
      ThunkJob& job = thunk_jobs_[record_key];
      job.done = true;
      if (published != artifact) job.with_thunk = published;
    }
    // Without a thunk object (generation failed) Attach generates per
    // signature, as it always has for artifacts that carry none.
    for (LoadedKernel* k : loader_.ThunkableKernels(record_key)) {
      (void)thunks_.Attach(*published, *k);
    }
  }
  // 3. Publish: memory tier (later hits get the thunk) and disk, atomically
  // (temp + fsync + rename). A failed write was logged by the cache.
  if (key.has_value() && (published != artifact || disk_pending)) {
    (void)cache_.Update(*key, published);
  }
}

void ModuleBuilder::AttachThunk(const std::string& record_key,
                                const jit::Artifact& image_artifact,
                                LoadedKernel& k) {
  if (!thunks_.enabled()) return;
  const jit::Artifact* source = &image_artifact;
  std::shared_ptr<const jit::Artifact> with_thunk;  // keeps `source` alive
  {
    absl::MutexLock lock(&thunk_jobs_mu_);
    auto it = thunk_jobs_.find(record_key);
    if (it != thunk_jobs_.end()) {
      // Being generated: the generator attaches it when ready; launches
      // take the generic path until then.
      if (!it->second.done) return;
      if (it->second.with_thunk != nullptr) {
        with_thunk = it->second.with_thunk;
        source = with_thunk.get();
      }
    }
  }
  // Without a thunk (disabled, or it failed) launches take the generic path.
  (void)thunks_.Attach(*source, k);
}

}  // namespace fleetjit
