// fj_status: how the C ABI reports failures, and the one conversion from
// absl::Status.
#ifndef FLEETJIT_CAPI_STATUS_H_
#define FLEETJIT_CAPI_STATUS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "fleetjit/fleetjit.h"

struct fj_status {
  fj_code code;
  std::string message;
  std::vector<std::pair<std::string, std::string>> details;
};

namespace fleetjit::capi {

// NULL for OK; otherwise a new fj_status carrying code, message and every
// fleetjit detail payload. Never throws: on allocation failure returns a
// static out-of-memory status that fj_status_free ignores.
fj_status* ToFjStatus(const absl::Status& status);
// The fj_code a status maps to, the one decision of a public code: the
// code its origin set (SetPublicCode, base/status_macros.h), else that of
// its absl code.
fj_code CodeOf(const absl::Status& status);
// The fj_code of a status without a code set by its origin; every absl code
// has one (FJ_INTERNAL for those no public entry should return).
fj_code CodeOfAbsl(absl::StatusCode code);

}  // namespace fleetjit::capi

#endif  // FLEETJIT_CAPI_STATUS_H_
