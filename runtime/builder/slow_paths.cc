// The copy layer's slow paths, built once (docs/slow-path-library.md).
//
// Most of what a kernel on <fleetjit/copy.cuh> compiles is the layer's
// out-of-line slow paths (the tile walker, the unaligned and narrow-row
// fallbacks, the TMA load's software fallback), the same code in every
// such kernel. With RuntimeOptions::slow_path_library a build that may use
// them instead:
//  1. compiles the kernel with -dc and FJ_SLOW_PATHS_EXTERN (the slow paths
//     declared, not defined) and reads its kernels' register counts;
//  2. looks up the slow-path library of its target, copy implementation,
//     layer configuration (the -DFJ_* options) and register budget in the
//     cache tiers: a -dc build of the layer with FJ_SLOW_PATHS_LIBRARY
//     (every slow path for ranks 1 to 5) under -maxrregcount, so that
//     linking it never raises a kernel's register count;
//  3. if it is there, links the two with nvJitLink: the module is used as a
//     whole build's, under the same cache key;
//  4. if it is not, compiles the whole kernel as ever and builds that
//     library in the background, once per library key, for the builds that
//     follow (in this process, and in every process through the disk and
//     remote tiers).
// Anything unexpected on the separate route (nvJitLink missing, a compile
// or link error) falls back to the whole build, which reports the user's
// own errors as ever.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/exit_gate.h"
#include "base/status_macros.h"
#include "jit/image_reader.h"
#include "jit/include_scan.h"
#include "jit/link_build.h"
#include "runtime/builder/module_builder.h"

namespace fleetjit {
namespace {

constexpr char kLibrarySource[] =
    "// fleetjit: the copy layer's slow paths for this target and\n"
    "// implementation (docs/slow-path-library.md)\n"
    "#define FJ_SLOW_PATHS_LIBRARY\n"
    "#include <fleetjit/copy.cuh>\n";

bool IsLayerMacroOption(absl::string_view o) {
  return absl::ConsumePrefix(&o, "-D") || absl::ConsumePrefix(&o, "-U") ||
                 absl::ConsumePrefix(&o, "--define-macro=") ||
                 absl::ConsumePrefix(&o, "--undefine-macro=")
             ? absl::StartsWith(o, "FJ_")
             : false;
}

// Whether `source` defines or undefines an FJ_* macro itself: the layer's
// configuration would then differ from the library's.
bool DefinesLayerMacro(absl::string_view source) {
  for (absl::string_view line : absl::StrSplit(source, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "#")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "define") &&
        !absl::ConsumePrefix(&line, "undef")) {
      continue;
    }
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "FJ_"))
      return true;
  }
  return false;
}

bool IncludesLayer(absl::string_view source) {
  for (const auto& [angled, name] : jit::IncludeDirectives(source)) {
    if (name == "fleetjit/copy.cuh") return true;
  }
  return false;
}

// The register budget of the slow paths linked into `image`'s kernels. A
// linked kernel uses the most of its own and its callees' registers, so
// uncapped slow paths (up to 132 registers) would lower the occupancy of
// every kernel that links them. The budget is the largest of a few levels
// that does not exceed the fewest registers any of the kernels uses alone
// (so linking raises none of them), and at least 32 (a kernel at 32 or
// fewer can run 2048 threads per SM anyway). A few levels, not one per
// count: each is a library built once per target and implementation.
absl::StatusOr<int> SlowPathRegisterCap(absl::string_view image) {
  FJ_ASSIGN_OR_RETURN(std::vector<std::string> kernels,
                      jit::CubinKernelNames(image));
  FJ_ASSIGN_OR_RETURN(auto counts, jit::CubinRegisterCounts(image));
  int fewest = 0;
  for (const auto& [name, regs] : counts) {
    if (std::find(kernels.begin(), kernels.end(), name) == kernels.end())
      continue;
    if (fewest == 0 || regs < fewest) fewest = regs;
  }
  if (fewest == 0) {
    return absl::NotFoundError("no kernel of the image records its registers");
  }
  int cap = 32;
  for (int level : {48, 64, 96, 128, 168}) {
    if (level <= fewest) cap = level;
  }
  return cap;
}

}  // namespace

bool ModuleBuilder::SlowPathLibraryApplies(const BuildSpec& spec,
                                           const jit::BuildRequest& request) {
  if (!options_.slow_path_library || !spec.use_cache) return false;
  if (request.target.ptx || request.emit_ptx) return false;  // no link to PTX
  if (request.device_code != jit::DeviceCode::kWhole) return false;
  if (jit::IsRelocatableBuild(request.options)) return false;
  for (const std::string& o : request.options) {
    if (o == "-D" || o == "-U") return false;  // a macro in two words
  }
  return IncludesLayer(request.source) && !DefinesLayerMacro(request.source);
}

BuildSpec ModuleBuilder::SlowPathLibrarySpec(const BuildSpec& spec,
                                             const jit::BuildRequest& request,
                                             int register_cap) {
  BuildSpec lib;
  lib.source = kLibrarySource;
  lib.name = absl::StrCat("fleetjit slow paths (", request.target.Name(), ", ",
                          jit::CopyImplName(request.copy_impl), ", ",
                          register_cap, " registers)");
  lib.options = {"-dc", absl::StrCat("-maxrregcount=", register_cap)};
  for (const std::string& o : request.options) {
    if (IsLayerMacroOption(o)) lib.options.push_back(o);
  }
  lib.target = request.target;
  lib.copy_impl = request.copy_impl;
  lib.device = spec.device;
  lib.use_cache = true;
  lib.checkable = false;
  return lib;
}

void ModuleBuilder::BuildSlowPathLibrary(const std::string& name,
                                         const jit::BuildRequest& request,
                                         const CacheKey& key) {
  // Skipped when the runtime is going away before it started, or the
  // process is exiting (exit() waits for one that runs: base/exit_gate.h).
  if (closing_.load(std::memory_order_acquire)) return;
  absl::StatusOr<ExitGate::Pass> pass = ExitGate::Enter("building");
  if (!pass.ok()) return;
  absl::StatusOr<jit::Artifact> built = jit::BuildModule(*nvrtc_, request);
  absl::Status stored =
      built.ok()
          ? cache_.Update(
                key, std::make_shared<const jit::Artifact>(*std::move(built)))
          : built.status();
  if (!stored.ok()) {
    LoggerFor(options_).Log(LogLevel::kWarn,
                            absl::StrCat("slow paths: ", name,
                                         " not built or not stored (kernels "
                                         "keep compiling them): ",
                                         stored.message()));
  }
}

absl::StatusOr<std::optional<jit::Artifact>>
ModuleBuilder::BuildWithSlowPathLibrary(const BuildSpec& spec,
                                        const jit::BuildRequest& request,
                                        const std::string& compiler) {
  if (!SlowPathLibraryApplies(spec, request)) return std::nullopt;
  const Logger log = LoggerFor(options_);
  ResolveLinker();
  if (!linker_identity_.ok()) {
    log.Log(LogLevel::kDebug,
            absl::StrCat(
                "slow paths: compiled into '", spec.name,
                "' (no nvJitLink: ", linker_identity_.status().message(), ")"));
    return std::nullopt;
  }
  // 1. The kernel without the slow paths.
  const std::string context =
      absl::StrCat("slow paths: '", spec.name, "' compiled whole (");
  jit::BuildRequest own_request = request;
  own_request.device_code = jit::DeviceCode::kRelocatable;
  own_request.options.push_back("-DFJ_SLOW_PATHS_EXTERN");
  absl::StatusOr<jit::Artifact> own = jit::BuildModule(*nvrtc_, own_request);
  if (!own.ok()) {
    log.Log(LogLevel::kInfo,
            absl::StrCat(context, own.status().message(), ")"));
    return std::nullopt;
  }
  // 2. The library for its register budget, if some build already made it.
  absl::StatusOr<int> cap = SlowPathRegisterCap(own->image);
  if (!cap.ok()) {
    log.Log(LogLevel::kInfo,
            absl::StrCat(context, cap.status().message(), ")"));
    return std::nullopt;
  }
  const BuildSpec lib_spec = SlowPathLibrarySpec(spec, request, *cap);
  FJ_ASSIGN_OR_RETURN(jit::BuildRequest lib_request, ResolveRequest(lib_spec));
  const CacheKey lib_key = MakeCacheKey(BuildKeyInputs(lib_request, compiler));
  absl::StatusOr<ModuleCache::Result> lib = cache_.Find(lib_key);
  if (!lib.ok()) {
    // Not yet: this build compiles them; the library follows.
    bool first = false;
    {
      absl::MutexLock lock(&slow_path_mu_);
      first = slow_path_jobs_.insert(lib_key.digest).second;
    }
    if (first) {
      log.Log(LogLevel::kInfo,
              absl::StrCat("slow paths: building ", lib_spec.name,
                           " in the background for the builds that follow"));
      background_->Post(
          [this, name = lib_spec.name, lib_request = std::move(lib_request),
           lib_key] { BuildSlowPathLibrary(name, lib_request, lib_key); });
    }
    return std::nullopt;
  }
  // 3. The two linked.
  jit::LinkRequest link;
  link.name = spec.name;
  link.target = request.target;
  link.copy_impl = request.copy_impl;
  jit::LinkObject kernel;
  kernel.name = spec.name;
  kernel.bytes = own->image;
  kernel.ptx = own->ptx;
  kernel.named_kernels = own->kernels;
  link.objects.push_back(std::move(kernel));
  jit::LinkObject library;
  library.name = lib_spec.name;
  library.bytes = lib->artifact->image;
  link.objects.push_back(std::move(library));
  absl::StatusOr<jit::LinkResult> linked = jit::LinkModule(*nvjitlink_, link);
  if (!linked.ok() || !linked->unresolved_kernels.empty()) {
    log.Log(LogLevel::kInfo,
            absl::StrCat(context,
                         linked.ok() ? "a kernel's parameters are unknown"
                                     : linked.status().message(),
                         ")"));
    return std::nullopt;
  }
  // The module a whole build would make: the kernel's own PTX, log,
  // kernels (their layouts and C++ names) and globals, the linked image.
  jit::Artifact artifact = std::move(*own);
  artifact.image = std::move(linked->artifact.image);
  artifact.compile_ms += linked->artifact.compile_ms;
  log.Log(LogLevel::kDebug,
          absl::StrCat("slow paths: '", spec.name, "' linked with ",
                       lib_spec.name, " in ", artifact.compile_ms, " ms"));
  return std::optional<jit::Artifact>(std::move(artifact));
}

}  // namespace fleetjit
