// Fatbins for a fleet: one file holding a cubin per target and PTX for the
// newest, which the driver loads on any device one of them runs on
// (`fleetjit build --target LIST --emit fatbin`; fj_module_load reads it).
// Made with nvFatbin (platform/nvfatbin_library.h), loaded only here.
#ifndef FLEETJIT_JIT_FATBIN_H_
#define FLEETJIT_JIT_FATBIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "jit/target.h"
#include "platform/nvfatbin_library.h"

namespace fleetjit::jit {

struct FatbinInput {
  Target target;      // sm_XX[a|f]: `image` is its cubin; compute_XX: PTX
  std::string image;  // the bytes fleetjit built (fj_module_image)
};

// "90a" for sm_90a or compute_90a: the architecture as nvFatbin takes it.
std::string NvFatbinArch(const Target& target);

// One fatbin of `inputs`, in order, each under `identifier` (the source's
// name). Nothing is compressed, so the image reader (FatbinKernelNames)
// lists the kernels of the cubins. INVALID_ARGUMENT for no input or an
// empty image; nvFatbin's refusals carry its message.
absl::StatusOr<std::string> MakeFatbin(NvFatbinLibrary& library,
                                       const std::vector<FatbinInput>& inputs,
                                       absl::string_view identifier);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_FATBIN_H_
