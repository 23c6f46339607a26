#include "runtime/tune/tune_space.h"

#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace fleetjit::tune {
namespace {

uint32_t One(uint32_t v) { return v == 0 ? 1 : v; }

absl::StatusOr<uint64_t> Divisor(const TuneCandidate& c,
                                 const std::string& name) {
  if (name.empty()) return 1;
  if (name == "block.x") return One(c.shape.block[0]);
  if (name == "block.y") return One(c.shape.block[1]);
  if (name == "block.z") return One(c.shape.block[2]);
  return MacroValue(c.options, name);
}

absl::Status ResolveGrid(const GridRule& rule, TuneCandidate& c) {
  if (rule.fn) {
    uint32_t grid[3] = {0, 0, 0};
    FJ_RETURN_IF_ERROR(rule.fn(c, grid), "the grid callback refused it");
    for (int i = 0; i < 3; ++i) c.grid[i] = One(grid[i]);
    return absl::OkStatus();
  }
  const bool by_extent =
      rule.extent[0] != 0 || rule.extent[1] != 0 || rule.extent[2] != 0;
  for (int i = 0; i < 3; ++i) {
    if (!by_extent) {
      c.grid[i] = One(rule.fixed[i]);
      continue;
    }
    FJ_ASSIGN_OR_RETURN(uint64_t d, Divisor(c, rule.divisor[i]),
                        absl::StrCat("grid divisor ", i));
    if (d == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid divisor ", i, " ('", rule.divisor[i], "') is 0"));
    }
    const uint64_t extent = rule.extent[i] == 0 ? 1 : rule.extent[i];
    const uint64_t blocks = extent / d + (extent % d != 0);  // no overflow
    if (blocks > UINT32_MAX) {
      return absl::OutOfRangeError(
          absl::StrCat("grid[", i, "] = ", blocks, " does not fit 32 bits"));
    }
    c.grid[i] = static_cast<uint32_t>(blocks);
  }
  return absl::OkStatus();
}

std::string ShapeText(const TuneShape& s) {
  return absl::StrCat("block=", One(s.block[0]), "x", One(s.block[1]), "x",
                      One(s.block[2]), " smem=", s.shared_bytes,
                      " cluster=", s.cluster[0], "x", s.cluster[1], "x",
                      s.cluster[2]);
}

}  // namespace

std::vector<std::string> SplitOptions(absl::string_view macros) {
  return absl::StrSplit(macros, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

absl::StatusOr<uint64_t> MacroValue(const std::vector<std::string>& options,
                                    absl::string_view name) {
  const std::string prefix = absl::StrCat("-D", name, "=");
  for (const std::string& o : options) {
    if (o.compare(0, prefix.size(), prefix) != 0) continue;
    absl::string_view value = absl::string_view(o).substr(prefix.size());
    uint64_t v = 0;
    bool ok = false;
    if (value.size() > 2 && value[0] == '0' &&
        (value[1] == 'x' || value[1] == 'X')) {
      ok = absl::SimpleHexAtoi(value.substr(2), &v);
    } else {
      ok = absl::SimpleAtoi(value, &v);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "macro ", name, " = '", value, "' is not an unsigned integer"));
    }
    return v;
  }
  return absl::NotFoundError(
      absl::StrCat("the macro set defines no ", name, " (-D", name, "=N)"));
}

absl::StatusOr<std::vector<TuneCandidate>> ExpandSpace(const TuneSpace& space) {
  if (space.shapes.empty()) {
    return absl::InvalidArgumentError(
        "shapes: the space has no launch shape (give at least one block)");
  }
  std::vector<std::string> macro_sets = space.macro_sets;
  if (macro_sets.empty()) macro_sets.push_back("");
  // Each set split once: a space of a hundred candidates expands on a
  // fresh process's lookup path (runtime/tuning/copy_window_tune.cc).
  std::vector<std::vector<std::string>> split;
  split.reserve(macro_sets.size());
  std::set<std::vector<std::string>> seen_macros;
  for (size_t i = 0; i < macro_sets.size(); ++i) {
    split.push_back(SplitOptions(macro_sets[i]));
    if (!seen_macros.insert(split.back()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("macro_sets[", i, "] ('", macro_sets[i],
                       "') repeats an earlier macro set"));
    }
  }
  std::set<std::string> seen_shapes;
  for (size_t i = 0; i < space.shapes.size(); ++i) {
    const TuneShape& s = space.shapes[i];
    if (!seen_shapes.insert(ShapeText(s)).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes[", i, "] (", ShapeText(s), ") repeats an earlier shape"));
    }
    const uint64_t threads =
        uint64_t{One(s.block[0])} * One(s.block[1]) * One(s.block[2]);
    if (threads > 1024 * 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("shapes[", i, "].block has ", threads, " threads"));
    }
  }
  std::vector<TuneCandidate> out;
  out.reserve(macro_sets.size() * space.shapes.size());
  for (size_t m = 0; m < macro_sets.size(); ++m) {
    for (size_t s = 0; s < space.shapes.size(); ++s) {
      TuneCandidate c;
      c.candidate_index = out.size();
      c.macro_index = m;
      c.shape_index = s;
      c.macros = macro_sets[m];
      c.options = split[m];
      c.shape = space.shapes[s];
      c.grid_status = ResolveGrid(space.grid, c);
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::string CanonicalSpace(const std::vector<TuneCandidate>& candidates) {
  std::string out;
  for (const TuneCandidate& c : candidates) {
    // Lengths first, so no option text can forge a boundary.
    absl::StrAppend(&out, "candidate ", c.options.size());
    for (const std::string& o : c.options) {
      absl::StrAppend(&out, " ", o.size(), ":", o);
    }
    absl::StrAppend(&out, " ", ShapeText(c.shape));
    if (c.grid_status.ok()) {
      absl::StrAppend(&out, " grid=", c.grid[0], "x", c.grid[1], "x", c.grid[2],
                      "\n");
    } else {
      absl::StrAppend(&out, " grid=refused\n");
    }
  }
  return out;
}

}  // namespace fleetjit::tune
