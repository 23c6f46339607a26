// Tuning on the live device: fj_tune's candidates (tune_kernel.cc) and
// fj_copy's window shapes (copy_window_tune.cc), over the tuning loop of
// runtime/tune/ (spaces, records, the loop itself, which know no device).
// This room holds the tuning's state and its locks: the single flight of
// each tuning key, and the (device, implementation) pairs whose copy
// shapes were asked for. It sees the runtime only through TuningParts.
#ifndef FLEETJIT_RUNTIME_TUNING_TUNING_H_
#define FLEETJIT_RUNTIME_TUNING_TUNING_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "base/log.h"
#include "jit/copy_plan.h"
#include "platform/driver_api.h"
#include "runtime/builder/build_pool.h"
#include "runtime/builder/module_builder.h"
#include "runtime/cache/module_cache.h"
#include "runtime/device/device.h"
#include "runtime/launch/wire.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module.h"
#include "runtime/tune/tune_record.h"
#include "runtime/tune/tune_space.h"
#include "runtime/tune/tuner.h"

namespace fleetjit {

class CopyEngine;  // runtime/copy/copy_engine.h
class Runtime;     // runtime/runtime.h: the owner of the tuning's streams
namespace copy {
struct CopyLaunchShape;  // runtime/copy/copy_kernels.h
}  // namespace copy

// What fj_tune asks (tune_kernel.cc).
struct TuneRequest {
  // The base build: source, name, options, name expressions, device,
  // target and copy implementation; each candidate adds its macro set.
  BuildSpec build;
  std::string kernel;  // looked up in every candidate's module
  tune::TuneSpace space;
  tune::TuneSettings settings;
  // The arguments every candidate is launched with (the wire format).
  const fj_arg* args = nullptr;
  size_t num_args = 0;
  size_t arg_stride = 0;
  // (address, bytes) of the buffers the kernel writes: saved before the
  // tuning, reset before each check run, compared, restored at the end.
  std::vector<std::pair<uint64_t, uint64_t>> outputs;
  // Replaces the byte comparison: true = candidate's outputs correct.
  std::function<absl::StatusOr<bool>(size_t candidate,
                                     const std::vector<std::string>& outputs)>
      check;
  bool read_cache = true;   // take a stored result
  bool write_cache = true;  // store a result that is not noisy
};

struct TuneOutcome {
  tune::TuneRecord record;
  // kCompiled: tuned by this call; else the tier it came from.
  CacheSource source = CacheSource::kCompiled;
  bool stored = false;     // written to the cache tiers
  std::string key_digest;  // the tuning entry's digest
  double lookup_ms = 0;    // key + lookup
};

// The pieces of the runtime the tuning uses, each outliving it.
struct TuningParts {
  Runtime* owner = nullptr;  // owns the tuning's streams (Stream::Create)
  const DriverApi* driver = nullptr;
  const DeviceList* devices = nullptr;
  ModuleCache* cache = nullptr;
  ModuleBuilder* builder = nullptr;  // builds, and the background worker
  BuildPool* build_pool = nullptr;   // the candidates' builds
  const Logger* logger = nullptr;
  bool copy_tune = false;  // RuntimeOptions::copy_tune
  // The facade's DescribeDevice (its target and copy overrides).
  std::function<absl::StatusOr<DeviceReport>(int ordinal)> describe;
  // The facade's LoadKernel (the loader, and the thunk attached).
  std::function<absl::StatusOr<LoadedKernel*>(const ModuleRecord&,
                                              absl::string_view, int)>
      load_kernel;
  // The facade's copy engine, created on first use.
  std::function<CopyEngine&()> copy;
};

class Tuning {
 public:
  explicit Tuning(TuningParts parts) : parts_(std::move(parts)) {}

  // See Runtime::Tune, Runtime::TuneKey.
  absl::StatusOr<TuneOutcome> Tune(const TuneRequest& request);
  absl::StatusOr<CacheKey> TuneKey(const TuneRequest& request,
                                   std::vector<tune::TuneCandidate>* out);
  // See Runtime::TuneCopyWindow, Runtime::CopyWindowShapeOf,
  // Runtime::ScheduleCopyTune.
  absl::StatusOr<TuneOutcome> TuneCopyWindow(int device, jit::CopyImpl impl);
  static absl::StatusOr<copy::CopyLaunchShape> CopyWindowShapeOf(
      const tune::TuneRow& row);
  void ScheduleCopyTune(int device, jit::CopyImpl impl);

  // ~Runtime's first step: a copy-shape tuning queued or running stops at
  // its next candidate and stores nothing. True when one was ever asked
  // for (the runtime then waits for its background work).
  bool CancelCopyTuning();

 private:
  struct TuneFlight {
    absl::Notification done;
  };
  // Tune's single flight, shared with TuneCopyWindow. FindOrStartTuning
  // looks `key` up (when `read_cache`) and, on a miss, makes this call the
  // one tuning it: a hit fills `outcome` (record, source) and returns null;
  // else the flight returned is this call's, ended by EndTuneFlight (which
  // wakes the calls waiting for it to look again).
  std::shared_ptr<TuneFlight> FindOrStartTuning(const CacheKey& key,
                                                bool read_cache,
                                                absl::string_view name,
                                                TuneOutcome& outcome);
  void EndTuneFlight(const std::string& digest,
                     const std::shared_ptr<TuneFlight>& flight);
  // Stores `record` in the cache tiers (the memory tier always; a failed
  // disk write is logged).
  void StoreTuneRecord(const CacheKey& key, const tune::TuneRecord& record,
                       const jit::Target& target, jit::CopyImpl impl);
  absl::StatusOr<Device*> device(int ordinal) const {
    return parts_.devices->at(ordinal);
  }

  const TuningParts parts_;
  // The tuning runs in progress, by key digest: Tune's single flight.
  absl::Mutex tune_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<TuneFlight>> tune_flights_
      ABSL_GUARDED_BY(tune_mu_);
  // fj_copy's window tuning: the (device, impl) pairs queued or done, and
  // the flag ~Runtime raises so a run in progress stops at its next
  // candidate (and stores nothing).
  absl::Mutex copy_tune_mu_;
  std::set<std::pair<int, int>> copy_tune_asked_ ABSL_GUARDED_BY(copy_tune_mu_);
  std::atomic<bool> copy_tune_cancel_{false};
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_TUNING_TUNING_H_
