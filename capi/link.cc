// fj_module_link (since 1.3): reads fj_link_options into a LinkSpec
// (runtime/load/module.h), checking every input, and publishes the linked
// module like a built one (runtime/builder/module_link.cc links it).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/raw_enum.h"
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/entry.h"
#include "fleetjit/fleetjit.h"

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

namespace fleetjit::capi {
namespace {

constexpr uint32_t kKnownLinkFlags =
    FJ_LINK_NO_CACHE | FJ_LINK_LTO | FJ_LINK_DEVRT;

absl::StatusOr<LinkInputSpec> ReadLinkInput(const fj_link_input& in,
                                            size_t index) {
  const std::string field = absl::StrCat("options->inputs[", index, "]");
  FJ_ASSIGN_OR_RETURN(
      int32_t kind,
      CheckEnum(RawEnum(in.kind), absl::StrCat(field, ".kind").c_str(),
                "fj_link_input_kind", FJ_LINK_SOURCE, FJ_LINK_INPUT_KIND_LAST));
  static constexpr LinkInputSpec::Kind kKinds[] = {
      LinkInputSpec::Kind::kSource, LinkInputSpec::Kind::kCubin,
      LinkInputSpec::Kind::kPtx,    LinkInputSpec::Kind::kFatbin,
      LinkInputSpec::Kind::kLtoIr,  LinkInputSpec::Kind::kLibrary};
  LinkInputSpec spec;
  spec.kind = kKinds[kind];
  FJ_ASSIGN_OR_RETURN(spec.name,
                      ReadStr(in.name, absl::StrCat(field, ".name").c_str()));
  if (spec.name.empty()) spec.name = absl::StrCat("input", index);
  if (in.data == nullptr || in.size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".data is ", in.data == nullptr ? "NULL" : "empty",
                     " ('", spec.name, "')"));
  }
  spec.data.assign(static_cast<const char*>(in.data), in.size);
  if (spec.kind == LinkInputSpec::Kind::kSource) {
    if (size_t nul = spec.data.find('\0'); nul != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " ('", spec.name, "') is a source with a NUL byte at offset ",
          nul, "; pass its text only"));
    }
  } else if (in.num_nvrtc_options != 0 || in.num_name_expressions != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ('", spec.name,
                     "') is not a source: it takes no nvrtc_options or "
                     "name_expressions"));
  }
  FJ_ASSIGN_OR_RETURN(
      spec.options,
      ReadStrArray(in.nvrtc_options, in.num_nvrtc_options,
                   absl::StrCat(field, ".nvrtc_options").c_str()));
  FJ_ASSIGN_OR_RETURN(
      spec.name_expressions,
      ReadStrArray(in.name_expressions, in.num_name_expressions,
                   absl::StrCat(field, ".name_expressions").c_str(),
                   /*allow_empty=*/false));
  return spec;
}

}  // namespace

absl::StatusOr<LinkSpec> ReadLinkSpec(const fj_link_options* options) {
  fj_link_options o;
  FJ_RETURN_IF_ERROR(
      ReadStruct(options, "options", sizeof(fj_link_options), o));
  if (o.inputs == nullptr || o.num_inputs == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options->inputs is ", o.inputs == nullptr ? "NULL" : "empty",
        "; a link needs at least one input"));
  }
  // The stride is the caller's sizeof(fj_link_input): inputs[0].struct_size.
  const size_t stride = StructSize(o.inputs);
  if (stride < sizeof(fj_link_input)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options->inputs[0].struct_size is ", stride, "; at least ",
        sizeof(fj_link_input), " expected (set it to sizeof(fj_link_input))"));
  }
  LinkSpec spec;
  const char* base = reinterpret_cast<const char*>(o.inputs);
  for (size_t i = 0; i < o.num_inputs; ++i) {
    const auto* element =
        reinterpret_cast<const fj_link_input*>(base + i * stride);
    if (StructSize(element) != stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options->inputs[", i, "].struct_size is ", StructSize(element),
          ", not ", stride, " as inputs[0]'s: every input carries the same"));
    }
    fj_link_input in;
    std::memcpy(&in, element, sizeof(in));
    FJ_ASSIGN_OR_RETURN(LinkInputSpec input, ReadLinkInput(in, i));
    spec.inputs.push_back(std::move(input));
  }
  FJ_ASSIGN_OR_RETURN(std::string name, ReadStr(o.name, "options->name"));
  if (!name.empty()) spec.name = std::move(name);
  FJ_ASSIGN_OR_RETURN(std::string target, ReadStr(o.target, "options->target"));
  if (!target.empty()) {
    FJ_ASSIGN_OR_RETURN(spec.target, jit::ParseTarget(target),
                        "options->target");
  }
  spec.device = o.device;
  FJ_ASSIGN_OR_RETURN(
      spec.link_options,
      ReadStrArray(o.link_options, o.num_link_options, "options->link_options",
                   /*allow_empty=*/false));
  FJ_ASSIGN_OR_RETURN(
      spec.include_dirs,
      ReadStrArray(o.include_dirs, o.num_include_dirs, "options->include_dirs",
                   /*allow_empty=*/false));
  if ((o.flags & ~kKnownLinkFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options->flags has unknown bits 0x",
        absl::Hex(o.flags & ~kKnownLinkFlags), " (fj_link_flags)"));
  }
  spec.use_cache = (o.flags & FJ_LINK_NO_CACHE) == 0;
  spec.lto = (o.flags & FJ_LINK_LTO) != 0;
  spec.devrt = (o.flags & FJ_LINK_DEVRT) != 0;
  return spec;
}

}  // namespace fleetjit::capi

extern "C" {

FJ_API fj_status* fj_module_link(fj_runtime* runtime,
                                 const fj_link_options* options,
                                 fj_module** out_module) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_module == nullptr) return NullArgument("out_module");
    FJ_ASSIGN_OR_RETURN(LinkSpec spec, ReadLinkSpec(options));
    RuntimePin pin(rt);
    absl::StatusOr<Module*> m;
    {
      OutsideGate blocking;  // a device link: destroys need not wait
      m = rt->LinkModule(spec);
    }
    if (!m.ok()) return m.status();
    return Publish(rt, HandleType::kModule, *m, out_module);
  });
}

}  // extern "C"
