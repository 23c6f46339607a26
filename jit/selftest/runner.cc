#include "jit/selftest/runner.h"
#include "runtime/status_macros.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "fleetjit/copy/tensor_param.h"
#include "jit/embedded.h"
#include "jit/selftest/reference.h"
#include "runtime/tensor_encoder.h"


namespace fleetjit::selftest {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kKernelFile = "jit/selftest/conformance_kernels.cu";
constexpr uint64_t kArenaBytes = 16ull << 20;  // tensors / outputs
constexpr uint64_t kAuxBytes = 1ull << 20;     // cases, coords, predicates
constexpr uint64_t kAuxPredsOffset = kAuxBytes / 2;
constexpr uint32_t kBoxBudget = 8192;         // bytes of one tile
constexpr int64_t kMaxTensorElems = 1 << 16;  // logical elements per tensor
constexpr int kMaxSamples = 3;

// ---------------------------------------------------------------------------
// Random numbers: SplitMix64, seeded per (matrix seed, variant, launch).

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t HashName(absl::string_view s) {
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
constexpr uint8_t kPoisons[] = {0xA5, 0x5A, 0xC3, 0x3C, 0x96};

// ---------------------------------------------------------------------------
// C ABI statuses.

absl::StatusCode CodeOf(fj_code c) {
  switch (c) {
    case FJ_OK: return absl::StatusCode::kOk;
    case FJ_INVALID_ARGUMENT: return absl::StatusCode::kInvalidArgument;
    case FJ_NOT_FOUND: return absl::StatusCode::kNotFound;
    case FJ_UNAVAILABLE: return absl::StatusCode::kUnavailable;
    case FJ_FAILED_PRECONDITION: return absl::StatusCode::kFailedPrecondition;
    case FJ_BUILD_ERROR: return absl::StatusCode::kAborted;
    case FJ_CUDA_ERROR: return absl::StatusCode::kInternal;
    case FJ_RESOURCE_EXHAUSTED: return absl::StatusCode::kResourceExhausted;
    case FJ_OUT_OF_RANGE: return absl::StatusCode::kOutOfRange;
    default: return absl::StatusCode::kInternal;
  }
}

// Converts (and frees) a C ABI status; the message keeps the C code name.
absl::Status Fj(fj_status* s, absl::string_view what) {
  if (s == nullptr) return absl::OkStatus();
  const fj_code code = fj_status_code(s);
  std::string msg = absl::StrCat(what, ": ", fj_code_name(code), ": ",
                                 fj_status_message(s, nullptr));
  static constexpr char kLog[] = "build_log";
  const char* log = fj_status_detail(s, fj_str{kLog, sizeof(kLog) - 1}, nullptr);
  if (log != nullptr && *log != '\0') {
    std::string l(log);
    if (l.size() > 3000) l = l.substr(0, 3000) + "\n[... build log truncated]";
    absl::StrAppend(&msg, "\nbuild log:\n", l);
  }
  fj_status_free(s);
  return absl::Status(CodeOf(code), msg);
}


fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }

fj_arg PtrArg(uint64_t p) {
  fj_arg a{};
  a.struct_size = sizeof(fj_arg);
  a.kind = FJ_ARG_POINTER;
  a.v.pointer = p;
  return a;
}
fj_arg I32Arg(int32_t v) {
  fj_arg a{};
  a.struct_size = sizeof(fj_arg);
  a.kind = FJ_ARG_I32;
  a.v.i32 = v;
  return a;
}
fj_arg TensorArg(const fj_tensor_arg* t) {
  fj_arg a{};
  a.struct_size = sizeof(fj_arg);
  a.kind = FJ_ARG_TENSOR;
  a.v.tensor = t;
  return a;
}

// ---------------------------------------------------------------------------
// Rows: an implementation, optionally on a named (PTX) target.

struct RowSpec {
  std::string name;        // "tma", "cp_async@compute_80"
  fj_copy_impl impl;
  std::string target;      // "" = the live device
  int target_cc = 0;       // e.g. 90, 80, 75
};

int ImplMinCc(fj_copy_impl impl) {
  return impl == FJ_COPY_IMPL_TMA ? 90 : impl == FJ_COPY_IMPL_CP_ASYNC ? 80 : 0;
}

absl::StatusOr<RowSpec> ParseRow(absl::string_view name, int device_cc) {
  RowSpec r;
  r.name = std::string(name);
  absl::string_view impl = name, target;
  const size_t at = name.find('@');
  if (at != absl::string_view::npos) {
    impl = name.substr(0, at);
    target = name.substr(at + 1);
  }
  if (impl == "tma") {
    r.impl = FJ_COPY_IMPL_TMA;
  } else if (impl == "cp_async") {
    r.impl = FJ_COPY_IMPL_CP_ASYNC;
  } else if (impl == "sync") {
    r.impl = FJ_COPY_IMPL_SYNC;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown implementation '", impl, "' in '", name,
        "': use tma, cp_async or sync, optionally @compute_XX or @sm_XX"));
  }
  r.target_cc = device_cc;
  if (!target.empty()) {
    absl::string_view digits = target;
    if (absl::ConsumePrefix(&digits, "compute_") ||
        absl::ConsumePrefix(&digits, "sm_")) {
      std::string d(digits);
      while (!d.empty() && !absl::ascii_isdigit(static_cast<unsigned char>(d.back()))) {
        d.pop_back();  // "90a", "100f"
      }
      if (!absl::SimpleAtoi(d, &r.target_cc)) r.target_cc = -1;
    } else {
      r.target_cc = -1;
    }
    if (r.target_cc <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad target '", target, "' in '", name, "': use compute_XX or sm_XX"));
    }
    r.target = std::string(target);
    if (r.target_cc > device_cc) {
      return absl::FailedPreconditionError(absl::StrCat(
          "'", name, "': target ", target, " is newer than the device (cc ",
          device_cc / 10, ".", device_cc % 10, ")"));
    }
  }
  if (ImplMinCc(r.impl) > r.target_cc) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", name, "': ", impl, " needs compute capability ",
        ImplMinCc(r.impl) / 10, ".", ImplMinCc(r.impl) % 10, " or newer; ",
        target.empty() ? "the device is " : "the target is ", r.target_cc / 10,
        ".", r.target_cc % 10));
  }
  return r;
}

std::vector<std::string> DefaultRows(int cc) {
  std::vector<std::string> rows;
  if (cc >= 90) rows.push_back("tma");
  if (cc >= 80) rows.push_back("cp_async");
  rows.push_back("sync");
  if (cc >= 90) rows.push_back("cp_async@compute_80");
  if (cc >= 80) rows.push_back("sync@compute_75");
  return rows;
}

// ---------------------------------------------------------------------------
// Variants: the unit of case generation.

enum class Kind { kBarrier, kSpanLoad, kSpanStore, kGroups, kTileLoad,
                  kTileStore, kPipeline };
enum class Done { kAny, kBarrier, kGroup };
constexpr int kOobPromise = 1 << fj::oob_promise_in_bounds;
constexpr int kOobZeros = 1 << fj::oob_zeros;
constexpr int kOobNan = 1 << fj::oob_nan;

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

const std::vector<Variant>& Variants() {
  static const auto* v = new std::vector<Variant>{
      // barrier: init/arrive/wait/test/parity; copies completing on one.
      {"barrier", "barrier", Kind::kBarrier, 12},
      {"span_load.barrier", "barrier", Kind::kSpanLoad, 8, Done::kBarrier},
      {"tile_load.barrier", "barrier", Kind::kTileLoad, 10, Done::kBarrier},
      // group_wait: the ring of fj_ct_groups, loads completed by groups.
      {"groups", "group_wait", Kind::kGroups, 12},
      {"span_load.group", "group_wait", Kind::kSpanLoad, 8, Done::kGroup},
      {"tile_load.group", "group_wait", Kind::kTileLoad, 10, Done::kGroup},
      // contiguous copies, every size and alignment.
      {"span_load", "copy_g2s", Kind::kSpanLoad, 16},
      {"span_store", "copy_s2g", Kind::kSpanStore, 16},
      // per-copy predicates, skip and zero.
      {"span_load.pred", "predicate", Kind::kSpanLoad, 8, Done::kAny, true},
      {"span_store.pred", "predicate", Kind::kSpanStore, 8, Done::kAny, true},
      {"tile_load.pred", "predicate", Kind::kTileLoad, 10, Done::kAny, true,
       false, false, kOobPromise | kOobZeros | kOobNan},
      {"tile_store.pred", "predicate", Kind::kTileStore, 10, Done::kAny, true},
      // tiles: every dtype at every rank, loads and clipped stores.
      {"tile_load", "tile_copy", Kind::kTileLoad, 65, Done::kAny, false, false,
       false, kOobPromise | kOobZeros, false, true},
      {"tile_store", "tile_copy", Kind::kTileStore, 65, Done::kAny, false,
       false, false, kOobPromise | kOobZeros, false, true},
      // out-of-bounds fill on ragged tiles.
      {"tile_load.oob_zeros", "oob_zeros", Kind::kTileLoad, 20, Done::kAny,
       false, false, false, kOobZeros},
      {"pipeline.oob_zeros", "oob_zeros", Kind::kPipeline, 5, Done::kAny,
       false, false, false, kOobZeros},
      {"tile_load.oob_nan", "oob_nan", Kind::kTileLoad, 30, Done::kAny, false,
       false, false, kOobNan, true, true},
      {"pipeline.oob_nan", "oob_nan", Kind::kPipeline, 5, Done::kAny, false,
       false, false, kOobNan, true},
      // cluster collective copies (clusters of 1, 2 and 4 where possible).
      {"span_load.multicast", "multicast", Kind::kSpanLoad, 9, Done::kBarrier,
       false, true},
      {"tile_load.multicast", "multicast", Kind::kTileLoad, 15, Done::kBarrier,
       true, true, false, kOobPromise | kOobZeros | kOobNan},
      // L2 prefetch of spans and tiles, then the copy.
      {"span_load.prefetch", "l2_prefetch", Kind::kSpanLoad, 8, Done::kAny,
       false, false, true},
      {"tile_load.prefetch", "l2_prefetch", Kind::kTileLoad, 10, Done::kAny,
       false, false, true, kOobPromise | kOobZeros | kOobNan},
      // 3-stage barrier ring with per-tile predicates.
      {"pipeline", "pipeline", Kind::kPipeline, 15, Done::kBarrier, true,
       false, false, kOobPromise | kOobZeros | kOobNan},
  };
  return *v;
}

// ---------------------------------------------------------------------------
// Dtypes.

const int kAllDtypes[] = {
    fj::dtype_f32,  fj::dtype_f16, fj::dtype_bf16, fj::dtype_f8e4m3,
    fj::dtype_f8e5m2, fj::dtype_i8, fj::dtype_u8,  fj::dtype_i32,
    fj::dtype_u32,  fj::dtype_f64, fj::dtype_i64,  fj::dtype_i16,
    fj::dtype_u16};
const int kFloatDtypes[] = {fj::dtype_f32,    fj::dtype_f16,
                            fj::dtype_bf16,   fj::dtype_f8e4m3,
                            fj::dtype_f8e5m2, fj::dtype_f64};

fj_dl_dtype DlDtype(int dtype) {
  fj_dl_dtype d{0, 8, 1};
  switch (dtype) {
    case fj::dtype_f32: d = {2, 32, 1}; break;
    case fj::dtype_f16: d = {2, 16, 1}; break;
    case fj::dtype_bf16: d = {4, 16, 1}; break;
    case fj::dtype_f8e4m3: d = {FJ_DL_FLOAT8_E4M3, 8, 1}; break;
    case fj::dtype_f8e5m2: d = {FJ_DL_FLOAT8_E5M2, 8, 1}; break;
    case fj::dtype_i8: d = {0, 8, 1}; break;
    case fj::dtype_u8: d = {1, 8, 1}; break;
    case fj::dtype_i32: d = {0, 32, 1}; break;
    case fj::dtype_u32: d = {1, 32, 1}; break;
    case fj::dtype_f64: d = {2, 64, 1}; break;
    case fj::dtype_i64: d = {0, 64, 1}; break;
    case fj::dtype_i16: d = {0, 16, 1}; break;
    case fj::dtype_u16: d = {1, 16, 1}; break;
  }
  return d;
}

const char* OobName(int oob) {
  return oob == fj::oob_zeros ? "zeros" : oob == fj::oob_nan ? "nan" : "promise_in_bounds";
}

// Float data must hold no NaN, so a NaN in the output can only be the fill:
// clearing bit 6 of the top byte clears the exponent's top bit for every
// float dtype here.
void ClearNans(int dtype, int eb, uint8_t* p, size_t elems) {
  if (!DtypeIsFloat(dtype)) return;
  for (size_t i = 0; i < elems; ++i) {
    uint8_t* e = p + i * eb;
    if (IsNan(dtype, e)) e[eb - 1] &= 0xBF;
  }
}

std::string Hex(const uint8_t* p, int n) {
  std::string s = "0x";
  for (int i = n - 1; i >= 0; --i) absl::StrAppendFormat(&s, "%02x", p[i]);
  return s;
}

// ---------------------------------------------------------------------------
// Random tensors.

struct GenTensor {
  fj::tensor_param p{};  // the kernel's view, data = host memory
  std::vector<uint8_t> host;
  int64_t dl_shape[FJ_TP_MAX_RANK] = {};
  int64_t dl_strides[FJ_TP_MAX_RANK] = {};
  bool pass_strides = true;
  uint64_t shift = 0;       // bytes past the arena start (alignment)
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

size_t BoxBytes(const fj::tensor_param& p) { return BoxElems(p) * p.elem_bytes; }

// A random tensor of `rank` and `dtype`. With `in_bounds` every dimension
// is at least its box (promise_in_bounds tiles fit). About 70% are shaped
// so TMA can describe them; the rest break one or more of TMA's rules
// (inner stride, row stride not a multiple of 16 bytes, base not 16-byte
// aligned, inner box not a multiple of 16 bytes, box over 256).
GenTensor MakeTensor(Rng& rng, int rank, int dtype, int oob, bool in_bounds) {
  GenTensor g;
  fj::tensor_param& p = g.p;
  std::memset(&p, 0, sizeof(p));
  const int eb = DtypeBytes(dtype);
  const int unit = 16 / eb;  // elements per 16 bytes
  p.rank = rank;
  p.dtype = dtype;
  p.elem_bytes = eb;
  p.oob = oob;
  const bool friendly = rng.Chance(0.7);
  bool inner_stride = false, row_pad = false, misaligned = false,
       odd_box = false, big_box = false;
  if (!friendly) {
    do {
      inner_stride = rng.Chance(0.35);
      row_pad = rank > 1 && rng.Chance(0.4);
      misaligned = rng.Chance(0.35);
      odd_box = rng.Chance(0.4);
      big_box = rank <= 2 && eb <= 2 && rng.Chance(0.2);
    } while (!(inner_stride || row_pad || misaligned || odd_box || big_box));
  }
  // Box, dimension 0 innermost.
  static constexpr int kOuterMax[6] = {0, 1, 16, 8, 4, 3};
  if (big_box) {
    p.box[0] = static_cast<int>(rng.Int(257, 400));
  } else if (odd_box) {
    do {
      p.box[0] = static_cast<int>(rng.Int(1, 40));
    } while (p.box[0] % unit == 0);
  } else {
    p.box[0] = unit * static_cast<int>(rng.Int(1, rank <= 2 ? 16 : 4));
  }
  for (int d = 1; d < rank; ++d) {
    p.box[d] = static_cast<int>(rng.Int(1, kOuterMax[rank]));
  }
  while (BoxBytes(p) > kBoxBudget) {
    int d = 1;
    for (int k = 2; k < rank; ++k) {
      if (p.box[k] > p.box[d]) d = k;
    }
    if (rank > 1 && p.box[d] > 1) {
      --p.box[d];
    } else {
      p.box[0] = std::max(1, p.box[0] / 2);
    }
  }
  // Shape: ragged (not a multiple of the box) most of the time.
  for (int d = 0; d < rank; ++d) {
    const int64_t b = p.box[d];
    int64_t s = in_bounds ? b + rng.Int(0, 2 * b + 3) : rng.Int(1, 3 * b + 4);
    if (s % b == 0 && rng.Chance(0.8)) ++s;
    p.shape[d] = s;
  }
  auto total = [&] {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= p.shape[d];
    return n;
  };
  while (total() > kMaxTensorElems) {
    // Shrink the largest dimension that can still shrink (box elements are
    // at most kBoxBudget < kMaxTensorElems, so one always can).
    int d = -1;
    for (int k = 0; k < rank; ++k) {
      const int64_t floor = in_bounds ? p.box[k] : 1;
      if (p.shape[k] > floor && (d < 0 || p.shape[k] > p.shape[d])) d = k;
    }
    if (d < 0) break;
    const int64_t floor = in_bounds ? p.box[d] : 1;
    p.shape[d] = std::max<int64_t>(floor, p.shape[d] * 3 / 4);
  }
  // Strides in elements.
  p.stride[0] = inner_stride ? rng.Int(2, 3) : 1;
  bool compact = p.stride[0] == 1;
  for (int d = 1; d < rank; ++d) {
    const int64_t dense = p.stride[d - 1] * p.shape[d - 1];
    int64_t s;
    if (row_pad) {
      s = dense + rng.Int(1, 5);
      if (s % unit == 0) ++s;  // bytes not a multiple of 16
    } else {
      s = (dense + unit - 1) / unit * unit;
      if (rng.Chance(0.3)) s += unit * rng.Int(1, 3);
    }
    if (s != dense) compact = false;
    p.stride[d] = s;
  }
  g.pass_strides = !compact || rng.Chance(0.5);
  if (misaligned) {
    g.shift = static_cast<uint64_t>(eb) * rng.Int(1, std::max(1, 15 / eb));
    if (g.shift % 16 == 0) g.shift += eb;
  }
  g.split_offset = rng.Chance(0.3);
  int64_t span = 1;
  for (int d = 0; d < rank; ++d) span += (p.shape[d] - 1) * p.stride[d];
  g.host.resize(static_cast<size_t>(span) * eb);
  rng.Fill(g.host.data(), g.host.size());
  ClearNans(dtype, eb, g.host.data(), static_cast<size_t>(span));
  for (int i = 0; i < rank; ++i) {
    g.dl_shape[i] = p.shape[rank - 1 - i];
    g.dl_strides[i] = p.stride[rank - 1 - i];
  }
  return g;
}

// Tile start coordinates (kCaseInts ints). In bounds: inside the tensor.
// Ragged: straddling an edge, inside, or now and then entirely outside.
void MakeCoords(Rng& rng, const fj::tensor_param& p, bool in_bounds,
                int32_t* c) {
  for (int d = 0; d < kCaseInts; ++d) c[d] = 0;
  const bool outside = !in_bounds && rng.Chance(0.1);
  const int far_dim = static_cast<int>(rng.Int(0, p.rank - 1));
  for (int d = 0; d < p.rank; ++d) {
    const int64_t b = p.box[d], s = p.shape[d];
    int64_t v;
    if (in_bounds) {
      v = rng.Int(0, s - b);
    } else if (outside && d == far_dim) {
      v = rng.Chance(0.5) ? -b - rng.Int(0, 3) : s + rng.Int(0, 3);
    } else {
      v = rng.Int(-b + 1, s - 1);
    }
    c[d] = static_cast<int32_t>(v);
  }
}

bool TileInBounds(const fj::tensor_param& p, const int32_t* c) {
  for (int d = 0; d < p.rank; ++d) {
    if (c[d] < 0 || c[d] + p.box[d] > p.shape[d]) return false;
  }
  return true;
}

// "[a, b, c]" of a param-order array, printed outermost-first.
template <class T>
std::string Outer(const T* v, int rank) {
  std::vector<std::string> parts;
  for (int i = rank - 1; i >= 0; --i) parts.push_back(absl::StrCat(v[i]));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// ---------------------------------------------------------------------------
// Watchdog: a hung barrier or group wait never returns from the stream
// synchronisation; say which case it was.

class Watchdog {
 public:
  Watchdog() : thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Enter(std::string label) {
    std::lock_guard<std::mutex> l(mu_);
    label_ = std::move(label);
    since_ = Clock::now();
    active_ = true;
    warned_ = 0;
  }
  void Leave() {
    std::lock_guard<std::mutex> l(mu_);
    active_ = false;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      cv_.wait_for(l, std::chrono::seconds(1));
      if (stop_ || !active_) continue;
      const double s = std::chrono::duration<double>(Clock::now() - since_).count();
      if (s >= 15.0 * (warned_ + 1)) {
        ++warned_;
        std::fprintf(stderr,
                     "fleetjit selftest: still waiting after %.0f s for %s "
                     "(a barrier or group wait that never completes is a "
                     "copy-layer bug)\n",
                     s, label_.c_str());
        std::fflush(stderr);
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, active_ = false;
  int warned_ = 0;
  std::string label_;
  Clock::time_point since_;
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// One row's module and kernels.

struct Row {
  RowSpec spec;
  bool clusters = false;  // cluster launches reach the kernel's cluster code
  fj_module* module = nullptr;
  std::string built_for;  // module target
  std::string build_note;
  std::string build_error;
  std::map<std::string, fj_kernel*> kernels;
  std::map<std::string, int> max_threads;
};

// Failures of one cell.
struct Tally {
  int cases = 0, failures = 0, launches = 0, maps = 0, fallbacks = 0;
  std::vector<std::string> samples;
  void Fail(int n, std::string what) {
    failures += n;
    if (static_cast<int>(samples.size()) < kMaxSamples) samples.push_back(std::move(what));
  }
};

// ---------------------------------------------------------------------------

class Matrix {
 public:
  Matrix(fj_runtime* rt, int device, uint64_t seed, int scale)
      : rt_(rt), device_(device), seed_(seed), scale_(scale) {}
  ~Matrix() {
    if (stream_ != nullptr) fj_status_free(fj_stream_synchronize(stream_));
    for (uint64_t a : {in_, out_, aux_}) {
      if (a != 0) fj_status_free(fj_mem_free(rt_, a));
    }
    if (stream_ != nullptr) fj_status_free(fj_stream_destroy(stream_));
    for (auto& r : rows_) fj_status_free(fj_module_destroy(r->module));
  }

  absl::Status Init(const fj_device_info& info) {
    info_ = info;
    FJ_RETURN_IF_ERROR(Fj(fj_stream_create(rt_, device_, &stream_), "creating a stream"), "");
    FJ_RETURN_IF_ERROR(Fj(fj_mem_alloc(rt_, device_, kArenaBytes, &in_), "allocating"), "");
    FJ_RETURN_IF_ERROR(Fj(fj_mem_alloc(rt_, device_, kArenaBytes, &out_), "allocating"), "");
    FJ_RETURN_IF_ERROR(Fj(fj_mem_alloc(rt_, device_, kAuxBytes, &aux_), "allocating"), "");
    return absl::OkStatus();
  }

  void AddRow(RowSpec spec) {
    auto r = std::make_unique<Row>();
    r->spec = std::move(spec);
    r->clusters = info_.cluster_launch != 0 && r->spec.target_cc >= 90;
    rows_.push_back(std::move(r));
  }
  std::vector<std::unique_ptr<Row>>& rows() { return rows_; }

  // Builds every row's module in parallel (NVRTC, then the driver's load
  // and, for PTX rows, its JIT).
  void BuildAll(const std::function<void(const std::string&)>& log) {
    const auto* file = jit::FindEmbeddedKernel(kKernelFile);
    if (file == nullptr) {
      for (auto& r : rows_) {
        r->build_error = absl::StrCat(kKernelFile, " is not embedded in this build");
      }
      return;
    }
    const std::string source(file->content);
    std::vector<std::thread> threads;
    for (auto& r : rows_) {
      Row* row = r.get();
      threads.emplace_back([this, row, &source] { Build(*row, source); });
    }
    for (auto& t : threads) t.join();
    if (log) {
      for (auto& r : rows_) {
        log(r->build_error.empty()
                ? absl::StrFormat("  %-22s %s", r->spec.name, r->build_note)
                : absl::StrFormat("  %-22s BUILD FAILED: %s", r->spec.name,
                                  r->build_error));
      }
    }
  }

  // Runs `launches` launches of variant `v` on `row` into `t`. A non-OK
  // status means the device is unusable (poisoned by a fault).
  absl::Status RunVariant(Row& row, const Variant& v, const std::string& feature,
                          Tally& t) {
    const int n = v.launches * scale_;
    for (int i = 0; i < n; ++i) {
      Rng rng(Mix(seed_ ^ Mix(HashName(v.name) + static_cast<uint64_t>(i))));
      Ctx c{row, v, feature, i, rng, t};
      absl::Status s;
      switch (v.kind) {
        case Kind::kBarrier: s = Barrier(c); break;
        case Kind::kSpanLoad: s = SpanLoad(c); break;
        case Kind::kSpanStore: s = SpanStore(c); break;
        case Kind::kGroups: s = Groups(c); break;
        case Kind::kTileLoad: s = TileLoad(c); break;
        case Kind::kTileStore: s = TileStore(c); break;
        case Kind::kPipeline: s = Pipeline(c); break;
      }
      if (s.ok()) continue;
      if (absl::StartsWith(s.message(), "the device stopped working")) return s;
      // A selftest bug or a failed copy to/from the device: a failed case.
      ++t.cases;
      t.Fail(1, absl::StrCat(Repro(c), " ", s.message()));
      absl::Status healthy = Healthy(c, s);
      if (!healthy.ok()) return healthy;
    }
    return absl::OkStatus();
  }

 private:
  struct Ctx {
    Row& row;
    const Variant& v;
    const std::string& feature;
    int index;
    Rng& rng;
    Tally& t;
  };

  void Build(Row& row, const std::string& source) {
    const auto t0 = Clock::now();
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = Str(source);
    const std::string name = kKernelFile;
    o.name = Str(name);
    o.target = Str(row.spec.target);
    o.device = device_;
    o.copy_impl = row.spec.impl;
    o.output = FJ_OUTPUT_AUTO;
    absl::Status s = Fj(fj_module_build(rt_, &o, &row.module),
                        absl::StrCat("building ", kKernelFile, " for ", row.spec.name));
    if (!s.ok()) {
      row.module = nullptr;
      row.build_error = std::string(s.message());
      return;
    }
    fj_module_info mi{};
    mi.struct_size = sizeof(mi);
    s = Fj(fj_module_info_get(row.module, &mi), "module info");
    const double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    // Loading the first kernel loads the module (and JITs PTX) on the device.
    const auto t1 = Clock::now();
    auto k = Kernel(row, "fj_ct_barrier");
    if (!k.ok()) {
      row.build_error = std::string(k.status().message());
      return;
    }
    const double load_s = std::chrono::duration<double>(Clock::now() - t1).count();
    if (s.ok()) {
      row.built_for = mi.target;
      if (mi.copy_impl != row.spec.impl) {
        row.build_error = absl::StrCat("the module was built with copy implementation ",
                                       fj_copy_impl_name(mi.copy_impl), ", not ",
                                       fj_copy_impl_name(row.spec.impl));
        return;
      }
      row.build_note = absl::StrFormat(
          "%s, %s, %s in %.2f s, loaded in %.2f s", mi.target,
          mi.output == FJ_OUTPUT_PTX ? "PTX (driver JIT)" : "cubin",
          mi.cache_result == FJ_CACHE_COMPILED     ? "compiled"
          : mi.cache_result == FJ_CACHE_DISK_HIT ? "disk cache hit"
                                                 : "memory cache hit",
          build_s, load_s);
    }
  }

  absl::StatusOr<fj_kernel*> Kernel(Row& row, const std::string& name) {
    {
      std::lock_guard<std::mutex> l(kernels_mu_);
      auto it = row.kernels.find(name);
      if (it != row.kernels.end()) return it->second;
    }
    if (row.module == nullptr) return absl::FailedPreconditionError("no module");
    fj_kernel* k = nullptr;
    FJ_RETURN_IF_ERROR(Fj(fj_module_get_kernel(row.module, Str(name), device_, &k),
                                absl::StrCat("loading kernel ", name)), "");
    fj_kernel_info ki{};
    ki.struct_size = sizeof(ki);
    FJ_RETURN_IF_ERROR(Fj(fj_kernel_info_get(k, &ki), "kernel info"), "");
    std::lock_guard<std::mutex> l(kernels_mu_);
    row.kernels[name] = k;
    row.max_threads[name] = ki.max_threads_per_block > 0 ? ki.max_threads_per_block : 1024;
    return k;
  }

  // A block size: any 1-D size works; favour the common ones.
  int PickThreads(Rng& rng, Row& row, const std::string& kernel) {
    static constexpr int kSizes[] = {1, 32, 33, 64, 96, 128, 128, 160, 256, 256, 384, 512};
    int t = kSizes[rng.Int(0, sizeof(kSizes) / sizeof(kSizes[0]) - 1)];
    if (Kernel(row, kernel).ok()) {  // a failure here shows at the launch
      std::lock_guard<std::mutex> l(kernels_mu_);
      t = std::min(t, row.max_threads[kernel]);
    }
    return std::max(t, 1);
  }

  std::string Label(const Ctx& c) const {
    return absl::StrCat(c.feature, "/", c.row.spec.name, " ", c.v.name,
                        " case ", c.index, " (seed ", seed_, ")");
  }
  std::string Repro(const Ctx& c) const {
    return absl::StrCat("[impl ", c.row.spec.name, ", feature ", c.feature,
                        ", variant ", c.v.name, ", seed ", seed_, ", case ",
                        c.index, "; rerun: fleetjit selftest --seed ", seed_,
                        " --impl ", c.row.spec.name, " --feature ", c.feature,
                        " --variant ", c.v.name, "]");
  }

  absl::Status Upload(uint64_t dst, const void* src, size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    return Fj(fj_memcpy_htod(rt_, dst, src, bytes, stream_), "copying to the device");
  }
  absl::Status Download(void* dst, uint64_t src, size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    return Fj(fj_memcpy_dtoh(rt_, dst, src, bytes, stream_), "copying to the host");
  }
  absl::Status Poison(uint64_t dst, uint8_t value, size_t bytes) {
    if (bytes == 0) return absl::OkStatus();
    return Fj(fj_memset_d8(rt_, dst, value, bytes, stream_), "poisoning");
  }

  struct Shape {
    uint32_t grid = 1, block = 1, smem = 0, cluster = 0;
  };

  // Launches, downloads (`after` queues the copies back) and synchronises.
  // A launch or run error is a failure of all `cases` of the launch; false
  // is returned and the caller skips the comparison. A non-OK status means
  // the device no longer works.
  absl::StatusOr<bool> LaunchAndWait(Ctx& c, const std::string& kernel,
                                     const Shape& s, std::vector<fj_arg>& args,
                                     int cases, const std::string& what,
                                     const std::function<absl::Status()>& after) {
    ++c.t.launches;
    c.t.cases += cases;
    auto k = Kernel(c.row, kernel);
    absl::Status st = k.status();
    if (st.ok()) {
      fj_launch_config cfg{};
      cfg.struct_size = sizeof(cfg);
      cfg.grid[0] = s.grid;
      cfg.block[0] = s.block;
      cfg.shared_bytes = s.smem;
      if (s.cluster > 1) cfg.cluster[0] = s.cluster;
      cfg.stream = stream_;
      st = Fj(fj_launch(*k, &cfg, args.data(), args.size()),
              absl::StrCat("launching ", kernel));
    }
    if (st.ok() && after) st = after();
    if (st.ok()) {
      watchdog_.Enter(absl::StrCat(Label(c), ", kernel ", kernel));
      st = Fj(fj_stream_synchronize(stream_), absl::StrCat("running ", kernel));
      watchdog_.Leave();
    }
    if (st.ok()) return true;
    c.t.Fail(cases, absl::StrCat(Repro(c), " ", what, ": ", st.message()));
    absl::Status healthy = Healthy(c, st);
    if (!healthy.ok()) return healthy;
    return false;
  }

  // Whether the device still works after `error` (a fault poisons it).
  absl::Status Healthy(const Ctx& c, const absl::Status& error) {
    fj_status_free(fj_stream_synchronize(stream_));
    absl::Status probe = Poison(aux_, 0, 16);
    if (probe.ok()) probe = Fj(fj_stream_synchronize(stream_), "synchronising");
    if (probe.ok()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "the device stopped working after ", Label(c), ": ", error.message(),
        " (then: ", probe.message(), ")"));
  }

  // For the tile-load kernels: fills the tensor argument for `g` in the
  // input arena, uploads its elements, the coordinates and the predicates,
  // and poisons `out_bytes` of the output.
  absl::Status StageTileLoad(Ctx& c, const GenTensor& g, const std::vector<int32_t>& coords,
                             const std::vector<uint8_t>& preds, uint8_t poison,
                             size_t out_bytes, fj_tensor* tensor, fj_tensor_arg* targ) {
    g.Fill(in_, device_, tensor, targ);
    CountTma(c, *targ);
    FJ_RETURN_IF_ERROR(Upload(in_ + g.shift, g.host.data(), g.host.size()), "");
    FJ_RETURN_IF_ERROR(Upload(aux_, coords.data(), coords.size() * 4), "");
    FJ_RETURN_IF_ERROR(Upload(aux_ + kAuxPredsOffset, preds.data(), preds.size()), "");
    return Poison(out_, poison, out_bytes);
  }

  // Counts tensor maps vs fallbacks on tma rows (the runtime's own rules).
  void CountTma(Ctx& c, const fj_tensor_arg& a) {
    if (c.row.spec.impl != FJ_COPY_IMPL_TMA) return;
    auto d = DescribeTensor(&a, 0);
    if (d.ok() && TmaRejection(*d).empty()) {
      ++c.t.maps;
    } else {
      ++c.t.fallbacks;
    }
  }
  std::string TensorText(const Ctx& c, const GenTensor& g, const fj_tensor_arg& a,
                         int threads) const {
    std::string tma = "n/a";
    if (c.row.spec.impl == FJ_COPY_IMPL_TMA) {
      auto d = DescribeTensor(&a, 0);
      if (!d.ok()) {
        tma = std::string(d.status().message());
      } else {
        const std::string why = TmaRejection(*d);
        tma = why.empty() ? "yes" : absl::StrCat("no (", why, ")");
      }
    }
    return absl::StrCat(DtypeName(g.p.dtype), " rank ", g.p.rank, " shape ",
                        Outer(g.p.shape, g.p.rank), " strides ",
                        Outer(g.p.stride, g.p.rank), g.pass_strides ? "" : " (passed as NULL)",
                        " box ", Outer(g.p.box, g.p.rank), " (outermost-first), base +",
                        g.shift, " B", g.split_offset ? " (byte_offset)" : "",
                        ", oob ", OobName(g.p.oob), ", TMA map: ", tma, ", ",
                        threads, " threads/block");
  }

  // Where element `e` of a box lands: box index and global coordinates.
  static std::string ElementText(const fj::tensor_param& p, const int32_t* coords,
                                 size_t e) {
    int64_t idx[FJ_TP_MAX_RANK] = {}, g[FJ_TP_MAX_RANK] = {};
    bool in = true;
    size_t rest = e;
    for (int d = 0; d < p.rank; ++d) {
      idx[d] = static_cast<int64_t>(rest % p.box[d]);
      rest /= p.box[d];
      g[d] = coords[d] + idx[d];
      in = in && g[d] >= 0 && g[d] < p.shape[d];
    }
    return absl::StrCat("element ", e, " = box index ", Outer(idx, p.rank), ", tensor index ",
                        Outer(g, p.rank), in ? " (in bounds)" : " (out of bounds)");
  }

  // -------------------------------------------------------------------- kernels
  absl::Status Barrier(Ctx& c) {
    Rng& rng = c.rng;
    const int threads = PickThreads(rng, c.row, "fj_ct_barrier") ;
    const int phases = static_cast<int>(rng.Int(0, 9));
    const int blocks = static_cast<int>(rng.Int(1, 6));
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    const size_t words = static_cast<size_t>(blocks) * (phases + 1) * threads;
    std::vector<uint32_t> got(words), want(words);
    RefBarrier(blocks, threads, phases, want.data());
    FJ_RETURN_IF_ERROR(Poison(out_, poison, words * 4), "");
    std::vector<fj_arg> args = {PtrArg(out_), I32Arg(phases)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = BarrierSmemBytes(threads);
    const std::string what = absl::StrFormat("fj_ct_barrier <<<%d, %d, %u>>> phases %d", blocks,
                                             threads, s.smem, phases);
    auto ok = LaunchAndWait(c, "fj_ct_barrier", s, args, blocks, what,
                            [&] { return Download(got.data(), out_, words * 4); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    const size_t per = static_cast<size_t>(phases + 1) * threads;
    int bad = 0;
    std::string first;
    for (int b = 0; b < blocks; ++b) {
      ptrdiff_t f = -1;
      const size_t n = CountMismatches(fj::dtype_u32, 4, want.data() + b * per,
                                       got.data() + b * per, per, &f);
      if (n == 0) continue;
      ++bad;
      if (first.empty()) {
        const size_t k = static_cast<size_t>(f) / threads, th = static_cast<size_t>(f) % threads;
        first = absl::StrFormat(
            "block %d: %zu of %zu words differ; first: %s of thread %zu: expected 0x%08x got "
            "0x%08x",
            b, n, per,
            k < static_cast<size_t>(phases) ? absl::StrCat("phase ", k, " word")
                                            : std::string("flags word (1 = test(1) fresh, 2 = "
                                                          "!test(0) before arrival, 4 = test "
                                                          "of the last phase)"),
            th, want[b * per + f], got[b * per + f]);
      }
    }
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " of ", blocks,
                                           " blocks wrong; ", first));
    return absl::OkStatus();
  }

  // Span cases for `groups` case groups of `cpb` cases: destinations of a
  // group in disjoint slots of [0, kSpanCap); sources inside [0, src_size).
  // `dst_cap` bounds the destination, `src_cap` the source offsets.
  static void MakeSpans(Rng& rng, int groups, int cpb, int64_t src_cap, bool preds,
                        int mode_base, std::vector<SpanCase>& cases) {
    const int slot = kSpanCap / cpb;
    for (int gi = 0; gi < groups; ++gi) {
      std::vector<SpanCase> group;
      for (int j = 0; j < cpb; ++j) {
        const int r = static_cast<int>(rng.Int(0, 9));
        int bytes = r < 2   ? static_cast<int>(rng.Int(0, 16))
                    : r < 6 ? static_cast<int>(rng.Int(17, std::min(512, slot)))
                            : static_cast<int>(rng.Int(1, slot));
        bytes = std::min(bytes, slot);
        SpanCase sc{};
        sc.dst_off = j * slot + static_cast<int>(rng.Int(0, slot - bytes));
        // Source offset: often with the destination's alignment mod 16
        // (bulk/vector paths), else mod 8 or 4, else anything.
        const int64_t any = rng.Int(0, src_cap - bytes);
        const int rel = static_cast<int>(rng.Int(0, 3));
        const int m = rel == 0 ? 16 : rel == 1 ? 8 : rel == 2 ? 4 : 1;
        int64_t so = any - ((any - sc.dst_off) % m + m) % m;
        if (so < 0) so += m;
        if (so < 0 || so + bytes > src_cap) so = any;  // no such offset fits
        sc.src_off = static_cast<int32_t>(so);
        sc.bytes = bytes;
        sc.pred = preds ? (rng.Chance(0.5) ? 1 : 0) : 1;
        sc.mode = preds ? (mode_base + j) % 2 : static_cast<int32_t>(rng.Int(0, 1));
        group.push_back(sc);
      }
      std::shuffle(group.begin(), group.end(), rng);
      cases.insert(cases.end(), group.begin(), group.end());
    }
  }

  static absl::Status CheckSpans(const std::vector<SpanCase>& cases, int cpb,
                                 int64_t src_cap, bool load) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const SpanCase& a = cases[i];
      if (a.bytes < 0 || a.dst_off < 0 || a.src_off < 0 || a.dst_off + a.bytes > kSpanCap ||
          a.src_off + a.bytes > (load ? src_cap : kSpanCap)) {
        return absl::InternalError(absl::StrCat("selftest bug: span case ", i, " out of range"));
      }
      const size_t g0 = i / cpb * cpb;
      for (size_t j = g0; j < i; ++j) {
        const SpanCase& b = cases[j];
        if (a.dst_off < b.dst_off + b.bytes && b.dst_off < a.dst_off + a.bytes &&
            a.bytes > 0 && b.bytes > 0) {
          return absl::InternalError(
              absl::StrCat("selftest bug: span destinations ", j, " and ", i, " overlap"));
        }
      }
    }
    return absl::OkStatus();
  }

  // How one block's kSpanCap bytes differ from the reference: the count,
  // the first differing byte, the cases (spans) with a wrong byte (a wrong
  // byte outside every span counts as one more), and the span owning the
  // first byte (-1: none).
  struct SpanDiff {
    size_t bytes = 0;
    int first_byte = -1;
    int bad_cases = 0;
    int first_owner = -1;
  };
  static SpanDiff DiffSpans(const uint8_t* want, const uint8_t* got,
                            const SpanCase* bc, int cpb) {
    SpanDiff d;
    std::vector<bool> case_bad(cpb, false);
    bool stray = false;
    for (int i = 0; i < kSpanCap; ++i) {
      if (want[i] == got[i]) continue;
      ++d.bytes;
      if (d.first_byte < 0) d.first_byte = i;
      bool hit = false;
      for (int j = 0; j < cpb; ++j) {
        if (i >= bc[j].dst_off && i < bc[j].dst_off + bc[j].bytes) {
          case_bad[j] = true;
          hit = true;
          if (i == d.first_byte) d.first_owner = j;
        }
      }
      if (!hit) stray = true;
    }
    d.bad_cases = static_cast<int>(std::count(case_bad.begin(), case_bad.end(), true));
    if (d.bytes > 0 && d.bad_cases == 0 && stray) d.bad_cases = 1;
    return d;
  }

  static std::string SpanText(const SpanCase& s, bool load) {
    return absl::StrFormat("{%s %d, %s %d, %d bytes, pred %d%s}", load ? "src" : "smem",
                           s.src_off, load ? "smem" : "out", s.dst_off, s.bytes, s.pred,
                           load ? (s.mode == kPredZero ? " zero" : " skip") : "");
  }

  absl::Status SpanLoad(Ctx& c) {
    Rng& rng = c.rng;
    const Variant& v = c.v;
    const int cpb = static_cast<int>(rng.Int(1, 6));
    const int groups = static_cast<int>(rng.Int(1, 6));
    static constexpr int kClusters[] = {1, 2, 4};
    const int cs = v.multicast && c.row.clusters ? kClusters[c.index % 3] : 1;
    const int blocks = groups * cs;
    const int64_t src_size = rng.Int(kSpanCap + 64, 64 * 1024);
    int flags = 0;
    if (v.done == Done::kGroup || (v.done == Done::kAny && rng.Chance(0.5))) flags |= kInGroup;
    if (v.prefetch || rng.Chance(0.15)) flags |= kPrefetch;
    if (v.multicast) flags = (flags & ~kInGroup) | kMulticast;
    std::vector<uint8_t> src(static_cast<size_t>(src_size));
    rng.Fill(src.data(), src.size());
    std::vector<SpanCase> cases;
    MakeSpans(rng, groups, cpb, src_size, v.preds, c.index, cases);
    FJ_RETURN_IF_ERROR(CheckSpans(cases, cpb, src_size, true), "");
    const int threads = PickThreads(rng, c.row, "fj_ct_span_load");
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    const size_t out_bytes = static_cast<size_t>(blocks) * kSpanCap;
    std::vector<uint8_t> want(out_bytes), got(out_bytes);
    RefSpanLoad(src.data(), cases.data(), cpb, blocks, cs, want.data());
    FJ_RETURN_IF_ERROR(Upload(in_, src.data(), src.size()), "");
    FJ_RETURN_IF_ERROR(Upload(aux_, cases.data(), cases.size() * sizeof(SpanCase)), "");
    FJ_RETURN_IF_ERROR(Poison(out_, poison, out_bytes), "");
    std::vector<fj_arg> args = {PtrArg(in_), PtrArg(out_), PtrArg(aux_), I32Arg(cpb),
                                I32Arg(flags)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = SpanSmemBytes();
    s.cluster = cs > 1 ? cs : 0;
    const std::string what = absl::StrFormat(
        "fj_ct_span_load <<<%d, %d, %u>>>%s flags %d (%s%s%s), %d cases/block, src %d B", blocks,
        threads, s.smem, cs > 1 ? absl::StrCat(" cluster ", cs) : std::string(), flags,
        flags & kInGroup ? "group" : "barrier", flags & kPrefetch ? "+prefetch" : "",
        flags & kMulticast ? "+multicast" : "", cpb, src_size);
    auto ok = LaunchAndWait(c, "fj_ct_span_load", s, args, groups * cpb, what,
                            [&] { return Download(got.data(), out_, out_bytes); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    int bad = 0;
    std::string first;
    for (int b = 0; b < blocks; ++b) {
      const uint8_t* w = want.data() + static_cast<size_t>(b) * kSpanCap;
      const uint8_t* g = got.data() + static_cast<size_t>(b) * kSpanCap;
      const SpanCase* bc = cases.data() + static_cast<size_t>(b / cs) * cpb;
      const SpanDiff d = DiffSpans(w, g, bc, cpb);
      if (d.bytes == 0) continue;
      bad += d.bad_cases;
      if (first.empty()) {
        const int fb = d.first_byte;
        const std::string owner =
            d.first_owner < 0
                ? std::string("a byte outside every span (must keep its stale value)")
                : absl::StrCat("span ", SpanText(bc[d.first_owner], true), " at byte ",
                               fb - bc[d.first_owner].dst_off);
        first = absl::StrFormat(
            "block %d (cluster rank %d): %zu of %d SMEM bytes differ; first: SMEM byte %d, %s: "
            "expected 0x%02x got 0x%02x (poison 0x%02x, stale 0x%02x)",
            b, b % cs, d.bytes, kSpanCap, fb, owner, w[fb], g[fb], poison, StaleByte(b, fb));
      }
    }
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " spans wrong; ",
                                           first));
    return absl::OkStatus();
  }

  absl::Status SpanStore(Ctx& c) {
    Rng& rng = c.rng;
    const Variant& v = c.v;
    const int cpb = static_cast<int>(rng.Int(1, 6));
    const int blocks = static_cast<int>(rng.Int(1, 8));
    const size_t bytes = static_cast<size_t>(blocks) * kSpanCap;
    std::vector<uint8_t> src(bytes);
    rng.Fill(src.data(), bytes);
    // A store case is (smem_off, out_off, bytes, pred): MakeSpans gives
    // disjoint destinations (out_off) and any source inside the SMEM image.
    std::vector<SpanCase> cases;
    MakeSpans(rng, blocks, cpb, kSpanCap, v.preds, c.index, cases);
    for (auto& sc : cases) sc.mode = 0;
    FJ_RETURN_IF_ERROR(CheckSpans(cases, cpb, kSpanCap, false), "");
    const int threads = PickThreads(rng, c.row, "fj_ct_span_store");
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    std::vector<uint8_t> want(bytes, poison), got(bytes);
    RefSpanStore(src.data(), cases.data(), cpb, blocks, want.data());
    FJ_RETURN_IF_ERROR(Upload(in_, src.data(), bytes), "");
    FJ_RETURN_IF_ERROR(Upload(aux_, cases.data(), cases.size() * sizeof(SpanCase)), "");
    FJ_RETURN_IF_ERROR(Poison(out_, poison, bytes), "");
    std::vector<fj_arg> args = {PtrArg(in_), PtrArg(out_), PtrArg(aux_), I32Arg(cpb)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = SpanSmemBytes();
    const std::string what = absl::StrFormat("fj_ct_span_store <<<%d, %d, %u>>>, %d cases/block",
                                             blocks, threads, s.smem, cpb);
    auto ok = LaunchAndWait(c, "fj_ct_span_store", s, args, blocks * cpb, what,
                            [&] { return Download(got.data(), out_, bytes); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    int bad = 0;
    std::string first;
    for (int b = 0; b < blocks; ++b) {
      const size_t region = static_cast<size_t>(b) * kSpanCap;
      const SpanCase* bc = cases.data() + static_cast<size_t>(b) * cpb;
      const SpanDiff d = DiffSpans(want.data() + region, got.data() + region, bc, cpb);
      if (d.bytes == 0) continue;
      bad += d.bad_cases;
      if (first.empty()) {
        const int fb = d.first_byte;
        const std::string owner =
            d.first_owner < 0
                ? std::string("a byte no store covers (must keep the poison)")
                : absl::StrCat("store ", SpanText(bc[d.first_owner], false), " at byte ",
                               fb - bc[d.first_owner].dst_off);
        first = absl::StrFormat(
            "block %d: %zu of %d output bytes differ; first: out byte %d of the block, %s: "
            "expected 0x%02x got 0x%02x (poison 0x%02x)",
            b, d.bytes, kSpanCap, fb, owner, want[region + fb], got[region + fb], poison);
      }
    }
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " stores wrong; ",
                                           first));
    return absl::OkStatus();
  }

  absl::Status Groups(Ctx& c) {
    Rng& rng = c.rng;
    const int blocks = static_cast<int>(rng.Int(1, 8));
    const int chunks = static_cast<int>(rng.Int(1, 12));
    const int r = static_cast<int>(rng.Int(0, 3));
    const int chunk_bytes = r == 0   ? static_cast<int>(rng.Int(1, 16))
                            : r == 1 ? 16 * static_cast<int>(rng.Int(1, 64))
                                     : static_cast<int>(rng.Int(17, 2048));
    const size_t bytes = static_cast<size_t>(blocks) * chunks * chunk_bytes;
    std::vector<uint8_t> src(bytes), want(bytes), got(bytes);
    rng.Fill(src.data(), bytes);
    RefGroups(src.data(), blocks, chunks, chunk_bytes, want.data());
    const int threads = PickThreads(rng, c.row, "fj_ct_groups");
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    FJ_RETURN_IF_ERROR(Upload(in_, src.data(), bytes), "");
    FJ_RETURN_IF_ERROR(Poison(out_, poison, bytes), "");
    std::vector<fj_arg> args = {PtrArg(in_), PtrArg(out_), I32Arg(chunks), I32Arg(chunk_bytes)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = GroupsSmemBytes(chunk_bytes);
    const std::string what = absl::StrFormat(
        "fj_ct_groups <<<%d, %d, %u>>> %d chunks of %d bytes (4-slot ring, wait_group<2>)",
        blocks, threads, s.smem, chunks, chunk_bytes);
    auto ok = LaunchAndWait(c, "fj_ct_groups", s, args, blocks, what,
                            [&] { return Download(got.data(), out_, bytes); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    const size_t per = static_cast<size_t>(chunks) * chunk_bytes;
    int bad = 0;
    std::string first;
    for (int b = 0; b < blocks; ++b) {
      ptrdiff_t f = -1;
      const size_t n = CountMismatches(fj::dtype_u8, 1, want.data() + b * per,
                                       got.data() + b * per, per, &f);
      if (n == 0) continue;
      ++bad;
      if (first.empty()) {
        first = absl::StrFormat(
            "block %d: %zu of %zu bytes differ; first: chunk %d byte %d: expected 0x%02x got "
            "0x%02x (poison 0x%02x)",
            b, n, per, static_cast<int>(f / chunk_bytes), static_cast<int>(f % chunk_bytes),
            want[b * per + f], got[b * per + f], poison);
      }
    }
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " blocks wrong; ",
                                           first));
    return absl::OkStatus();
  }

  // The (dtype, rank) of launch `i` of a tile variant.
  static std::pair<int, int> PickDtypeRank(Ctx& c) {
    const Variant& v = c.v;
    const int rank = 1 + c.index % 5;
    const int j = c.index / 5;
    const int* list = v.float_only ? kFloatDtypes : kAllDtypes;
    const int n = v.float_only ? 6 : 13;
    if (v.all_dtypes) return {list[j % n], rank};
    // Cycle the element sizes, pick a dtype of that size.
    static constexpr int kSizes[] = {4, 2, 1, 8};
    const int eb = kSizes[j % 4];
    std::vector<int> pool;
    for (int k = 0; k < n; ++k) {
      if (DtypeBytes(list[k]) == eb) pool.push_back(list[k]);
    }
    if (pool.empty()) return {list[c.rng.Int(0, n - 1)], rank};
    return {pool[c.rng.Int(0, static_cast<int64_t>(pool.size()) - 1)], rank};
  }
  static int PickOob(Ctx& c, int dtype) {
    std::vector<int> modes;
    for (int m = 0; m < 3; ++m) {
      if ((c.v.oobs & (1 << m)) == 0) continue;
      if (m == fj::oob_nan && !DtypeIsFloat(dtype)) continue;
      modes.push_back(m);
    }
    if (modes.empty()) return fj::oob_zeros;
    return modes[c.rng.Int(0, static_cast<int64_t>(modes.size()) - 1)];
  }

  // Compares `tiles` boxes; tile k's case is cases[k / per_case].
  int CompareTiles(const fj::tensor_param& p, const uint8_t* want, const uint8_t* got,
                   int tiles, const int32_t* coords, const uint8_t* preds, int per_case,
                   const char* unit, std::string* first) {
    const size_t elems = BoxElems(p), bytes = elems * p.elem_bytes;
    // Any NaN matches any NaN only under NaN fill (the data holds none).
    const int cmp_dtype = p.oob == fj::oob_nan ? p.dtype : fj::dtype_u8;
    int bad = 0;
    for (int k = 0; k < tiles; ++k) {
      ptrdiff_t f = -1;
      const size_t n = CountMismatches(cmp_dtype, p.elem_bytes, want + k * bytes,
                                       got + k * bytes, elems, &f);
      if (n == 0) continue;
      ++bad;
      if (first->empty()) {
        const int ci = k / per_case;
        const int32_t* cc = coords + static_cast<size_t>(ci) * kCaseInts;
        *first = absl::StrCat(
            unit, " ", k, ": tile at ", Outer(cc, p.rank), ", pred ", preds[ci], ", ",
            TileInBounds(p, cc) ? "in bounds" : "ragged", ": ", n, " of ", elems,
            " elements differ; first: ", ElementText(p, cc, static_cast<size_t>(f)),
            ": expected ", Hex(want + k * bytes + f * p.elem_bytes, p.elem_bytes), " got ",
            Hex(got + k * bytes + f * p.elem_bytes, p.elem_bytes));
      }
    }
    return bad;
  }

  absl::Status TileLoad(Ctx& c) {
    Rng& rng = c.rng;
    const Variant& v = c.v;
    const auto [dtype, rank] = PickDtypeRank(c);
    const int oob = PickOob(c, dtype);
    const bool in_bounds = oob == fj::oob_promise_in_bounds;
    GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
    static constexpr int kClusters[] = {1, 2, 4};
    const int cs = v.multicast && c.row.clusters ? kClusters[c.index % 3] : 1;
    const int groups = static_cast<int>(rng.Int(1, 8));
    const int blocks = groups * cs;
    std::vector<int32_t> coords(static_cast<size_t>(groups) * kCaseInts);
    std::vector<uint8_t> preds(groups);
    for (int k = 0; k < groups; ++k) {
      MakeCoords(rng, g.p, in_bounds, coords.data() + k * kCaseInts);
      preds[k] = v.preds ? (rng.Chance(0.5) ? 1 : 0) : 1;
      if (in_bounds && !TileInBounds(g.p, coords.data() + k * kCaseInts)) {
        return absl::InternalError("selftest bug: promise_in_bounds tile out of bounds");
      }
    }
    const int pred_mode = v.preds ? c.index % 2 : static_cast<int>(rng.Int(0, 1));
    int flags = 0;
    if (v.done == Done::kGroup || (v.done == Done::kAny && rng.Chance(0.5))) flags |= kInGroup;
    if (v.prefetch || rng.Chance(0.15)) flags |= kPrefetch;
    if (v.multicast) flags = (flags & ~kInGroup) | kMulticast;
    const std::string kernel =
        absl::StrCat("fj_ct_tile_load_e", g.p.elem_bytes, "_r", rank);
    const int threads = PickThreads(rng, c.row, kernel);
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    const size_t bytes = BoxBytes(g.p);
    const size_t out_bytes = bytes * blocks;
    if (g.host.size() + g.shift > kArenaBytes || out_bytes > kArenaBytes) {
      return absl::InternalError("selftest bug: tensor larger than the arena");
    }
    std::vector<uint8_t> want(out_bytes), got(out_bytes);
    HostTensor ht = g.Host();
    RefTileLoad(ht, coords.data(), preds.data(), pred_mode, blocks, cs, want.data());
    fj_tensor tensor;
    fj_tensor_arg targ;
    FJ_RETURN_IF_ERROR(
        StageTileLoad(c, g, coords, preds, poison, out_bytes, &tensor, &targ), "");
    std::vector<fj_arg> args = {TensorArg(&targ), PtrArg(aux_), PtrArg(aux_ + kAuxPredsOffset),
                                I32Arg(pred_mode), I32Arg(flags), PtrArg(out_)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = TileSmemBytes(g.p);
    s.cluster = cs > 1 ? cs : 0;
    const std::string what = absl::StrCat(
        kernel, " <<<", blocks, ", ", threads, ", ", s.smem, ">>>",
        cs > 1 ? absl::StrCat(" cluster ", cs) : std::string(), " flags ", flags, " (",
        flags & kInGroup ? "group" : "barrier", flags & kPrefetch ? "+prefetch" : "",
        flags & kMulticast ? "+multicast" : "", "), pred_mode ",
        pred_mode == kPredZero ? "zero" : "skip", ", tensor ", TensorText(c, g, targ, threads));
    auto ok = LaunchAndWait(c, kernel, s, args, blocks, what,
                            [&] { return Download(got.data(), out_, out_bytes); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    std::string first;
    const int bad = CompareTiles(g.p, want.data(), got.data(), blocks, coords.data(),
                                 preds.data(), cs, "block", &first);
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " of ", blocks,
                                           " tiles wrong; ", first));
    return absl::OkStatus();
  }

  absl::Status TileStore(Ctx& c) {
    Rng& rng = c.rng;
    const Variant& v = c.v;
    const auto [dtype, rank] = PickDtypeRank(c);
    // Stores are clipped at the bounds whatever the mode; promise only with
    // tiles inside the tensor.
    const bool in_bounds = (v.oobs & kOobPromise) != 0 && rng.Chance(0.25);
    const int oob = in_bounds ? fj::oob_promise_in_bounds : fj::oob_zeros;
    GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
    const fj::tensor_param& p = g.p;
    // Tiles on a grid shifted by `origin` (so they straddle the edges),
    // distinct cells, hence no overlap; ragged grids reach one cell past
    // each end.
    int64_t origin[FJ_TP_MAX_RANK] = {}, lo[FJ_TP_MAX_RANK] = {}, hi[FJ_TP_MAX_RANK] = {};
    int64_t cells = 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t b = p.box[d];
      if (in_bounds) {
        origin[d] = 0;
        lo[d] = 0;
        hi[d] = p.shape[d] / b;
      } else {
        origin[d] = -rng.Int(0, b - 1);
        lo[d] = rng.Chance(0.2) ? -1 : 0;
        hi[d] = (p.shape[d] - origin[d] + b - 1) / b + (rng.Chance(0.2) ? 1 : 0);
      }
      cells *= hi[d] - lo[d];
    }
    const int blocks = static_cast<int>(std::min<int64_t>(rng.Int(1, 8), cells));
    std::set<std::vector<int64_t>> used;
    std::vector<int32_t> coords(static_cast<size_t>(blocks) * kCaseInts, 0);
    std::vector<uint8_t> preds(blocks);
    for (int k = 0; k < blocks; ++k) {
      std::vector<int64_t> cell(rank);
      do {
        for (int d = 0; d < rank; ++d) cell[d] = rng.Int(lo[d], hi[d] - 1);
      } while (!used.insert(cell).second);
      for (int d = 0; d < rank; ++d) {
        coords[k * kCaseInts + d] = static_cast<int32_t>(origin[d] + cell[d] * p.box[d]);
      }
      preds[k] = v.preds ? (rng.Chance(0.5) ? 1 : 0) : 1;
      if (in_bounds && !TileInBounds(p, coords.data() + k * kCaseInts)) {
        return absl::InternalError("selftest bug: promise_in_bounds store tile out of bounds");
      }
    }
    const size_t elems = BoxElems(p), box_bytes = elems * p.elem_bytes;
    std::vector<uint8_t> src(box_bytes * blocks);
    rng.Fill(src.data(), src.size());
    const std::string kernel = absl::StrCat("fj_ct_tile_store_e", p.elem_bytes, "_r", rank);
    const int threads = PickThreads(rng, c.row, kernel);
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    // The tensor lives in `out_`, poisoned; g.host becomes its expected
    // contents. The tiles' source goes in `in_`.
    const size_t span = g.host.size();
    if (span + g.shift > kArenaBytes || src.size() > kArenaBytes) {
      return absl::InternalError("selftest bug: tensor larger than the arena");
    }
    std::fill(g.host.begin(), g.host.end(), poison);
    HostTensor ht = g.Host();
    RefTileStore(ht, coords.data(), preds.data(), blocks, src.data());
    std::vector<uint8_t> got(span);
    fj_tensor tensor;
    fj_tensor_arg targ;
    g.Fill(out_, device_, &tensor, &targ);
    CountTma(c, targ);
    FJ_RETURN_IF_ERROR(Upload(in_, src.data(), src.size()), "");
    FJ_RETURN_IF_ERROR(Upload(aux_, coords.data(), coords.size() * 4), "");
    FJ_RETURN_IF_ERROR(Upload(aux_ + kAuxPredsOffset, preds.data(), preds.size()), "");
    FJ_RETURN_IF_ERROR(Poison(out_ + g.shift, poison, span), "");
    std::vector<fj_arg> args = {TensorArg(&targ), PtrArg(aux_), PtrArg(aux_ + kAuxPredsOffset),
                                PtrArg(in_)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = TileSmemBytes(p);
    const std::string what = absl::StrCat(kernel, " <<<", blocks, ", ", threads, ", ", s.smem,
                                          ">>>, tensor ", TensorText(c, g, targ, threads));
    auto ok = LaunchAndWait(c, kernel, s, args, blocks, what,
                            [&] { return Download(got.data(), out_ + g.shift, span); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    // Attribute each wrong element to the tile covering it (or a stray write).
    const int eb = p.elem_bytes;
    std::vector<bool> tile_bad(blocks, false);
    bool stray = false;
    size_t nbad = 0;
    std::string first;
    for (size_t e = 0; e < span / eb; ++e) {
      if (std::memcmp(g.host.data() + e * eb, got.data() + e * eb, eb) == 0) continue;
      ++nbad;
      // Tensor index of linear element e, if it is one (else padding).
      int64_t idx[FJ_TP_MAX_RANK] = {};
      bool element = true;
      int64_t rest = static_cast<int64_t>(e);
      for (int d = rank - 1; d >= 0; --d) {
        idx[d] = rest / p.stride[d];
        rest -= idx[d] * p.stride[d];
        if (idx[d] >= p.shape[d]) element = false;
      }
      if (rest != 0) element = false;
      int owner = -1;
      if (element) {
        for (int k = 0; k < blocks && owner < 0; ++k) {
          const int32_t* cc = coords.data() + k * kCaseInts;
          bool in = true;
          for (int d = 0; d < rank; ++d) in = in && idx[d] >= cc[d] && idx[d] < cc[d] + p.box[d];
          if (in) owner = k;
        }
      }
      if (owner >= 0) {
        tile_bad[owner] = true;
      } else {
        stray = true;
      }
      if (first.empty()) {
        std::string where;
        if (!element) {
          where = "a padding element between rows (no store may write it)";
        } else if (owner < 0) {
          where = absl::StrCat("tensor index ", Outer(idx, rank),
                               ", covered by no tile (must keep the poison)");
        } else {
          const int32_t* cc = coords.data() + owner * kCaseInts;
          int64_t bi[FJ_TP_MAX_RANK] = {};
          for (int d = 0; d < rank; ++d) bi[d] = idx[d] - cc[d];
          where = absl::StrCat("tensor index ", Outer(idx, rank), " = block ", owner,
                               "'s tile at ", Outer(cc, rank), " (pred ", preds[owner],
                               ") box index ", Outer(bi, rank));
        }
        first = absl::StrCat("first: linear element ", e, ", ", where, ": expected ",
                             Hex(g.host.data() + e * eb, eb), " got ",
                             Hex(got.data() + e * eb, eb),
                             absl::StrFormat(" (poison 0x%02x)", poison));
      }
    }
    if (nbad > 0) {
      int bad = static_cast<int>(std::count(tile_bad.begin(), tile_bad.end(), true));
      if (bad == 0) bad = 1;
      c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", nbad, " elements wrong", stray ? " (some outside every tile)" : "", "; ", first));
    }
    return absl::OkStatus();
  }

  absl::Status Pipeline(Ctx& c) {
    Rng& rng = c.rng;
    const Variant& v = c.v;
    const int rank = 1 + c.index % 5;
    const int* list = v.float_only ? kFloatDtypes : kAllDtypes;
    const int dtype = list[rng.Int(0, v.float_only ? 5 : 12)];
    const int oob = PickOob(c, dtype);
    const bool in_bounds = oob == fj::oob_promise_in_bounds;
    GenTensor g = MakeTensor(rng, rank, dtype, oob, in_bounds);
    const int blocks = static_cast<int>(rng.Int(1, 4));
    const int tiles = static_cast<int>(rng.Int(1, 9));
    const int n = blocks * tiles;
    std::vector<int32_t> coords(static_cast<size_t>(n) * kCaseInts);
    std::vector<uint8_t> preds(n);
    for (int k = 0; k < n; ++k) {
      MakeCoords(rng, g.p, in_bounds, coords.data() + k * kCaseInts);
      preds[k] = v.preds ? (rng.Chance(0.7) ? 1 : 0) : 1;
      if (in_bounds && !TileInBounds(g.p, coords.data() + k * kCaseInts)) {
        return absl::InternalError("selftest bug: promise_in_bounds tile out of bounds");
      }
    }
    const int pred_mode = v.preds ? c.index % 2 : static_cast<int>(rng.Int(0, 1));
    const std::string kernel = absl::StrCat("fj_ct_pipeline_e", g.p.elem_bytes, "_r", rank);
    const int threads = PickThreads(rng, c.row, kernel);
    const uint8_t poison = kPoisons[rng.Int(0, 4)];
    const size_t bytes = BoxBytes(g.p), out_bytes = bytes * n;
    if (g.host.size() + g.shift > kArenaBytes || out_bytes > kArenaBytes) {
      return absl::InternalError("selftest bug: tensor larger than the arena");
    }
    std::vector<uint8_t> want(out_bytes), got(out_bytes);
    HostTensor ht = g.Host();
    RefPipeline(ht, coords.data(), preds.data(), pred_mode, blocks, tiles, want.data());
    fj_tensor tensor;
    fj_tensor_arg targ;
    FJ_RETURN_IF_ERROR(
        StageTileLoad(c, g, coords, preds, poison, out_bytes, &tensor, &targ), "");
    std::vector<fj_arg> args = {TensorArg(&targ), PtrArg(aux_), PtrArg(aux_ + kAuxPredsOffset),
                                I32Arg(pred_mode), I32Arg(tiles), PtrArg(out_)};
    Shape s;
    s.grid = blocks;
    s.block = threads;
    s.smem = PipelineSmemBytes(g.p);
    const std::string what = absl::StrCat(
        kernel, " <<<", blocks, ", ", threads, ", ", s.smem, ">>> ", tiles,
        " tiles/block (3-stage ring), pred_mode ", pred_mode == kPredZero ? "zero" : "skip",
        ", tensor ", TensorText(c, g, targ, threads));
    auto ok = LaunchAndWait(c, kernel, s, args, n, what,
                            [&] { return Download(got.data(), out_, out_bytes); });
    if (!ok.ok()) return ok.status();
    if (!*ok) return absl::OkStatus();
    std::string first;
    const int bad = CompareTiles(g.p, want.data(), got.data(), n, coords.data(), preds.data(),
                                 1, "tile (block * tiles + k)", &first);
    if (bad > 0) c.t.Fail(bad, absl::StrCat(Repro(c), " ", what, ": ", bad, " of ", n,
                                           " tiles wrong; ", first));
    return absl::OkStatus();
  }

  fj_runtime* rt_;
  int device_;
  uint64_t seed_;
  int scale_;
  fj_device_info info_{};
  fj_stream* stream_ = nullptr;
  uint64_t in_ = 0, out_ = 0, aux_ = 0;
  std::vector<std::unique_ptr<Row>> rows_;
  std::mutex kernels_mu_;
  Watchdog watchdog_;
};

absl::StatusOr<fj_device_info> LiveDevice(fj_runtime* rt, int device) {
  if (rt == nullptr) return absl::InvalidArgumentError("no runtime");
  int32_t count = 0;
  absl::Status s = Fj(fj_device_count(rt, &count), "counting devices");
  if (!s.ok()) return s;
  if (count == 0) {
    const char* why = fj_runtime_driver_error(rt);
    return absl::UnavailableError(absl::StrCat(
        "no CUDA GPU: ", why != nullptr && *why != '\0' ? why : "the driver reports 0 devices"));
  }
  if (device < 0 || device >= count) {
    return absl::NotFoundError(absl::StrCat("device ", device, " does not exist (", count,
                                            " device", count == 1 ? "" : "s", ")"));
  }
  fj_device_info info{};
  info.struct_size = sizeof(info);
  s = Fj(fj_device_info_get(rt, device, &info), "reading the device");
  if (!s.ok()) return s;
  return info;
}

}  // namespace

const std::vector<std::string>& MatrixFeatures() {
  static const auto* f = new std::vector<std::string>{
      "barrier",   "group_wait", "copy_g2s",  "copy_s2g",    "predicate", "tile_copy",
      "oob_zeros", "oob_nan",    "multicast", "l2_prefetch", "pipeline"};
  return *f;
}

const std::vector<std::string>& AllVariants() {
  static const auto* v = [] {
    auto* out = new std::vector<std::string>;
    for (const std::string& f : MatrixFeatures()) {
      for (const Variant& x : Variants()) {
        if (f == x.feature) out->push_back(x.name);
      }
    }
    return out;
  }();
  return *v;
}

std::vector<std::string> FeatureVariants(absl::string_view feature) {
  std::vector<std::string> out;
  for (const Variant& x : Variants()) {
    if (feature == x.feature) out.push_back(x.name);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> DeviceImpls(fj_runtime* rt, int device) {
  auto info = LiveDevice(rt, device);
  if (!info.ok()) return info.status();
  return DefaultRows(info->cc_major * 10 + info->cc_minor);
}

uint64_t FreshSeed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
               static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  s = Mix(s) & ((1ull << 53) - 1);  // exact in a JSON number
  return s == 0 ? 1 : s;
}

absl::StatusOr<std::vector<CellResult>> RunConformanceMatrix(
    fj_runtime* rt, const MatrixOptions& options,
    std::function<void(const CellResult&)> progress) {
  auto info = LiveDevice(rt, options.device);
  if (!info.ok()) return info.status();
  const int cc = info->cc_major * 10 + info->cc_minor;
  if (options.scale < 1) {
    return absl::InvalidArgumentError(absl::StrCat("scale is ", options.scale, "; it must be >= 1"));
  }
  // Columns and variants.
  std::vector<std::string> features =
      options.features.empty() ? MatrixFeatures() : options.features;
  for (const std::string& f : features) {
    if (std::find(MatrixFeatures().begin(), MatrixFeatures().end(), f) ==
        MatrixFeatures().end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown feature '", f, "'; features: ", absl::StrJoin(MatrixFeatures(), ", ")));
    }
  }
  for (const std::string& v : options.variants) {
    if (std::find(AllVariants().begin(), AllVariants().end(), v) == AllVariants().end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown variant '", v, "'; variants: ", absl::StrJoin(AllVariants(), ", ")));
    }
  }
  auto variants_of = [&](const std::string& f) {
    std::vector<const Variant*> out;
    for (const Variant& x : Variants()) {
      if (f != x.feature) continue;
      if (!options.variants.empty() &&
          std::find(options.variants.begin(), options.variants.end(), x.name) ==
              options.variants.end()) {
        continue;
      }
      out.push_back(&x);
    }
    return out;
  };
  // Rows.
  std::vector<RowSpec> specs;
  for (const std::string& name : options.impls.empty() ? DefaultRows(cc) : options.impls) {
    auto spec = ParseRow(name, cc);
    if (!spec.ok()) return spec.status();
    specs.push_back(*spec);
  }
  const uint64_t seed = options.seed != 0 ? options.seed : FreshSeed();
  Matrix m(rt, options.device, seed, options.scale);
  absl::Status s = m.Init(*info);
  if (!s.ok()) return s;
  for (auto& spec : specs) m.AddRow(spec);
  if (options.log) {
    options.log(absl::StrCat("building ", kKernelFile, " for ", specs.size(), " row",
                             specs.size() == 1 ? "" : "s", " (in parallel)"));
  }
  m.BuildAll(options.log);

  std::vector<CellResult> results;
  absl::Status dead;  // set once the device stops working
  for (const std::string& f : features) {
    const std::vector<const Variant*> vs = variants_of(f);
    if (vs.empty()) continue;
    for (auto& row : m.rows()) {
      CellResult cell;
      cell.feature = f;
      cell.impl = row->spec.name;
      cell.seed = seed;
      const auto t0 = Clock::now();
      Tally t;
      if (!row->build_error.empty()) {
        t.Fail(1, absl::StrCat("[impl ", row->spec.name, ", feature ", f,
                               "] not run: the conformance kernels did not build: ",
                               row->build_error));
      } else if (!dead.ok()) {
        t.Fail(1, absl::StrCat("[impl ", row->spec.name, ", feature ", f,
                               "] not run: ", dead.message()));
      } else {
        for (const Variant* v : vs) {
          absl::Status st = m.RunVariant(*row, *v, f, t);
          if (!st.ok()) {
            dead = st;
            break;
          }
        }
      }
      cell.cases = t.cases;
      cell.failures = t.failures;
      cell.launches = t.launches;
      cell.tensor_maps = t.maps;
      cell.fallbacks = t.fallbacks;
      cell.failure_samples = t.samples;
      if (!t.samples.empty()) cell.first_failure = t.samples.front();
      cell.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (progress) progress(cell);
      results.push_back(std::move(cell));
    }
  }
  return results;
}

}  // namespace fleetjit::selftest
