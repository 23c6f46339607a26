// The JSON form of a tuning run (`fleetjit tune FILE.cu --space SPACE.json`;
// the schema is docs/tuning.md): the search space, the kernel's arguments
// (scalars and device buffers the CLI allocates and fills) and the timing
// settings. ParseTuneSpec refuses a malformed file with INVALID_ARGUMENT
// naming the bad field ("shapes[1].block: ...").
#ifndef FLEETJIT_TOOLS_TUNE_SPACE_JSON_H_
#define FLEETJIT_TOOLS_TUNE_SPACE_JSON_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::cli {

struct TuneArgSpec {
  // A scalar (kind one of FJ_ARG_I32 .. FJ_ARG_F64) or a buffer
  // (kind FJ_ARG_POINTER, allocated by the CLI).
  fj_arg_kind kind = FJ_ARG_I32;
  int64_t i = 0;  // integer scalars (u64 above INT64_MAX wraps, as in C)
  double f = 0;   // f32 / f64
  uint64_t bytes = 0;
  enum class Fill { kRandom, kZero, kByte } fill = Fill::kRandom;
  uint8_t fill_byte = 0;
  bool output = false;  // checked and restored by fj_tune
};

struct TuneSpec {
  std::string kernel;                // "" = --kernel must say
  std::vector<std::string> options;  // base NVRTC options
  std::vector<std::string> name_expressions;
  std::vector<std::string> macro_sets;
  struct Shape {
    std::array<uint32_t, 3> block = {0, 0, 0};
    uint32_t shared_bytes = 0;
    std::array<uint32_t, 3> cluster = {0, 0, 0};
  };
  std::vector<Shape> shapes;
  std::array<uint32_t, 3> grid = {0, 0, 0};
  std::array<uint64_t, 3> grid_extent = {0, 0, 0};
  std::array<std::string, 3> grid_divisor;
  std::vector<TuneArgSpec> args;
  uint32_t warmup = 0, samples = 0, timeout_ms = 0;  // 0 = fj_tune's default
  double noise_threshold = 0;
};

absl::StatusOr<TuneSpec> ParseTuneSpec(absl::string_view json);

}  // namespace fleetjit::cli

#endif  // FLEETJIT_TOOLS_TUNE_SPACE_JSON_H_
