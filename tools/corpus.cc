#include "tools/corpus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace fleetjit::cli::corpus {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(what);
}

#define CORPUS_RETURN_IF_ERROR(expr)         \
  do {                                       \
    absl::Status corpus_st_ = (expr);        \
    if (!corpus_st_.ok()) return corpus_st_; \
  } while (0)

#define CORPUS_ASSIGN_OR_RETURN(lhs, expr)      \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = *std::move(lhs##_or)

std::string FormatDouble(double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  // Python's repr of a float always shows it is one: 2.0, 1e-05, inf.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string Show(const Value& v) {
  return v.is_int ? std::to_string(v.i) : FormatDouble(v.d);
}

// ------------------------------------------------------------ expressions

struct Token {
  enum Kind { kNum, kName, kOp, kEnd } kind = kEnd;
  std::string text;  // name or operator
  Value num;
};

std::string ShowToken(const Token& t) {
  if (t.kind == Token::kEnd) return "the end";
  if (t.kind == Token::kNum) return Show(t.num);
  return absl::StrCat("'", t.text, "'");
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }

absl::StatusOr<std::vector<Token>> Tokens(absl::string_view text) {
  std::vector<Token> out;
  while (!text.empty() && absl::ascii_isspace(text.back()))
    text.remove_suffix(1);
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && absl::ascii_isspace(text[pos])) ++pos;
    const char c = text[pos];
    Token t;
    if (IsDigit(c) ||
        (c == '.' && pos + 1 < text.size() && IsDigit(text[pos + 1]))) {
      // (\d+\.?\d*|\.\d+)([eE][+-]?\d+)?
      size_t end = pos;
      bool is_float = false;
      while (end < text.size() && IsDigit(text[end])) ++end;
      if (end < text.size() && text[end] == '.') {
        is_float = true;
        ++end;
        while (end < text.size() && IsDigit(text[end])) ++end;
      }
      if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
        size_t e = end + 1;
        if (e < text.size() && (text[e] == '+' || text[e] == '-')) ++e;
        if (e < text.size() && IsDigit(text[e])) {
          while (e < text.size() && IsDigit(text[e])) ++e;
          end = e;
          is_float = true;
        }
      }
      const std::string s(text.substr(pos, end - pos));
      t.kind = Token::kNum;
      if (is_float) {
        t.num = Value::Float(std::strtod(s.c_str(), nullptr));
      } else {
        int64_t v = 0;
        auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc()) return Bad(s + " does not fit 64 bits");
        t.num = Value::Int(v);
      }
      pos = end;
    } else if (IsNameStart(c)) {
      size_t end = pos;
      while (end < text.size() &&
             (absl::ascii_isalnum(text[end]) || text[end] == '_')) {
        ++end;
      }
      t.kind = Token::kName;
      t.text = std::string(text.substr(pos, end - pos));
      pos = end;
    } else if (text.substr(pos, 2) == "//") {
      t.kind = Token::kOp;
      t.text = "//";
      pos += 2;
    } else if (std::strchr("-+*/%(),", c) != nullptr && c != '\0') {
      t.kind = Token::kOp;
      t.text = std::string(1, c);
      ++pos;
    } else {
      return Bad(absl::StrCat("unexpected '", std::string(1, c), "' at column ",
                              pos + 1));
    }
    out.push_back(std::move(t));
  }
  out.push_back(Token{});
  return out;
}

absl::Status Overflow() { return Bad("the result does not fit 64 bits"); }

absl::StatusOr<Value> FloorDiv(const Value& a, const Value& b) {
  if (b.AsDouble() == 0) return Bad("division by zero");
  if (a.is_int && b.is_int) {
    if (a.i == INT64_MIN && b.i == -1) return Overflow();
    int64_t q = a.i / b.i;
    if (a.i % b.i != 0 && ((a.i < 0) != (b.i < 0))) --q;
    return Value::Int(q);
  }
  return Value::Float(std::floor(a.AsDouble() / b.AsDouble()));
}

absl::StatusOr<Value> Mod(const Value& a, const Value& b) {
  if (b.AsDouble() == 0) return Bad("modulo by zero");
  if (a.is_int && b.is_int) {
    if (b.i == -1) return Value::Int(0);
    int64_t r = a.i % b.i;
    if (r != 0 && ((r < 0) != (b.i < 0))) r += b.i;
    return Value::Int(r);
  }
  double r = std::fmod(a.AsDouble(), b.AsDouble());
  if (r != 0 && ((r < 0) != (b.AsDouble() < 0))) r += b.AsDouble();
  return Value::Float(r);
}

absl::StatusOr<Value> Binary(const std::string& op, const Value& a,
                             const Value& b) {
  if (op == "/") {
    if (b.AsDouble() == 0) return Bad("division by zero");
    return Value::Float(a.AsDouble() / b.AsDouble());
  }
  if (op == "//") return FloorDiv(a, b);
  if (op == "%") return Mod(a, b);
  if (a.is_int && b.is_int) {
    int64_t r = 0;
    const bool over = op == "+"   ? __builtin_add_overflow(a.i, b.i, &r)
                      : op == "-" ? __builtin_sub_overflow(a.i, b.i, &r)
                                  : __builtin_mul_overflow(a.i, b.i, &r);
    if (over) return Overflow();
    return Value::Int(r);
  }
  const double x = a.AsDouble(), y = b.AsDouble();
  return Value::Float(op == "+" ? x + y : op == "-" ? x - y : x * y);
}

absl::StatusOr<Value> Negate(const Value& a) {
  if (!a.is_int) return Value::Float(-a.d);
  if (a.i == INT64_MIN) return Overflow();
  return Value::Int(-a.i);
}

bool Less(const Value& a, const Value& b) {
  if (a.is_int && b.is_int) return a.i < b.i;
  return a.AsDouble() < b.AsDouble();
}

class Parser {
 public:
  Parser(std::vector<Token> toks, const Env& env)
      : toks_(std::move(toks)), env_(env) {}

  absl::StatusOr<Value> Whole() {
    CORPUS_ASSIGN_OR_RETURN(v, Expr());
    if (Peek().kind != Token::kEnd) {
      return Bad(absl::StrCat("unexpected ", ShowToken(Peek()),
                              " after the expression"));
    }
    return v;
  }

 private:
  const Token& Peek() const { return toks_[i_]; }
  bool PeekOp(absl::string_view op) const {
    return Peek().kind == Token::kOp && Peek().text == op;
  }
  absl::Status Expect(absl::string_view op) {
    if (!PeekOp(op)) {
      return Bad(absl::StrCat("expected '", op, "', got ", ShowToken(Peek())));
    }
    ++i_;
    return absl::OkStatus();
  }

  absl::StatusOr<Value> Expr() {
    CORPUS_ASSIGN_OR_RETURN(v, Term());
    while (PeekOp("+") || PeekOp("-")) {
      const std::string op = toks_[i_++].text;
      CORPUS_ASSIGN_OR_RETURN(r, Term());
      CORPUS_ASSIGN_OR_RETURN(x, Binary(op, v, r));
      v = x;
    }
    return v;
  }
  absl::StatusOr<Value> Term() {
    CORPUS_ASSIGN_OR_RETURN(v, Unary());
    while (PeekOp("*") || PeekOp("/") || PeekOp("//") || PeekOp("%")) {
      const std::string op = toks_[i_++].text;
      CORPUS_ASSIGN_OR_RETURN(r, Unary());
      CORPUS_ASSIGN_OR_RETURN(x, Binary(op, v, r));
      v = x;
    }
    return v;
  }
  absl::StatusOr<Value> Unary() {
    if (PeekOp("-")) {
      ++i_;
      CORPUS_ASSIGN_OR_RETURN(v, Unary());
      return Negate(v);
    }
    if (PeekOp("+")) {
      ++i_;
      return Unary();
    }
    return Primary();
  }
  absl::StatusOr<Value> Primary() {
    const Token t = toks_[i_];
    if (t.kind != Token::kEnd) ++i_;
    if (t.kind == Token::kNum) return t.num;
    if (t.kind == Token::kOp && t.text == "(") {
      CORPUS_ASSIGN_OR_RETURN(v, Expr());
      CORPUS_RETURN_IF_ERROR(Expect(")"));
      return v;
    }
    if (t.kind == Token::kName) {
      if (PeekOp("(")) return Call(t.text);
      auto it = env_.find(t.text);
      if (it == env_.end()) {
        std::vector<std::string> known;
        for (const auto& [k, _] : env_) known.push_back(k);
        return Bad(absl::StrCat(
            "unknown name '", t.text, "' (known: ",
            known.empty() ? "none" : absl::StrJoin(known, ", "), ")"));
      }
      return it->second;
    }
    return Bad(absl::StrCat("unexpected ", ShowToken(t)));
  }
  absl::StatusOr<Value> Call(const std::string& fn) {
    if (fn != "min" && fn != "max" && fn != "cdiv") {
      return Bad(absl::StrCat("unknown function '", fn, "' (min, max, cdiv)"));
    }
    CORPUS_RETURN_IF_ERROR(Expect("("));
    std::vector<Value> args;
    CORPUS_ASSIGN_OR_RETURN(first, Expr());
    args.push_back(first);
    while (PeekOp(",")) {
      ++i_;
      CORPUS_ASSIGN_OR_RETURN(next, Expr());
      args.push_back(next);
    }
    CORPUS_RETURN_IF_ERROR(Expect(")"));
    if (fn == "cdiv") {
      if (args.size() != 2) {
        return Bad(absl::StrCat("cdiv takes 2 arguments, not ", args.size()));
      }
      CORPUS_ASSIGN_OR_RETURN(na, Negate(args[0]));
      CORPUS_ASSIGN_OR_RETURN(q, FloorDiv(na, args[1]));
      return Negate(q);
    }
    if (args.size() < 2) return Bad(fn + " takes 2 or more arguments");
    Value best = args[0];
    for (size_t k = 1; k < args.size(); ++k) {
      if (fn == "min" ? Less(args[k], best) : Less(best, args[k]))
        best = args[k];
    }
    return best;
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  const Env& env_;
};

// ------------------------------------------------------------- manifests

constexpr const char* kArgKinds[] = {"buffer", "tensor", "i32", "i64", "f32"};
constexpr const char* kInits[] = {"randn", "rand",   "randint",
                                  "perm",  "arange", "zeros"};
constexpr const char* kReserved[] = {"sms", "torch", "F", "min", "max", "cdiv"};

bool IsIdent(absl::string_view s) {
  if (s.empty() || !IsNameStart(s[0])) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

bool Reserved(absl::string_view s) {
  for (const char* r : kReserved) {
    if (s == r) return true;
  }
  return false;
}

std::string Kind(const Json& j) {
  return j.is_object() ? "object" : j.is_array() ? "list" : j.type_name();
}

absl::Status Keys(const Json& obj, const std::string& where,
                  std::vector<std::string> required,
                  std::vector<std::string> optional) {
  if (!obj.is_object()) {
    return Bad(absl::StrCat(where, ": an object is needed, not ", Kind(obj)));
  }
  for (const std::string& k : required) {
    if (!obj.contains(k))
      return Bad(absl::StrCat(where, ": '", k, "' is missing"));
  }
  for (const auto& [k, _] : obj.items()) {
    const bool known =
        std::find(required.begin(), required.end(), k) != required.end() ||
        std::find(optional.begin(), optional.end(), k) != optional.end() ||
        k == "notes" || k == "comment" || absl::StartsWith(k, "_");
    if (!known) {
      std::vector<std::string> all = required;
      all.insert(all.end(), optional.begin(), optional.end());
      return Bad(absl::StrCat(where, ": unknown key '", k,
                              "' (known: ", absl::StrJoin(all, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

bool IsNumber(const Json& j) { return j.is_number() && !j.is_boolean(); }

absl::Status ExprOk(const Json& j, const std::string& where) {
  if (!IsNumber(j) && !j.is_string()) {
    return Bad(absl::StrCat(where, ": ", j.dump(),
                            " is not a number or an expression string"));
  }
  return absl::OkStatus();
}

// A list of lo..hi expressions, or one expression (a one-entry list).
absl::StatusOr<std::vector<Json>> Dims(const Json& j, const std::string& where,
                                       size_t lo, size_t hi) {
  std::vector<Json> v;
  if (j.is_array()) {
    for (const Json& e : j) v.push_back(e);
  } else {
    v.push_back(j);
  }
  if (v.size() < lo || v.size() > hi) {
    return Bad(absl::StrCat(where, ": ", v.size(), " entries (give ", lo,
                            " to ", hi, ")"));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    CORPUS_RETURN_IF_ERROR(ExprOk(v[i], absl::StrCat(where, "[", i, "]")));
  }
  return v;
}

// ("name", argument texts) of "name" or "name(a, b)".
absl::StatusOr<std::pair<std::string, std::vector<std::string>>> ParseCall(
    absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  size_t n = 0;
  while (n < text.size() && (absl::ascii_isalnum(text[n]) || text[n] == '_'))
    ++n;
  std::string name(text.substr(0, n));
  absl::string_view rest = absl::StripAsciiWhitespace(text.substr(n));
  std::vector<std::string> args;
  if (!IsIdent(name) ||
      (!rest.empty() && (rest.front() != '(' || rest.back() != ')'))) {
    return Bad(absl::StrCat("'", text, "' is not NAME or NAME(ARGS)"));
  }
  if (!rest.empty()) {
    rest = rest.substr(1, rest.size() - 2);
    int depth = 0;
    std::string cur;
    for (char c : rest) {
      if (c == ',' && depth == 0) {
        args.push_back(std::string(absl::StripAsciiWhitespace(cur)));
        cur.clear();
        continue;
      }
      depth += (c == '(') - (c == ')');
      cur += c;
    }
    args.push_back(std::string(absl::StripAsciiWhitespace(cur)));
  }
  return std::make_pair(name, args);
}

absl::Status CheckLaunch(const Json& l, const std::string& where,
                         const Json& buffers, const fs::path& dir) {
  CORPUS_RETURN_IF_ERROR(Keys(l, where,
                              {"source", "kernel", "grid", "block", "args"},
                              {"smem", "defines"}));
  for (const char* k : {"source", "kernel"}) {
    if (!l[k].is_string() || l[k].get<std::string>().empty()) {
      return Bad(absl::StrCat(where, ".", k, ": a non-empty string is needed"));
    }
  }
  const std::string src = l["source"].get<std::string>();
  std::error_code ec;
  if (!fs::is_regular_file(dir / src, ec)) {
    return Bad(
        absl::StrCat(where, ".source: no file ", src, " beside the manifest"));
  }
  CORPUS_RETURN_IF_ERROR(Dims(l["grid"], where + ".grid", 1, 3).status());
  CORPUS_RETURN_IF_ERROR(Dims(l["block"], where + ".block", 1, 3).status());
  if (l.contains("smem"))
    CORPUS_RETURN_IF_ERROR(ExprOk(l["smem"], where + ".smem"));
  if (l.contains("defines")) {
    if (!l["defines"].is_object()) {
      return Bad(where + ".defines: an object NAME -> EXPR is needed");
    }
    for (const auto& [k, v] : l["defines"].items()) {
      if (!IsIdent(k)) {
        return Bad(
            absl::StrCat(where, ".defines: '", k, "' is not a macro name"));
      }
      CORPUS_RETURN_IF_ERROR(ExprOk(v, absl::StrCat(where, ".defines.", k)));
    }
  }
  if (!l["args"].is_array()) return Bad(where + ".args: a list is needed");
  for (size_t i = 0; i < l["args"].size(); ++i) {
    const Json& a = l["args"][i];
    const std::string w = absl::StrCat(where, ".args[", i, "]");
    if (!a.is_object()) return Bad(w + ": an object is needed");
    std::vector<std::string> kinds;
    for (const char* k : kArgKinds) {
      if (a.contains(k)) kinds.push_back(k);
    }
    if (kinds.size() != 1) {
      std::vector<std::string> has;
      for (const auto& [k, _] : a.items()) has.push_back(k);
      return Bad(absl::StrCat(
          w, ": give exactly one of buffer, tensor, i32, i64, f32 (has ",
          has.empty() ? "nothing" : absl::StrJoin(has, ", "), ")"));
    }
    const std::string& kind = kinds[0];
    if (kind == "tensor") {
      CORPUS_RETURN_IF_ERROR(
          Keys(a, w, {"tensor"}, {"box", "oob", "swizzle", "view"}));
    } else {
      CORPUS_RETURN_IF_ERROR(Keys(a, w, {kind}, {}));
    }
    if (kind == "buffer" || kind == "tensor") {
      if (!a[kind].is_string() ||
          !buffers.contains(a[kind].get<std::string>())) {
        return Bad(absl::StrCat(w, ": no buffer ", a[kind].dump()));
      }
      if (kind == "tensor") {
        if (a.contains("oob") && !(a["oob"] == "promise_in_bounds" ||
                                   a["oob"] == "zeros" || a["oob"] == "nan")) {
          return Bad(
              absl::StrCat(w, ".oob: ", a["oob"].dump(),
                           " is not one of promise_in_bounds, zeros, nan"));
        }
        if (a.contains("swizzle") &&
            !(a["swizzle"] == 0 || a["swizzle"] == 32 || a["swizzle"] == 64 ||
              a["swizzle"] == 128)) {
          return Bad(absl::StrCat(w, ".swizzle: ", a["swizzle"].dump(),
                                  " is not 0, 32, 64 or 128"));
        }
        if (a.contains("box"))
          CORPUS_RETURN_IF_ERROR(Dims(a["box"], w + ".box", 0, 5).status());
        if (a.contains("view"))
          CORPUS_RETURN_IF_ERROR(Dims(a["view"], w + ".view", 1, 5).status());
      }
    } else {
      CORPUS_RETURN_IF_ERROR(ExprOk(a[kind], absl::StrCat(w, ".", kind)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> EvalInt(const Json& j, const Env& env,
                                const std::string& what) {
  absl::StatusOr<Value> v = EvaluateJson(j, env);
  if (!v.ok()) return Bad(absl::StrCat(what, ": ", v.status().message()));
  if (!v->is_int) {
    return Bad(absl::StrCat(what, ": ", j.dump(), " is ", Show(*v),
                            ", not an integer (// divides integers)"));
  }
  return v->i;
}

absl::StatusOr<Value> EvalAny(const Json& j, const Env& env,
                              const std::string& what) {
  absl::StatusOr<Value> v = EvaluateJson(j, env);
  if (!v.ok()) return Bad(absl::StrCat(what, ": ", v.status().message()));
  return *v;
}

bool Fits(int64_t v, const Dtype& d) {
  if (d.kind == 'u')
    return v >= 0 && (d.bytes == 8 || v < (int64_t{1} << (8 * d.bytes)));
  if (d.bytes == 8) return true;
  const int64_t lim = int64_t{1} << (8 * d.bytes - 1);
  return v >= -lim && v < lim;
}

absl::StatusOr<Buffer> ResolveBuffer(const std::string& name, const Json& b,
                                     const Env& env) {
  const std::string w = "buffers." + name;
  Buffer out;
  out.name = name;
  out.dtype = FindDtype(b["dtype"].get<std::string>());
  CORPUS_ASSIGN_OR_RETURN(dims, Dims(b["shape"], w + ".shape", 0, 8));
  for (size_t i = 0; i < dims.size(); ++i) {
    CORPUS_ASSIGN_OR_RETURN(
        d, EvalInt(dims[i], env, absl::StrCat(w, ".shape[", i, "]")));
    if (d < 1) {
      return Bad(
          absl::StrCat(w, ".shape[", i, "] is ", d, ": extents are >= 1"));
    }
    if (__builtin_mul_overflow(out.numel, d, &out.numel)) return Overflow();
    out.shape.push_back(d);
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(out.numel, int64_t{out.dtype->bytes}, &bytes))
    return Overflow();
  out.bytes = static_cast<uint64_t>(bytes);
  out.output = b.value("output", false);
  out.atol = b.contains("atol") ? b["atol"].get<double>() : 0;
  out.rtol = b.contains("rtol") ? b["rtol"].get<double>() : 0;
  if (!b.contains("init")) return out;
  CORPUS_ASSIGN_OR_RETURN(call, ParseCall(b["init"].get<std::string>()));
  out.init = call.first;
  const size_t want = out.init == "randint" ? 2 : out.init == "perm" ? 1 : 0;
  if (call.second.size() != want) {
    return Bad(
        absl::StrCat(w, ".init: ", out.init, " takes ", want, " argument(s)"));
  }
  for (const std::string& t : call.second) {
    CORPUS_ASSIGN_OR_RETURN(v, EvalInt(Json(t), env, w + ".init"));
    out.init_args.push_back(v);
  }
  const Dtype& d = *out.dtype;
  if ((out.init == "randn" || out.init == "rand") && d.kind != 'f') {
    return Bad(absl::StrCat(w, ".init: ", out.init,
                            " fills floating-point buffers (", d.name,
                            " is not)"));
  }
  if ((out.init == "randint" || out.init == "perm") && d.kind == 'f') {
    return Bad(absl::StrCat(w, ".init: ", out.init, " fills integer buffers (",
                            d.name, " is not)"));
  }
  if (out.init == "randint") {
    const int64_t lo = out.init_args[0], hi = out.init_args[1];
    if (!(lo < hi && Fits(lo, d) && Fits(hi - 1, d))) {
      return Bad(absl::StrCat(w, ".init: randint(", lo, ", ", hi,
                              ") is empty or does not fit ", d.name));
    }
  }
  if (out.init == "perm") {
    const int64_t n = out.init_args[0];
    if (n < out.numel || !Fits(n - 1, d)) {
      return Bad(absl::StrCat(w, ".init: perm(", n, ") must give ", out.numel,
                              " distinct values that fit ", d.name));
    }
  }
  if (out.init == "arange" && d.kind != 'f' && !Fits(out.numel - 1, d)) {
    return Bad(absl::StrCat(w, ".init: arange up to ", out.numel - 1,
                            " does not fit ", d.name));
  }
  return out;
}

absl::Status Dim3(const Json& j, const Env& env, const std::string& where,
                  const int64_t limits[3], uint32_t out[3]) {
  CORPUS_ASSIGN_OR_RETURN(dims, Dims(j, where, 1, 3));
  for (size_t i = 0; i < 3; ++i) {
    if (i >= dims.size()) {
      out[i] = 1;
      continue;
    }
    CORPUS_ASSIGN_OR_RETURN(
        v, EvalInt(dims[i], env, absl::StrCat(where, "[", i, "]")));
    if (v < 1 || v > limits[i]) {
      return Bad(
          absl::StrCat(where, "[", i, "] is ", v, " (1..", limits[i], ")"));
    }
    out[i] = static_cast<uint32_t>(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<Launch> ResolveLaunch(const Json& l, const std::string& where,
                                     const Env& env, const Problem& p,
                                     const std::string& dir) {
  Launch out;
  out.source_path = (fs::path(dir) / l["source"].get<std::string>()).string();
  out.kernel = l["kernel"].get<std::string>();
  static const int64_t kGrid[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
  static const int64_t kBlock[3] = {1024, 1024, 64};
  CORPUS_RETURN_IF_ERROR(
      Dim3(l["grid"], env, where + ".grid", kGrid, out.grid));
  CORPUS_RETURN_IF_ERROR(
      Dim3(l["block"], env, where + ".block", kBlock, out.block));
  const uint64_t threads = uint64_t{out.block[0]} * out.block[1] * out.block[2];
  if (threads > 1024) {
    return Bad(
        absl::StrCat(where, ".block: ", threads, " threads (1024 at most)"));
  }
  CORPUS_ASSIGN_OR_RETURN(
      smem,
      EvalInt(l.contains("smem") ? l["smem"] : Json(0), env, where + ".smem"));
  if (smem < 0 || smem >= (int64_t{1} << 32)) {
    return Bad(absl::StrCat(where, ".smem is ", smem));
  }
  out.smem = static_cast<uint32_t>(smem);
  if (l.contains("defines")) {
    for (const auto& [k, v] : l["defines"].items()) {
      CORPUS_ASSIGN_OR_RETURN(
          x, EvalAny(v, env, absl::StrCat(where, ".defines.", k)));
      out.defines.push_back(absl::StrCat("-D", k, "=", DefineText(x)));
    }
  }
  for (size_t i = 0; i < l["args"].size(); ++i) {
    const Json& a = l["args"][i];
    const std::string w = absl::StrCat(where, ".args[", i, "]");
    Arg arg;
    if (a.contains("buffer")) {
      arg.kind = Arg::kBuffer;
      arg.buffer = a["buffer"].get<std::string>();
    } else if (a.contains("tensor")) {
      arg.kind = Arg::kTensor;
      arg.buffer = a["tensor"].get<std::string>();
      const Buffer& b = *p.Find(arg.buffer);
      arg.shape = b.shape;
      if (a.contains("view")) {
        CORPUS_ASSIGN_OR_RETURN(view, Dims(a["view"], w + ".view", 1, 5));
        std::vector<int64_t> v;
        int64_t n = 1;
        bool ok = true;
        for (size_t k = 0; k < view.size(); ++k) {
          CORPUS_ASSIGN_OR_RETURN(
              d, EvalInt(view[k], env, absl::StrCat(w, ".view[", k, "]")));
          ok = ok && d >= 1 && !__builtin_mul_overflow(n, d, &n);
          v.push_back(d);
        }
        if (!ok || n != b.numel) {
          return Bad(absl::StrCat(w, ".view: [", absl::StrJoin(v, ", "),
                                  "] does not hold the ", b.numel,
                                  " elements of ", b.name, " [",
                                  absl::StrJoin(b.shape, ", "), "]"));
        }
        arg.shape = v;
      }
      if (arg.shape.empty() || arg.shape.size() > 5) {
        return Bad(absl::StrCat(w, ": a tensor has 1 to 5 dimensions (", b.name,
                                ": ", arg.shape.size(), ")"));
      }
      const std::string oob = a.value("oob", "promise_in_bounds");
      arg.oob = oob == "zeros" ? FJ_OOB_ZEROS
                : oob == "nan" ? FJ_OOB_NAN
                               : FJ_OOB_PROMISE_IN_BOUNDS;
      if (a.contains("box")) {
        CORPUS_ASSIGN_OR_RETURN(box, Dims(a["box"], w + ".box", 0, 5));
        if (box.size() > arg.shape.size()) {
          return Bad(absl::StrCat(w, ".box: ", box.size(), " extents for a ",
                                  arg.shape.size(),
                                  "-D tensor (outermost-first, like the "
                                  "shape)"));
        }
        for (size_t k = 0; k < box.size(); ++k) {
          CORPUS_ASSIGN_OR_RETURN(
              x, EvalInt(box[k], env, absl::StrCat(w, ".box[", k, "]")));
          if (x < 0 || x >= (int64_t{1} << 32)) {
            return Bad(absl::StrCat(w, ".box[", k, "] is ", x));
          }
          if (arg.oob == FJ_OOB_PROMISE_IN_BOUNDS && x > arg.shape[k]) {
            return Bad(absl::StrCat(w, ".box[", k, "] is ", x,
                                    ", past the extent ", arg.shape[k],
                                    " (oob promise_in_bounds)"));
          }
          arg.box.push_back(x);
        }
      }
      if (arg.oob == FJ_OOB_NAN && b.dtype->kind != 'f') {
        return Bad(w + ".oob: nan fill needs a floating-point tensor");
      }
      const int sw = a.value("swizzle", 0);
      arg.swizzle = sw == 32    ? FJ_SWIZZLE_32B
                    : sw == 64  ? FJ_SWIZZLE_64B
                    : sw == 128 ? FJ_SWIZZLE_128B
                                : FJ_SWIZZLE_NONE;
    } else {
      const std::string kind = a.contains("i32")   ? "i32"
                               : a.contains("i64") ? "i64"
                                                   : "f32";
      CORPUS_ASSIGN_OR_RETURN(v, EvalAny(a[kind], env, w));
      if (kind == "f32") {
        arg.kind = Arg::kF32;
        arg.f = v.AsDouble();
        if (!std::isfinite(arg.f) || std::fabs(arg.f) > 3.4028234663852886e38) {
          return Bad(absl::StrCat(w, ": ", a[kind].dump(), " is ",
                                  FormatDouble(arg.f), ", not a finite f32"));
        }
      } else {
        if (!v.is_int) {
          return Bad(absl::StrCat(w, ": ", a[kind].dump(), " is ", Show(v),
                                  ", not an integer"));
        }
        arg.kind = kind == "i32" ? Arg::kI32 : Arg::kI64;
        arg.i = v.i;
        if (kind == "i32" && (v.i < INT32_MIN || v.i > INT32_MAX)) {
          return Bad(absl::StrCat(w, ": ", v.i, " does not fit i32"));
        }
      }
    }
    out.args.push_back(std::move(arg));
  }
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<Value> Evaluate(absl::string_view expr, const Env& env) {
  absl::StatusOr<Value> v = [&]() -> absl::StatusOr<Value> {
    CORPUS_ASSIGN_OR_RETURN(toks, Tokens(expr));
    return Parser(std::move(toks), env).Whole();
  }();
  if (!v.ok()) {
    return Bad(absl::StrCat("'", expr, "': ", v.status().message()));
  }
  return v;
}

absl::StatusOr<Value> EvaluateJson(const Json& j, const Env& env) {
  if (j.is_string()) return Evaluate(j.get<std::string>(), env);
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > uint64_t{INT64_MAX}) {
      return Bad(absl::StrCat(j.dump(), " does not fit 64 bits"));
    }
    return Value::Int(static_cast<int64_t>(j.get<uint64_t>()));
  }
  if (j.is_number_integer()) return Value::Int(j.get<int64_t>());
  if (j.is_number_float()) return Value::Float(j.get<double>());
  return Bad(absl::StrCat(j.dump(), " is not a number or an expression"));
}

std::string DefineText(const Value& v) {
  return v.is_int ? std::to_string(v.i) : FormatDouble(v.d);
}

const std::vector<Dtype>& Dtypes() {
  static const std::vector<Dtype> d = {
      {"f32", 4, 'f', 2, 32},  {"f16", 2, 'f', 2, 16},
      {"bf16", 2, 'f', 4, 16}, {"fp8e4m3", 1, 'f', FJ_DL_FLOAT8_E4M3, 8},
      {"i8", 1, 'i', 0, 8},    {"u8", 1, 'u', 1, 8},
      {"i32", 4, 'i', 0, 32},  {"i64", 8, 'i', 0, 64},
  };
  return d;
}

const Dtype* FindDtype(absl::string_view name) {
  for (const Dtype& d : Dtypes()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const Buffer* Problem::Find(absl::string_view name) const {
  for (const Buffer& b : buffers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

absl::StatusOr<Manifest> CheckManifest(Json data, const std::string& path) {
  const fs::path p(path);
  CORPUS_RETURN_IF_ERROR(
      Keys(data, p.filename().string(),
           {"name", "sizes", "buffers", "bytes", "torch", "layer", "plain"},
           {"what"}));
  Manifest m;
  m.path = path;
  m.dir = p.parent_path().string();
  m.set = fs::path(m.dir).filename().string();
  if (!data["name"].is_string() || !IsIdent(data["name"].get<std::string>())) {
    return Bad(absl::StrCat("name: ", data["name"].dump(),
                            " is not a name (letters, digits, _)"));
  }
  m.name = data["name"].get<std::string>();
  if (data.contains("what") && data["what"].is_string())
    m.what = data["what"].get<std::string>();
  const Json& bufs = data["buffers"];
  if (!bufs.is_object() || bufs.empty()) {
    return Bad("buffers: a non-empty object is needed");
  }
  if (!data["sizes"].is_array() || data["sizes"].empty()) {
    return Bad("sizes: a non-empty list is needed");
  }
  for (size_t i = 0; i < data["sizes"].size(); ++i) {
    const Json& s = data["sizes"][i];
    const std::string w = absl::StrCat("sizes[", i, "]");
    CORPUS_RETURN_IF_ERROR(Keys(s, w, {"label", "vars"}, {}));
    bool seen = false;
    for (const auto& [label, _] : m.sizes) seen = seen || s["label"] == label;
    if (!s["label"].is_string() || seen) {
      return Bad(w + ".label: a string of its own is needed");
    }
    if (!s["vars"].is_object()) {
      return Bad(w + ".vars: an object NAME -> number is needed");
    }
    Env env;
    for (const auto& [k, v] : s["vars"].items()) {
      if (!IsIdent(k) || Reserved(k) || bufs.contains(k)) {
        return Bad(absl::StrCat(
            w, ".vars: '", k,
            "' cannot be a variable's name (an identifier, not sms, torch, "
            "F, min, max, cdiv or a buffer)"));
      }
      if (!IsNumber(v)) {
        return Bad(
            absl::StrCat(w, ".vars.", k, ": ", v.dump(), " is not a number"));
      }
      CORPUS_ASSIGN_OR_RETURN(x, EvaluateJson(v, {}));
      env[k] = x;
    }
    m.sizes.emplace_back(s["label"].get<std::string>(), std::move(env));
  }
  for (const auto& [name, b] : bufs.items()) {
    const std::string w = "buffers." + name;
    if (!IsIdent(name) || Reserved(name)) {
      return Bad(w +
                 ": not a buffer name (an identifier, not sms, torch, F, "
                 "min, max, cdiv)");
    }
    CORPUS_RETURN_IF_ERROR(
        Keys(b, w, {"dtype", "shape"}, {"init", "output", "atol", "rtol"}));
    if (!b["dtype"].is_string() ||
        FindDtype(b["dtype"].get<std::string>()) == nullptr) {
      return Bad(absl::StrCat(w, ".dtype: ", b["dtype"].dump(),
                              " is not one of f32, f16, bf16, fp8e4m3, i8, "
                              "u8, i32, i64"));
    }
    CORPUS_RETURN_IF_ERROR(Dims(b["shape"], w + ".shape", 0, 8).status());
    if (b.contains("output") && !b["output"].is_boolean()) {
      return Bad(w + ".output: true or false");
    }
    const bool output = b.value("output", false);
    if (!output) {
      if (!b.contains("init")) {
        return Bad(w +
                   ": an input needs an init (or mark it \"output\": true)");
      }
      for (const char* k : {"atol", "rtol"}) {
        if (b.contains(k)) {
          return Bad(absl::StrCat(w, ".", k, ": only outputs are compared"));
        }
      }
    }
    for (const char* k : {"atol", "rtol"}) {
      if (b.contains(k) && (!IsNumber(b[k]) || !(b[k].get<double>() >= 0))) {
        return Bad(absl::StrCat(w, ".", k, ": ", b[k].dump(),
                                " is not a number >= 0"));
      }
    }
    if (b.contains("init")) {
      if (!b["init"].is_string()) return Bad(w + ".init: a string is needed");
      absl::StatusOr<std::pair<std::string, std::vector<std::string>>> call =
          ParseCall(b["init"].get<std::string>());
      if (!call.ok()) {
        return Bad(absl::StrCat(w, ".init: ", call.status().message()));
      }
      if (std::find_if(std::begin(kInits), std::end(kInits),
                       [&](const char* i) { return call->first == i; }) ==
          std::end(kInits)) {
        return Bad(absl::StrCat(w, ".init: '", call->first,
                                "' is not one of randn, rand, randint, perm, "
                                "arange, zeros"));
      }
    }
  }
  CORPUS_RETURN_IF_ERROR(ExprOk(data["bytes"], "bytes"));
  if (!data["torch"].is_string() ||
      absl::StripAsciiWhitespace(data["torch"].get<std::string>()).empty()) {
    return Bad("torch: a Python expression string is needed");
  }
  for (const char* side : {"layer", "plain"}) {
    CORPUS_RETURN_IF_ERROR(
        CheckLaunch(data[side], side, bufs, p.parent_path()));
  }
  m.data = std::move(data);
  return m;
}

absl::StatusOr<Manifest> LoadManifest(const std::string& path) {
  CORPUS_ASSIGN_OR_RETURN(text, ReadFile(path));
  Json data;
  try {
    data = Json::parse(text);
  } catch (const Json::exception& e) {
    return Bad(absl::StrCat(path, ": not JSON: ", e.what()));
  }
  absl::StatusOr<Manifest> m = CheckManifest(std::move(data), path);
  if (!m.ok()) return Bad(absl::StrCat(path, ": ", m.status().message()));
  return m;
}

absl::StatusOr<Problem> Resolve(const Manifest& m, size_t size, int sms) {
  Problem p;
  p.label = m.sizes.at(size).first;
  p.env = m.sizes.at(size).second;
  p.env["sms"] = Value::Int(sms);
  absl::Status st = [&]() -> absl::Status {
    for (const auto& [name, b] : m.data["buffers"].items()) {
      CORPUS_ASSIGN_OR_RETURN(buf, ResolveBuffer(name, b, p.env));
      p.buffers.push_back(std::move(buf));
    }
    CORPUS_ASSIGN_OR_RETURN(bytes, EvalInt(m.data["bytes"], p.env, "bytes"));
    if (bytes < 2) return Bad(absl::StrCat("bytes is ", bytes));
    p.bytes = static_cast<uint64_t>(bytes);
    CORPUS_ASSIGN_OR_RETURN(
        layer, ResolveLaunch(m.data["layer"], "layer", p.env, p, m.dir));
    p.layer = std::move(layer);
    CORPUS_ASSIGN_OR_RETURN(
        plain, ResolveLaunch(m.data["plain"], "plain", p.env, p, m.dir));
    p.plain = std::move(plain);
    return absl::OkStatus();
  }();
  if (!st.ok()) {
    return Bad(absl::StrCat(m.path, " (size '", p.label, "'): ", st.message()));
  }
  return p;
}

absl::StatusOr<std::vector<std::string>> FindSets(
    const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) {
      return absl::NotFoundError(absl::StrCat(d, ": no such folder"));
    }
    bool has_json = false;
    std::vector<std::string> subs;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
      if (e.is_regular_file(ec) && e.path().extension() == ".json")
        has_json = true;
      if (e.is_directory(ec) &&
          absl::StartsWith(e.path().filename().string(), "set")) {
        subs.push_back(e.path().string());
      }
    }
    if (has_json) {
      out.push_back(d);
    } else {
      std::sort(subs.begin(), subs.end());
      out.insert(out.end(), subs.begin(), subs.end());
    }
  }
  return out;
}

absl::StatusOr<std::vector<Manifest>> LoadSets(
    const std::vector<std::string>& sets) {
  std::vector<Manifest> out;
  for (const std::string& d : sets) {
    std::vector<std::string> files;
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
      if (e.is_regular_file(ec) && e.path().extension() == ".json")
        files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      CORPUS_ASSIGN_OR_RETURN(m, LoadManifest(f));
      out.push_back(std::move(m));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<LaunchArgs>> LaunchArgs::Make(
    const Problem& p, const Launch& launch,
    const std::map<std::string, uint64_t>& addresses, int device) {
  auto out = std::unique_ptr<LaunchArgs>(new LaunchArgs());
  for (const Arg& a : launch.args) {
    fj_arg x{};
    x.struct_size = sizeof(fj_arg);
    if (a.kind == Arg::kBuffer || a.kind == Arg::kTensor) {
      auto it = addresses.find(a.buffer);
      if (it == addresses.end()) {
        return absl::InternalError(absl::StrCat("no address for ", a.buffer));
      }
      if (a.kind == Arg::kBuffer) {
        x.kind = FJ_ARG_POINTER;
        x.v.pointer = it->second;
      } else {
        const Dtype& d = *p.Find(a.buffer)->dtype;
        std::vector<int64_t>& shape = out->shapes_.emplace_back(a.shape);
        fj_tensor& t = out->tensors_.emplace_back();
        t.data = reinterpret_cast<void*>(it->second);
        t.device = {2, device};
        t.ndim = static_cast<int32_t>(shape.size());
        t.dtype = {d.dl_code, d.dl_bits, 1};
        t.shape = shape.data();
        fj_tensor_arg& ta = out->tensor_args_.emplace_back();
        ta.struct_size = sizeof(fj_tensor_arg);
        ta.tensor = &t;
        for (size_t k = 0; k < a.box.size(); ++k)
          ta.box[k] = static_cast<uint32_t>(a.box[k]);
        ta.oob = a.oob;
        ta.swizzle = a.swizzle;
        x.kind = FJ_ARG_TENSOR;
        x.v.tensor = &ta;
      }
    } else if (a.kind == Arg::kI32) {
      x.kind = FJ_ARG_I32;
      x.v.i32 = static_cast<int32_t>(a.i);
    } else if (a.kind == Arg::kI64) {
      x.kind = FJ_ARG_I64;
      x.v.i64 = a.i;
    } else {
      x.kind = FJ_ARG_F32;
      x.v.f32 = static_cast<float>(a.f);
    }
    out->args_.push_back(x);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<BuildRequest>> BuildRequest::Make(
    const Launch& launch, const std::string& target, fj_copy_impl impl,
    fj_output output) {
  auto r = std::unique_ptr<BuildRequest>(new BuildRequest());
  CORPUS_ASSIGN_OR_RETURN(source, ReadFile(launch.source_path));
  r->source_ = std::move(source);
  r->name_ = fs::path(launch.source_path).filename().string();
  r->target_ = target;
  r->defines_ = launch.defines;
  for (const std::string& d : r->defines_)
    r->define_strs_.push_back(fj_str{d.data(), d.size()});
  r->key_ = absl::StrCat(launch.source_path, "|",
                         absl::StrJoin(launch.defines, " "), "|", target, "|",
                         static_cast<int>(impl), "|", static_cast<int>(output));
  fj_build_options& o = r->options_;
  o.struct_size = sizeof(o);
  o.source = fj_str{r->source_.data(), r->source_.size()};
  o.name = fj_str{r->name_.data(), r->name_.size()};
  o.nvrtc_options = r->define_strs_.data();
  o.num_nvrtc_options = r->define_strs_.size();
  o.target = fj_str{r->target_.data(), r->target_.size()};
  o.copy_impl = impl;
  o.output = output;
  return r;
}

}  // namespace fleetjit::cli::corpus
