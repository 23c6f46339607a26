// The base of the tuning runs on the live device (see
// timed_stream_backend.h): the stream, the events, the watchdog wait.
#include "runtime/tuning/timed_stream_backend.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/launch/launch.h"

namespace fleetjit {

TimedStreamBackend::~TimedStreamBackend() {
  // A candidate still running (deadline) keeps its stream: waiting for it
  // could take forever, so it is left behind.
  if (abandoned_) {
    (void)stream_.release();
    return;
  }
  (void)device_.MakeCurrent();
  for (CUevent e : {start_, stop_}) {
    if (e != nullptr) (void)api_.cuEventDestroy(e);
  }
  if (stream_ != nullptr) (void)stream_->Close();
}

absl::Status TimedStreamBackend::OpenStream() {
  FJ_RETURN_IF_ERROR(device_.poisoned());
  FJ_RETURN_IF_ERROR(device_.MakeCurrent().status());
  FJ_ASSIGN_OR_RETURN(stream_, Stream::Create(owner_, api_, device_));
  FJ_CU_RETURN_IF_ERROR(api_, cuEventCreate, &start_, CU_EVENT_DEFAULT);
  return FJ_CU_CALL(api_, cuEventCreate, &stop_, CU_EVENT_DEFAULT);
}

absl::Status TimedStreamBackend::RunOnce(size_t i, absl::Duration deadline) {
  FJ_RETURN_IF_ERROR(LaunchOne(i));
  return Wait(deadline, "the check run");
}

absl::StatusOr<double> TimedStreamBackend::Time(size_t i, uint32_t count,
                                                absl::Duration deadline) {
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, start_, stream());
  for (uint32_t n = 0; n < count; ++n) FJ_RETURN_IF_ERROR(LaunchOne(i));
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, stop_, stream());
  FJ_RETURN_IF_ERROR(WaitEvent(stop_, deadline, "a timed sample"));
  float ms = 0;
  FJ_CU_RETURN_IF_ERROR(api_, cuEventElapsedTime, &ms, start_, stop_);
  return static_cast<double>(ms);
}

absl::Status TimedStreamBackend::Wait(absl::Duration deadline,
                                      absl::string_view what) {
  FJ_CU_RETURN_IF_ERROR(api_, cuEventRecord, stop_, stream());
  return WaitEvent(stop_, deadline, what);
}

absl::Status TimedStreamBackend::WaitEvent(CUevent event,
                                           absl::Duration deadline,
                                           absl::string_view what) {
  const std::string call = absl::StrCat(what_, ": ", what);
  if (api_.cuEventQuery == nullptr) {
    return CheckStickyError(device_, api_, api_.cuEventSynchronize(event),
                            call);
  }
  const auto end =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(deadline);
  auto pause = std::chrono::microseconds(2);
  while (true) {
    CUresult r = api_.cuEventQuery(event);
    if (r != CUDA_ERROR_NOT_READY) {
      return CheckStickyError(device_, api_, r, call);
    }
    if (std::chrono::steady_clock::now() >= end) {
      abandoned_ = true;
      return absl::DeadlineExceededError(absl::StrCat(
          call, " did not finish within ", absl::FormatDuration(deadline)));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
}

tune::TuneKeyInputs TuneKeyOfDevice(const DeviceReport& report,
                                    jit::CopyImpl impl,
                                    const jit::Target& target) {
  tune::TuneKeyInputs in;
  in.device_name = report.facts->name;
  in.sm_count = report.facts->sm_count;
  in.cc_major = report.facts->cc_major;
  in.cc_minor = report.facts->cc_minor;
  in.driver_version = report.driver_version;
  in.copy_impl = std::string(jit::CopyImplName(impl));
  in.target = target.Name();
  return in;
}

}  // namespace fleetjit
