// Tensor arguments: from a caller's DLPack-style fj_tensor_arg to the
// 320-byte fj::tensor_param a kernel receives (include/fleetjit/copy/
// tensor_param.h).
//
// Encoding checks the tensor (NULLs, struct_size, rank 1..5, dtype, tile box,
// out-of-bounds mode, address alignment), reverses DLPack's outermost-first
// dimension order to the parameter's dim-0-innermost order, and fills in
// compact row-major strides when the caller passes none. On a `tma` build it
// also encodes a CUtensorMap (cuTensorMapEncodeTiled) when TMA can describe
// the tensor; when it cannot (alignment, strides, box limits, ...), the flag
// FJ_TP_HAS_TMAP stays clear, the kernel falls back to cp.async for that
// tensor, and the switch is counted on the kernel and reported once
// through the runtime's logger (level info). Nothing here faults: every bad
// input is an INVALID_ARGUMENT status naming the argument.
//
// Encoded parameters are reused while the tensor's pointer, shape, strides,
// box, dtype and oob mode are unchanged. The cache is per thread, so the
// launch path takes no lock and shares no cache line between threads. It is
// addressed by the tensor's description, not by kernel: every kernel and
// argument slot that passes the same tensor shares one entry, and 256
// tensors per thread stay encoded (32 sets of 8, least recently used out;
// 128 KiB made at a thread's first tensor, freed when it ends). An entry
// lives no longer than the runtime that made it: making or destroying a
// runtime calls ForgetKeptTensors, so a new runtime encodes afresh (and
// meets the driver's errors afresh).
//
//   TensorEncoder encoder(&api, "saxpy.cu:k", &k.tma_fallbacks,
//                         &k.tma_fallback_reported);
//   FJ_RETURN_IF_ERROR(encoder.Encode(arg_index, arg.v.tensor, spec_rank,
//                                     spec_dtype, jit::CopyImpl::kTma,
//                                     buffer + spec.offset),
//                      "packing arguments");
#ifndef FLEETJIT_RUNTIME_LAUNCH_TENSOR_ENCODER_H_
#define FLEETJIT_RUNTIME_LAUNCH_TENSOR_ENCODER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/log.h"
#include "fleetjit/copy/tensor_param.h"
#include "jit/copy_plan.h"
#include "platform/driver_api.h"
#include "runtime/launch/dl_tensor.h"
#include "runtime/launch/wire.h"

namespace fleetjit {

// Drops every thread's kept tensor parameters (each thread's cache empties
// at its next tensor). Cheap: one atomic increment.
void ForgetKeptTensors();

// A validated tensor in the parameter's order (dimension 0 innermost).
struct TensorDesc {
  uint64_t address = 0;  // data + byte_offset
  int rank = 0;
  fj::dtype_code dtype = fj::dtype_f32;
  int elem_bytes = 0;
  int64_t shape[FJ_TP_MAX_RANK] = {};
  int64_t stride[FJ_TP_MAX_RANK] = {};  // elements
  int32_t box[FJ_TP_MAX_RANK] = {};     // resolved: never 0
  fj::oob_mode oob = fj::oob_promise_in_bounds;
  fj::swizzle_mode swizzle = fj::swizzle_none;
};

// The first fj_tensor_arg (1.0): everything before `swizzle`.
constexpr size_t kTensorArgV1Size = offsetof(fj_tensor_arg, swizzle);

// The fj::dtype_code of a DLPack dtype (lanes must be 1). Accepts kDLInt
// 8/16/32/64, kDLUInt 8/16/32, kDLFloat 16/32/64, kDLBfloat 16, kDLBool 8
// (as u8) and FJ_DL_FLOAT8_E4M3/E5M2 with 8 bits. INVALID_ARGUMENT
// otherwise, naming the dtype.
absl::StatusOr<fj::dtype_code> DtypeFromDlpack(DlDtype dtype);
// Bytes per element of `dtype`; 0 for an unknown code.
int DtypeBytes(int dtype);
// "f32", "bf16", ... ("dtype#N" for an unknown code).
std::string DtypeName(int dtype);
bool DtypeIsFloat(int dtype);

// Checks a caller's tensor and puts it in the parameter's order: ndim,
// device type (CUDA memory), dtype, shape and data non-null, extents,
// strides, `box` (FJ_TP_MAX_RANK entries outermost-first, 0 = the whole
// extent, none past ndim), `oob` and `swizzle` (fj::oob_mode and
// fj::swizzle_mode values, range-checked here). `arg_index` only names the
// argument in messages.
absl::StatusOr<TensorDesc> DescribeTensor(const DlTensor& t,
                                          const uint32_t* box, int32_t oob,
                                          int32_t swizzle, size_t arg_index);
// The same for a tensor argument of the wire: its NULLs and struct_size,
// then the tensor with the argument's box, oob and swizzle.
absl::StatusOr<TensorDesc> DescribeTensor(const fj_tensor_arg* arg,
                                          size_t arg_index);

// The declared side of a tensor parameter: `declared_rank` (0 = any) and
// `declared_dtype` (-1 = any; below -1, an element of -1 - declared_dtype
// bytes, see jit::ParamSpec::tensor_dtype) against the tensor's `rank` and
// `dtype`. INVALID_ARGUMENT naming argument `arg_index` on a mismatch.
absl::Status CheckDeclaredTensor(size_t arg_index, int rank, int dtype,
                                 int32_t declared_rank, int32_t declared_dtype);

// The tensor map's box for `desc` (parameter order) in `hw`: the tile's box
// where every extent is within TMA's 1..256, else a box that tiles it in
// pieces contiguous in SMEM: hw == box in the dimensions below the first
// one over 256 (k), hw[k] the largest divisor of box[k] up to 256 whose
// piece is a multiple of 128 bytes (the swizzle repeat under a swizzle;
// for k = 0 also a multiple of 16 bytes), 1 above k. "" or why none exists.
std::string HardwareBox(const TensorDesc& desc, int32_t hw[FJ_TP_MAX_RANK]);

// Why TMA cannot describe `desc` ("" when it can), per the rules of
// cuTensorMapEncodeTiled: 16-byte-aligned address, inner stride 1, outer
// strides in bytes positive multiples of 16 below 2^40, extents 1..2^32,
// a hardware box (HardwareBox) with the inner box a multiple of 16 bytes,
// and NaN fill only for dtypes TMA treats as floating point (not fp8).
std::string TmaRejection(const TensorDesc& desc);

// Writes the parameter for `desc` without a tensor map (flags clear).
void FillTensorParam(const TensorDesc& desc, fj::tensor_param* out);

// Encodes desc's CUtensorMap into out->tmap (128 bytes) with
// api.cuTensorMapEncodeTiled: no interleave, desc's swizzle, the hardware
// box (recorded in out->hw_box_m1, FJ_TP_SPLIT_BOX when it differs from the
// box), L2 promotion 128B, NaN fill for oob_nan. `out` must be 64-byte
// aligned. On a driver refusal the status carries the driver's error; the
// caller falls back.
absl::Status EncodeTensorMap(const DriverApi& api, const TensorDesc& desc,
                             fj::tensor_param* out);

class TensorEncoder {
 public:
  // `api` may be null (no tensor maps: every tma tensor falls back).
  // `fallbacks` counts tensor arguments that fell back from TMA;
  // `reported` has bit min(i, 63) set once argument i's fallback was
  // printed. Both belong to the kernel and may be null.
  TensorEncoder(const DriverApi* api, absl::string_view kernel_name,
                std::atomic<uint64_t>* fallbacks,
                std::atomic<uint64_t>* reported, const Logger* logger = nullptr)
      : api_(api),
        kernel_name_(kernel_name),
        fallbacks_(fallbacks),
        reported_(reported),
        logger_(logger) {}

  // Writes all 320 bytes of the parameter to `out` (any alignment) for
  // argument `arg_index`. `declared_rank` (0 = any) and `declared_dtype`
  // (-1 = any; below -1, an element of -1 - declared_dtype bytes, see
  // jit::ParamSpec::tensor_dtype) come from the kernel's signature; a
  // mismatch is INVALID_ARGUMENT. A tensor TMA cannot describe is not an
  // error.
  absl::Status Encode(size_t arg_index, const fj_tensor_arg* arg,
                      int32_t declared_rank, int32_t declared_dtype,
                      jit::CopyImpl impl, void* out) const;

  // The same for a tensor already described (the runtime's own kernels:
  // runtime/copy/), with no declared side to check: the parameter with its
  // tensor map under `impl` tma when TMA can describe `desc`. Shares the
  // per-thread cache (its keys are marked apart from the wire's).
  absl::Status EncodeDescribed(size_t arg_index, const TensorDesc& desc,
                               jit::CopyImpl impl, fj::tensor_param* out) const;

  // Turns the per-thread cache off for this encoder (tests).
  void set_cache_enabled(bool enabled) { cache_enabled_ = enabled; }

 private:
  void ReportFallback(size_t arg_index, const char* reason) const;
  // Encode past its cache lookup: a miss (`cache` null when there is no
  // cache; `set` is the key's), or a hit whose declared rank or dtype
  // differs (`hit`, checked and copied here). Out of line, so that a hit
  // runs through a few lines of code.
  absl::Status EncodeRest(size_t arg_index, const fj_tensor_arg* arg,
                          int32_t declared_rank, int32_t declared_dtype,
                          bool want_tma, const void* encode_fn, void* cache,
                          size_t set, const void* hit, void* out) const;

  const DriverApi* api_;
  absl::string_view kernel_name_;
  std::atomic<uint64_t>* fallbacks_;
  std::atomic<uint64_t>* reported_;
  const Logger* logger_;  // may be null: no report
  bool cache_enabled_ = true;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_TENSOR_ENCODER_H_
