// What a build produces, and what the module cache stores: the image, the
// kernels in it with their parameter layouts, and (once generated) the host
// launch thunks' object code. One Artifact is one self-contained cache
// payload, so an entry's image and metadata can never come from two
// different builds.
#ifndef FLEETJIT_JIT_ARTIFACT_H_
#define FLEETJIT_JIT_ARTIFACT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/copy_plan.h"
#include "jit/target.h"

namespace fleetjit::jit {

// How a kernel parameter is passed and checked.
enum class ParamKind : uint8_t {
  kUnknown = 0,   // only the size is known (extern "C" kernel, no C++ type)
  kSigned = 1,    // signed integer of `size` bytes
  kUnsigned = 2,  // unsigned integer (also bool, char)
  kFloat = 3,     // float16 (2), float (4), double (8); bf16 is kBFloat
  kBFloat = 4,
  kPointer = 5,  // any T*
  kTensor = 6,   // fj::tensor<T, R> (tensor_dtype, tensor_rank set)
  kStruct = 7,   // other by-value struct
};

struct ParamSpec {
  ParamKind kind = ParamKind::kUnknown;
  uint32_t offset = 0;  // bytes into the parameter buffer
  uint32_t size = 0;
  uint32_t align = 1;
  // fj::dtype_code; -1 if not declared; -(1 + sizeof(T)) when T names no
  // dtype but its size is known (CUDA vector types: float4 is -17), so a
  // launch checks the element size (runtime/tensor_encoder.cc).
  int32_t tensor_dtype = -1;
  int32_t tensor_rank = 0;
  std::string type_name;  // demangled C++ type, "" if unknown
};

struct KernelEntry {
  std::string name;          // what callers look up: "k" or "k<float>"
  std::string lowered_name;  // the symbol in the image
  std::vector<ParamSpec> params;
  uint32_t param_bytes = 0;  // size of the whole parameter buffer
};

// A `__device__` / `__constant__` variable named by a name expression:
// what callers look up ("table<float>") and the symbol NVRTC lowered it to.
// Variables without a name expression are looked up by their symbol.
struct GlobalEntry {
  std::string name;
  std::string lowered_name;
};

struct Artifact {
  Target target;
  CopyImpl copy_impl = CopyImpl::kSync;
  bool is_ptx = false;
  std::string image;     // cubin bytes, or PTX text when is_ptx
  std::string ptx;       // PTX (always kept: layouts and inspection)
  std::string log;       // NVRTC's log (warnings)
  std::string compiler;  // compiler identity, e.g. "nvrtc 13.0 (...)"
  double compile_ms = 0;
  std::vector<KernelEntry> kernels;
  std::string thunk_object;          // ELF object of the launch thunks, or ""
  std::vector<GlobalEntry> globals;  // name expressions naming variables

  const KernelEntry* FindKernel(absl::string_view name) const;
  // The symbol of global `name`: a name expression's lowered name, else
  // `name` itself (an unmangled variable).
  std::string GlobalSymbol(absl::string_view name) const;
};

// Self-describing binary encoding (versioned); Deserialize rejects anything
// malformed with DATA_LOSS rather than trusting it.
std::string SerializeArtifact(const Artifact& artifact);
absl::StatusOr<Artifact> DeserializeArtifact(absl::string_view bytes);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_ARTIFACT_H_
