// Where CUDA's own headers are: the folders a kernel's `#include
// <cuda_fp16.h>`, `<cuda/std/...>` or `<cub/...>` is searched in.
//
// NVRTC searches no folder by itself, so a kernel that includes a toolkit
// header fails with "could not open source file" unless the caller passes
// -I. FindCudaIncludeDirs looks, in this order, and reports each hit with
// where it came from (fleetjit info prints them):
//   1. $CUDA_HOME/include, then $CUDA_PATH/include;
//   2. the toolkit that holds the NVRTC in use (<root>/lib64/libnvrtc.so.13
//      -> <root>/include; a wheel's nvidia/cu13/lib -> nvidia/cu13/include);
//   3. /usr/local/cuda/include;
//   4. the include folders of NVIDIA's Python wheels
//      (<site-packages>/nvidia/*/include) under the Python prefixes given.
// A toolkit folder that holds cccl/ (CUDA 13 moved cub, thrust and libcu++
// there) contributes that folder too, right after itself. A folder is
// listed once, at its first place; only folders that exist are listed.
#ifndef FLEETJIT_PLATFORM_CUDA_HEADERS_H_
#define FLEETJIT_PLATFORM_CUDA_HEADERS_H_

#include <string>
#include <vector>

namespace fleetjit {

struct CudaIncludeDir {
  std::string path;    // absolute folder, passed to NVRTC as -I<path>
  std::string origin;  // why it is listed: "CUDA_HOME", "NVRTC's toolkit", ...
};

struct CudaHeaderSearch {
  std::string cuda_home;      // $CUDA_HOME ("" when unset)
  std::string cuda_path;      // $CUDA_PATH
  std::string nvrtc_library;  // the resolved NVRTC file ("" when unknown)
  std::string default_root = "/usr/local/cuda";
  // Folders that hold site-packages / dist-packages trees, e.g.
  // "/usr/local/lib/python3.12/dist-packages". DefaultPythonPackageDirs()
  // lists the usual ones.
  std::vector<std::string> python_package_dirs;
};

// The include folders of CUDA's headers, in search order.
std::vector<CudaIncludeDir> FindCudaIncludeDirs(const CudaHeaderSearch& search);

// The usual homes of Python packages on this machine: dist-packages and
// site-packages of /usr/local/lib/python3.*, /usr/lib/python3*, and of
// $VIRTUAL_ENV and $CONDA_PREFIX when given (pass "" when unset).
std::vector<std::string> DefaultPythonPackageDirs(
    const std::string& virtual_env, const std::string& conda_prefix);

}  // namespace fleetjit

#endif  // FLEETJIT_PLATFORM_CUDA_HEADERS_H_
