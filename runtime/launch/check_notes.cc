#include "runtime/launch/check_notes.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "fleetjit/copy/check_notes.h"
#include "runtime/launch/launch.h"

namespace fleetjit {
namespace {

const char* CallName(int call) {
  switch (call) {
    case fj::check_load_tile:
      return "fj::load_tile";
    case fj::check_load_tile_multicast:
      return "fj::load_tile_multicast";
    case fj::check_load_tiles:
      return "fj::load_tiles";
    case fj::check_gather_tiles:
      return "fj::gather_tiles";
    case fj::check_store_tile:
      return "fj::store_tile";
    case fj::check_store_tiles:
      return "fj::store_tiles";
    case fj::check_scatter_tiles:
      return "fj::scatter_tiles";
    default:
      return "an fj:: tile call";
  }
}

}  // namespace

std::string DescribeCheckNote(uint64_t key, uint64_t detail,
                              absl::string_view kernel) {
  const unsigned line = static_cast<unsigned>(key >> 32);
  const int call = static_cast<int>((key >> 8) & 0xFF);
  const int reason = static_cast<int>(key & 0xFF);
  const bool store = call == fj::check_store_tile ||
                     call == fj::check_store_tiles ||
                     call == fj::check_scatter_tiles;
  std::string why;
  switch (reason) {
    case fj::check_unaligned_start: {
      const int c0 = static_cast<int>(static_cast<uint32_t>(detail));
      const int eb = static_cast<int>((detail >> 32) & 0xFF);
      const int multiple = eb > 0 ? std::max(1, 16 / eb) : 0;
      why = absl::StrCat(
          "its innermost start coordinate ", c0, " (x ", eb,
          " bytes) is not a multiple of 16 bytes, so its tiles ",
          store ? "were stored by the threads" : "took cp.async",
          "; tiles whose innermost start is a multiple of ", multiple,
          " elements stay on TMA (outer coordinates may be anything)");
      break;
    }
    case fj::check_unaligned_smem:
      why = absl::StrCat(
          "its SMEM tile is ", detail,
          " bytes past the alignment TMA needs (128 bytes, or the swizzle's "
          "repeat): align the buffer (__align__(128) or more)");
      break;
    case fj::check_edge_store:
      why =
          "a tile crossing the tensor's edge is stored by the threads, "
          "clipped (tiles wholly inside stay on TMA)";
      break;
    case fj::check_group_load:
      why =
          "it completes in a group (fj::in_group): TMA loads complete only on "
          "a barrier, so group loads are cp.async; give it an fj::barrier";
      break;
    case fj::check_fp8_nan:
      why = "TMA has no NaN fill for fp8: NaN-filled fp8 tiles are cp.async";
      break;
    default:
      why = absl::StrCat("reason ", reason);
      break;
  }
  return absl::StrCat("checked build: ", CallName(call), " at line ", line,
                      " (seen after a launch of ", kernel, ") left TMA: ", why);
}

absl::Status ReportCheckNotes(LoadedKernel& k, CUstream stream) {
  CheckNotes& notes = *k.check_notes;
  if (k.logger == nullptr || !k.logger->Enabled(LogLevel::kDebug)) {
    return absl::OkStatus();
  }
  const DriverApi& api = *k.api;
  if (api.cuStreamIsCapturing != nullptr) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (api.cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS ||
        capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      return absl::OkStatus();
    }
  }
  FJ_RETURN_IF_ERROR(
      CheckStickyError(*k.device, api, api.cuStreamSynchronize(stream),
                       absl::StrCat("kernel '", k.display_name,
                                    "' (a checked build; a failed check "
                                    "prints its reason on the device's "
                                    "printf stream): cuStreamSynchronize")));
  std::vector<uint64_t> table(2 * FJ_CHECK_NOTE_SLOTS);
  FJ_RETURN_IF_ERROR(FJ_CU_CALL(api, cuMemcpyDtoH, table.data(), notes.table,
                                table.size() * sizeof(uint64_t)),
                     absl::StrCat("reading the checked build's notes of '",
                                  k.display_name, "'"));
  std::vector<std::string> lines;
  {
    absl::MutexLock lock(&notes.mu);
    for (int i = 0; i < FJ_CHECK_NOTE_SLOTS; ++i) {
      const uint64_t key = table[2 * i];
      if (key == 0) break;
      if (std::find(notes.logged.begin(), notes.logged.end(), key) !=
          notes.logged.end()) {
        continue;
      }
      notes.logged.push_back(key);
      lines.push_back(absl::StrCat(
          notes.module_name, ": ",
          DescribeCheckNote(key, table[2 * i + 1], k.display_name)));
    }
  }
  for (const std::string& line : lines) k.logger->Log(LogLevel::kDebug, line);
  return absl::OkStatus();
}

}  // namespace fleetjit
