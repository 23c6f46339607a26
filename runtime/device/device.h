// A CUDA device as fleetjit sees it: its facts, its copy plan and its
// primary context (retained lazily, released by the runtime).
#ifndef FLEETJIT_RUNTIME_DEVICE_DEVICE_H_
#define FLEETJIT_RUNTIME_DEVICE_DEVICE_H_

#include <cuda.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/log.h"
#include "jit/copy_plan.h"
#include "platform/driver_api.h"

namespace fleetjit {

struct DeviceFacts {
  std::string name;
  int ordinal = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  uint64_t total_memory = 0;
  int shared_per_block = 0;
  int shared_per_block_optin = 0;
  int shared_per_sm = 0;
  int l2_bytes = 0;
  int max_threads_per_block = 0;
  int max_block_dim[3] = {0, 0, 0};
  int max_grid_dim[3] = {0, 0, 0};
  bool cluster_launch = false;
  // Since ABI 1.3: cooperative launches (grid.sync()), the persisting L2
  // set-aside's maximum and the largest L2 access-policy window (0 before
  // sm_80).
  bool cooperative_launch = false;
  int max_persisting_l2_bytes = 0;
  int max_access_policy_window_bytes = 0;
  int arch() const { return cc_major * 10 + cc_minor; }
};

// What fj_device_info reports about one device.
struct DeviceReport {
  const DeviceFacts* facts;
  jit::CopyPlan plan;  // the runtime's PlanForDevice
  int driver_version;
};

class Device {
 public:
  // Reads the facts of device `ordinal`. Release failures are logged to
  // `logger` (may be null), which must outlive the device.
  static absl::StatusOr<std::unique_ptr<Device>> Open(
      const DriverApi& api, int ordinal, const Logger* logger = nullptr);
  ~Device();  // releases the primary context if it was retained (logged if that
              // fails)

  const DeviceFacts& facts() const { return facts_; }
  CUdevice handle() const { return device_; }

  // The primary context, retained on first use, made current on this thread.
  absl::StatusOr<CUcontext> MakeCurrent();

  // Set when a kernel faulted: the context is unusable from then on (CUDA
  // errors are sticky) and every later call on it fails with this status.
  // The driver makes the fault sticky for the whole process, not only for
  // the faulting device's context (measured on two H200s, driver 580: after
  // an illegal address on device 0, device 1's allocations, loads and
  // launches returned CUDA_ERROR_ILLEGAL_ADDRESS too, whether its context
  // was retained before the fault or after), so the other devices of the
  // runtime are poisoned as well, each status naming the first fault.
  void MarkPoisoned(const absl::Status& why);
  // The last kernel launched on this device ("module.cu:kernel"), so a fault
  // that surfaces at a later synchronisation can name its likely culprit.
  void NoteLaunch(const std::string* kernel_name) {
    // Read first: threads launching the same kernel then write nothing, and
    // the line read by every launch (is_poisoned) stays in each core's cache.
    if (last_kernel_.load(std::memory_order_relaxed) != kernel_name) {
      last_kernel_.store(kernel_name, std::memory_order_relaxed);
    }
  }
  // Adds "after kernel 'X' (the last launched on device N)" to a sticky
  // error's status, marks the device poisoned, and returns the status.
  absl::Status PoisonAfterFault(const absl::Status& fault);
  absl::Status poisoned() const;
  // The CheckCu status of `result` from `call` (OK for CUDA_SUCCESS). A
  // sticky error (the CUresult table, platform/cu_errors.h) also poisons
  // this device, naming the last kernel launched (PoisonAfterFault). For
  // copies and synchronisations, where a kernel's fault surfaces.
  absl::Status CheckAfterWork(CUresult result, absl::string_view call);
  // cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) in this device's
  // context (fj_device_set_persisting_l2), checked against its facts;
  // returns what the driver set.
  absl::StatusOr<uint64_t> SetPersistingL2(uint64_t bytes);
  bool is_poisoned() const {
    return poisoned_flag_.load(std::memory_order_acquire);
  }
  // Whether objects of this device's context may be released: not after a
  // sticky fault (the context is dead, its objects go with it) and not in
  // a fork() child (the driver belongs to the parent).
  bool CanRelease() const { return !is_poisoned() && !IsForkedChild(api_); }

  // For releases (cuMemFree, cuModuleUnload, cuStreamDestroy, ...) made
  // where no caller can be told: logs `status`, if it is an error, at warn,
  // with `what` was being released.
  void LogReleaseFailure(const absl::Status& status,
                         absl::string_view what) const;

 private:
  Device(const DriverApi& api, CUdevice device) : api_(api), device_(device) {}

  friend class DeviceList;
  // Poisons this device for a fault on another: no further spread.
  void MarkPoisonedBy(const absl::Status& poison);

  const DriverApi& api_;
  const Logger* logger_ = nullptr;
  CUdevice device_;
  // The runtime's devices (this one included), for MarkPoisoned.
  std::shared_ptr<const std::vector<Device*>> siblings_;
  DeviceFacts facts_;
  absl::Mutex mu_;
  CUcontext context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<CUcontext> context_fast_{nullptr};
  std::atomic<bool> poisoned_flag_{false};
  // Written by launches of different kernels: on a line of its own, away
  // from what every launch reads.
  alignas(64) std::atomic<const std::string*> last_kernel_{nullptr};
  mutable absl::Mutex poison_mu_;
  absl::Status poison_ ABSL_GUARDED_BY(poison_mu_);
};

// The devices of one runtime, opened at its creation and fixed for its
// life, and why there are none when there are none.
class DeviceList {
 public:
  // Opens every device `api` reports. `api` null (no driver): no devices,
  // `driver_status` says why. A driver that reports none is not an error:
  // driver_status() then says so.
  static absl::StatusOr<DeviceList> Open(const DriverApi* api,
                                         absl::Status driver_status,
                                         const Logger* logger = nullptr);

  int count() const { return static_cast<int>(devices_.size()); }
  // Device `ordinal`: UNAVAILABLE without a device, NOT_FOUND out of range.
  absl::StatusOr<Device*> at(int ordinal) const;
  // Device `ordinal`, which must be in range.
  Device& get(int ordinal) const { return *devices_[ordinal]; }
  const absl::Status& driver_status() const { return driver_status_; }

 private:
  // UNAVAILABLE "no CUDA device: <why>", carrying the failed driver call's
  // details (cuda_call, cuda_error) when there was one.
  absl::Status NoDevice() const;

  const DriverApi* api_ = nullptr;
  absl::Status driver_status_;
  std::vector<std::unique_ptr<Device>> devices_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_DEVICE_DEVICE_H_
