#include "jit/nvrtc_build.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/exit_gate.h"
#include "base/status_macros.h"
#include "jit/embedded.h"
#include "jit/nvrtc_pch.h"
#include "jit/param_layout.h"
#include "jit/source_signature.h"
#include "platform/nvrtc_library.h"

namespace fleetjit::jit {
namespace {

// Destroys the program however the build ends.
struct ProgramGuard {
  const NvrtcApi* api;
  nvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program != nullptr) api->nvrtcDestroyProgram(&program);
  }
};

std::string ProgramLog(const NvrtcApi& api, nvrtcProgram program) {
  size_t size = 0;
  if (api.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS ||
      size <= 1) {
    return "";
  }
  std::string log(size, '\0');
  if (api.nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the NUL
  return log;
}

absl::Status BuildError(const BuildRequest& request,
                        const std::vector<std::string>& options,
                        absl::string_view log) {
  std::string missing = MissingHeader(log);
  std::string searched;
  if (!missing.empty()) {
    std::vector<std::string> dirs;
    for (const IncludeDir& d : SearchedDirs(request)) {
      dirs.push_back(absl::StrCat(d.path, " (", d.origin, ")"));
    }
    searched = dirs.empty() ? "no folder" : absl::StrJoin(dirs, ", ");
  }
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(
      "NVRTC could not compile '", request.name, "' for ",
      request.target.Name(), " with copy implementation ",
      CopyImplName(request.copy_impl),
      missing.empty() ? ""
                      : absl::StrCat(": header '", missing,
                                     "' not found; searched: ", searched,
                                     " (add a folder with include_dirs or -I)"),
      ":\n", log));
  if (!missing.empty()) {
    SetDetail(status, "missing_header", missing);
    SetDetail(status, "searched", searched);
  }
  SetPublicCode(status, PublicCode::kBuildError);
  SetDetail(status, "build_log", log);
  SetDetail(status, "options", absl::StrJoin(options, " "));
  SetDetail(status, "target", request.target.Name());
  SetDetail(status, "copy_impl", CopyImplName(request.copy_impl));
  return status;
}

}  // namespace

// -DFJ_COPY_IMPL selects the device layer's implementation
// (include/fleetjit/copy.cuh: 0 sync, 1 cp_async, 2 tma): jit::CopyImpl's
// own numbering, tied here.
static_assert(static_cast<int>(CopyImpl::kSync) == 0 &&
                  static_cast<int>(CopyImpl::kCpAsync) == 1 &&
                  static_cast<int>(CopyImpl::kTma) == 2,
              "jit::CopyImpl must number like FJ_COPY_IMPL in copy.cuh");

std::vector<std::string> BuildOptions(const BuildRequest& request) {
  std::vector<std::string> options = {
      request.target.NvrtcArchOption(),
      absl::StrCat("-DFJ_COPY_IMPL=", static_cast<int>(request.copy_impl)),
      "-std=c++17",
  };
  if (request.device_code == DeviceCode::kRelocatable) options.push_back("-dc");
  if (request.device_code == DeviceCode::kLtoIr) options.push_back("-dlto");
  options.insert(options.end(), request.options.begin(), request.options.end());
  return options;
}

namespace {

// "FJ_COPY_IMPL" or "FJ_COPY_IMPL=...": the macro copy.cuh selects its
// implementation by.
bool NamesCopyImpl(absl::string_view macro) {
  return absl::ConsumePrefix(&macro, "FJ_COPY_IMPL") &&
         (macro.empty() || macro[0] == '=');
}
bool DefinesCopyImpl(absl::string_view o) {
  for (absl::string_view prefix :
       {"-D", "-U", "--define-macro=", "--undefine-macro="}) {
    absl::string_view rest = o;
    if (absl::ConsumePrefix(&rest, prefix) && NamesCopyImpl(rest)) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckBuildInputs(absl::string_view source,
                              const std::vector<std::string>& options,
                              absl::string_view field) {
  if (size_t nul = source.find('\0'); nul != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the source has a NUL byte at offset ", nul, " of ", source.size(),
        " (NVRTC would stop reading there); pass its text only"));
  }
  // Short and long forms that take the next option as their value.
  static constexpr absl::string_view kTakesNext[] = {"-D",
                                                     "--define-macro",
                                                     "-U",
                                                     "--undefine-macro",
                                                     "-I",
                                                     "--include-path",
                                                     "-include",
                                                     "--pre-include",
                                                     "-isystem",
                                                     "-maxrregcount",
                                                     "--maxrregcount",
                                                     "-std",
                                                     "--std"};
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    const std::string name = absl::StrCat(field, "[", i, "]");
    if (size_t nul = o.find('\0'); nul != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " has a NUL byte at offset ", nul,
                       "; pass one option per entry"));
    }
    if (o.empty())
      return absl::InvalidArgumentError(absl::StrCat(name, " is empty"));
    if (o == "-arch" || o == "--gpu-architecture" ||
        absl::StartsWith(o, "-arch=") ||
        absl::StartsWith(o, "--gpu-architecture=")) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " ('", o,
          "') sets the target: name it in the build's target instead "
          "(fleetjit passes -arch itself, and reports the target it built)"));
    }
    if (DefinesCopyImpl(o) ||
        ((o == "-D" || o == "-U" || o == "--define-macro" ||
          o == "--undefine-macro") &&
         i + 1 < options.size() && NamesCopyImpl(options[i + 1]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " ('", o,
          "...') sets FJ_COPY_IMPL, which fleetjit sets from the build's copy "
          "implementation (its module info reports it): force one with "
          "copy_impl (fleetjit build --impl) instead"));
    }
    if (i + 1 == options.size()) {
      for (absl::string_view t : kTakesNext) {
        if (o == t) {
          return absl::InvalidArgumentError(absl::StrCat(
              name, " ('", o, "') is the last option but takes a value: write ",
              o, "=VALUE, ", o, "VALUE or put the value in the next entry"));
        }
      }
    }
  }
  return absl::OkStatus();
}

bool IsRelocatableBuild(const std::vector<std::string>& options) {
  for (const std::string& o : options) {
    if (o == "-dc" || o == "--device-c" || o == "-rdc=true" ||
        o == "--relocatable-device-code=true" || o == "-dlto" ||
        o == "--dlink-time-opt") {
      return true;
    }
  }
  return false;
}

std::vector<IncludeDir> SearchedDirs(const BuildRequest& request) {
  std::vector<IncludeDir> dirs;
  const std::vector<std::string>& o = request.options;
  for (size_t i = 0; i < o.size(); ++i) {
    absl::string_view opt = o[i];
    if ((opt == "-I" || opt == "--include-path") && i + 1 < o.size()) {
      dirs.push_back({o[++i], "nvrtc_options"});
    } else if (absl::ConsumePrefix(&opt, "--include-path=") ||
               absl::ConsumePrefix(&opt, "-I")) {
      dirs.push_back({std::string(opt), "nvrtc_options"});
    }
  }
  dirs.insert(dirs.end(), request.include_dirs.begin(),
              request.include_dirs.end());
  return dirs;
}

std::string MissingHeader(absl::string_view log) {
  // EDG's wording: `catastrophic error: cannot open source file "x.h"`.
  for (absl::string_view marker :
       {"cannot open source file \"", "could not open source file \""}) {
    size_t at = log.find(marker);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = log.substr(at + marker.size());
    return std::string(rest.substr(0, rest.find('"')));
  }
  return "";
}

std::string SupportedTargetsText(const NvrtcApi& api) {
  std::string out;
  for (int arch : api.supported_archs) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", "sm_", arch);
  }
  return out;
}

absl::Status CheckTargetSupported(const NvrtcApi& api, const Target& target) {
  if (api.supported_archs.empty() ||
      std::find(api.supported_archs.begin(), api.supported_archs.end(),
                target.arch) != api.supported_archs.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "target ", target.Name(), " is not supported by NVRTC ", api.major, ".",
      api.minor, " (", api.library_path, "), which builds ",
      SupportedTargetsText(api),
      " (nvrtcGetSupportedArchs; compute_XX and the a/f suffixes of those "
      "too): name one of them, or use an NVRTC that still builds ",
      target.Name()));
}

absl::StatusOr<Artifact> BuildModule(NvrtcLibrary& nvrtc,
                                     const BuildRequest& request) {
  // Held until NVRTC is done with this build: exit() waits for it.
  FJ_ASSIGN_OR_RETURN(ExitGate::Pass pass, ExitGate::Enter("NVRTC"),
                      absl::StrCat("building '", request.name, "'"));
  FJ_ASSIGN_OR_RETURN(const NvrtcApi* api, nvrtc.Get(),
                      absl::StrCat("building '", request.name, "'"));
  FJ_RETURN_IF_ERROR(CheckTargetSupported(*api, request.target),
                     absl::StrCat("building '", request.name, "'"));
  auto start = std::chrono::steady_clock::now();

  std::vector<const char*> header_names, header_sources;
  for (size_t i = 0; i < kEmbeddedHeadersCount; ++i) {
    header_names.push_back(kEmbeddedHeaders[i].path.data());
    header_sources.push_back(kEmbeddedHeaders[i].content.data());
  }
  // Declared before the program so that the PCH slot is held until the
  // program is destroyed: nothing of the PCH heap outlives the slot.
  std::unique_ptr<PchBuild> pch;
  ProgramGuard guard{api};
  FJ_RETURN_IF_ERROR(CheckNvrtc(*api,
                                api->nvrtcCreateProgram(
                                    &guard.program, request.source.c_str(),
                                    request.name.c_str(),
                                    static_cast<int>(header_names.size()),
                                    header_sources.data(), header_names.data()),
                                "nvrtcCreateProgram"),
                     absl::StrCat("building '", request.name, "'"));
  for (const std::string& expr : request.name_expressions) {
    FJ_RETURN_IF_ERROR(
        CheckNvrtc(*api,
                   api->nvrtcAddNameExpression(guard.program, expr.c_str()),
                   "nvrtcAddNameExpression"),
        absl::StrCat("adding name expression '", expr, "'"));
  }
  std::vector<std::string> options = BuildOptions(request);
  for (const IncludeDir& d : request.include_dirs)
    options.push_back("-I" + d.path);
  if (request.use_pch) {
    pch = StartPchBuild(*api, options, request.source, request.pch_files);
  }
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  if (pch != nullptr) {
    for (const std::string& o : pch->options())
      option_ptrs.push_back(o.c_str());
  }
  nvrtcResult compiled = api->nvrtcCompileProgram(
      guard.program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::string log = ProgramLog(*api, guard.program);
  if (pch != nullptr)
    pch->Finish(guard.program, compiled == NVRTC_SUCCESS, &log);
  if (compiled == NVRTC_ERROR_COMPILATION ||
      compiled == NVRTC_ERROR_INVALID_OPTION) {
    // The source or the caller's options: a build error with NVRTC's log.
    if (log.empty()) log = api->nvrtcGetErrorString(compiled);
    return BuildError(request, options, log);
  }
  if (compiled != NVRTC_SUCCESS) {
    // NVRTC itself failed (out of memory, an internal error): not the
    // source's fault, and named as NVRTC's.
    absl::Status status = CheckNvrtc(*api, compiled, "nvrtcCompileProgram");
    // With a log it is reported as a build error, carrying the log.
    if (!log.empty()) {
      SetPublicCode(status, PublicCode::kBuildError);
      SetDetail(status, "build_log", log);
    }
    return Annotate(status, absl::StrCat("compiling '", request.name, "' for ",
                                         request.target.Name()));
  }

  Artifact artifact;
  artifact.target = request.target;
  artifact.copy_impl = request.copy_impl;
  artifact.log = std::move(log);
  artifact.compiler = absl::StrCat("nvrtc ", api->major, ".", api->minor);
  size_t ptx_size = 0;
  FJ_RETURN_IF_ERROR(
      CheckNvrtc(*api, api->nvrtcGetPTXSize(guard.program, &ptx_size),
                 "nvrtcGetPTXSize"),
      "reading PTX");
  artifact.ptx.resize(ptx_size);
  FJ_RETURN_IF_ERROR(
      CheckNvrtc(*api, api->nvrtcGetPTX(guard.program, artifact.ptx.data()),
                 "nvrtcGetPTX"),
      "reading PTX");
  while (!artifact.ptx.empty() && artifact.ptx.back() == '\0')
    artifact.ptx.pop_back();
  artifact.is_ptx = request.target.ptx || request.emit_ptx;
  if (request.device_code == DeviceCode::kLtoIr) {
    if (api->nvrtcGetLTOIRSize == nullptr || api->nvrtcGetLTOIR == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("this NVRTC (", api->major, ".", api->minor,
                       ") cannot return LTO-IR: -dlto needs NVRTC 12.0+"));
    }
    size_t lto_size = 0;
    FJ_RETURN_IF_ERROR(
        CheckNvrtc(*api, api->nvrtcGetLTOIRSize(guard.program, &lto_size),
                   "nvrtcGetLTOIRSize"),
        "reading the LTO-IR");
    artifact.image.resize(lto_size);
    FJ_RETURN_IF_ERROR(
        CheckNvrtc(*api,
                   api->nvrtcGetLTOIR(guard.program, artifact.image.data()),
                   "nvrtcGetLTOIR"),
        "reading the LTO-IR");
    artifact.is_ptx = false;
  } else if (artifact.is_ptx) {
    artifact.image = artifact.ptx;
  } else {
    size_t cubin_size = 0;
    FJ_RETURN_IF_ERROR(
        CheckNvrtc(*api, api->nvrtcGetCUBINSize(guard.program, &cubin_size),
                   "nvrtcGetCUBINSize"),
        "reading the cubin");
    artifact.image.resize(cubin_size);
    FJ_RETURN_IF_ERROR(
        CheckNvrtc(*api,
                   api->nvrtcGetCUBIN(guard.program, artifact.image.data()),
                   "nvrtcGetCUBIN"),
        "reading the cubin");
  }

  // Kernels: every name expression that lowers to an entry of the PTX,
  // then every extern "C" entry. A name expression lowering to anything
  // else names a variable: a global (fj_module_get_global).
  const std::vector<std::string> entry_names = PtxEntryNames(artifact.ptx);
  for (const std::string& expr : request.name_expressions) {
    const char* lowered = nullptr;
    FJ_RETURN_IF_ERROR(CheckNvrtc(*api,
                                  api->nvrtcGetLoweredName(
                                      guard.program, expr.c_str(), &lowered),
                                  "nvrtcGetLoweredName"),
                       absl::StrCat("looking up '", expr, "'"));
    if (std::find(entry_names.begin(), entry_names.end(), lowered) ==
        entry_names.end()) {
      artifact.globals.push_back(GlobalEntry{expr, lowered});
      continue;
    }
    KernelEntry entry;
    entry.name = expr;
    entry.lowered_name = lowered;
    artifact.kernels.push_back(std::move(entry));
  }
  for (const std::string& entry_name : entry_names) {
    bool known = false;
    for (const KernelEntry& k : artifact.kernels) {
      known = known || k.lowered_name == entry_name;
    }
    if (known) continue;
    KernelEntry entry;
    entry.name = entry_name;
    entry.lowered_name = entry_name;
    artifact.kernels.push_back(std::move(entry));
  }
  // LTO-IR has no PTX: the link reads the layouts (jit/link_build.h).
  for (KernelEntry& entry : artifact.kernels) {
    if (request.device_code == DeviceCode::kLtoIr) break;
    FJ_ASSIGN_OR_RETURN(entry.params,
                        ParsePtxParams(artifact.ptx, entry.lowered_name),
                        absl::StrCat("reading the parameters of ", entry.name));
    FJ_RETURN_IF_ERROR(ApplyCxxSignature(entry.lowered_name, entry.params),
                       absl::StrCat("reading the signature of ", entry.name));
    // An extern "C" kernel's FJ_TENSOR types, from its declaration.
    ApplySourceSignature(request.source, options, entry.lowered_name,
                         entry.params);
    entry.param_bytes = ParamBufferBytes(entry.params);
  }
  artifact.compile_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  return artifact;
}

absl::StatusOr<Artifact> BuildModule(const BuildRequest& request) {
  return BuildModule(NvrtcLibrary::Default(), request);
}

}  // namespace fleetjit::jit
