// One device's run of the conformance matrix for `fleetjit selftest`: the
// progress lines while it runs, then what the command prints at the end.
#ifndef FLEETJIT_TOOLS_SELFTEST_REPORT_H_
#define FLEETJIT_TOOLS_SELFTEST_REPORT_H_

#include <string>

#include "conformance/runner.h"
#include "fleetjit/fleetjit.h"
#include "tools/cli_app.h"

namespace fleetjit::cli {

struct DeviceReport {
  int ordinal = 0;
  int exit_code = kExitOk;  // 0 pass, 1 failures, 2 bad names, 3 no GPU
  long long cases = 0, failures = 0;
  // "selftest: N cases, M failures, ..." or "selftest: error: ...".
  std::string summary;
  // The device's JSON object: the device, seed, totals, rows and cells.
  nlohmann::ordered_json json;
};

// Runs the matrix of `options` on options.device (options.seed must be
// set). Progress goes to stdout, or to stderr when `json`; so does the
// "total:" line. The summary and the JSON are left to the caller.
DeviceReport RunDeviceMatrix(fj_runtime* rt,
                             const selftest::MatrixOptions& options, bool json);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_SELFTEST_REPORT_H_
