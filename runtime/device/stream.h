// A CUDA stream of a caller (fj_stream) on one device's primary context:
// either created by the runtime (non-blocking) or borrowed from the caller
// (fj_stream_wrap). Owned by the runtime's registry (registry.h), which
// closes it when the caller destroys it or the runtime; closing a borrowed
// stream only forgets it.
#ifndef FLEETJIT_RUNTIME_DEVICE_STREAM_H_
#define FLEETJIT_RUNTIME_DEVICE_STREAM_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"

namespace fleetjit {

class Runtime;

class Stream {
 public:
  // Creates a CU_STREAM_NON_BLOCKING stream on `device` for `owner`.
  static absl::StatusOr<std::unique_ptr<Stream>> Create(Runtime* owner,
                                                        const DriverApi& api,
                                                        Device& device);
  // The device's stream priorities: (least, greatest), e.g. (0, -5).
  static absl::StatusOr<std::pair<int, int>> PriorityRange(const DriverApi& api,
                                                           Device& device);
  // Create with a priority in PriorityRange (else OUT_OF_RANGE naming it).
  static absl::StatusOr<std::unique_ptr<Stream>> CreateWithPriority(
      Runtime* owner, const DriverApi& api, Device& device, int priority);
  // Borrows the caller's `cu_stream` on `device`: 0 and CU_STREAM_LEGACY
  // (the legacy default stream, kept as CU_STREAM_LEGACY so copies stay
  // asynchronous), CU_STREAM_PER_THREAD, or a stream the driver places in
  // the device's primary context (checked with cuStreamGetCtx where the
  // driver has it; another context is INVALID_ARGUMENT).
  static absl::StatusOr<std::unique_ptr<Stream>> Wrap(Runtime* owner,
                                                      const DriverApi& api,
                                                      Device& device,
                                                      uint64_t cu_stream);
  ~Stream();  // Close() if it was not called; its status is lost

  // Waits for the work queued so far. A sticky error (a faulting kernel)
  // poisons the device, naming the last kernel launched on it.
  absl::Status Synchronize();
  // Waits for the stream, then destroys it; the first error of the two.
  // Skipped in a forked child (CUDA is not fork-safe). Idempotent. A
  // borrowed stream is only forgotten: no wait, no destroy.
  absl::Status Close();

  Runtime* owner() const { return owner_; }
  Device& device() const { return device_; }
  CUstream handle() const { return stream_; }
  bool borrowed() const { return borrowed_; }

  // The caller's name for this stream (its fj_stream handle), 0 until set.
  uint64_t tag = 0;

 private:
  Stream(Runtime* owner, const DriverApi& api, Device& device)
      : owner_(owner), api_(api), device_(device) {}

  Runtime* owner_;
  const DriverApi& api_;
  Device& device_;
  CUstream stream_ = nullptr;
  bool borrowed_ = false;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_DEVICE_STREAM_H_
