#include "capi/entry.h"

#include "base/status_macros.h"

namespace fleetjit::capi {

absl::Status NotLive(const char* name, const char* extra) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, " is not a live fj_", name,
                   " handle (destroyed or foreign", extra, ")"));
}

absl::StatusOr<Runtime*> GetRuntime(const fj_runtime* h) {
  return LookUp<Runtime>(h, HandleType::kRuntime, "runtime");
}
absl::StatusOr<Module*> GetModule(const fj_module* h) {
  return LookUp<Module>(h, HandleType::kModule, "module");
}
absl::StatusOr<KernelRef*> GetKernel(const fj_kernel* h) {
  return LookUp<KernelRef>(h, HandleType::kKernel, "kernel",
                           ", or its module was destroyed");
}
absl::StatusOr<PendingBuild*> GetBuild(const fj_build* h) {
  return LookUp<PendingBuild>(h, HandleType::kBuild, "build");
}
absl::StatusOr<Stream*> GetStream(const fj_stream* h) {
  return LookUp<Stream>(h, HandleType::kStream, "stream");
}

absl::StatusOr<Stream*> StreamOf(const fj_stream* h, Runtime* rt) {
  if (h == nullptr) return nullptr;
  if (Stream* s = FindStream(h, rt)) return s;
  // Refused: say why.
  FJ_RETURN_IF_ERROR(GetStream(h).status());
  return absl::InvalidArgumentError("stream belongs to another runtime");
}

absl::StatusOr<CopyEngine::Stream> CopyStreamOf(const fj_stream* h,
                                                Runtime* rt) {
  FJ_ASSIGN_OR_RETURN(Stream * s, StreamOf(h, rt));
  if (s == nullptr) return CopyEngine::Stream{};
  return CopyEngine::Stream{s->device().facts().ordinal, s->handle()};
}

bool ReleaseTag(ObjectKind kind, uint64_t tag) {
  static constexpr HandleType kTypes[] = {
      HandleType::kModule, HandleType::kKernel, HandleType::kStream,
      HandleType::kBuild};
  return ReleaseHandle(tag, kTypes[static_cast<int>(kind)]) != nullptr;
}

absl::Status PublishRuntime(std::unique_ptr<Runtime> rt, fj_runtime** out) {
  uint64_t h = RegisterHandle(HandleType::kRuntime, rt.get());
  if (h == 0) return absl::ResourceExhaustedError("too many live handles");
  rt.release();
  *out = AsHandle<fj_runtime>(h);
  return absl::OkStatus();
}

}  // namespace fleetjit::capi
