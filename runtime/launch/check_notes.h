// The host half of the copy layer's checked mode (<fleetjit/copy.cuh>,
// guide 6.): a module built with FJ_CHECK=1 under tma notes, once per call
// site, a tile copy that left the tensor map for a reason of its own call
// (<fleetjit/copy/check_notes.h>). The device cannot log, so after a launch
// of such a kernel, with the runtime's log level at debug,
// ReportCheckNotes waits for the stream (the kernel must have run), reads
// the module's table and logs each new note once at debug level: why the
// copy left TMA, at which line, and which coordinates stay on it.
//
// Why a wait: the notes are in device memory, and a debug log of a checked
// build is a debugging session, where a launch that returns once its kernel
// ran also reports a trap (a failed check) at the launch that caused it. A
// stream being captured into a graph is not waited on (nothing ran yet);
// its notes are logged after a later launch. Without debug logging a
// checked launch does not wait.
#ifndef FLEETJIT_RUNTIME_LAUNCH_CHECK_NOTES_H_
#define FLEETJIT_RUNTIME_LAUNCH_CHECK_NOTES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "runtime/load/kernel.h"

namespace fleetjit {

// After a successful launch of `k` (k.check_notes set) on `stream`.
absl::Status ReportCheckNotes(LoadedKernel& k, CUstream stream);

// The line logged for the note (key, detail) of the table (check_notes.h),
// seen after a launch of kernel `kernel` ("module.cu:k").
std::string DescribeCheckNote(uint64_t key, uint64_t detail,
                              absl::string_view kernel);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_CHECK_NOTES_H_
