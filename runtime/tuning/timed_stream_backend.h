// What the runtime's two tuning runs share (tune_kernel.cc: fj_tune's
// candidates; copy_window_tune.cc: fj_copy's window shapes): a stream of
// their own on the device, two events, the watchdog wait and the timed
// samples. A subclass says how candidate `i` launches (LaunchOne) and
// what the outputs are.
#ifndef FLEETJIT_RUNTIME_TUNING_TIMED_STREAM_BACKEND_H_
#define FLEETJIT_RUNTIME_TUNING_TIMED_STREAM_BACKEND_H_

#include <cuda.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/device/device.h"
#include "runtime/device/stream.h"
#include "runtime/tune/tuner.h"
#include "runtime/tuning/tuning.h"

namespace fleetjit {

// The device-model part of a tuning key: name, SM count, compute
// capability, driver version, copy implementation and target.
tune::TuneKeyInputs TuneKeyOfDevice(const DeviceReport& report,
                                    jit::CopyImpl impl,
                                    const jit::Target& target);

class TimedStreamBackend : public tune::TuneBackend {
 public:
  // `what` names the run in errors ("tuning saxpy: ..."); the stream is
  // `owner`'s (Stream::Create).
  TimedStreamBackend(Runtime* owner, const DriverApi& api, Device& device,
                     std::string what)
      : owner_(owner), device_(device), api_(api), what_(std::move(what)) {}
  ~TimedStreamBackend() override;

  absl::Status RunOnce(size_t i, absl::Duration deadline) override;
  absl::StatusOr<double> Time(size_t i, uint32_t count,
                              absl::Duration deadline) override;
  bool IsSticky(const absl::Status& error) const override {
    return !device_.poisoned().ok();
  }

 protected:
  // Makes the device current, creates the stream and the events.
  absl::Status OpenStream();
  // Enqueues candidate `i` once on stream().
  virtual absl::Status LaunchOne(size_t i) = 0;
  // Waits for the work enqueued so far, at most `deadline`.
  absl::Status Wait(absl::Duration deadline, absl::string_view what);
  CUstream stream() const { return stream_->handle(); }
  // A wait ran past its deadline: the stream may still run a candidate,
  // so nothing it may touch is released (a subclass keeps its buffers).
  bool abandoned() const { return abandoned_; }

  Runtime* const owner_;
  Device& device_;
  const DriverApi& api_;

 private:
  // The watchdog: polls the event until it completes or `deadline` passes
  // (DEADLINE_EXCEEDED; the stream is then abandoned).
  absl::Status WaitEvent(CUevent event, absl::Duration deadline,
                         absl::string_view what);

  std::string what_;
  std::unique_ptr<Stream> stream_;
  CUevent start_ = nullptr, stop_ = nullptr;
  bool abandoned_ = false;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_TUNING_TIMED_STREAM_BACKEND_H_
