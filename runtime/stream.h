// A CUDA stream a runtime created for a caller (fj_stream): non-blocking,
// on one device's primary context. Owned by the runtime's registry
// (registry.h), which closes it when the caller destroys it or the runtime.
#ifndef FLEETJIT_RUNTIME_STREAM_H_
#define FLEETJIT_RUNTIME_STREAM_H_

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "platform/driver_api.h"
#include "runtime/device.h"

namespace fleetjit {

class Runtime;

class Stream {
 public:
  // Creates a CU_STREAM_NON_BLOCKING stream on `device` for `owner`.
  static absl::StatusOr<std::unique_ptr<Stream>> Create(Runtime* owner,
                                                        const DriverApi& api,
                                                        Device& device);
  ~Stream();  // Close() if it was not called; its status is lost

  // Waits for the work queued so far. A sticky error (a faulting kernel)
  // poisons the device, naming the last kernel launched on it.
  absl::Status Synchronize();
  // Waits for the stream, then destroys it; the first error of the two.
  // Skipped in a forked child (CUDA is not fork-safe). Idempotent.
  absl::Status Close();

  Runtime* owner() const { return owner_; }
  Device& device() const { return device_; }
  CUstream handle() const { return stream_; }

  // The caller's name for this stream (its fj_stream handle), 0 until set.
  uint64_t tag = 0;

 private:
  Stream(Runtime* owner, const DriverApi& api, Device& device)
      : owner_(owner), api_(api), device_(device) {}

  Runtime* owner_;
  const DriverApi& api_;
  Device& device_;
  CUstream stream_ = nullptr;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_STREAM_H_
