#include "jit/param_layout.h"

#include <cxxabi.h>

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fleetjit/copy/tensor_param.h"
#include "jit/source_signature.h"

namespace fleetjit::jit {
namespace {

bool IsIdentChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '$' || c == '.';
}

// Finds ".entry <name>(" as a whole word and returns the text between the
// parentheses.
absl::StatusOr<absl::string_view> EntryParamText(absl::string_view ptx,
                                                 absl::string_view name) {
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != absl::string_view::npos) {
    size_t p = pos + 6;
    while (p < ptx.size() && absl::ascii_isspace(ptx[p])) ++p;
    size_t start = p;
    while (p < ptx.size() && IsIdentChar(ptx[p])) ++p;
    if (ptx.substr(start, p - start) == name) {
      size_t open = ptx.find('(', p);
      size_t brace = ptx.find('{', p);
      if (open == absl::string_view::npos || open > brace) {
        return absl::string_view();  // no parameters
      }
      size_t close = ptx.find(')', open);
      if (close == absl::string_view::npos) {
        return absl::DataLossError(
            absl::StrCat("unterminated parameter list of .entry ", name));
      }
      return ptx.substr(open + 1, close - open - 1);
    }
    pos = p;
  }
  return absl::NotFoundError(absl::StrCat("no .entry ", name, " in the PTX"));
}

uint32_t AlignUp(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::vector<std::string> PtxEntryNames(absl::string_view ptx) {
  std::vector<std::string> names;
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != absl::string_view::npos) {
    size_t p = pos + 6;
    if (p < ptx.size() && !absl::ascii_isspace(ptx[p])) {
      pos = p;
      continue;
    }
    while (p < ptx.size() && absl::ascii_isspace(ptx[p])) ++p;
    size_t start = p;
    while (p < ptx.size() && IsIdentChar(ptx[p])) ++p;
    if (p > start) names.emplace_back(ptx.substr(start, p - start));
    pos = p;
  }
  return names;
}

absl::StatusOr<std::vector<ParamSpec>> ParsePtxParams(
    absl::string_view ptx, absl::string_view lowered_name) {
  auto text_or = EntryParamText(ptx, lowered_name);
  if (!text_or.ok()) return text_or.status();
  std::vector<ParamSpec> params;
  uint32_t offset = 0;
  for (absl::string_view decl : absl::StrSplit(*text_or, ',')) {
    decl = absl::StripAsciiWhitespace(decl);
    if (decl.empty()) continue;
    std::vector<absl::string_view> tokens =
        absl::StrSplit(decl, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
    if (tokens.size() < 3 || tokens[0] != ".param") {
      return absl::DataLossError(
          absl::StrCat("unexpected PTX parameter '", decl, "'"));
    }
    ParamSpec spec;
    uint32_t elem = 0;
    uint32_t align = 0;
    bool is_float = false;
    absl::string_view last = tokens.back();
    for (size_t i = 1; i + 1 < tokens.size(); ++i) {
      absl::string_view t = tokens[i];
      if (t == ".align" && i + 1 < tokens.size() - 1) {
        if (!absl::SimpleAtoi(tokens[++i], &align) || align == 0 ||
            (align & (align - 1)) != 0) {
          return absl::DataLossError(
              absl::StrCat("bad .align in '", decl, "'"));
        }
      } else if (t.size() >= 3 &&
                 (t[1] == 'u' || t[1] == 's' || t[1] == 'b' || t[1] == 'f') &&
                 elem == 0) {
        uint32_t bits = 0;
        if (absl::SimpleAtoi(t.substr(2), &bits) && bits % 8 == 0 && bits > 0) {
          elem = bits / 8;
          is_float = t[1] == 'f';
        }
      }
    }
    if (elem == 0) {
      return absl::DataLossError(absl::StrCat("no type in '", decl, "'"));
    }
    uint32_t count = 1;
    size_t bracket = last.find('[');
    if (bracket != absl::string_view::npos) {
      absl::string_view n = last.substr(bracket + 1);
      n = absl::StripSuffix(n, "]");
      if (!absl::SimpleAtoi(n, &count) || count == 0) {
        return absl::DataLossError(absl::StrCat("bad array in '", decl, "'"));
      }
    }
    spec.size = elem * count;
    spec.align = align ? align : elem;
    spec.offset = offset = AlignUp(offset, spec.align);
    offset += spec.size;
    if (spec.size == sizeof(fj::tensor_param) &&
        spec.align == alignof(fj::tensor_param)) {
      spec.kind = ParamKind::kTensor;
    } else if (count == 1 && is_float) {
      spec.kind = ParamKind::kFloat;
    }
    params.push_back(std::move(spec));
  }
  return params;
}

uint32_t ParamBufferBytes(const std::vector<ParamSpec>& params) {
  return params.empty() ? 0 : params.back().offset + params.back().size;
}

namespace {

// Splits "a, b<c, d>, e(f, g)" at top-level commas.
std::vector<std::string> SplitTopLevel(absl::string_view list) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : list) {
    if (c == '<' || c == '(' || c == '[') ++depth;
    if (c == '>' || c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back(absl::StripAsciiWhitespace(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!absl::StripAsciiWhitespace(cur).empty()) {
    out.emplace_back(absl::StripAsciiWhitespace(cur));
  }
  return out;
}

void ClassifyCxxParam(absl::string_view type, ParamSpec& spec) {
  spec.type_name = std::string(type);
  absl::string_view t = absl::StripSuffix(type, " const");
  if (absl::EndsWith(t, "*")) {
    spec.kind = ParamKind::kPointer;
    return;
  }
  if (absl::StartsWith(t, "fj::tensor<")) {
    spec.kind = ParamKind::kTensor;
    absl::string_view inner = t.substr(11);
    inner = absl::StripSuffix(inner, ">");
    std::vector<std::string> parts = SplitTopLevel(inner);
    // fj::tensor<T, R, sizeof(T)> (<T, R> before the size was a parameter).
    if (parts.size() == 2 || parts.size() == 3) {
      // A dtype, or a size (unsigned integers, vector types), or nothing
      // (jit/source_signature.h); the mangled sizeof(T) sizes the rest.
      spec.tensor_dtype = DeclaredTensorDtype(parts[0]);
      int element_bytes = 0;
      if (parts.size() == 3 &&
          (!absl::SimpleAtoi(parts[2], &element_bytes) || element_bytes <= 0)) {
        element_bytes = 0;
      }
      if (spec.tensor_dtype == -1 && element_bytes > 0) {
        spec.tensor_dtype = -1 - element_bytes;
      }
      int rank = 0;
      if (absl::SimpleAtoi(parts[1], &rank)) spec.tensor_rank = rank;
    }
    return;
  }
  if (t == "float" || t == "double" || t == "__half" || t == "half") {
    spec.kind = ParamKind::kFloat;
  } else if (absl::StrContains(t, "bfloat16")) {
    spec.kind = ParamKind::kBFloat;
  } else if (absl::StartsWith(t, "unsigned") || t == "bool") {
    spec.kind = ParamKind::kUnsigned;
  } else if (t == "int" || t == "long" || t == "long long" || t == "short" ||
             t == "char" || t == "signed char") {
    spec.kind = ParamKind::kSigned;
  } else {
    spec.kind = ParamKind::kStruct;
  }
}

}  // namespace

absl::Status ApplyCxxSignature(absl::string_view lowered_name,
                               std::vector<ParamSpec>& params) {
  if (!absl::StartsWith(lowered_name, "_Z")) return absl::OkStatus();
  std::string mangled(lowered_name);
  int status = 0;
  char* raw = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (raw == nullptr || status != 0) {
    std::free(raw);
    return absl::OkStatus();  // keep the PTX facts
  }
  std::string demangled(raw);
  std::free(raw);
  // The parameter list is the last top-level parenthesised group.
  if (demangled.empty() || demangled.back() != ')') return absl::OkStatus();
  int depth = 0;
  size_t open = std::string::npos;
  for (size_t i = demangled.size(); i-- > 0;) {
    if (demangled[i] == ')') ++depth;
    if (demangled[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) return absl::OkStatus();
  absl::string_view list(demangled);
  list = list.substr(open + 1, list.size() - open - 2);
  std::vector<std::string> types = SplitTopLevel(list);
  if (types.size() == 1 && types[0] == "void") types.clear();
  if (types.size() != params.size()) {
    return absl::InternalError(
        absl::StrCat("kernel ", demangled, " declares ", types.size(),
                     " parameters but its PTX has ", params.size()));
  }
  for (size_t i = 0; i < types.size(); ++i)
    ClassifyCxxParam(types[i], params[i]);
  return absl::OkStatus();
}

}  // namespace fleetjit::jit
