#include "runtime/device/stream.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "platform/cu_errors.h"

namespace fleetjit {

absl::StatusOr<std::unique_ptr<Stream>> Stream::Create(Runtime* owner,
                                                       const DriverApi& api,
                                                       Device& device) {
  FJ_RETURN_IF_ERROR(device.MakeCurrent().status());
  std::unique_ptr<Stream> stream(new Stream(owner, api, device));
  FJ_CU_RETURN_IF_ERROR(api, cuStreamCreate, &stream->stream_,
                        CU_STREAM_NON_BLOCKING);
  return stream;
}

absl::StatusOr<std::pair<int, int>> Stream::PriorityRange(const DriverApi& api,
                                                          Device& device) {
  if (api.cuCtxGetStreamPriorityRange == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuCtxGetStreamPriorityRange");
  }
  FJ_RETURN_IF_ERROR(device.MakeCurrent().status());
  int least = 0, greatest = 0;
  FJ_RETURN_IF_ERROR(
      FJ_CU_CALL(api, cuCtxGetStreamPriorityRange, &least, &greatest),
      absl::StrCat("reading the stream priorities of device ",
                   device.facts().ordinal));
  return std::make_pair(least, greatest);
}

absl::StatusOr<std::unique_ptr<Stream>> Stream::CreateWithPriority(
    Runtime* owner, const DriverApi& api, Device& device, int priority) {
  FJ_ASSIGN_OR_RETURN(auto range, PriorityRange(api, device));
  // Lower numbers are higher priorities: greatest <= priority <= least.
  if (priority > range.first || priority < range.second) {
    return absl::OutOfRangeError(
        absl::StrCat("stream priority ", priority, " is outside device ",
                     device.facts().ordinal, "'s range ", range.second,
                     " (greatest) to ", range.first, " (least, the default)"));
  }
  if (api.cuStreamCreateWithPriority == nullptr) {
    return absl::UnavailableError(
        "this CUDA driver lacks cuStreamCreateWithPriority");
  }
  std::unique_ptr<Stream> stream(new Stream(owner, api, device));
  FJ_CU_RETURN_IF_ERROR(api, cuStreamCreateWithPriority, &stream->stream_,
                        CU_STREAM_NON_BLOCKING, priority);
  return stream;
}

absl::StatusOr<std::unique_ptr<Stream>> Stream::Wrap(Runtime* owner,
                                                     const DriverApi& api,
                                                     Device& device,
                                                     uint64_t cu_stream) {
  FJ_ASSIGN_OR_RETURN(CUcontext primary, device.MakeCurrent());
  std::unique_ptr<Stream> stream(new Stream(owner, api, device));
  stream->borrowed_ = true;
  // The legacy and per-thread default streams are valid in every context.
  if (cu_stream == 0 ||
      cu_stream == reinterpret_cast<uintptr_t>(CU_STREAM_LEGACY)) {
    stream->stream_ = CU_STREAM_LEGACY;
    return stream;
  }
  stream->stream_ =
      reinterpret_cast<CUstream>(static_cast<uintptr_t>(cu_stream));
  if (cu_stream == reinterpret_cast<uintptr_t>(CU_STREAM_PER_THREAD) ||
      api.cuStreamGetCtx == nullptr) {
    return stream;
  }
  CUcontext ctx = nullptr;
  CUresult r = api.cuStreamGetCtx(stream->stream_, &ctx);
  if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT ||
      r == CUDA_ERROR_CONTEXT_IS_DESTROYED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cu_stream 0x", absl::Hex(cu_stream),
        " is not a live CUstream (cuStreamGetCtx: ", DescribeCuError(r).name,
        ")"));
  }
  FJ_RETURN_IF_ERROR(CheckCu(api, r, "cuStreamGetCtx"),
                     "checking the wrapped stream");
  if (ctx != primary) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cu_stream 0x", absl::Hex(cu_stream),
        " belongs to another context than device ", device.facts().ordinal,
        "'s primary context (another device, or a context the caller created); "
        "wrap a stream of that device's primary context"));
  }
  return stream;
}

Stream::~Stream() { (void)Close(); }

absl::Status Stream::Synchronize() {
  FJ_RETURN_IF_ERROR(device_.MakeCurrent().status());
  return device_.CheckAfterWork(api_.cuStreamSynchronize(stream_),
                                "cuStreamSynchronize");
}

absl::Status Stream::Close() {
  if (stream_ == nullptr || borrowed_ || IsForkedChild(api_)) {
    stream_ = nullptr;
    return absl::OkStatus();
  }
  absl::Status status = device_.MakeCurrent().status();
  // A poisoned context is dead, and its streams with it. Otherwise the
  // stream is destroyed even if the context could not be made current
  // (the handle names its context; work still queued completes first).
  if (device_.CanRelease()) {
    if (status.ok()) {
      status = FJ_CU_CALL(api_, cuStreamSynchronize, stream_);
    }
    absl::Status destroyed = FJ_CU_CALL(api_, cuStreamDestroy, stream_);
    if (status.ok()) status = destroyed;
  }
  stream_ = nullptr;
  return status;
}

}  // namespace fleetjit
