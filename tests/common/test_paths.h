// Paths of build products, found next to the running test binary first so a
// build tree staged elsewhere (the GPU host) works, then at the path the
// build recorded.
#ifndef FLEETJIT_TESTS_TEST_PATHS_H_
#define FLEETJIT_TESTS_TEST_PATHS_H_

#include <unistd.h>

#include <string>

namespace fleetjit::testing {

// `relative` resolved against the directory of this executable, if that
// file exists; else `fallback`.
inline std::string BesideExecutable(const std::string& relative,
                                    const std::string& fallback) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.find_last_of('/'));
    std::string candidate = dir + "/" + relative;
    if (access(candidate.c_str(), F_OK) == 0) return candidate;
  }
  return fallback;
}

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_TEST_PATHS_H_
