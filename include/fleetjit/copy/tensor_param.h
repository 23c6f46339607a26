// fleetjit tensor kernel parameter: the one layout shared by the host runtime
// and the device copy layer.
//
// A kernel declares a tensor parameter as `FJ_TENSOR(float, 2) name` (see
// <fleetjit/copy.cuh>). Whatever copy implementation the module was built
// with, the parameter has this layout, so the kernel source never changes
// between implementations. The host fills it from a caller's DLPack-style
// tensor and tile description:
//   - `tmap` holds an encoded CUtensorMap when `flags & FJ_TP_HAS_TMAP`; the
//     device then uses TMA tensor copies. Otherwise the device walks
//     `data`/`shape`/`stride` itself (cp.async or ld/st). A TMA build can
//     therefore fall back per launch when TMA cannot describe a tensor.
//   - Dimension 0 is the innermost (fastest-varying) one, as in PTX tensor
//     coordinates and CUtensorMap; DLPack's order is reversed by the host.
//
// This header uses builtin types only: it is compiled by the host compiler
// and, embedded, by NVRTC (which has no <cstdint>).
#ifndef FLEETJIT_COPY_TENSOR_PARAM_H_
#define FLEETJIT_COPY_TENSOR_PARAM_H_

#define FJ_TP_MAX_RANK 5
#define FJ_TP_HAS_TMAP 0x1u
// The tensor map's box (hw_box) is smaller than the tile (box): the device
// splits one tile copy into several tensor copies (see hw_box below).
#define FJ_TP_SPLIT_BOX 0x2u

namespace fj {

// Element types a tensor parameter can carry. Values are ABI: append only.
enum dtype_code : int {
  dtype_f32 = 0,
  dtype_f16 = 1,
  dtype_bf16 = 2,
  dtype_f8e4m3 = 3,
  dtype_f8e5m2 = 4,
  dtype_i8 = 5,
  dtype_u8 = 6,
  dtype_i32 = 7,
  dtype_u32 = 8,
  dtype_f64 = 9,
  dtype_i64 = 10,
  dtype_i16 = 11,
  dtype_u16 = 12,
  dtype_count = 13,
};

#if !defined(__CUDACC_RTC__)
// Host-side facts of a dtype_code, shared by the runtime and its callers
// (e.g. the conformance runner): name, bytes per element, floating point.
struct dtype_facts {
  const char* name;  // "f32", "bf16", ...; nullptr for an unknown code
  int bytes;         // 0 for an unknown code
  bool is_float;
};
inline constexpr dtype_facts dtype_info(int code) {
  constexpr dtype_facts kFacts[dtype_count] = {
      {"f32", 4, true},    {"f16", 2, true},    {"bf16", 2, true},
      {"f8e4m3", 1, true}, {"f8e5m2", 1, true}, {"i8", 1, false},
      {"u8", 1, false},    {"i32", 4, false},   {"u32", 4, false},
      {"f64", 8, true},    {"i64", 8, false},   {"i16", 2, false},
      {"u16", 2, false},
  };
  return code >= 0 && code < dtype_count ? kFacts[code]
                                         : dtype_facts{nullptr, 0, false};
}
#endif  // !__CUDACC_RTC__

// What a tile read outside the tensor's shape produces. Values are ABI.
enum oob_mode : int {
  // The caller guarantees the tile lies inside the tensor; nothing checks.
  oob_promise_in_bounds = 0,
  // Out-of-bounds elements read as zero.
  oob_zeros = 1,
  // Out-of-bounds elements read as NaN (floating-point dtypes only).
  oob_nan = 2,
};

// How a tile is laid out in SMEM: the TMA swizzle modes. Values are ABI.
// Under mode m (1..3) the 16-byte chunk bits [4, 4 + m) of a byte offset in
// the tile are XORed with bits [7, 7 + m): rows of 16 << m bytes, a pattern
// that repeats every 128 << m bytes.
enum swizzle_mode : int {
  swizzle_none = 0,
  swizzle_32b = 1,
  swizzle_64b = 2,
  swizzle_128b = 3,
};

struct alignas(64) tensor_param {
  unsigned char tmap[128];           // CUtensorMap, valid if FJ_TP_HAS_TMAP
  void* data;                        // address of element (0, ..., 0)
  long long shape[FJ_TP_MAX_RANK];   // elements per dim, dim 0 innermost
  long long stride[FJ_TP_MAX_RANK];  // elements between neighbours per dim
  int box[FJ_TP_MAX_RANK];           // tile extent per dim, dim 0 innermost
  int rank;                          // 1..FJ_TP_MAX_RANK
  int dtype;                         // dtype_code
  int elem_bytes;                    // 1, 2, 4 or 8
  int oob;                           // oob_mode
  unsigned int flags;                // FJ_TP_* bits
  // The box of the encoded tensor map, minus one, per dim (valid with
  // FJ_TP_HAS_TMAP): a tile is box[] elements per dim; a TMA copy moves at
  // most 256 per dim, so the host picks a hardware box that tiles the box in
  // SMEM-contiguous pieces (hw_box == box in every inner dim but one, 1 in
  // the dims above it) and sets FJ_TP_SPLIT_BOX when they differ.
  unsigned char hw_box_m1[FJ_TP_MAX_RANK];
  // The SMEM layout of a tile: fj::swizzle_mode (0 none, 1 32B, 2 64B,
  // 3 128B), the TMA XOR pattern. Software paths write the same bytes.
  unsigned char swizzle;
  unsigned char reserved[10];  // zero; room to grow without a resize
};

}  // namespace fj

#endif  // FLEETJIT_COPY_TENSOR_PARAM_H_
