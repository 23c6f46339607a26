#include "capi/entry.h"

#include "base/status_macros.h"

namespace fleetjit::capi {

absl::Status NotLive(const char* name, const char* extra) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, " is not a live fj_", name,
                   " handle (destroyed or foreign", extra, ")"));
}

absl::Status InForkedChild(const Runtime& rt) {
  return absl::FailedPreconditionError(
      "this process is a fork() child of the one that created the runtime; "
      "CUDA is not fork-safe: create a runtime in the child (or spawn "
      "instead of fork)");
}

namespace {

// `object` (of runtime `rt`), unless this process is a fork() child of the
// runtime's creator.
template <typename Object>
absl::StatusOr<Object*> Unforked(absl::StatusOr<Object*> object,
                                 const Runtime* rt) {
  if (object.ok() && __builtin_expect(rt->forked(), 0)) {
    return InForkedChild(*rt);
  }
  return object;
}

}  // namespace

absl::StatusOr<Runtime*> GetRuntime(const fj_runtime* h) {
  absl::StatusOr<Runtime*> rt =
      LookUp<Runtime>(h, HandleType::kRuntime, "runtime");
  return rt.ok() ? Unforked(rt, *rt) : rt;
}
absl::StatusOr<Module*> GetModule(const fj_module* h) {
  absl::StatusOr<Module*> m = LookUp<Module>(h, HandleType::kModule, "module");
  return m.ok() ? Unforked(m, (*m)->runtime) : m;
}
absl::StatusOr<KernelRef*> GetKernel(const fj_kernel* h) {
  absl::StatusOr<KernelRef*> k = LookUp<KernelRef>(
      h, HandleType::kKernel, "kernel", ", or its module was destroyed");
  return k.ok() ? Unforked(k, (*k)->module->runtime) : k;
}
absl::StatusOr<PendingBuild*> GetBuild(const fj_build* h) {
  absl::StatusOr<PendingBuild*> b =
      LookUp<PendingBuild>(h, HandleType::kBuild, "build");
  return b.ok() ? Unforked(b, (*b)->runtime) : b;
}
absl::StatusOr<Stream*> GetStream(const fj_stream* h) {
  absl::StatusOr<Stream*> s = LookUp<Stream>(h, HandleType::kStream, "stream");
  return s.ok() ? Unforked(s, (*s)->owner()) : s;
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

absl::Status PublishKernel(Module& module, KernelRef* kernel, fj_kernel** out) {
  uint64_t h = 0;
  absl::Status named = module.runtime->registry().Publish(module, kernel, [&] {
    h = RegisterHandle(HandleType::kKernel, kernel);
    return h;
  });
  if (!named.ok()) return named;
  *out = AsHandle<fj_kernel>(h);
  return absl::OkStatus();
}

absl::Status PublishRuntime(std::unique_ptr<Runtime> rt, fj_runtime** out) {
  uint64_t h = RegisterHandle(HandleType::kRuntime, rt.get());
  if (h == 0) return absl::ResourceExhaustedError("too many live handles");
  rt.release();
  *out = AsHandle<fj_runtime>(h);
  return absl::OkStatus();
}

}  // namespace fleetjit::capi
