// <fleetjit/fleetjit.h> from C++17 with -Wall -Wextra -Wpedantic -Werror
// (abi_c99_test covers C99): the header is clean C++ too, and its structs
// can be value-initialised the way the README shows.
#include <fleetjit/fleetjit.h>

#include <cstdio>
#include <type_traits>

static_assert(std::is_standard_layout_v<fj_build_options>);
static_assert(std::is_trivially_copyable_v<fj_tensor>);
static_assert(sizeof(fj_str) == 2 * sizeof(void*));

int main() {
  fj_copy_plan plan{};
  plan.struct_size = sizeof(plan);
  fj_status* st =
      fj_copy_plan_for_target(fj_str{"sm_90", 5}, FJ_COPY_IMPL_AUTO, &plan);
  if (st != nullptr) {
    std::fprintf(stderr, "%s\n", fj_status_message(st, nullptr));
    fj_status_free(st);
    return 1;
  }
  if (fj_version() >> 16 != FJ_VERSION_MAJOR || plan.impl != FJ_COPY_IMPL_TMA)
    return 1;
  std::printf("C++17: fleetjit %u.%u, sm_90 plan %s\n", fj_version() >> 16,
              fj_version() & 0xffff, fj_copy_impl_name(plan.impl));
  return 0;
}
