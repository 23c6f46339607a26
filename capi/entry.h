// What each fj_* entry of the shim (fleetjit.cc) is made of, besides the
// conversions (convert.h): Guard, which lets no exception escape and keeps
// the call inside the call gate (call_gate.h); the checked handle lookups,
// which name the argument of a NULL, destroyed, foreign or forged handle
// and refuse a parent's objects in a fork() child; OnHandle (and
// OnRuntime), an entry's Guard and lookup in one; Take, BuryOutsideGate and
// OnDestroy, for destroy calls; and Publish, which names a new object with
// a handle (handles.h).
#ifndef FLEETJIT_CAPI_ENTRY_H_
#define FLEETJIT_CAPI_ENTRY_H_

#include <exception>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "capi/call_gate.h"
#include "capi/convert.h"
#include "capi/handles.h"
#include "capi/status.h"
#include "fleetjit/fleetjit.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/runtime.h"

namespace fleetjit::capi {

// Runs `body` (returning absl::Status), turning any exception into an
// INTERNAL status (RESOURCE_EXHAUSTED for std::bad_alloc).
template <typename F>
fj_status* Guard(F&& body) {
  CallScope in_gate;
  try {
    absl::Status status = body();
    // OK without a call: the launch path's common case.
    if (__builtin_expect(status.ok(), 1)) return nullptr;
    return ToFjStatus(status);
  } catch (const std::bad_alloc&) {
    return ToFjStatus(absl::ResourceExhaustedError("out of host memory"));
  } catch (const std::exception& e) {
    return ToFjStatus(
        absl::InternalError(absl::StrCat("unexpected exception: ", e.what())));
  } catch (...) {
    return ToFjStatus(absl::InternalError("unexpected exception"));
  }
}

// "NAME is not a live fj_NAME handle (destroyed or foreign EXTRA)".
absl::Status NotLive(const char* name, const char* extra = "");

// The object behind a caller's handle of kind `type`, or a status naming
// the argument: NULL, or not a live handle of that kind.
template <typename Object, typename Handle>
absl::StatusOr<Object*> LookUp(const Handle* h, HandleType type,
                               const char* name, const char* extra = "") {
  if (h == nullptr) return NullArgument(name);
  auto* obj = static_cast<Object*>(LookupHandle(HandleValue(h), type));
  if (obj == nullptr) return NotLive(name, extra);
  return obj;
}

// FAILED_PRECONDITION: this process is a fork() child of `rt`'s creator
// (header rule 7). Every lookup below says it for a parent's object.
absl::Status InForkedChild(const Runtime& rt);

absl::StatusOr<Runtime*> GetRuntime(const fj_runtime* h);
absl::StatusOr<Module*> GetModule(const fj_module* h);
absl::StatusOr<KernelRef*> GetKernel(const fj_kernel* h);
absl::StatusOr<PendingBuild*> GetBuild(const fj_build* h);
absl::StatusOr<Stream*> GetStream(const fj_stream* h);
// The stream behind `h` when it is a live fj_stream of `rt`, else nullptr
// (NULL, destroyed, forged, or another runtime's): the launch path's
// lookup, which builds no status. StreamOf says why it refused.
inline Stream* FindStream(const fj_stream* h, Runtime* rt) {
  auto* s =
      static_cast<Stream*>(LookupHandle(HandleValue(h), HandleType::kStream));
  return s != nullptr && s->owner() == rt ? s : nullptr;
}
// The stream of an optional fj_stream (NULL: nullptr), checking it belongs
// to `rt`.
absl::StatusOr<Stream*> StreamOf(const fj_stream* h, Runtime* rt);
// The same as CopyEngine takes it: the GPU and CUstream (NULL: none).
absl::StatusOr<CopyEngine::Stream> CopyStreamOf(const fj_stream* h,
                                                Runtime* rt);

// Writes a yes/no answer as the C ABI's int32 1/0.
inline absl::Status WriteBool(bool value, int32_t* out, const char* name) {
  if (out == nullptr) return NullArgument(name);
  *out = value ? 1 : 0;
  return absl::OkStatus();
}

// Guard around `body(Object*)` for the object behind `h`, found by the
// checked lookup `Get` (GetRuntime, GetModule, ...: a status naming the
// argument when it is NULL or not live, or in a fork() child), which runs
// first, before `body` reads any other argument:
//   return OnHandle<GetModule>(module, [&](Module* m) { ... });
template <auto Get, typename Handle, typename F>
fj_status* OnHandle(const Handle* h, F&& body) {
  return Guard([&]() -> absl::Status {
    auto object = Get(h);
    if (!object.ok()) return object.status();
    return body(*object);
  });
}
// The same for a runtime (most entries).
template <typename F>
fj_status* OnRuntime(const fj_runtime* h, F&& body) {
  return OnHandle<GetRuntime>(h, std::forward<F>(body));
}

// For destroy calls: invalidates the handle and returns its object, or
// nullptr for a NULL handle (destroy accepts NULL).
template <typename Object, typename Handle>
absl::StatusOr<Object*> Take(Handle* h, HandleType type, const char* name) {
  if (h == nullptr) return nullptr;
  auto* obj = static_cast<Object*>(ReleaseHandle(HandleValue(h), type));
  if (obj == nullptr) return NotLive(name);
  return obj;
}

// Invalidates the handle `tag` of an object a runtime's destroy cascade
// takes down (see runtime/registry.h).
bool ReleaseTag(ObjectKind kind, uint64_t tag);

// A pin on a runtime (Runtime::Pin) for the length of a scope: what a call
// holds while it uses the runtime outside the call gate.
class RuntimePin {
 public:
  explicit RuntimePin(Runtime* rt) : rt_(rt) { rt_->Pin(); }
  ~RuntimePin() { Runtime::Unpin(rt_); }
  RuntimePin(const RuntimePin&) = delete;
  RuntimePin& operator=(const RuntimePin&) = delete;

 private:
  Runtime* rt_;
};

// The second half of a destroy, once its objects are unreachable (the
// first half began with CheckCanWaitHere): leaves the gate, waits for the
// calls that may still use them, then runs `bury` (which frees them), with
// `rt` pinned throughout.
template <typename F>
absl::Status BuryOutsideGate(Runtime* rt, F&& bury) {
  RuntimePin pin(rt);
  OutsideGate outside;
  WaitForCallsInFlight();
  return bury();
}

// The handle kind and argument name of a runtime's objects that have a
// destroy entry.
struct DestroyedKind {
  HandleType type;
  const char* name;
};
inline DestroyedKind KindOf(const fj_stream*) {
  return {HandleType::kStream, "stream"};
}
inline DestroyedKind KindOf(const fj_module*) {
  return {HandleType::kModule, "module"};
}
inline DestroyedKind KindOf(const fj_build*) {
  return {HandleType::kBuild, "build"};
}

// A destroy entry of a runtime's object (a stream, module or build): NULL
// is OK and does nothing; else it is refused inside a nested call
// (CheckCanWaitHere) and, by the checked lookup `Get`, for a handle that is
// not live or in a fork() child; then the handle is released (Take) and
// `body(object)` takes it from its runtime's registry and buries it
// (BuryOutsideGate).
template <auto Get, typename Handle, typename F>
fj_status* OnDestroy(Handle* h, F&& body) {
  using Object = std::remove_pointer_t<typename decltype(Get(h))::value_type>;
  return Guard([&]() -> absl::Status {
    if (h == nullptr) return absl::OkStatus();
    FJ_RETURN_IF_ERROR(CheckCanWaitHere());
    FJ_RETURN_IF_ERROR(Get(h).status());  // fork: refused
    const DestroyedKind kind = KindOf(h);
    FJ_ASSIGN_OR_RETURN(Object * object, Take<Object>(h, kind.type, kind.name));
    return body(object);
  });
}

// Names `object`, just added to `rt`'s registry, with a new handle in
// *out and in object->tag (Registry::Publish: refused when the runtime is
// being destroyed, or the handle table is full).
template <typename Handle, typename Object>
absl::Status Publish(Runtime* rt, HandleType type, Object* object,
                     Handle** out) {
  uint64_t h = 0;
  absl::Status named = rt->registry().Publish(object, [&] {
    h = RegisterHandle(type, object);
    return h;
  });
  if (!named.ok()) return named;
  *out = AsHandle<Handle>(h);
  return absl::OkStatus();
}
// The same for a kernel taken from `module`.
absl::Status PublishKernel(Module& module, KernelRef* kernel, fj_kernel** out);
// The runtime's own handle (a runtime has no tag).
absl::Status PublishRuntime(std::unique_ptr<Runtime> rt, fj_runtime** out);

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_ENTRY_H_
