// Kernel parameter layouts, read from the PTX and the kernel's C++ name.
//
// The PTX `.entry` gives each parameter's size and alignment, hence its
// offset in the parameter buffer, on any machine (no GPU needed). The
// mangled name of a C++ kernel adds what PTX erases: pointer vs integer,
// float vs int, and the dtype and rank of each fj::tensor<T, R>. An extern
// "C" kernel has only the PTX facts (its 320-byte, 64-aligned parameters
// are tensors of undeclared dtype and rank) until its source declaration
// fills them in (jit/source_signature.h).
#ifndef FLEETJIT_JIT_PARAM_LAYOUT_H_
#define FLEETJIT_JIT_PARAM_LAYOUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/artifact.h"

namespace fleetjit::jit {

// The parameters of `.entry lowered_name` in `ptx`, in order, with offsets.
// NOT_FOUND if the entry is absent; DATA_LOSS if its list is malformed.
absl::StatusOr<std::vector<ParamSpec>> ParsePtxParams(
    absl::string_view ptx, absl::string_view lowered_name);

// Fills kind/type_name/tensor_* of `params` from the demangled C++ name.
// A kernel with C linkage (or a name that does not demangle) is left with
// the PTX-derived kinds. Fails if the C++ list disagrees with the PTX count.
absl::Status ApplyCxxSignature(absl::string_view lowered_name,
                               std::vector<ParamSpec>& params);

// Every `.entry` name in `ptx`, in order.
std::vector<std::string> PtxEntryNames(absl::string_view ptx);

// The bytes the parameter buffer needs.
uint32_t ParamBufferBytes(const std::vector<ParamSpec>& params);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_PARAM_LAYOUT_H_
