// Device memory of one runtime: the allocations it made, tracked so a
// foreign or freed address is refused rather than handed to the driver,
// and copies and fills between them and host memory.
//
// A copy that reports a sticky driver error (a kernel's fault surfacing at
// the copy: the CUresult table, platform/cu_errors.h) poisons the device it
// ran on; later calls on that device then fail fast.
#ifndef FLEETJIT_RUNTIME_DEVICE_MEMORY_H_
#define FLEETJIT_RUNTIME_DEVICE_MEMORY_H_

#include <cuda.h>

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"

namespace fleetjit {

// One copy or fill; which addresses count depends on `kind`.
struct CopyRequest {
  enum class Kind { kHtoD, kDtoH, kDtoD, kSet } kind = Kind::kHtoD;
  uint64_t dst_device = 0;         // kHtoD, kDtoD, kSet
  void* dst_host = nullptr;        // kDtoH
  uint64_t src_device = 0;         // kDtoH, kDtoD
  const void* src_host = nullptr;  // kHtoD
  uint8_t value = 0;               // kSet
  uint64_t bytes = 0;
};

class DeviceMemory {
 public:
  // `driver` (null without one) and `devices` outlive this.
  DeviceMemory(const DriverApi* driver, const DeviceList& devices)
      : driver_(driver), devices_(devices) {}
  ~DeviceMemory();  // frees what is still allocated (not in a forked child)

  absl::StatusOr<uint64_t> Allocate(int ordinal, uint64_t bytes);
  // OK for 0; INVALID_ARGUMENT for an address this runtime did not allocate.
  absl::Status Free(uint64_t address);
  // Checks [address, address+bytes) lies in one allocation; returns its device.
  absl::StatusOr<Device*> DeviceOfRange(uint64_t address, uint64_t bytes) const;

  // Runs `request` on `stream` (a CUstream of the device's context), or
  // synchronously when `stream` is null (a device-to-device copy or a fill
  // then waits for the context). 0 bytes is OK without a look at the
  // addresses; a NULL host pointer is INVALID_ARGUMENT; device ranges must
  // lie inside allocations of this runtime.
  absl::Status Copy(const CopyRequest& request, CUstream stream);

 private:
  struct Allocation {
    uint64_t bytes;
    int ordinal;
  };
  // cuMemFree of `address` on `device`; skipped on a poisoned device.
  absl::Status Release(Device& device, uint64_t address);
  absl::Status SynchronizeAfter(Device& device, const char* call);

  const DriverApi* driver_;
  const DeviceList& devices_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, Allocation> allocations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_DEVICE_MEMORY_H_
