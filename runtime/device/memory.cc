#include "runtime/device/memory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace fleetjit {

DeviceMemory::~DeviceMemory() {
  if (driver_ == nullptr || IsForkedChild(*driver_)) return;
  absl::MutexLock lock(&mu_);
  for (auto& [address, alloc] : allocations_) {
    Device& device = devices_.get(alloc.ordinal);
    device.LogReleaseFailure(Release(device, address), "device memory");
  }
}

absl::Status DeviceMemory::Release(Device& device, uint64_t address) {
  // A poisoned context is dead, and its memory with it. Otherwise the
  // memory is freed even if the context could not be made current (the
  // address names its context).
  absl::Status status = device.MakeCurrent().status();
  if (!device.CanRelease()) return status;
  absl::Status freed =
      FJ_CU_CALL(*driver_, cuMemFree, static_cast<CUdeviceptr>(address));
  return status.ok() ? freed : status;
}

absl::StatusOr<uint64_t> DeviceMemory::Allocate(int ordinal, uint64_t bytes) {
  FJ_ASSIGN_OR_RETURN(Device * dev, devices_.at(ordinal),
                      "allocating device memory");
  if (bytes == 0) return absl::InvalidArgumentError("cannot allocate 0 bytes");
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status(), "allocating device memory");
  CUdeviceptr ptr = 0;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(*driver_, cuMemAlloc, &ptr, bytes),
      absl::StrCat("allocating ", bytes, " bytes on device ", ordinal));
  absl::MutexLock lock(&mu_);
  allocations_[ptr] = Allocation{bytes, ordinal};
  return static_cast<uint64_t>(ptr);
}

absl::Status DeviceMemory::Free(uint64_t address) {
  if (address == 0) return absl::OkStatus();
  int ordinal = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = allocations_.find(address);
    if (it == allocations_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "0x%x was not allocated by this runtime (or was freed already)",
          address));
    }
    ordinal = it->second.ordinal;
    allocations_.erase(it);
  }
  return Annotate(Release(devices_.get(ordinal), address),
                  "freeing device memory");
}

absl::StatusOr<Device*> DeviceMemory::DeviceOfRange(uint64_t address,
                                                    uint64_t bytes) const {
  absl::MutexLock lock(&mu_);
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device address 0x%x is not inside an allocation of this runtime",
        address));
  }
  --it;
  uint64_t offset = address - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "device range [0x%x, +%u) runs outside its allocation (0x%x, %u bytes)",
        address, bytes, it->first, it->second.bytes));
  }
  return &devices_.get(it->second.ordinal);
}

// A synchronous device-side copy or fill is complete on return: waits for
// the context, naming the wait (not `call`) when it fails.
absl::Status DeviceMemory::SynchronizeAfter(Device& device, const char* call) {
  return Annotate(
      device.CheckAfterWork(driver_->cuCtxSynchronize(), "cuCtxSynchronize"),
      absl::StrCat("after ", call));
}

absl::Status DeviceMemory::Copy(const CopyRequest& request, CUstream s) {
  using Kind = CopyRequest::Kind;
  const Kind kind = request.kind;
  const uint64_t bytes = request.bytes;
  if (bytes == 0) return absl::OkStatus();
  if ((kind == Kind::kHtoD && request.src_host == nullptr) ||
      (kind == Kind::kDtoH && request.dst_host == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind == Kind::kHtoD ? "src" : "dst", " is NULL"));
  }
  Device* dev = nullptr;
  if (kind != Kind::kDtoH) {
    FJ_ASSIGN_OR_RETURN(dev, DeviceOfRange(request.dst_device, bytes), "dst");
  }
  if (kind == Kind::kDtoH || kind == Kind::kDtoD) {
    FJ_ASSIGN_OR_RETURN(dev, DeviceOfRange(request.src_device, bytes), "src");
  }
  FJ_RETURN_IF_ERROR(dev->MakeCurrent().status());
  const DriverApi& api = *driver_;
  auto d = static_cast<CUdeviceptr>(request.dst_device);
  auto sd = static_cast<CUdeviceptr>(request.src_device);
  CUresult r;
  const char* call;
  switch (kind) {
    case Kind::kHtoD:
      call = s ? "cuMemcpyHtoDAsync" : "cuMemcpyHtoD";
      r = s ? api.cuMemcpyHtoDAsync(d, request.src_host, bytes, s)
            : api.cuMemcpyHtoD(d, request.src_host, bytes);
      break;
    case Kind::kDtoH:
      call = s ? "cuMemcpyDtoHAsync" : "cuMemcpyDtoH";
      r = s ? api.cuMemcpyDtoHAsync(request.dst_host, sd, bytes, s)
            : api.cuMemcpyDtoH(request.dst_host, sd, bytes);
      break;
    case Kind::kDtoD:
      call = s ? "cuMemcpyDtoDAsync" : "cuMemcpyDtoD";
      r = s ? api.cuMemcpyDtoDAsync(d, sd, bytes, s)
            : api.cuMemcpyDtoD(d, sd, bytes);
      if (r == CUDA_SUCCESS && !s) return SynchronizeAfter(*dev, call);
      break;
    case Kind::kSet:
    default:
      call = s ? "cuMemsetD8Async" : "cuMemsetD8";
      r = s ? api.cuMemsetD8Async(d, request.value, bytes, s)
            : api.cuMemsetD8(d, request.value, bytes);
      if (r == CUDA_SUCCESS && !s) return SynchronizeAfter(*dev, call);
      break;
  }
  return dev->CheckAfterWork(r, call);
}

}  // namespace fleetjit
