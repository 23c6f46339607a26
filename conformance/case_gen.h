// Internal to the conformance runner: random case generation. Every
// launch of the matrix draws its cases from one Rng seeded from (matrix
// seed, variant, launch index), so `fleetjit selftest --seed N` reproduces
// them; the functions here consume random numbers in a fixed order, which
// is part of that promise.
//
// A Variant is the unit of generation: which kernel, how many launches, and
// the rules its cases follow (completion mechanism, predicates, multicast,
// prefetch, out-of-bounds modes, dtypes). MakeTensor, MakeCoords and
// MakeSpans build the random inputs those rules allow.
#ifndef FLEETJIT_CONFORMANCE_CASE_GEN_H_
#define FLEETJIT_CONFORMANCE_CASE_GEN_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "conformance/reference.h"
#include "fleetjit/copy/tensor_param.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::selftest::internal {

// ---------------------------------------------------------------------------
// Random numbers: SplitMix64, seeded per (matrix seed, variant, launch).

inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A fresh seed for a run: never 0, and exact in a JSON number (53 bits).
// Print it, so a failure can be replayed. The tests draw theirs here too
// (tests/common/seed.h).
inline uint64_t FreshSeed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
               static_cast<uint64_t>(
                   std::chrono::steady_clock::now().time_since_epoch().count());
  s = Mix(s) & ((1ull << 53) - 1);
  return s == 0 ? 1 : s;
}

inline uint64_t HashName(absl::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

class Rng {
 public:
  using result_type = uint64_t;
  explicit Rng(uint64_t seed) : state_(seed) {}
  static constexpr uint64_t min() { return 0; }
  static constexpr uint64_t max() { return ~0ull; }
  uint64_t operator()() {
    state_ += 0x9E3779B97F4A7C15ull;
    return Mix(state_);
  }
  // Uniform in [lo, hi] (hi < lo gives lo).
  int64_t Int(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>((*this)() % span);
  }
  bool Chance(double p) {
    return static_cast<double>((*this)() >> 11) * 0x1.0p-53 < p;
  }
  void Fill(uint8_t* p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t v = (*this)();
      std::memcpy(p + i, &v, 8);
    }
    if (i < n) {
      const uint64_t v = (*this)();
      std::memcpy(p + i, &v, n - i);
    }
  }

 private:
  uint64_t state_;
};

// Output poison: non-zero bytes that form no NaN in any float dtype, so an
// element the kernel failed to write never passes for an OOB NaN.
inline constexpr uint8_t kPoisons[] = {0xA5, 0x5A, 0xC3, 0x3C, 0x96};

// ---------------------------------------------------------------------------
// Variants: the unit of case generation.

enum class Kind {
  kBarrier,
  kSpanLoad,
  kSpanStore,
  kGroups,
  kTileLoad,
  kTileStore,
  kPipeline,
  kScatter,  // fj::store_tiles / fj::scatter_tiles
  kGather,   // fj::gather_tiles, indices outside the tensor included
};
enum class Done { kAny, kBarrier, kGroup };
inline constexpr int kOobPromise = 1 << fj::oob_promise_in_bounds;
inline constexpr int kOobZeros = 1 << fj::oob_zeros;
inline constexpr int kOobNan = 1 << fj::oob_nan;

struct Variant {
  const char* name;
  const char* feature;
  Kind kind;
  int launches;  // at scale 1
  Done done = Done::kAny;
  bool preds = false;      // random predicates (skip and zero modes)
  bool multicast = false;  // flag 4, clusters of 1, 2, 4
  bool prefetch = false;   // flag 2 always (else sometimes)
  int oobs = kOobPromise | kOobZeros;
  bool float_only = false;
  bool all_dtypes = false;  // one launch per (dtype, rank) pair
};

// Every variant, grouped by feature.
const std::vector<Variant>& Variants();

// ---------------------------------------------------------------------------
// Dtypes.

inline constexpr int kAllDtypes[] = {
    fj::dtype_f32,    fj::dtype_f16, fj::dtype_bf16, fj::dtype_f8e4m3,
    fj::dtype_f8e5m2, fj::dtype_i8,  fj::dtype_u8,   fj::dtype_i32,
    fj::dtype_u32,    fj::dtype_f64, fj::dtype_i64,  fj::dtype_i16,
    fj::dtype_u16};
inline constexpr int kFloatDtypes[] = {fj::dtype_f32,    fj::dtype_f16,
                                       fj::dtype_bf16,   fj::dtype_f8e4m3,
                                       fj::dtype_f8e5m2, fj::dtype_f64};

fj_dl_dtype DlDtype(int dtype);
const char* OobName(int oob);

// Float data must hold no NaN, so a NaN in the output can only be the fill:
// clearing bit 6 of the top byte clears the exponent's top bit for every
// float dtype here.
void ClearNans(int dtype, int eb, uint8_t* p, size_t elems);

// "0x..." of an element's `n` bytes, most significant first.
std::string Hex(const uint8_t* p, int n);

// "[a, b, c]" of a param-order array, printed outermost-first.
template <class T>
std::string Outer(const T* v, int rank) {
  std::vector<std::string> parts;
  for (int i = rank - 1; i >= 0; --i) parts.push_back(absl::StrCat(v[i]));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// ---------------------------------------------------------------------------
// Random tensors.

struct GenTensor {
  fj::tensor_param p{};  // the kernel's view, data = host memory
  std::vector<uint8_t> host;
  int64_t dl_shape[FJ_TP_MAX_RANK] = {};
  int64_t dl_strides[FJ_TP_MAX_RANK] = {};
  bool pass_strides = true;
  uint64_t shift = 0;         // bytes past the arena start (alignment)
  bool split_offset = false;  // shift passed as byte_offset
  std::string shape_note;     // why TMA should not describe it, "" if it should

  size_t elems() const { return host.size() / p.elem_bytes; }
  HostTensor Host() {
    HostTensor h;
    h.param = p;
    h.param.data = host.data();
    h.data = host.data();
    return h;
  }
  // The caller's view: fj_tensor + fj_tensor_arg at device address `base`.
  void Fill(uint64_t base, int device, fj_tensor* t, fj_tensor_arg* a) const {
    *t = fj_tensor{};
    const uint64_t addr = base + (split_offset ? 0 : shift);
    t->data = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
    t->byte_offset = split_offset ? shift : 0;
    t->device = {2, device};
    t->ndim = p.rank;
    t->dtype = DlDtype(p.dtype);
    t->shape = const_cast<int64_t*>(dl_shape);
    t->strides = pass_strides ? const_cast<int64_t*>(dl_strides) : nullptr;
    *a = fj_tensor_arg{};
    a->struct_size = sizeof(fj_tensor_arg);
    a->tensor = t;
    for (int i = 0; i < p.rank; ++i) {
      a->box[i] = static_cast<uint32_t>(p.box[p.rank - 1 - i]);
    }
    a->oob = static_cast<fj_oob>(p.oob);
  }
};

size_t BoxBytes(const fj::tensor_param& p);

// A random tensor of `rank` and `dtype`. With `in_bounds` every dimension
// is at least its box (promise_in_bounds tiles fit). About 70% are shaped
// so TMA can describe them; the rest break one or more of TMA's rules
// (inner stride, row stride not a multiple of 16 bytes, base not 16-byte
// aligned, inner box not a multiple of 16 bytes, box over 256).
GenTensor MakeTensor(Rng& rng, int rank, int dtype, int oob, bool in_bounds);

// Tile start coordinates (kCaseInts ints). In bounds: inside the tensor.
// Ragged: straddling an edge, inside, or now and then entirely outside.
void MakeCoords(Rng& rng, const fj::tensor_param& p, bool in_bounds,
                int32_t* c);

// Whether the box at `c` lies inside the tensor.
bool TileInBounds(const fj::tensor_param& p, const int32_t* c);

// The (dtype, rank) of launch `index` of a tile variant.
std::pair<int, int> PickDtypeRank(const Variant& v, int index, Rng& rng);
// An out-of-bounds mode `v` allows for `dtype` (NaN fill for floats only).
int PickOob(const Variant& v, Rng& rng, int dtype);

// ---------------------------------------------------------------------------
// Random spans.

// Span cases for `groups` case groups of `cpb` cases: destinations of a
// group in disjoint slots of [0, kSpanCap); sources inside [0, src_cap).
void MakeSpans(Rng& rng, int groups, int cpb, int64_t src_cap, bool preds,
               int mode_base, std::vector<SpanCase>& cases);
// An internal error if `cases` break the contract (a selftest bug).
absl::Status CheckSpans(const std::vector<SpanCase>& cases, int cpb,
                        int64_t src_cap, bool load);

}  // namespace fleetjit::selftest::internal

#endif  // FLEETJIT_CONFORMANCE_CASE_GEN_H_
