// Helpers shared by the benchmarks: checked C ABI calls, launch arguments
// (the selftest's builders, conformance/c_abi.h: their one home), and the
// timing helpers `fleetjit bench` uses too (reference/measure.h: their home).
#ifndef FLEETJIT_BENCH_BENCH_UTIL_H_
#define FLEETJIT_BENCH_BENCH_UTIL_H_

#include <string>
#include <vector>

#include "conformance/c_abi.h"
#include "fleetjit/fleetjit.h"
#include "reference/measure.h"

namespace fleetjit::bench {

using ::fleetjit::selftest::internal::Arg;
using ::fleetjit::selftest::internal::F32Arg;
using ::fleetjit::selftest::internal::I32Arg;
using ::fleetjit::selftest::internal::PtrArg;
using ::fleetjit::selftest::internal::TensorArg;

// Exits the process with the status's message if `status` is an error.
void Check(fj_status* status, const char* what);
// Views of strings that outlive the call using them. The const char*
// overload keeps literals from binding to a temporary std::string.
fj_str Str(const std::string& s);
fj_str Str(const char* s);
using ::fleetjit::measure::Median;
using ::fleetjit::measure::NowMs;

}  // namespace fleetjit::bench

#endif  // FLEETJIT_BENCH_BENCH_UTIL_H_
