// The one table of CUDA driver errors (cu_errors.inc): for each CUresult,
// the public fj_code it is reported as and whether it is sticky. CheckCu
// converts through it, and the runtime poisons a device through it;
// nothing else decides what a driver error means.
//
//   if (IsStickyError(r)) device.MarkPoisoned(status);
#ifndef FLEETJIT_PLATFORM_CU_ERRORS_H_
#define FLEETJIT_PLATFORM_CU_ERRORS_H_

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit {

enum class CuErrorStickiness { kRecoverable, kSticky };

struct CuErrorRow {
  CUresult result;
  const char* name;  // "CUDA_ERROR_ILLEGAL_ADDRESS"
  fj_code code;
  CuErrorStickiness stickiness;
};

// Every row of cu_errors.inc, in its order.
absl::Span<const CuErrorRow> CuErrorTable();

// The row of `result`; one not in the table (a newer driver's) is
// FJ_CUDA_ERROR, recoverable, named "CUDA_ERROR".
CuErrorRow DescribeCuError(CUresult result);

// True for the errors that leave a context unusable (a kernel fault:
// illegal address, illegal instruction, misaligned address, assert,
// hardware stack error, launch failure, uncorrectable ECC, ...).
inline bool IsStickyError(CUresult result) {
  return DescribeCuError(result).stickiness == CuErrorStickiness::kSticky;
}

// The absl code a status with public code `code` carries, so C++ callers
// that look at absl codes see a consistent one: FJ_CUDA_ERROR (and any
// code without an absl twin) is kInternal. The C ABI never reads it back:
// it reads the explicit code (PublicCodeOf).
absl::StatusCode AbslCodeFor(fj_code code);

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_CU_ERRORS_H_
