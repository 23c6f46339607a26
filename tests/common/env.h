// Environment variables changed for one test and restored after it.
#ifndef FLEETJIT_TESTS_COMMON_ENV_H_
#define FLEETJIT_TESTS_COMMON_ENV_H_

#include <stdlib.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fleetjit::testing {

// Saves `names` and restores them on scope exit; with `clear`, unsets them
// for the scope (the test then sets what it needs).
class EnvGuard {
 public:
  explicit EnvGuard(std::vector<const char*> names, bool clear = true) {
    for (const char* n : names) {
      const char* v = std::getenv(n);
      saved_.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      if (clear) ::unsetenv(n);
    }
  }
  ~EnvGuard() {
    for (auto& [n, v] : saved_) {
      if (v) {
        ::setenv(n, v->c_str(), 1);
      } else {
        ::unsetenv(n);
      }
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// Sets `name` to `value` (nullptr: unsets it) for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : guard_({name}) {
    if (value != nullptr) ::setenv(name, value, 1);
  }
  ScopedEnv(const char* name, const std::string& value)
      : ScopedEnv(name, value.c_str()) {}

 private:
  EnvGuard guard_;
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_ENV_H_
