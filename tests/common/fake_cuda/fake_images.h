// Kernels and parameter layouts of images, as the fake CUDA driver
// (fake_cuda.h) reports them: from PTX text (each parameter at its
// alignment, in order, as ptxas lays them out) or from a cubin's
// EIATTR_KPARAM_INFO records.
#ifndef FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_IMAGES_H_
#define FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_IMAGES_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace fleetjit::fake_cuda {

struct Layout {
  struct Param {
    size_t offset, size;
  };
  bool known = false;
  std::vector<Param> params;
  size_t bytes = 0;  // the end of the last parameter
};

// Every kernel (.entry) of a PTX text, by its (lowered) name.
std::map<std::string, Layout> PtxKernels(const std::string& ptx);

// The parameters of `kernel` in a cubin (ELF); not `known` if the image has
// no .nv.info section for it.
Layout CubinLayout(const std::string& elf, const std::string& kernel);

}  // namespace fleetjit::fake_cuda

#endif  // FLEETJIT_TESTS_COMMON_FAKE_CUDA_FAKE_IMAGES_H_
