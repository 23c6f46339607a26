#include "runtime/device/device.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "platform/cu_errors.h"

namespace fleetjit {

absl::StatusOr<std::unique_ptr<Device>> Device::Open(const DriverApi& api,
                                                     int ordinal,
                                                     const Logger* logger) {
  CUdevice handle = 0;
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuDeviceGet, &handle, ordinal),
                     absl::StrCat("opening device ", ordinal));
  std::unique_ptr<Device> device(new Device(api, handle));
  device->logger_ = logger;
  DeviceFacts& f = device->facts_;
  f.ordinal = ordinal;
  char name[256] = {};
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(api, cuDeviceGetName, name, sizeof(name) - 1, handle),
      absl::StrCat("reading device ", ordinal));
  f.name = name;
  size_t total = 0;
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuDeviceTotalMem, &total, handle),
                     absl::StrCat("reading device ", ordinal));
  f.total_memory = total;
  struct AttributeSlot {
    CUdevice_attribute attribute;
    int* out;
  };
  int cluster = 0, cooperative = 0;
  const AttributeSlot slots[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &f.cc_major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &f.cc_minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &f.sm_count},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &f.shared_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       &f.shared_per_block_optin},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
       &f.shared_per_sm},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &f.l2_bytes},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &f.max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &f.max_block_dim[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &f.max_block_dim[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &f.max_block_dim[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &f.max_grid_dim[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &f.max_grid_dim[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &f.max_grid_dim[2]},
      {CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, &cluster},
      {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, &cooperative},
      {CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE,
       &f.max_persisting_l2_bytes},
      {CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE,
       &f.max_access_policy_window_bytes},
  };
  for (const AttributeSlot& slot : slots) {
    FJ_RETURN_IF_ERROR(
        FJ_CU_CALL(api, cuDeviceGetAttribute, slot.out, slot.attribute, handle),
        absl::StrCat("reading attribute ", static_cast<int>(slot.attribute),
                     " of device ", ordinal));
  }
  f.cluster_launch = cluster != 0;
  f.cooperative_launch = cooperative != 0;
  return device;
}

Device::~Device() {
  // At process exit the driver may already be torn down; the runtime only
  // destroys devices from fj_runtime_destroy, never from a static destructor.
  absl::MutexLock lock(&mu_);
  if (context_ != nullptr && !IsForkedChild(api_)) {
    LogReleaseFailure(FJ_CU_CALL(api_, cuDevicePrimaryCtxRelease, device_),
                      "the primary context");
  }
}

void Device::LogReleaseFailure(const absl::Status& status,
                               absl::string_view what) const {
  if (status.ok() || logger_ == nullptr) return;
  logger_->Log(LogLevel::kWarn,
               absl::StrCat("device ", facts_.ordinal, ": releasing ", what,
                            ": ", status.message()));
}

absl::StatusOr<CUcontext> Device::MakeCurrent() {
  if (is_poisoned()) return poisoned();
  // Refused before the driver is reached: CUDA is not fork-safe.
  if (IsForkedChild(api_))
    return CheckCu(api_, CUDA_SUCCESS, "cuCtxGetCurrent");
  CUcontext ctx = context_fast_.load(std::memory_order_acquire);
  if (ctx == nullptr) {
    absl::MutexLock lock(&mu_);
    if (context_ == nullptr) {
      CUresult r = api_.cuDevicePrimaryCtxRetain(&context_, device_);
      if (r != CUDA_SUCCESS) {
        // A sticky fault of the context current on this thread (another
        // device's) is reported here too (seen on two H200s after an
        // illegal address on device 0): leave that context and retry once.
        CUcontext current = nullptr;
        if (api_.cuCtxGetCurrent(&current) != CUDA_SUCCESS ||
            current != nullptr) {
          if (api_.cuCtxSetCurrent(nullptr) == CUDA_SUCCESS) {
            const absl::Status first =
                CheckCu(api_, r, "cuDevicePrimaryCtxRetain");
            r = api_.cuDevicePrimaryCtxRetain(&context_, device_);
            if (r == CUDA_SUCCESS && logger_ != nullptr) {
              logger_->Log(
                  LogLevel::kWarn,
                  absl::StrCat(
                      "device ", facts_.ordinal, ": ", first.message(),
                      "; retried outside the thread's current context: ok"));
            }
          }
        }
      }
      FJ_RETURN_IF_ERROR(
          CheckCu(api_, r, "cuDevicePrimaryCtxRetain"),
          absl::StrCat("retaining the primary context of device ",
                       facts_.ordinal));
      context_fast_.store(context_, std::memory_order_release);
    }
    ctx = context_;
  }
  // An error here can be another device's sticky fault, reported through
  // the context current on this thread: it says nothing about this device,
  // so this device's context is entered anyway (cuCtxSetCurrent checks).
  CUcontext current = nullptr;
  if (api_.cuCtxGetCurrent(&current) != CUDA_SUCCESS) current = nullptr;
  if (current != ctx) {
    FJ_RETURN_IF_ERROR(FJ_CU_CALL(api_, cuCtxSetCurrent, ctx),
                       absl::StrCat("entering device ", facts_.ordinal));
  }
  return ctx;
}

void Device::MarkPoisoned(const absl::Status& why) {
  absl::Status poison;
  {
    absl::MutexLock lock(&poison_mu_);
    if (!poison_.ok()) return;  // already poisoned: the first fault stands
    poison_ = absl::FailedPreconditionError(absl::StrCat(
        "device ", facts_.ordinal,
        "'s context is unusable after an earlier fault (CUDA errors are "
        "sticky for the whole process; start a new process): ",
        why.message()));
    poison = poison_;
    poisoned_flag_.store(true, std::memory_order_release);
  }
  if (siblings_ == nullptr) return;
  for (Device* other : *siblings_) {
    if (other != this) other->MarkPoisonedBy(poison);
  }
}

void Device::MarkPoisonedBy(const absl::Status& poison) {
  absl::MutexLock lock(&poison_mu_);
  if (!poison_.ok()) return;
  poison_ = absl::FailedPreconditionError(absl::StrCat(
      "device ", facts_.ordinal,
      " is unusable: the CUDA driver makes a fault sticky for every context "
      "of the process; ",
      poison.message()));
  poisoned_flag_.store(true, std::memory_order_release);
}

absl::Status Device::PoisonAfterFault(const absl::Status& fault) {
  const std::string* last = last_kernel_.load(std::memory_order_relaxed);
  absl::Status named =
      last == nullptr
          ? fault
          : Annotate(fault, absl::StrCat("after kernel '", *last,
                                         "' (the last launched on device ",
                                         facts_.ordinal, ")"));
  MarkPoisoned(named);
  return named;
}

absl::Status Device::poisoned() const {
  absl::MutexLock lock(&poison_mu_);
  return poison_;
}

absl::Status Device::CheckAfterWork(CUresult result, absl::string_view call) {
  absl::Status status = CheckCu(api_, result, call);
  if (!status.ok() && IsStickyError(result)) return PoisonAfterFault(status);
  return status;
}

absl::StatusOr<uint64_t> Device::SetPersistingL2(uint64_t bytes) {
  const DeviceFacts& f = facts_;
  const int ordinal = f.ordinal;
  if (f.cc_major < 8 || f.max_persisting_l2_bytes <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", ordinal, " (sm_", f.arch(),
        ") has no persisting L2 set-aside (sm_80 and newer have it)"));
  }
  if (bytes > static_cast<uint64_t>(f.max_persisting_l2_bytes)) {
    return absl::OutOfRangeError(absl::StrCat(
        "a persisting L2 set-aside of ", bytes, " bytes exceeds device ",
        ordinal, "'s maximum, ", f.max_persisting_l2_bytes, " bytes"));
  }
  if (api_.cuCtxSetLimit == nullptr || api_.cuCtxGetLimit == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuCtxSetLimit / cuCtxGetLimit");
  }
  if (is_poisoned()) return poisoned();
  FJ_RETURN_IF_ERROR(MakeCurrent().status());
  FJ_RETURN_IF_ERROR(
      CheckCu(api_,
              api_.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, bytes),
              "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)"),
      absl::StrCat("setting aside L2 on device ", ordinal));
  size_t set = 0;
  FJ_RETURN_IF_ERROR(
      CheckCu(api_, api_.cuCtxGetLimit(&set, CU_LIMIT_PERSISTING_L2_CACHE_SIZE),
              "cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)"),
      absl::StrCat("reading the L2 set-aside of device ", ordinal));
  return static_cast<uint64_t>(set);
}

absl::StatusOr<DeviceList> DeviceList::Open(const DriverApi* api,
                                            absl::Status driver_status,
                                            const Logger* logger) {
  DeviceList list;
  list.api_ = api;
  list.driver_status_ = std::move(driver_status);
  if (api == nullptr) return list;
  int count = 0;
  absl::Status counted = FJ_CU_CALL(*api, cuDeviceGetCount, &count);
  if (!counted.ok()) {
    list.driver_status_ = counted;
    count = 0;
  }
  for (int i = 0; i < count; ++i) {
    FJ_ASSIGN_OR_RETURN(std::unique_ptr<Device> d,
                        Device::Open(*api, i, logger), "creating the runtime");
    list.devices_.push_back(std::move(d));
  }
  auto siblings = std::make_shared<std::vector<Device*>>();
  for (const std::unique_ptr<Device>& d : list.devices_)
    siblings->push_back(d.get());
  for (const std::unique_ptr<Device>& d : list.devices_)
    d->siblings_ = siblings;
  if (count == 0 && list.driver_status_.ok()) {
    list.driver_status_ =
        absl::UnavailableError("the CUDA driver reports no GPU");
  }
  return list;
}

absl::Status DeviceList::NoDevice() const {
  absl::Status status = absl::UnavailableError(
      absl::StrCat("no CUDA device: ", driver_status_.message()));
  // The driver call that failed (cuda_call, cuda_error), when one did; the
  // public code stays UNAVAILABLE.
  driver_status_.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) {
        if (absl::StartsWith(url, kPayloadPrefix))
          status.SetPayload(url, payload);
      });
  return status;
}

absl::StatusOr<Device*> DeviceList::at(int ordinal) const {
  if (api_ == nullptr) return NoDevice();
  if (ordinal < 0 || ordinal >= count()) {
    if (count() == 0) return NoDevice();
    return absl::NotFoundError(absl::StrCat(
        "device ", ordinal, " does not exist; there are ", count()));
  }
  return devices_[ordinal].get();
}

}  // namespace fleetjit
