#include "platform/hiredis_api.h"

#include <dlfcn.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

static_assert(HIREDIS_MAJOR == 0 && HIREDIS_MINOR == 14,
              "the dlopen'ed soname and these declarations must agree");

namespace fleetjit {
namespace {

absl::StatusOr<const HiredisApi*> Load(absl::string_view configured) {
  const std::string file =
      configured.empty() ? "libhiredis.so.0.14" : std::string(configured);
  // Never dlclose'd: contexts may outlive any one owner.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::UnavailableError(absl::StrCat(
        "cannot load hiredis (needed by the remote cache tier only): ",
        err != nullptr ? err : file,
        "; install libhiredis0.14 (Debian/Ubuntu) or set FLEETJIT_LIBHIREDIS"));
  }
  auto* api = new HiredisApi();  // lives as long as the process
#define FJ_HIREDIS(name)                                                   \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(handle, #name)); \
  if (api->name == nullptr) {                                              \
    return absl::UnavailableError(                                         \
        absl::StrCat(file, " lacks ", #name, ": not hiredis 0.14"));       \
  }
#include "platform/hiredis_symbols.inc"
#undef FJ_HIREDIS
  return api;
}

}  // namespace

absl::StatusOr<const HiredisApi*> LoadHiredis(absl::string_view file) {
  static const absl::StatusOr<const HiredisApi*>* loaded =
      new absl::StatusOr<const HiredisApi*>(Load(file));
  return *loaded;
}

}  // namespace fleetjit
