// The headers a build may read, found without compiling: the cache key's
// view of `#include`.
//
// NVRTC reports no dependencies, so ScanIncludes follows the #include
// directives of the source, and of every header they name, through the same
// folders NVRTC is given (the caller's -I folders first, then CUDA's), and
// returns each header's path and SHA-256. The scan over-approximates: it
// ignores #if, so a header behind a false condition is covered too, and a
// name it cannot find is recorded as absent (creating that file later
// changes the key, as it may change the build). Names NVRTC serves from
// memory (<fleetjit/copy.cuh> and its parts) are skipped: their content is
// in the key already. `#include MACRO` cannot be followed; such lines are
// counted in `computed_includes`.
//
// Each file is read and hashed once per process while its inode, size and
// times stay the same; a later scan costs one stat() per header.
#ifndef FLEETJIT_JIT_INCLUDE_SCAN_H_
#define FLEETJIT_JIT_INCLUDE_SCAN_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace fleetjit::jit {

struct IncludeScanRequest {
  absl::string_view source;
  std::vector<std::string> dirs;  // search order, as passed to NVRTC with -I
  // True for names served from memory (not looked up on disk).
  std::function<bool(absl::string_view)> is_embedded;
};

struct ScannedHeader {
  std::string name;    // as written in the directive, e.g. "cuda_fp16.h"
  std::string path;    // the file it resolved to ("" when absent)
  std::string sha256;  // hex digest of its content ("" when absent)
};

struct IncludeScan {
  std::vector<ScannedHeader> headers;  // in discovery order, each path once
  int computed_includes = 0;
};

IncludeScan ScanIncludes(const IncludeScanRequest& request);

// The `#include` names of `text`, in order: (true, name) for <name>,
// (false, name) for "name". Exposed for tests.
std::vector<std::pair<bool, std::string>> IncludeDirectives(absl::string_view text,
                                                            int* computed = nullptr);

}  // namespace fleetjit::jit

#endif  // FLEETJIT_JIT_INCLUDE_SCAN_H_
