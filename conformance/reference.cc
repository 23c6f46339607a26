#include "conformance/reference.h"

#include <cstring>
#include <vector>

namespace fleetjit::selftest {
namespace {

uint32_t Round128(uint32_t n) { return (n + 127) & ~127u; }

// Byte address of the element at global coordinates `g` (dims < rank).
const uint8_t* ElementAt(const HostTensor& t, const int64_t* g) {
  int64_t offset = 0;
  for (int d = 0; d < t.param.rank; ++d) offset += g[d] * t.param.stride[d];
  return static_cast<const uint8_t*>(t.data) + offset * t.param.elem_bytes;
}

bool InBounds(const fj::tensor_param& p, const int64_t* g) {
  for (int d = 0; d < p.rank; ++d) {
    if (g[d] < 0 || g[d] >= p.shape[d]) return false;
  }
  return true;
}

// Calls fn(box_index, global_coords) for every element of the tile at
// `coords`, box index in SMEM order (dimension 0 fastest).
template <class Fn>
void ForEachTileElement(const fj::tensor_param& p, const int32_t* coords,
                        Fn fn) {
  const size_t n = BoxElems(p);
  int64_t g[FJ_TP_MAX_RANK] = {};
  for (size_t i = 0; i < n; ++i) {
    size_t rest = i;
    for (int d = 0; d < p.rank; ++d) {
      g[d] = coords[d] + static_cast<int64_t>(rest % p.box[d]);
      rest /= p.box[d];
    }
    fn(i, g);
  }
}

}  // namespace

uint8_t StaleByte(uint32_t block, uint32_t i) {
  return static_cast<uint8_t>(i * 7u + block * 13u + 0x5Au);
}

uint32_t BarrierWord(uint32_t block, uint32_t phase, uint32_t thread) {
  return block * 0x9E3779B9u + phase * 0x85EBCA6Bu + thread * 0xC2B2AE35u;
}

uint32_t BarrierSmemBytes(int threads) { return 8u * threads; }
uint32_t SpanSmemBytes() { return kSpanCap + 128; }
uint32_t GroupsSmemBytes(int chunk_bytes) {
  return kGroupSlots * Round128(chunk_bytes) + 128;
}
size_t BoxElems(const fj::tensor_param& p) {
  size_t n = 1;
  for (int d = 0; d < p.rank; ++d) n *= p.box[d];
  return n;
}
uint32_t TileSmemBytes(const fj::tensor_param& p) {
  return Round128(static_cast<uint32_t>(BoxElems(p) * p.elem_bytes)) + 128;
}
uint32_t PipelineSmemBytes(const fj::tensor_param& p) {
  return kPipelineStages *
             Round128(static_cast<uint32_t>(BoxElems(p) * p.elem_bytes)) +
         128;
}

void RefBarrier(int blocks, int threads, int phases, uint32_t* out) {
  for (int b = 0; b < blocks; ++b) {
    uint32_t* o = out + static_cast<size_t>(b) * (phases + 1) * threads;
    for (int k = 0; k < phases; ++k) {
      for (int t = 0; t < threads; ++t) {
        o[static_cast<size_t>(k) * threads + t] =
            BarrierWord(b, k, (t + 1) % threads);
      }
    }
    for (int t = 0; t < threads; ++t) {
      o[static_cast<size_t>(phases) * threads + t] = phases > 0 ? 7u : 3u;
    }
  }
}

void RefSpanLoad(const uint8_t* src, const SpanCase* cases, int cases_per_block,
                 int blocks, int cluster, uint8_t* out) {
  for (int b = 0; b < blocks; ++b) {
    uint8_t* smem = out + static_cast<size_t>(b) * kSpanCap;
    for (uint32_t i = 0; i < kSpanCap; ++i) smem[i] = StaleByte(b, i);
    const SpanCase* c =
        cases + static_cast<size_t>(b / cluster) * cases_per_block;
    for (int j = 0; j < cases_per_block; ++j) {
      if (c[j].pred) {
        std::memcpy(smem + c[j].dst_off, src + c[j].src_off, c[j].bytes);
      } else if (c[j].mode == kPredZero) {
        std::memset(smem + c[j].dst_off, 0, c[j].bytes);
      }
    }
  }
}

void RefSpanStore(const uint8_t* src, const SpanCase* cases,
                  int cases_per_block, int blocks, uint8_t* out) {
  for (int b = 0; b < blocks; ++b) {
    const size_t region = static_cast<size_t>(b) * kSpanCap;
    const SpanCase* c = cases + static_cast<size_t>(b) * cases_per_block;
    for (int j = 0; j < cases_per_block; ++j) {
      if (!c[j].pred) continue;
      std::memcpy(out + region + c[j].dst_off, src + region + c[j].src_off,
                  c[j].bytes);
    }
  }
}

void RefGroups(const uint8_t* src, int blocks, int chunks, int chunk_bytes,
               uint8_t* out) {
  std::memcpy(out, src, static_cast<size_t>(blocks) * chunks * chunk_bytes);
}

void RefLoadTileInto(const HostTensor& t, const int32_t* coords, bool pred,
                     int pred_mode, uint8_t* tile) {
  const fj::tensor_param& p = t.param;
  const int eb = p.elem_bytes;
  if (!pred) {
    if (pred_mode == kPredZero) std::memset(tile, 0, BoxElems(p) * eb);
    return;
  }
  const uint64_t fill = p.oob == fj::oob_nan ? NanPattern(p.dtype) : 0;
  ForEachTileElement(p, coords, [&](size_t i, const int64_t* g) {
    if (InBounds(p, g)) {
      std::memcpy(tile + i * eb, ElementAt(t, g), eb);
    } else {
      std::memcpy(tile + i * eb, &fill, eb);  // little-endian low bytes
    }
  });
}

void RefTileLoad(const HostTensor& t, const int32_t* coords,
                 const uint8_t* preds, int pred_mode, int blocks, int cluster,
                 void* out) {
  const size_t bytes = BoxElems(t.param) * t.param.elem_bytes;
  for (int b = 0; b < blocks; ++b) {
    uint8_t* tile = static_cast<uint8_t*>(out) + b * bytes;
    for (size_t i = 0; i < bytes; ++i) tile[i] = StaleByte(b, i);
    const int c = b / cluster;
    RefLoadTileInto(t, coords + c * kCaseInts, preds[c] != 0, pred_mode, tile);
  }
}

void RefTileStore(const HostTensor& t, const int32_t* coords,
                  const uint8_t* preds, int blocks, const void* src) {
  const fj::tensor_param& p = t.param;
  const int eb = p.elem_bytes;
  const size_t elems = BoxElems(p);
  for (int b = 0; b < blocks; ++b) {
    if (!preds[b]) continue;
    const uint8_t* tile = static_cast<const uint8_t*>(src) + b * elems * eb;
    ForEachTileElement(
        p, coords + b * kCaseInts, [&](size_t i, const int64_t* g) {
          if (!InBounds(p, g)) return;
          std::memcpy(const_cast<uint8_t*>(ElementAt(t, g)), tile + i * eb, eb);
        });
  }
}

void RefPipeline(const HostTensor& t, const int32_t* coords,
                 const uint8_t* preds, int pred_mode, int blocks, int tiles,
                 void* out) {
  const size_t bytes = BoxElems(t.param) * t.param.elem_bytes;
  const size_t slot = Round128(static_cast<uint32_t>(bytes));
  std::vector<uint8_t> smem(kPipelineStages * slot);
  for (int b = 0; b < blocks; ++b) {
    for (size_t i = 0; i < smem.size(); ++i) smem[i] = StaleByte(b, i);
    for (int k = 0; k < tiles; ++k) {
      const size_t c = static_cast<size_t>(b) * tiles + k;
      uint8_t* tile = smem.data() + (k % kPipelineStages) * slot;
      RefLoadTileInto(t, coords + c * kCaseInts, preds[c] != 0, pred_mode,
                      tile);
      std::memcpy(static_cast<uint8_t*>(out) + c * bytes, tile, bytes);
    }
  }
}

bool IndexInside(const fj::tensor_param& p, const int32_t* coords, int dim) {
  return coords[dim] >= 0 &&
         int64_t{coords[dim]} + p.box[dim] <= int64_t{p.shape[dim]};
}

void RefGatherTiles(const HostTensor& t, const int32_t* coords, int tiles,
                    int dim, void* out) {
  const fj::tensor_param& p = t.param;
  const int eb = p.elem_bytes;
  const size_t elems = BoxElems(p), bytes = elems * eb;
  const uint64_t fill = p.oob == fj::oob_nan ? NanPattern(p.dtype) : 0;
  for (int k = 0; k < tiles; ++k) {
    uint8_t* tile = static_cast<uint8_t*>(out) + k * bytes;
    const int32_t* c = coords + static_cast<size_t>(k) * kCaseInts;
    if (IndexInside(p, c, dim)) {
      RefLoadTileInto(t, c, true, kPredSkip, tile);
    } else {
      for (size_t i = 0; i < elems; ++i) std::memcpy(tile + i * eb, &fill, eb);
    }
  }
}

void RefScatterTiles(const HostTensor& t, const int32_t* coords,
                     const uint8_t* preds, int blocks, int tiles, int dim,
                     const void* src) {
  const size_t bytes = BoxElems(t.param) * t.param.elem_bytes;
  for (int b = 0; b < blocks; ++b) {
    for (int k = 0; k < tiles; ++k) {
      const size_t i = static_cast<size_t>(b) * tiles + k;
      const int32_t* c = coords + i * kCaseInts;
      const uint8_t go =
          preds[b] != 0 && (dim < 0 || IndexInside(t.param, c, dim)) ? 1 : 0;
      RefTileStore(t, c, &go, 1, static_cast<const uint8_t*>(src) + i * bytes);
    }
  }
}

uint64_t NanPattern(int dtype) {
  switch (dtype) {
    case fj::dtype_f32:
      return 0x7FC00000u;
    case fj::dtype_f64:
      return 0x7FF8000000000000ull;
    case fj::dtype_f16:
      return 0x7E00u;
    case fj::dtype_bf16:
      return 0x7FC0u;
    case fj::dtype_f8e4m3:
      return 0x7Fu;
    case fj::dtype_f8e5m2:
      return 0x7Eu;
    default:
      return 0;
  }
}

bool IsNan(int dtype, const void* p) {
  uint64_t v = 0;
  switch (dtype) {
    case fj::dtype_f32:
      std::memcpy(&v, p, 4);
      return (v & 0x7F800000u) == 0x7F800000u && (v & 0x007FFFFFu) != 0;
    case fj::dtype_f64:
      std::memcpy(&v, p, 8);
      return (v & 0x7FF0000000000000ull) == 0x7FF0000000000000ull &&
             (v & 0x000FFFFFFFFFFFFFull) != 0;
    case fj::dtype_f16:
      std::memcpy(&v, p, 2);
      return (v & 0x7C00u) == 0x7C00u && (v & 0x03FFu) != 0;
    case fj::dtype_bf16:
      std::memcpy(&v, p, 2);
      return (v & 0x7F80u) == 0x7F80u && (v & 0x007Fu) != 0;
    case fj::dtype_f8e4m3:  // S.1111.111 is the only NaN
      std::memcpy(&v, p, 1);
      return (v & 0x7Fu) == 0x7Fu;
    case fj::dtype_f8e5m2:
      std::memcpy(&v, p, 1);
      return (v & 0x7Cu) == 0x7Cu && (v & 0x03u) != 0;
    default:
      return false;
  }
}

bool SameElement(int dtype, int elem_bytes, const void* a, const void* b) {
  if (std::memcmp(a, b, elem_bytes) == 0) return true;
  return IsNan(dtype, a) && IsNan(dtype, b);
}

size_t CountMismatches(int dtype, int elem_bytes, const void* expected,
                       const void* actual, size_t n, ptrdiff_t* first) {
  const uint8_t* e = static_cast<const uint8_t*>(expected);
  const uint8_t* a = static_cast<const uint8_t*>(actual);
  size_t count = 0;
  if (first != nullptr) *first = -1;
  for (size_t i = 0; i < n; ++i) {
    if (SameElement(dtype, elem_bytes, e + i * elem_bytes, a + i * elem_bytes))
      continue;
    if (count == 0 && first != nullptr) *first = static_cast<ptrdiff_t>(i);
    ++count;
  }
  return count;
}

}  // namespace fleetjit::selftest
