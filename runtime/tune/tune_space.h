// A tuning search space (fj_tune, `fleetjit tune`): candidate macro sets
// times launch shapes, and how each candidate's grid is found.
//
//   TuneSpace space;
//   space.macro_sets = {"-DBM=64 -DSTAGES=3", "-DBM=128 -DSTAGES=2"};
//   space.shapes = {{{128, 1, 1}, 0, {0, 0, 0}}, {{256, 1, 1}, 0, {0, 0, 0}}};
//   space.grid.extent = {1 << 20, 1, 1};      // grid.x = ceil(extent / BM)
//   space.grid.divisor = {"BM", "", ""};
//   FJ_ASSIGN_OR_RETURN(std::vector<TuneCandidate> all, ExpandSpace(space));
//
// The candidates are every (macro set, shape) pair, macro sets outermost,
// in the order given. A space with no macro set tunes the shapes alone (one
// empty macro set); one with no shape is refused.
#ifndef FLEETJIT_RUNTIME_TUNE_TUNE_SPACE_H_
#define FLEETJIT_RUNTIME_TUNE_TUNE_SPACE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit::tune {

// One launch shape: block, dynamic shared memory, cluster (all 0 = none).
struct TuneShape {
  std::array<uint32_t, 3> block = {0, 0, 0};  // 0 entries count as 1
  uint32_t shared_bytes = 0;
  std::array<uint32_t, 3> cluster = {0, 0, 0};
};

// How a candidate's grid is found, first match wins:
//  1. `fn` set: fn(candidate) fills grid; an error skips that candidate.
//  2. `extent` not all 0: grid[i] = ceil(extent[i] / d) where d is the
//     integer value of macro `divisor[i]` in the candidate's set ("BM" for
//     -DBM=64), or its block[0..2] for "block.x"/"block.y"/"block.z", or 1
//     for "" (then grid[i] = extent[i]); extent 0 = 1 block.
//  3. `fixed` (0 entries count as 1).
struct TuneCandidate;
struct GridRule {
  std::array<uint32_t, 3> fixed = {0, 0, 0};
  std::array<uint64_t, 3> extent = {0, 0, 0};
  std::array<std::string, 3> divisor;
  std::function<absl::Status(const TuneCandidate&, uint32_t grid[3])> fn;
};

struct TuneSpace {
  // Each a whitespace-separated list of NVRTC options ("-DBM=64 -DS=3").
  std::vector<std::string> macro_sets;
  std::vector<TuneShape> shapes;
  GridRule grid;
};

// One point of the space, its grid resolved (or why it cannot be).
struct TuneCandidate {
  size_t candidate_index = 0;  // its place in ExpandSpace's list
  size_t macro_index = 0;
  size_t shape_index = 0;
  std::string macros;                // the macro set, as given
  std::vector<std::string> options;  // it, split on whitespace
  TuneShape shape;
  std::array<uint32_t, 3> grid = {1, 1, 1};
  absl::Status grid_status;  // not OK: the grid rule refused it
};

// The options of a macro set: split on spaces and tabs, empties dropped.
std::vector<std::string> SplitOptions(absl::string_view macros);

// The integer value of -DNAME=VALUE in `options` (decimal or 0x hex), or
// NOT_FOUND / INVALID_ARGUMENT naming the macro.
absl::StatusOr<uint64_t> MacroValue(const std::vector<std::string>& options,
                                    absl::string_view name);

// Checks `space` and lists its candidates. INVALID_ARGUMENT naming the
// field: no shape, a duplicate macro set (same options after splitting) or
// shape, a block of 0 threads after counting 0 entries as 1, or a grid
// divisor that names no macro of some set (checked per candidate: such a
// candidate gets a grid_status, as does one whose fn refuses it).
absl::StatusOr<std::vector<TuneCandidate>> ExpandSpace(const TuneSpace& space);

// A canonical text of the expanded space, for cache keys: per candidate its
// options, shape and resolved grid (so a grid callback is keyed by what it
// returned, not by its code).
std::string CanonicalSpace(const std::vector<TuneCandidate>& candidates);

}  // namespace fleetjit::tune

#endif  // FLEETJIT_RUNTIME_TUNE_TUNE_SPACE_H_
