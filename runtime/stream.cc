#include "runtime/stream.h"

#include "base/status_macros.h"

namespace fleetjit {

absl::StatusOr<std::unique_ptr<Stream>> Stream::Create(Runtime* owner,
                                                       const DriverApi& api,
                                                       Device& device) {
  FJ_RETURN_IF_ERROR(device.MakeCurrent().status(), "");
  std::unique_ptr<Stream> stream(new Stream(owner, api, device));
  FJ_RETURN_IF_ERROR(
      CheckCu(api, api.cuStreamCreate(&stream->stream_, CU_STREAM_NON_BLOCKING),
              "cuStreamCreate"),
      "");
  return stream;
}

Stream::~Stream() { (void)Close(); }

absl::Status Stream::Synchronize() {
  FJ_RETURN_IF_ERROR(device_.MakeCurrent().status(), "");
  return device_.CheckAfterWork(api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

absl::Status Stream::Close() {
  if (stream_ == nullptr || IsForkedChild(api_)) {
    stream_ = nullptr;
    return absl::OkStatus();
  }
  absl::Status status = device_.MakeCurrent().status();
  if (status.ok()) {
    status = CheckCu(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
    absl::Status destroyed = CheckCu(api_, api_.cuStreamDestroy(stream_), "cuStreamDestroy");
    if (status.ok()) status = destroyed;
  }
  stream_ = nullptr;
  return status;
}

}  // namespace fleetjit
