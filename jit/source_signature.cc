#include "jit/source_signature.h"

#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "fleetjit/copy/tensor_param.h"

namespace fleetjit::jit {
namespace {

bool IsIdentStart(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool IsIdentChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// sizeof(T) for CUDA's vector types (float4, __half2, ...), which name no
// dtype but whose size the runtime can check; 0 for any other type. A
// user's own struct is not known here: its name says nothing of its size.
int VectorTypeBytes(absl::string_view t) {
  if (t == "__half2" || t == "half2" || t == "__nv_bfloat162" ||
      t == "nv_bfloat162")
    return 4;
  struct Base {
    absl::string_view name;
    int bytes;
  };
  static constexpr Base kBases[] = {
      {"char", 1},  {"uchar", 1},    {"short", 2},     {"ushort", 2},
      {"int", 4},   {"uint", 4},     {"float", 4},     {"long", 8},
      {"ulong", 8}, {"longlong", 8}, {"ulonglong", 8}, {"double", 8},
  };
  if (t.empty()) return 0;
  const char lanes = t.back();
  if (lanes != '1' && lanes != '2' && lanes != '3' && lanes != '4') return 0;
  absl::string_view base = t.substr(0, t.size() - 1);
  for (const Base& b : kBases) {
    // CUDA's 3-lane types have no padding (float3 is 12 bytes).
    if (base == b.name) return b.bytes * (lanes - '0');
  }
  return 0;
}

// `text` without comments, and with the contents of string and character
// literals blanked, the same length (so offsets and lines are the source's).
std::string CleanSource(absl::string_view text) {
  std::string out(text);
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t end = text.find('\n', i);
      if (end == absl::string_view::npos) end = text.size();
      blank(i, end);
      i = end;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      end = end == absl::string_view::npos ? text.size() : end + 2;
      blank(i, end);
      i = end;
    } else if (c == 'R' && i + 1 < text.size() && text[i + 1] == '"' &&
               (i == 0 || !IsIdentChar(text[i - 1]))) {
      // R"delim( ... )delim"
      const size_t open = text.find('(', i + 2);
      if (open == absl::string_view::npos) break;
      const std::string close =
          absl::StrCat(")", text.substr(i + 2, open - i - 2), "\"");
      size_t end = text.find(close, open + 1);
      end = end == absl::string_view::npos ? text.size() : end + close.size();
      blank(i + 1, end);
      i = end;
    } else if (c == '"' || c == '\'') {
      size_t k = i + 1;
      while (k < text.size() && text[k] != c && text[k] != '\n') {
        k += text[k] == '\\' ? 2 : 1;
      }
      blank(i + 1, k);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

// Identifiers and single punctuation characters ("::" is one token).
std::vector<std::string> Tokens(absl::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (IsIdentChar(c)) {
      size_t k = i;
      while (k < text.size() && IsIdentChar(text[k])) ++k;
      out.emplace_back(text.substr(i, k - i));
      i = k;
    } else if (c == ':' && i + 1 < text.size() && text[i + 1] == ':') {
      out.emplace_back("::");
      i += 2;
    } else {
      out.emplace_back(1, c);
      ++i;
    }
  }
  return out;
}

// Splits at top-level commas (nesting of (), [], {} and <>).
std::vector<std::string> SplitArgs(absl::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : list) {
    if (c == '(' || c == '[' || c == '{' || c == '<') ++depth;
    if (c == ')' || c == ']' || c == '}' || c == '>') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back(absl::StripAsciiWhitespace(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!absl::StripAsciiWhitespace(cur).empty() || !out.empty()) {
    out.emplace_back(absl::StripAsciiWhitespace(cur));
  }
  return out;
}

// The text between the '(' at `open` and its matching ')', or nullopt.
std::optional<absl::string_view> Parenthesised(absl::string_view text,
                                               size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && --depth == 0)
      return text.substr(open + 1, i - open - 1);
  }
  return std::nullopt;
}

// The object-like macros and type aliases a declaration's words may use:
// name -> replacement, or nullopt where the name has two different
// meanings (or is a function-like macro): it resolves to nothing.
class Aliases {
 public:
  void Add(const std::string& name, absl::string_view value) {
    std::string v(absl::StripAsciiWhitespace(value));
    auto [it, fresh] = map_.emplace(name, v);
    if (!fresh && it->second != v) it->second = std::nullopt;
  }
  void Poison(const std::string& name) { map_[name] = std::nullopt; }

  // `text` with every alias replaced (repeatedly), as tokens joined by
  // single spaces ("::" and '*' included); nullopt when it uses an
  // ambiguous name.
  std::optional<std::string> Resolve(absl::string_view text) const {
    std::vector<std::string> tokens = Tokens(text);
    for (int round = 0; round < 8; ++round) {
      bool changed = false;
      std::vector<std::string> next;
      for (const std::string& t : tokens) {
        auto it = map_.find(t);
        if (it == map_.end()) {
          next.push_back(t);
          continue;
        }
        if (!it->second.has_value()) return std::nullopt;
        for (std::string& u : Tokens(*it->second)) next.push_back(std::move(u));
        changed = true;
      }
      tokens = std::move(next);
      if (!changed) break;
    }
    std::vector<std::string> kept;
    for (const std::string& t : tokens) {
      if (t == "const" || t == "volatile" || t == "struct" || t == "typename")
        continue;
      if (t == "::" && kept.empty()) continue;  // ::float -> float
      kept.push_back(t);
    }
    std::string out = absl::StrJoin(kept, " ");
    out = absl::StrReplaceAll(out, {{" :: ", "::"}});
    return out;
  }

 private:
  std::map<std::string, std::optional<std::string>> map_;
};

// Collects -D options, #defines, typedefs and using-aliases; blanks the
// preprocessor lines of `code` (a kernel declared in a macro is not one the
// scan can read).
Aliases CollectAliases(std::string& code,
                       const std::vector<std::string>& options) {
  Aliases aliases;
  for (size_t i = 0; i < options.size(); ++i) {
    absl::string_view o = options[i];
    std::string def;
    if (absl::ConsumePrefix(&o, "--define-macro=") ||
        (absl::ConsumePrefix(&o, "-D") && !o.empty())) {
      def = std::string(o);
    } else if ((o == "-D" || o == "--define-macro") && i + 1 < options.size()) {
      def = options[++i];
    } else {
      continue;
    }
    const size_t eq = def.find('=');
    if (eq == std::string::npos) {
      aliases.Add(def, "1");
    } else {
      aliases.Add(def.substr(0, eq), absl::string_view(def).substr(eq + 1));
    }
  }
  // Preprocessor lines (with their continuations).
  size_t line = 0;
  while (line < code.size()) {
    size_t end = line;
    while (end < code.size() && code[end] != '\n') {
      if (code[end] == '\\' && end + 1 < code.size() && code[end + 1] == '\n')
        ++end;  // a continued line
      ++end;
    }
    absl::string_view text(code.data() + line, end - line);
    absl::string_view body = absl::StripLeadingAsciiWhitespace(text);
    if (absl::ConsumePrefix(&body, "#")) {
      body = absl::StripLeadingAsciiWhitespace(body);
      if (absl::ConsumePrefix(&body, "define")) {
        body = absl::StripLeadingAsciiWhitespace(body);
        size_t n = 0;
        while (n < body.size() && IsIdentChar(body[n])) ++n;
        const std::string name(body.substr(0, n));
        if (!name.empty()) {
          if (n < body.size() && body[n] == '(') {
            aliases.Poison(name);  // function-like
          } else {
            std::string value(body.substr(n));
            for (char& c : value)
              if (c == '\\' || c == '\n') c = ' ';
            aliases.Add(name, value);
          }
        }
      }
      for (size_t k = line; k < end; ++k)
        if (code[k] != '\n') code[k] = ' ';
    }
    line = end + 1;
  }
  // typedef TYPE NAME;  using NAME = TYPE;
  const std::vector<std::string> tokens = Tokens(code);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == "typedef") {
      size_t k = i + 1;
      std::vector<std::string> words;
      bool plain = true;
      while (k < tokens.size() && tokens[k] != ";") {
        const std::string& t = tokens[k];
        if (t == "(" || t == "[" || t == "{" || t == "<") plain = false;
        words.push_back(t);
        ++k;
      }
      if (plain && words.size() >= 2 && IsIdentStart(words.back()[0])) {
        const std::string name = words.back();
        words.pop_back();
        aliases.Add(name, absl::StrJoin(words, " "));
      }
      i = k;
    } else if (tokens[i] == "using" && i + 2 < tokens.size() &&
               IsIdentStart(tokens[i + 1][0]) && tokens[i + 2] == "=") {
      size_t k = i + 3;
      std::vector<std::string> words;
      bool plain = true;
      while (k < tokens.size() && tokens[k] != ";") {
        const std::string& t = tokens[k];
        if (t == "(" || t == "[" || t == "{" || t == "<") plain = false;
        words.push_back(t);
        ++k;
      }
      if (plain && !words.empty())
        aliases.Add(tokens[i + 1], absl::StrJoin(words, " "));
      i = k;
    }
  }
  return aliases;
}

// What a parameter's text declares, when it is a tensor: FJ_TENSOR(T, R)
// or [fj::]tensor<T, R[, B]>.
struct TensorDecl {
  bool found = false;
  int32_t dtype = -1;
  int32_t rank = 0;
  std::string type_name;
  bool operator==(const TensorDecl& o) const {
    return found == o.found && dtype == o.dtype && rank == o.rank &&
           type_name == o.type_name;
  }
};

TensorDecl ReadTensorParam(absl::string_view param, const Aliases& aliases) {
  TensorDecl decl;
  std::vector<std::string> args;
  size_t at = 0;
  while ((at = param.find("FJ_TENSOR", at)) != absl::string_view::npos) {
    const size_t end = at + 9;
    if ((at == 0 || !IsIdentChar(param[at - 1])) &&
        (end >= param.size() || !IsIdentChar(param[end]))) {
      size_t open = end;
      while (open < param.size() && absl::ascii_isspace(param[open])) ++open;
      if (open < param.size() && param[open] == '(') {
        if (auto inner = Parenthesised(param, open)) args = SplitArgs(*inner);
      }
      break;
    }
    at = end;
  }
  if (args.empty()) {
    const std::optional<std::string> resolved = aliases.Resolve(param);
    if (!resolved.has_value()) return decl;
    absl::string_view r = *resolved;
    size_t t = r.find("fj::tensor <");
    if (t == absl::string_view::npos) return decl;
    const size_t open = t + 11;
    size_t close = r.rfind('>');
    if (close == absl::string_view::npos || close < open) return decl;
    args = SplitArgs(r.substr(open + 1, close - open - 1));
  }
  if (args.size() != 2 && args.size() != 3) return decl;
  const std::optional<std::string> type = aliases.Resolve(args[0]);
  const std::optional<std::string> rank_text = aliases.Resolve(args[1]);
  decl.found = true;
  if (type.has_value()) decl.dtype = DeclaredTensorDtype(*type);
  int rank = 0;
  if (rank_text.has_value()) {
    absl::string_view r = *rank_text;
    while (absl::ConsumePrefix(&r, "(") && absl::ConsumeSuffix(&r, ")")) {
      r = absl::StripAsciiWhitespace(r);
    }
    if (absl::SimpleAtoi(r, &rank) && rank >= 1 && rank <= FJ_TP_MAX_RANK)
      decl.rank = rank;
  }
  decl.type_name =
      absl::StrCat("FJ_TENSOR(", type.value_or(args[0]), ", ",
                   decl.rank > 0 ? absl::StrCat(decl.rank) : args[1], ")");
  return decl;
}

}  // namespace

int DeclaredTensorDtype(absl::string_view type) {
  std::string t(absl::StripAsciiWhitespace(type));
  for (absl::string_view q : {"const ", "volatile "}) {
    while (absl::StartsWith(t, q)) t = t.substr(q.size());
  }
  for (absl::string_view q : {" const", " volatile"}) {
    while (absl::EndsWith(t, q)) t.resize(t.size() - q.size());
  }
  absl::string_view v = t;
  absl::ConsumePrefix(&v, "::");
  absl::ConsumePrefix(&v, "std::");
  if (v == "float") return fj::dtype_f32;
  if (v == "double") return fj::dtype_f64;
  if (v == "__half" || v == "half" || absl::EndsWith(v, "::f16"))
    return fj::dtype_f16;
  if (v == "__nv_bfloat16" || v == "nv_bfloat16" || absl::EndsWith(v, "::bf16"))
    return fj::dtype_bf16;
  if (absl::StrContains(v, "e4m3")) return fj::dtype_f8e4m3;
  if (absl::StrContains(v, "e5m2")) return fj::dtype_f8e5m2;
  if (v == "signed char" || v == "char" || v == "int8_t") return fj::dtype_i8;
  if (v == "short" || v == "short int" || v == "signed short" ||
      v == "signed short int" || v == "int16_t")
    return fj::dtype_i16;
  if (v == "int" || v == "signed" || v == "signed int" || v == "int32_t")
    return fj::dtype_i32;
  if (v == "long" || v == "long int" || v == "long long" ||
      v == "long long int" || v == "signed long long" || v == "int64_t")
    return fj::dtype_i64;
  // Unsigned integers hold raw bits of any dtype of their size.
  if (v == "unsigned char" || v == "uint8_t") return -1 - 1;
  if (v == "unsigned short" || v == "unsigned short int" || v == "uint16_t")
    return -1 - 2;
  if (v == "unsigned" || v == "unsigned int" || v == "uint32_t") return -1 - 4;
  if (v == "unsigned long" || v == "unsigned long int" ||
      v == "unsigned long long" || v == "unsigned long long int" ||
      v == "uint64_t")
    return -1 - 8;
  const int vector_bytes = VectorTypeBytes(v);
  return vector_bytes > 0 ? -1 - vector_bytes : -1;
}

void ApplySourceSignature(absl::string_view source,
                          const std::vector<std::string>& options,
                          absl::string_view lowered_name,
                          std::vector<ParamSpec>& params) {
  if (absl::StartsWith(lowered_name, "_Z") || lowered_name.empty()) return;
  bool any_tensor = false;
  for (const ParamSpec& p : params)
    any_tensor = any_tensor || p.kind == ParamKind::kTensor;
  if (!any_tensor || source.find(lowered_name) == absl::string_view::npos)
    return;
  std::string code = CleanSource(source);
  const Aliases aliases = CollectAliases(code, options);
  // Every `__global__ ... NAME (` outside the preprocessor.
  std::optional<std::vector<TensorDecl>> agreed;
  size_t at = 0;
  while ((at = code.find(lowered_name.data(), at, lowered_name.size())) !=
         std::string::npos) {
    const size_t end = at + lowered_name.size();
    const bool word = (at == 0 || !IsIdentChar(code[at - 1])) &&
                      (end >= code.size() || !IsIdentChar(code[end]));
    size_t open = end;
    while (open < code.size() && absl::ascii_isspace(code[open])) ++open;
    if (!word || open >= code.size() || code[open] != '(') {
      at = end;
      continue;
    }
    // The declaration's start: after the last ';', '{' or '}' before it.
    const size_t stop = code.find_last_of(";{}", at);
    const size_t from = stop == std::string::npos ? 0 : stop + 1;
    bool global = false;
    for (const std::string& t :
         Tokens(absl::string_view(code).substr(from, at - from))) {
      global = global || t == "__global__";
    }
    if (!global) {
      at = end;
      continue;
    }
    const std::optional<absl::string_view> list = Parenthesised(code, open);
    if (!list.has_value()) return;
    std::vector<std::string> texts = SplitArgs(*list);
    if (texts.size() == 1 && (texts[0] == "void" || texts[0].empty()))
      texts.clear();
    if (texts.size() != params.size()) return;  // not this kernel, or unsure
    std::vector<TensorDecl> decls;
    for (const std::string& text : texts)
      decls.push_back(ReadTensorParam(text, aliases));
    if (agreed.has_value() && !(*agreed == decls)) return;  // two meanings
    agreed = std::move(decls);
    at = end;
  }
  if (!agreed.has_value()) return;
  for (size_t i = 0; i < params.size(); ++i) {
    const TensorDecl& d = (*agreed)[i];
    ParamSpec& p = params[i];
    if (!d.found || p.kind != ParamKind::kTensor) continue;
    p.tensor_dtype = d.dtype;
    p.tensor_rank = d.rank;
    p.type_name = d.type_name;
  }
}

}  // namespace fleetjit::jit
