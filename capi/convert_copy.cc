// fj_copy_desc and fj_prefetch_desc into the copy engine's C++ requests
// (their tensors through DlTensorOf, runtime/launch/wire.h), and
// fj_tensor_arg_check (convert.h).
#include <algorithm>
#include <cstdio>
#include <iterator>

#include "base/status_macros.h"
#include "capi/convert.h"
#include "runtime/launch/tensor_encoder.h"

namespace fleetjit::capi {

absl::StatusOr<copy::CopySpec> ReadCopyDesc(const fj_copy_desc* desc) {
  fj_copy_desc d;
  FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_copy_desc), d));
  // Field by field. The oob field is read as the int it is in memory, so
  // any value a caller stored reaches ValidateCopy's range check. The C ABI
  // forces neither the implementation nor the kernel path.
  copy::CopySpec spec{.src = DlTensorOf(d.src),
                      .oob = RawEnum(d.oob),
                      .dst = DlTensorOf(d.dst),
                      .index = DlTensorOf(d.gather_index),
                      .scatter = DlTensorOf(d.scatter_index),
                      .impl = std::nullopt,
                      .force_kernel = false};
  static_assert(sizeof(d.src_start) == sizeof(spec.start));
  std::copy(std::begin(d.src_start), std::end(d.src_start), spec.start.begin());
  return spec;
}

absl::StatusOr<copy::PrefetchSpec> ReadPrefetchDesc(
    const fj_prefetch_desc* desc) {
  fj_prefetch_desc d;
  FJ_RETURN_IF_ERROR(ReadStruct(desc, "desc", sizeof(fj_prefetch_desc), d));
  // Field by field; mode read as an int, like oob above.
  copy::PrefetchSpec spec{.address = d.address,
                          .bytes = d.bytes,
                          .tensor = DlTensorOf(d.tensor),
                          .mode = RawEnum(d.mode),
                          .reader_device = d.reader_device,
                          .stage_address = d.stage_address,
                          .stage_bytes = d.stage_bytes};
  static_assert(sizeof(d.tile_start) == sizeof(spec.start));
  std::copy(std::begin(d.tile_start), std::end(d.tile_start),
            spec.start.begin());
  std::copy(std::begin(d.tile_extent), std::end(d.tile_extent),
            spec.extent.begin());
  return spec;
}

absl::StatusOr<fj_tensor_check> CheckTensorArg(const fj_tensor_arg* arg) {
  if (arg == nullptr) return NullArgument("arg");
  // An aligned copy of the caller's struct, struct_size kept, so the
  // runtime's checks (DescribeTensor) see it as the caller passed it.
  fj_tensor_arg copy{};
  const size_t size = StructSize(arg);
  std::memcpy(&copy, arg, std::min(size, sizeof(copy)));
  copy.struct_size = size;
  FJ_ASSIGN_OR_RETURN(TensorDesc desc, DescribeTensor(&copy, 0));
  const std::string why = TmaRejection(desc);
  fj_tensor_check check{};
  check.struct_size = sizeof(check);
  check.tma = why.empty() ? 1 : 0;
  std::snprintf(check.reason, sizeof(check.reason), "%s", why.c_str());
  return check;
}

}  // namespace fleetjit::capi
