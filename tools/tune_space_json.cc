#include "tools/tune_space_json.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "fleetjit/fleetjit.h"
#include "nlohmann/json.hpp"

namespace fleetjit::cli {
namespace {

using json = nlohmann::json;

absl::Status Bad(const std::string& field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status CheckKeys(const json& obj, const std::string& field,
                       const std::set<std::string>& allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (allowed.count(it.key()) == 0) {
      std::string list;
      for (const std::string& a : allowed) {
        absl::StrAppend(&list, list.empty() ? "" : ", ", a);
      }
      return Bad(field.empty() ? it.key() : absl::StrCat(field, ".", it.key()),
                 absl::StrCat("unknown field (known: ", list, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Unsigned(const json& v, const std::string& field,
                                  uint64_t max) {
  if (!v.is_number_integer() ||
      (v.is_number_integer() && !v.is_number_unsigned() &&
       v.get<int64_t>() < 0)) {
    return Bad(field, "expected a non-negative integer");
  }
  const uint64_t u = v.get<uint64_t>();
  if (u > max) return Bad(field, absl::StrCat("above the maximum, ", max));
  return u;
}

absl::StatusOr<std::string> String(const json& v, const std::string& field) {
  if (!v.is_string()) return Bad(field, "expected a string");
  return v.get<std::string>();
}

absl::StatusOr<std::vector<std::string>> Strings(const json& v,
                                                 const std::string& field) {
  if (!v.is_array()) return Bad(field, "expected an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    auto s = String(v[i], absl::StrCat(field, "[", i, "]"));
    if (!s.ok()) return s.status();
    out.push_back(*s);
  }
  return out;
}

// 1 to 3 integers (the rest 0), or one integer.
template <typename T>
absl::Status Dims(const json& v, const std::string& field, uint64_t max,
                  std::array<T, 3>& out) {
  if (v.is_number()) {
    auto u = Unsigned(v, field, max);
    if (!u.ok()) return u.status();
    out = {static_cast<T>(*u), 0, 0};
    return absl::OkStatus();
  }
  if (!v.is_array() || v.empty() || v.size() > 3) {
    return Bad(field, "expected 1 to 3 non-negative integers (x, y, z)");
  }
  out = {0, 0, 0};
  for (size_t i = 0; i < v.size(); ++i) {
    auto u = Unsigned(v[i], absl::StrCat(field, "[", i, "]"), max);
    if (!u.ok()) return u.status();
    out[i] = static_cast<T>(*u);
  }
  return absl::OkStatus();
}

struct ScalarKind {
  const char* name;
  fj_arg_kind kind;
  bool is_float;
  int64_t min;
  uint64_t max;
};
constexpr ScalarKind kScalars[] = {
    {"i32", FJ_ARG_I32, false, INT32_MIN, INT32_MAX},
    {"u32", FJ_ARG_U32, false, 0, UINT32_MAX},
    {"i64", FJ_ARG_I64, false, INT64_MIN, INT64_MAX},
    {"u64", FJ_ARG_U64, false, 0, UINT64_MAX},
    {"f32", FJ_ARG_F32, true, 0, 0},
    {"f64", FJ_ARG_F64, true, 0, 0},
};

absl::StatusOr<TuneArgSpec> Arg(const json& v, const std::string& field) {
  if (!v.is_object() || v.empty()) {
    return Bad(field,
               "expected an object: {\"i32\": N}, {\"f32\": X}, ... or "
               "{\"buffer\": BYTES, \"fill\": ..., \"output\": true}");
  }
  TuneArgSpec a;
  if (v.contains("buffer")) {
    if (absl::Status s = CheckKeys(v, field, {"buffer", "fill", "output"});
        !s.ok()) {
      return s;
    }
    auto bytes = Unsigned(v["buffer"], field + ".buffer", uint64_t{1} << 40);
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) return Bad(field + ".buffer", "0 bytes");
    a.kind = FJ_ARG_POINTER;
    a.bytes = *bytes;
    if (v.contains("fill")) {
      const json& f = v["fill"];
      if (f.is_string() && f == "random") {
        a.fill = TuneArgSpec::Fill::kRandom;
      } else if (f.is_string() && f == "zero") {
        a.fill = TuneArgSpec::Fill::kZero;
      } else if (f.is_number_integer()) {
        auto b = Unsigned(f, field + ".fill", 255);
        if (!b.ok()) return b.status();
        a.fill = TuneArgSpec::Fill::kByte;
        a.fill_byte = static_cast<uint8_t>(*b);
      } else {
        return Bad(field + ".fill",
                   "expected \"random\", \"zero\" or a byte value 0-255");
      }
    }
    if (v.contains("output")) {
      if (!v["output"].is_boolean()) {
        return Bad(field + ".output", "expected true or false");
      }
      a.output = v["output"].get<bool>();
    }
    return a;
  }
  if (v.size() != 1) {
    return Bad(field, "a scalar argument has exactly one field, its type");
  }
  const std::string type = v.begin().key();
  const json& value = v.begin().value();
  for (const ScalarKind& k : kScalars) {
    if (type != k.name) continue;
    a.kind = k.kind;
    const std::string f = absl::StrCat(field, ".", type);
    if (k.is_float) {
      if (!value.is_number()) return Bad(f, "expected a number");
      a.f = value.get<double>();
      return a;
    }
    if (!value.is_number_integer()) return Bad(f, "expected an integer");
    if (value.is_number_unsigned()) {
      const uint64_t u = value.get<uint64_t>();
      if (u > k.max) return Bad(f, "out of range for its type");
      a.i = static_cast<int64_t>(u);
    } else {
      const int64_t s = value.get<int64_t>();
      if (s < k.min || (s > 0 && static_cast<uint64_t>(s) > k.max)) {
        return Bad(f, "out of range for its type");
      }
      a.i = s;
    }
    return a;
  }
  return Bad(absl::StrCat(field, ".", type),
             "unknown argument type (i32, u32, i64, u64, f32, f64, buffer)");
}

}  // namespace

absl::StatusOr<TuneSpec> ParseTuneSpec(absl::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError("the space is not valid JSON");
  }
  if (!doc.is_object()) return Bad("(top level)", "expected an object");
  if (absl::Status s =
          CheckKeys(doc, "",
                    {"kernel", "options", "name_expressions", "macro_sets",
                     "shapes", "grid", "args", "warmup", "samples",
                     "noise_threshold", "timeout_ms"});
      !s.ok()) {
    return s;
  }
  TuneSpec spec;
  if (doc.contains("kernel")) {
    auto k = String(doc["kernel"], "kernel");
    if (!k.ok()) return k.status();
    spec.kernel = *k;
  }
  for (const char* f : {"options", "name_expressions", "macro_sets"}) {
    if (!doc.contains(f)) continue;
    auto list = Strings(doc[f], f);
    if (!list.ok()) return list.status();
    (std::string(f) == "options"            ? spec.options
     : std::string(f) == "name_expressions" ? spec.name_expressions
                                            : spec.macro_sets) = *list;
  }
  if (!doc.contains("shapes")) return Bad("shapes", "missing (at least one)");
  const json& shapes = doc["shapes"];
  if (!shapes.is_array() || shapes.empty()) {
    return Bad("shapes", "expected a non-empty array of shapes");
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string f = absl::StrCat("shapes[", i, "]");
    const json& s = shapes[i];
    TuneSpec::Shape shape;
    if (s.is_number() || s.is_array()) {
      if (absl::Status st = Dims(s, f, 1u << 16, shape.block); !st.ok()) {
        return st;
      }
    } else if (s.is_object()) {
      if (absl::Status st =
              CheckKeys(s, f, {"block", "shared_bytes", "cluster"});
          !st.ok()) {
        return st;
      }
      if (!s.contains("block")) return Bad(f + ".block", "missing");
      if (absl::Status st =
              Dims(s["block"], f + ".block", 1u << 16, shape.block);
          !st.ok()) {
        return st;
      }
      if (s.contains("shared_bytes")) {
        auto b = Unsigned(s["shared_bytes"], f + ".shared_bytes", UINT32_MAX);
        if (!b.ok()) return b.status();
        shape.shared_bytes = static_cast<uint32_t>(*b);
      }
      if (s.contains("cluster")) {
        if (absl::Status st =
                Dims(s["cluster"], f + ".cluster", 1u << 16, shape.cluster);
            !st.ok()) {
          return st;
        }
      }
    } else {
      return Bad(f, "expected a block (N or [x, y, z]) or an object");
    }
    spec.shapes.push_back(shape);
  }
  if (doc.contains("grid")) {
    const json& g = doc["grid"];
    if (g.is_number() || g.is_array()) {
      if (absl::Status st = Dims(g, "grid", UINT32_MAX, spec.grid); !st.ok()) {
        return st;
      }
    } else if (g.is_object()) {
      if (absl::Status st = CheckKeys(g, "grid", {"extent", "divisor"});
          !st.ok()) {
        return st;
      }
      if (!g.contains("extent")) return Bad("grid.extent", "missing");
      if (absl::Status st =
              Dims(g["extent"], "grid.extent", UINT64_MAX, spec.grid_extent);
          !st.ok()) {
        return st;
      }
      if (g.contains("divisor")) {
        const json& d = g["divisor"];
        if (d.is_string()) {
          spec.grid_divisor[0] = d.get<std::string>();
        } else {
          auto list = Strings(d, "grid.divisor");
          if (!list.ok()) return list.status();
          if (list->size() > 3) return Bad("grid.divisor", "more than 3");
          for (size_t i = 0; i < list->size(); ++i) {
            spec.grid_divisor[i] = (*list)[i];
          }
        }
      }
    } else {
      return Bad("grid",
                 "expected [x, y, z] or {\"extent\": [...], \"divisor\": "
                 "[...]}");
    }
  }
  if (!doc.contains("args")) return Bad("args", "missing");
  const json& args = doc["args"];
  if (!args.is_array()) return Bad("args", "expected an array");
  bool any_output = false;
  for (size_t i = 0; i < args.size(); ++i) {
    auto a = Arg(args[i], absl::StrCat("args[", i, "]"));
    if (!a.ok()) return a.status();
    any_output |= a->output;
    spec.args.push_back(*a);
  }
  if (!any_output) {
    return Bad("args",
               "no buffer has \"output\": true (the outputs are what a "
               "candidate is checked by)");
  }
  struct U32Field {
    const char* name;
    uint32_t* out;
    uint64_t max;
  };
  for (const U32Field& f :
       {U32Field{"warmup", &spec.warmup, FJ_TUNE_MAX_COUNT},
        U32Field{"samples", &spec.samples, FJ_TUNE_MAX_COUNT},
        U32Field{"timeout_ms", &spec.timeout_ms, UINT32_MAX}}) {
    if (!doc.contains(f.name)) continue;
    auto u = Unsigned(doc[f.name], f.name, f.max);
    if (!u.ok()) return u.status();
    *f.out = static_cast<uint32_t>(*u);
  }
  if (doc.contains("noise_threshold")) {
    const json& t = doc["noise_threshold"];
    if (!t.is_number() || t.get<double>() < 0) {
      return Bad("noise_threshold", "expected a number >= 0");
    }
    spec.noise_threshold = t.get<double>();
  }
  return spec;
}

}  // namespace fleetjit::cli
