// The one kernel corpus: examples/*.cu, the kernels the C++ tests, the
// benches, the CLI and the bindings' tests all build. Embedded at build
// time (reference/bundled_kernels.h, the fj_bundled_kernels objects that
// fj_add_test links), so a test staged on another host finds them too.
// The bindings read the same files from the repository (examples/).
#ifndef FLEETJIT_TESTS_COMMON_CORPUS_H_
#define FLEETJIT_TESTS_COMMON_CORPUS_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "reference/bundled_kernels.h"

namespace fleetjit::testing {

// The text of examples/`file` ("saxpy.cu"); "" when it is not in the
// corpus (a test then fails on an empty source).
inline std::string CorpusKernel(absl::string_view file) {
  const bundled::BundledKernel* k =
      bundled::FindBundledKernel(absl::StrCat("examples/", file));
  return k != nullptr ? std::string(k->content) : std::string();
}

// examples/saxpy.cu: extern "C" saxpy(float* y, const float* x, float a,
// int n), y[i] = a * x[i] + y[i]; and the template axpy<T> (same order).
// Lives for the process (fj_build_options may point into it).
inline const std::string& SaxpySource() {
  static const std::string* source = new std::string(CorpusKernel("saxpy.cu"));
  return *source;
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_CORPUS_H_
