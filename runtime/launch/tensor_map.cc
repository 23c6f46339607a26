// Tensor maps: whether TMA can describe a tensor (HardwareBox,
// TmaRejection), the parameter without a map (FillTensorParam) and the
// CUtensorMap encoding (EncodeTensorMap), declared in tensor_encoder.h.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "platform/cu_errors.h"
#include "runtime/launch/tensor_encoder.h"

namespace fleetjit {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(fj::tensor_param{}.tmap),
              "CUtensorMap must fit tensor_param::tmap");

// The TMA side of each dtype (the rest is fj::dtype_info).
struct DtypeInfo {
  CUtensorMapDataType tma;
  bool tma_float;  // TMA sees it as floating point (NaN fill allowed)
};

// Indexed by fj::dtype_code. fp8 has no TMA type: its bytes move as uint8.
constexpr DtypeInfo kDtypes[fj::dtype_count] = {
    {CU_TENSOR_MAP_DATA_TYPE_FLOAT32, true},   // f32
    {CU_TENSOR_MAP_DATA_TYPE_FLOAT16, true},   // f16
    {CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, true},  // bf16
    {CU_TENSOR_MAP_DATA_TYPE_UINT8, false},    // f8e4m3
    {CU_TENSOR_MAP_DATA_TYPE_UINT8, false},    // f8e5m2
    {CU_TENSOR_MAP_DATA_TYPE_UINT8, false},    // i8
    {CU_TENSOR_MAP_DATA_TYPE_UINT8, false},    // u8
    {CU_TENSOR_MAP_DATA_TYPE_INT32, false},    // i32
    {CU_TENSOR_MAP_DATA_TYPE_UINT32, false},   // u32
    {CU_TENSOR_MAP_DATA_TYPE_FLOAT64, true},   // f64
    {CU_TENSOR_MAP_DATA_TYPE_INT64, false},    // i64
    {CU_TENSOR_MAP_DATA_TYPE_UINT16, false},   // i16
    {CU_TENSOR_MAP_DATA_TYPE_UINT16, false},   // u16
};

// Indexed by fj::swizzle_mode.
constexpr CUtensorMapSwizzle kSwizzles[4] = {
    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
    CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B};

bool KnownDtype(int dtype) { return dtype >= 0 && dtype < fj::dtype_count; }

}  // namespace

std::string HardwareBox(const TensorDesc& d, int32_t hw[FJ_TP_MAX_RANK]) {
  const int n = d.rank;
  const int64_t align =
      d.swizzle == fj::swizzle_none ? 128 : int64_t{128} << d.swizzle;
  int64_t inner = d.elem_bytes;  // bytes of one element of dimension dim
  int dim = 0;
  for (; dim < n && d.box[dim] <= 256; ++dim) {
    hw[dim] = d.box[dim];
    inner *= d.box[dim];
  }
  for (int e = dim; e < n; ++e) hw[e] = 1;
  if (dim == n) return "";
  const int32_t b = d.box[dim];
  for (int32_t h = 256; h >= 1; --h) {
    if (b % h != 0) continue;
    const int64_t piece = inner * h;
    if (piece % align != 0) continue;
    hw[dim] = h;
    return "";
  }
  return absl::StrCat(
      "box[", n - 1 - dim, "] = ", b,
      " is over TMA's 256 per copy and has no divisor up to 256 that makes "
      "pieces of a multiple of ",
      align, " bytes; a multiple of ", align / std::gcd<int64_t>(align, inner),
      " there splits (the part past the tensor reads as the oob fill)");
}

std::string TmaRejection(const TensorDesc& d) {
  const int n = d.rank;
  auto caller_dim = [n](int dim) { return n - 1 - dim; };  // DLPack index
  if (n < 1 || n > FJ_TP_MAX_RANK)
    return absl::StrCat("rank ", n, " is outside 1..5");
  if (!KnownDtype(d.dtype)) return absl::StrCat("unknown dtype ", d.dtype);
  if (d.address % 16 != 0) {
    return absl::StrFormat("address 0x%x is not 16-byte aligned", d.address);
  }
  if (d.stride[0] != 1) {
    return absl::StrCat("innermost stride (strides[", caller_dim(0), "]) is ",
                        d.stride[0], " elements; TMA needs 1");
  }
  for (int dim = 0; dim < n; ++dim) {
    if (d.shape[dim] == 0) {
      return absl::StrCat("shape[", caller_dim(dim), "] is 0");
    }
    if (static_cast<uint64_t>(d.shape[dim]) > (uint64_t{1} << 32)) {
      return absl::StrCat("shape[", caller_dim(dim), "] = ", d.shape[dim],
                          " exceeds 2^32");
    }
  }
  for (int dim = 1; dim < n; ++dim) {
    int64_t bytes = d.stride[dim] * d.elem_bytes;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (int64_t{1} << 40)) {
      return absl::StrCat(
          "strides[", caller_dim(dim), "] is ", bytes,
          " bytes; TMA needs a positive multiple of 16 below 2^40");
    }
  }
  for (int dim = 0; dim < n; ++dim) {
    if (d.box[dim] < 1) {
      return absl::StrCat("box[", caller_dim(dim), "] is ", d.box[dim],
                          " (outermost-first); TMA boxes are at least 1");
    }
  }
  if ((static_cast<int64_t>(d.box[0]) * d.elem_bytes) % 16 != 0) {
    return absl::StrCat("the inner box (box[", caller_dim(0), "] = ", d.box[0],
                        " x ", d.elem_bytes,
                        " bytes) is not a multiple of 16 bytes");
  }
  int32_t hw[FJ_TP_MAX_RANK];
  std::string why = HardwareBox(d, hw);
  if (!why.empty()) return why;
  if ((static_cast<int64_t>(hw[0]) * d.elem_bytes) % 16 != 0) {
    return absl::StrCat("the inner hardware box (", hw[0], " x ", d.elem_bytes,
                        " bytes) is not a multiple of 16 bytes");
  }
  if (d.oob == fj::oob_nan && !kDtypes[d.dtype].tma_float) {
    return absl::StrCat("NaN fill needs a TMA floating-point type; ",
                        DtypeName(d.dtype), " moves as uint8");
  }
  if (d.oob == fj::oob_nan && d.dtype == fj::dtype_f64) {
    // On the H200 (driver 580) a FLOAT64 tensor map's NaN fill did not
    // write the layer's f64 NaN into the rows a box left src by
    // (copy_gpu_test's WindowsOffABoundaryMatchTheReference, 2026-12-04);
    // the cp.async load's fill is the layer's own.
    return "TMA's NaN fill for f64 is not the layer's NaN (H200, driver 580)";
  }
  return "";
}

void FillTensorParam(const TensorDesc& d, fj::tensor_param* out) {
  std::memset(static_cast<void*>(out), 0, sizeof(*out));
  out->data = reinterpret_cast<void*>(static_cast<uintptr_t>(d.address));
  for (int dim = 0; dim < d.rank; ++dim) {
    out->shape[dim] = d.shape[dim];
    out->stride[dim] = d.stride[dim];
    out->box[dim] = d.box[dim];
  }
  out->rank = d.rank;
  out->dtype = d.dtype;
  out->elem_bytes = d.elem_bytes;
  out->oob = d.oob;
  out->flags = 0;
  out->swizzle = static_cast<unsigned char>(d.swizzle);
}

absl::Status EncodeTensorMap(const DriverApi& api, const TensorDesc& d,
                             fj::tensor_param* out) {
  if (api.cuTensorMapEncodeTiled == nullptr) {
    return absl::UnavailableError("the driver has no cuTensorMapEncodeTiled");
  }
  cuuint64_t dims[FJ_TP_MAX_RANK] = {};
  cuuint64_t strides[FJ_TP_MAX_RANK] = {};
  cuuint32_t box[FJ_TP_MAX_RANK] = {};
  cuuint32_t element_strides[FJ_TP_MAX_RANK] = {1, 1, 1, 1, 1};
  int32_t hw[FJ_TP_MAX_RANK] = {};
  const std::string why = HardwareBox(d, hw);
  if (!why.empty()) return absl::InvalidArgumentError(why);
  bool split = false;
  for (int dim = 0; dim < d.rank; ++dim) {
    dims[dim] = static_cast<cuuint64_t>(d.shape[dim]);
    box[dim] = static_cast<cuuint32_t>(hw[dim]);
    split = split || hw[dim] != d.box[dim];
    if (dim > 0) {
      strides[dim - 1] = static_cast<cuuint64_t>(d.stride[dim] * d.elem_bytes);
    }
  }
  CUresult r = api.cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap*>(out->tmap), kDtypes[d.dtype].tma,
      static_cast<cuuint32_t>(d.rank),
      reinterpret_cast<void*>(static_cast<uintptr_t>(d.address)), dims, strides,
      box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, kSwizzles[d.swizzle],
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      d.oob == fj::oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                           : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  absl::Status encoded = CheckCu(api, r, "cuTensorMapEncodeTiled");
  if (!encoded.ok()) return encoded;
  for (int dim = 0; dim < FJ_TP_MAX_RANK; ++dim) {
    out->hw_box_m1[dim] =
        dim < d.rank ? static_cast<unsigned char>(hw[dim] - 1) : 0;
  }
  if (split) out->flags |= FJ_TP_SPLIT_BOX;
  return absl::OkStatus();
}

}  // namespace fleetjit
