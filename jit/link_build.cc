#include "jit/link_build.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "jit/image_reader.h"
#include "jit/param_layout.h"
#include "platform/nvjitlink_library.h"

namespace fleetjit::jit {
namespace {

NvJitLinkInput InputType(LinkObject::Kind kind) {
  switch (kind) {
    case LinkObject::Kind::kCubin:
      return NvJitLinkInput::kCubin;
    case LinkObject::Kind::kPtx:
      return NvJitLinkInput::kPtx;
    case LinkObject::Kind::kFatbin:
      return NvJitLinkInput::kFatbin;
    case LinkObject::Kind::kLtoIr:
      return NvJitLinkInput::kLtoIr;
    case LinkObject::Kind::kLibrary:
      return NvJitLinkInput::kLibrary;
  }
  return NvJitLinkInput::kCubin;
}

// Destroys the handle however the link ends.
struct HandleGuard {
  const NvJitLinkApi* api;
  NvJitLinkHandle handle = nullptr;
  ~HandleGuard() {
    if (handle != nullptr) (void)api->nvJitLinkDestroy(&handle);
  }
};

std::string ReadLog(const NvJitLinkApi& api, NvJitLinkHandle handle,
                    bool error_log) {
  size_t size = 0;
  int r = error_log ? api.nvJitLinkGetErrorLogSize(handle, &size)
                    : api.nvJitLinkGetInfoLogSize(handle, &size);
  if (r != kNvJitLinkSuccess || size == 0) return "";
  std::string log(size, '\0');
  r = error_log ? api.nvJitLinkGetErrorLog(handle, log.data())
                : api.nvJitLinkGetInfoLog(handle, log.data());
  if (r != kNvJitLinkSuccess) return "";
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

// One nvJitLink run over `objects` with `options`: the linked cubin, or
// with -ptx the linked PTX. `info_log` receives the info log.
absl::StatusOr<std::string> RunLink(
    const NvJitLinkApi& api, const LinkRequest& request,
    const std::vector<const LinkObject*>& objects,
    const std::vector<std::string>& options, bool ptx_output,
    std::string* info_log) {
  std::vector<const char*> option_ptrs;
  for (const std::string& o : options) option_ptrs.push_back(o.c_str());
  HandleGuard guard{&api};
  FJ_RETURN_IF_ERROR(
      CheckNvJitLink(
          api.nvJitLinkCreate(&guard.handle,
                              static_cast<uint32_t>(option_ptrs.size()),
                              option_ptrs.data()),
          "nvJitLinkCreate"),
      absl::StrCat("linking '", request.name, "' with options ",
                   absl::StrJoin(options, " ")));
  auto link_error = [&](absl::Status status,
                        absl::string_view what) -> absl::Status {
    std::string log = ReadLog(api, guard.handle, /*error_log=*/true);
    absl::Status error = absl::InvalidArgumentError(
        absl::StrCat("nvJitLink could not link '", request.name, "' for ",
                     request.target.Name(), " (", what, ": ", status.message(),
                     ")", log.empty() ? "" : ":\n", log));
    SetPublicCode(error, PublicCode::kBuildError);
    SetDetail(error, "link_log", log);
    SetDetail(error, "build_log", log);
    SetDetail(error, "options", absl::StrJoin(options, " "));
    SetDetail(error, "target", request.target.Name());
    return error;
  };
  for (const LinkObject* object : objects) {
    absl::Status added = CheckNvJitLink(
        api.nvJitLinkAddData(
            guard.handle, static_cast<int>(InputType(object->kind)),
            object->bytes.data(), object->bytes.size(), object->name.c_str()),
        "nvJitLinkAddData");
    if (!added.ok()) {
      return link_error(added, absl::StrCat("adding '", object->name, "'"));
    }
  }
  absl::Status completed =
      CheckNvJitLink(api.nvJitLinkComplete(guard.handle), "nvJitLinkComplete");
  if (!completed.ok()) return link_error(completed, "linking");
  if (info_log != nullptr) *info_log = ReadLog(api, guard.handle, false);
  size_t size = 0;
  std::string out;
  if (ptx_output) {
    FJ_RETURN_IF_ERROR(
        CheckNvJitLink(api.nvJitLinkGetLinkedPtxSize(guard.handle, &size),
                       "nvJitLinkGetLinkedPtxSize"));
    out.resize(size);
    FJ_RETURN_IF_ERROR(
        CheckNvJitLink(api.nvJitLinkGetLinkedPtx(guard.handle, out.data()),
                       "nvJitLinkGetLinkedPtx"));
    while (!out.empty() && out.back() == '\0') out.pop_back();
  } else {
    FJ_RETURN_IF_ERROR(
        CheckNvJitLink(api.nvJitLinkGetLinkedCubinSize(guard.handle, &size),
                       "nvJitLinkGetLinkedCubinSize"));
    out.resize(size);
    FJ_RETURN_IF_ERROR(
        CheckNvJitLink(api.nvJitLinkGetLinkedCubin(guard.handle, out.data()),
                       "nvJitLinkGetLinkedCubin"));
  }
  return out;
}

bool HasEntry(const std::string& ptx, const std::string& lowered) {
  for (const std::string& name : PtxEntryNames(ptx)) {
    if (name == lowered) return true;
  }
  return false;
}

// Fills `entry`'s layout from `ptx`; false if `ptx` lacks its .entry.
absl::StatusOr<bool> LayoutFrom(const std::string& ptx, KernelEntry& entry) {
  if (ptx.empty() || !HasEntry(ptx, entry.lowered_name)) return false;
  FJ_ASSIGN_OR_RETURN(entry.params, ParsePtxParams(ptx, entry.lowered_name),
                      absl::StrCat("reading the parameters of ", entry.name));
  FJ_RETURN_IF_ERROR(ApplyCxxSignature(entry.lowered_name, entry.params),
                     absl::StrCat("reading the signature of ", entry.name));
  entry.param_bytes = ParamBufferBytes(entry.params);
  return true;
}

}  // namespace

std::vector<std::string> LinkOptions(const LinkRequest& request) {
  std::vector<std::string> options = {
      absl::StrCat("-arch=", request.target.Name())};
  if (request.lto) options.push_back("-lto");
  options.insert(options.end(), request.options.begin(), request.options.end());
  return options;
}

absl::StatusOr<LinkResult> LinkModule(NvJitLinkLibrary& linker,
                                      const LinkRequest& request) {
  if (request.target.ptx) {
    return absl::InvalidArgumentError(absl::StrCat(
        "linking '", request.name, "': a link produces a cubin, ",
        "so it needs an sm_XX target, not ", request.target.Name()));
  }
  if (request.objects.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("linking '", request.name, "': no inputs"));
  }
  FJ_ASSIGN_OR_RETURN(const NvJitLinkApi* api, linker.Get(),
                      absl::StrCat("linking '", request.name, "'"));
  auto start = std::chrono::steady_clock::now();
  std::vector<const LinkObject*> all, lto_only;
  for (const LinkObject& o : request.objects) {
    all.push_back(&o);
    if (o.kind == LinkObject::Kind::kLtoIr) lto_only.push_back(&o);
  }
  const std::vector<std::string> options = LinkOptions(request);
  LinkResult result;
  FJ_ASSIGN_OR_RETURN(std::string cubin, RunLink(*api, request, all, options,
                                                 false, &result.info_log));
  Artifact& artifact = result.artifact;
  artifact.target = request.target;
  artifact.copy_impl = request.copy_impl;
  artifact.is_ptx = false;
  artifact.image = std::move(cubin);
  artifact.compiler = absl::StrCat("nvjitlink ", api->major, ".", api->minor);
  artifact.log = result.info_log;
  FJ_ASSIGN_OR_RETURN(std::vector<std::string> names,
                      CubinEntryNames(artifact.image),
                      "reading the linked cubin's kernels");
  for (const std::string& lowered : names) {
    KernelEntry entry;
    entry.name = lowered;
    entry.lowered_name = lowered;
    for (const LinkObject& o : request.objects) {
      for (const KernelEntry& named : o.named_kernels) {
        if (named.lowered_name == lowered) entry.name = named.name;
      }
    }
    artifact.kernels.push_back(std::move(entry));
  }
  // Layouts: the PTX of each object, then the LTO-IR's own PTX.
  std::vector<KernelEntry*> missing;
  for (KernelEntry& entry : artifact.kernels) {
    bool found = false;
    for (const LinkObject& o : request.objects) {
      FJ_ASSIGN_OR_RETURN(found, LayoutFrom(o.ptx, entry));
      if (found) break;
    }
    if (!found) missing.push_back(&entry);
  }
  if (!missing.empty() && !lto_only.empty()) {
    std::vector<std::string> ptx_options = options;
    if (!request.lto) ptx_options.push_back("-lto");
    ptx_options.push_back("-ptx");
    FJ_ASSIGN_OR_RETURN(
        std::string lto_ptx,
        RunLink(*api, request, lto_only, ptx_options, true, nullptr),
        "reading the kernels' parameters from the LTO-IR's PTX");
    std::vector<KernelEntry*> still;
    for (KernelEntry* entry : missing) {
      FJ_ASSIGN_OR_RETURN(bool found, LayoutFrom(lto_ptx, *entry));
      if (!found) still.push_back(entry);
    }
    missing = std::move(still);
  }
  for (KernelEntry* entry : missing) {
    result.unresolved_kernels.push_back(entry->lowered_name);
  }
  artifact.compile_ms = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count();
  return result;
}

}  // namespace fleetjit::jit
