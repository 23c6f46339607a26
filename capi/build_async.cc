// The C ABI's asynchronous builds and prebuilt images (since 1.1): the
// fj_build handle and fj_module_load. Written as capi/fleetjit.cc's entries
// are (one chain inside Guard; see there).
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/entry.h"
#include "fleetjit/fleetjit.h"

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

extern "C" {

// ------------------------------------------- asynchronous builds, loading
// fj_build a PendingBuild (runtime/builder/build_pool.h); fj_module_load over
// Runtime::LoadModule (runtime/builder/image_import.h).

FJ_API fj_status* fj_module_build_async(fj_runtime* runtime,
                                        const fj_build_options* options,
                                        fj_build** out_build) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_build == nullptr) return NullArgument("out_build");
    FJ_ASSIGN_OR_RETURN(BuildSpec spec,
                        ReadBuildSpec(options));  // copies every string
    PendingBuild* b = rt->SubmitBuild(std::move(spec));
    return Publish(rt, HandleType::kBuild, b, out_build);
  });
}

FJ_API fj_status* fj_build_poll(const fj_build* build, int32_t* out_done) {
  return OnHandle<GetBuild>(build, [&](PendingBuild* b) -> absl::Status {
    return WriteBool(b->job->done(), out_done, "out_done");
  });
}

FJ_API fj_status* fj_build_wait(fj_build* build, uint32_t timeout_ms,
                                int32_t* out_done) {
  return OnHandle<GetBuild>(build, [&](PendingBuild* b) -> absl::Status {
    if (out_done == nullptr) return NullArgument("out_done");
    // Waits outside the gate, holding the job and the runtime.
    std::shared_ptr<BuildJob> job = b->job;
    RuntimePin pin(b->runtime);
    bool done;
    {
      OutsideGate blocking;
      done = job->Wait(ReadTimeout(timeout_ms));
    }
    return WriteBool(done, out_done, "out_done");
  });
}

FJ_API fj_status* fj_build_take(fj_build* build, fj_module** out_module) {
  return OnHandle<GetBuild>(build, [&](PendingBuild* b) -> absl::Status {
    if (out_module == nullptr) return NullArgument("out_module");
    // Waits outside the gate, holding the job and the runtime.
    std::shared_ptr<BuildJob> job = b->job;
    Runtime* rt = b->runtime;
    RuntimePin pin(rt);
    absl::StatusOr<Module*> m;
    {
      OutsideGate blocking;
      m = rt->TakeBuild(*job);
    }
    if (!m.ok()) return m.status();
    return Publish(rt, HandleType::kModule, *m, out_module);
  });
}

FJ_API fj_status* fj_build_destroy(fj_build* build) {
  return OnDestroy<GetBuild>(build, [&](PendingBuild* b) -> absl::Status {
    Runtime* rt = b->runtime;
    std::unique_ptr<PendingBuild> taken = rt->registry().TakeBuild(b);
    return BuryOutsideGate(rt, [&] {
      if (taken != nullptr) taken->job->Abandon();
      return absl::OkStatus();
    });
  });
}

FJ_API fj_status* fj_module_load(fj_runtime* runtime,
                                 const fj_module_load_options* options,
                                 fj_module** out_module) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(ImageSpec spec, ReadImageSpec(options));
    FJ_ASSIGN_OR_RETURN(Module * m, rt->LoadModule(spec));
    return Publish(rt, HandleType::kModule, m, out_module);
  });
}

}  // extern "C"
