#include "jit/thunk/arg_rules.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fleetjit/copy/tensor_param.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::jit {
namespace {

constexpr uint32_t Bit(int kind) { return uint32_t{1} << kind; }

// Scalar kinds by value size.
uint32_t ScalarKindsOfSize(uint32_t size) {
  switch (size) {
    case 1:
      return Bit(FJ_ARG_I8) | Bit(FJ_ARG_U8);
    case 2:
      return Bit(FJ_ARG_I16) | Bit(FJ_ARG_U16) | Bit(FJ_ARG_F16) |
             Bit(FJ_ARG_BF16);
    case 4:
      return Bit(FJ_ARG_I32) | Bit(FJ_ARG_U32) | Bit(FJ_ARG_F32);
    case 8:
      return Bit(FJ_ARG_I64) | Bit(FJ_ARG_U64) | Bit(FJ_ARG_F64) |
             Bit(FJ_ARG_POINTER) | Bit(FJ_ARG_C64);
  }
  return 0;
}

uint32_t IntegerKindsOfSize(uint32_t size) {
  switch (size) {
    case 1:
      return Bit(FJ_ARG_I8) | Bit(FJ_ARG_U8);
    case 2:
      return Bit(FJ_ARG_I16) | Bit(FJ_ARG_U16);
    case 4:
      return Bit(FJ_ARG_I32) | Bit(FJ_ARG_U32);
    case 8:
      return Bit(FJ_ARG_I64) | Bit(FJ_ARG_U64);
  }
  return 0;
}

}  // namespace

AcceptedArgs AcceptedArgsFor(const ParamSpec& spec) {
  AcceptedArgs a;
  switch (spec.kind) {
    case ParamKind::kSigned:
    case ParamKind::kUnsigned:
      a.scalar_kinds = IntegerKindsOfSize(spec.size);
      break;
    case ParamKind::kFloat:
      a.scalar_kinds = spec.size == 2   ? Bit(FJ_ARG_F16)
                       : spec.size == 4 ? Bit(FJ_ARG_F32)
                       : spec.size == 8 ? Bit(FJ_ARG_F64)
                                        : 0;
      break;
    case ParamKind::kBFloat:
      a.scalar_kinds = spec.size == 2 ? Bit(FJ_ARG_BF16) : 0;
      break;
    case ParamKind::kPointer:
      a.scalar_kinds = spec.size == 8 ? Bit(FJ_ARG_POINTER) : 0;
      break;
    case ParamKind::kTensor:
      a.tensor = spec.size == sizeof(fj::tensor_param);
      break;
    case ParamKind::kStruct:
      // A complex value is a by-value struct of 8 (float2) or 16 bytes.
      a.scalar_kinds = spec.size == 8 ? Bit(FJ_ARG_C64) : 0;
      a.c128 = spec.size == 16;
      a.bytes = spec.size > 0;
      break;
    case ParamKind::kUnknown:
    default:
      a.scalar_kinds = ScalarKindsOfSize(spec.size);
      a.c128 = spec.size == 16;
      a.bytes = spec.size > 0;
      a.tensor = spec.size == sizeof(fj::tensor_param);
      break;
  }
  return a;
}

uint32_t ScalarKindBytes(int kind) {
  switch (kind) {
    case FJ_ARG_I8:
    case FJ_ARG_U8:
      return 1;
    case FJ_ARG_I16:
    case FJ_ARG_U16:
    case FJ_ARG_F16:
    case FJ_ARG_BF16:
      return 2;
    case FJ_ARG_I32:
    case FJ_ARG_U32:
    case FJ_ARG_F32:
      return 4;
    case FJ_ARG_I64:
    case FJ_ARG_U64:
    case FJ_ARG_F64:
    case FJ_ARG_POINTER:
    case FJ_ARG_C64:
      return 8;
  }
  return 0;
}

std::string ArgKindName(int kind) {
  static constexpr const char* kNames[] = {
      nullptr,      "FJ_ARG_I8",      "FJ_ARG_I16",   "FJ_ARG_I32",
      "FJ_ARG_I64", "FJ_ARG_U8",      "FJ_ARG_U16",   "FJ_ARG_U32",
      "FJ_ARG_U64", "FJ_ARG_F16",     "FJ_ARG_BF16",  "FJ_ARG_F32",
      "FJ_ARG_F64", "FJ_ARG_POINTER", "FJ_ARG_BYTES", "FJ_ARG_TENSOR",
      "FJ_ARG_C64", "FJ_ARG_C128"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == FJ_ARG_KIND_LAST + 1);
  if (kind >= 1 && kind <= FJ_ARG_KIND_LAST) return kNames[kind];
  return absl::StrCat("kind ", kind);
}

std::string DescribeParam(const ParamSpec& spec) {
  std::string what;
  switch (spec.kind) {
    case ParamKind::kSigned:
      what = absl::StrCat(spec.size, "-byte integer");
      break;
    case ParamKind::kUnsigned:
      what = absl::StrCat(spec.size, "-byte unsigned integer");
      break;
    case ParamKind::kFloat:
      what = absl::StrCat(spec.size, "-byte float");
      break;
    case ParamKind::kBFloat:
      what = "bfloat16";
      break;
    case ParamKind::kPointer:
      what = "pointer";
      break;
    case ParamKind::kTensor: {
      what = "tensor";
      if (spec.tensor_rank > 0)
        absl::StrAppend(&what, " of rank ", spec.tensor_rank);
      break;
    }
    case ParamKind::kStruct:
      what = absl::StrCat(spec.size, "-byte struct");
      break;
    default:
      what = absl::StrCat(spec.size, "-byte value");
      break;
  }
  if (spec.type_name.empty()) return what;
  return absl::StrCat(spec.type_name, " (", what, ")");
}

absl::Status ValidateKernelLayout(const KernelEntry& entry) {
  auto bad = [&entry](absl::string_view why) {
    return absl::InternalError(absl::StrCat(
        "kernel '", entry.name, "' has a malformed parameter layout: ", why));
  };
  if (entry.param_bytes > kMaxParamBytes) {
    return absl::OutOfRangeError(absl::StrCat(
        "kernel '", entry.name, "' takes ", entry.param_bytes,
        " bytes of parameters; launches support at most ", kMaxParamBytes));
  }
  std::vector<std::pair<uint32_t, uint32_t>> spans;  // [offset, end)
  spans.reserve(entry.params.size());
  for (size_t i = 0; i < entry.params.size(); ++i) {
    const ParamSpec& p = entry.params[i];
    uint64_t end = uint64_t{p.offset} + p.size;
    if (p.size == 0) return bad(absl::StrCat("parameter ", i, " has size 0"));
    if (end > entry.param_bytes) {
      return bad(absl::StrCat("parameter ", i, " ends at byte ", end,
                              ", past the ", entry.param_bytes,
                              "-byte buffer"));
    }
    if (p.kind == ParamKind::kTensor && p.size != sizeof(fj::tensor_param)) {
      return bad(absl::StrCat("tensor parameter ", i, " is ", p.size,
                              " bytes, not ", sizeof(fj::tensor_param)));
    }
    spans.emplace_back(p.offset, static_cast<uint32_t>(end));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return bad(absl::StrCat("parameters at bytes ", spans[i - 1].first,
                              " and ", spans[i].first, " overlap"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fleetjit::jit
