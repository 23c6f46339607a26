#include "bench/bench_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace fleetjit::bench {

void Check(fj_status* status, const char* what) {
  if (status == nullptr) return;
  std::fprintf(stderr, "bench: %s: %s: %s\n", what,
               fj_code_name(fj_status_code(status)),
               fj_status_message(status, nullptr));
  fj_status_free(status);
  std::exit(1);
}

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }
fj_str Str(const char* s) { return fj_str{s, std::strlen(s)}; }

}  // namespace fleetjit::bench
