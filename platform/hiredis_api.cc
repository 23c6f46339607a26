#include "platform/hiredis_api.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "platform/lazy_library.h"

static_assert(HIREDIS_MAJOR == 0 && HIREDIS_MINOR == 14,
              "the dlopen'ed soname and these declarations must agree");

namespace fleetjit {
namespace {

absl::StatusOr<HiredisApi> Load(absl::string_view configured) {
  const std::string file =
      configured.empty() ? "libhiredis.so.0.14" : std::string(configured);
  // Never dlclose'd: contexts may outlive any one owner.
  std::string error;
  void* handle = OpenLibrary(file, &error);
  if (handle == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot load hiredis (needed by the remote cache tier only): ", error,
        "; install libhiredis0.14 (Debian/Ubuntu) or set FLEETJIT_LIBHIREDIS"));
  }
  HiredisApi api;
  SymbolResolver resolve(handle);
#define FJ_HIREDIS(name) resolve(api.name, #name);
#include "platform/hiredis_symbols.inc"
#undef FJ_HIREDIS
  if (!resolve.missing_names().empty()) {
    // The first entry point it lacks names the mismatch.
    return absl::UnavailableError(absl::StrCat(file, " lacks ",
                                               resolve.missing_names().front(),
                                               ": not hiredis 0.14"));
  }
  return api;
}

}  // namespace

absl::StatusOr<const HiredisApi*> LoadHiredis(absl::string_view file) {
  // Lives as long as the process.
  static auto* table = new LazyTable<HiredisApi>();
  return table->Get([file] { return Load(file); });
}

}  // namespace fleetjit
