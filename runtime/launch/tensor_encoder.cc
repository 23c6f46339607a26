#include "runtime/launch/tensor_encoder.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstring>
#include <new>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/dlpack_codes.h"

namespace fleetjit {
namespace {

static_assert(sizeof(fj::tensor_param) == 320, "tensor_param layout is ABI");
static_assert(alignof(fj::tensor_param) == 64, "tensor_param layout is ABI");

using dlpack::kDLBfloat;
using dlpack::kDLBool;
using dlpack::kDLCUDA;
using dlpack::kDLCUDAHost;
using dlpack::kDLCUDAManaged;
using dlpack::kDLFloat;
using dlpack::kDLInt;
using dlpack::kDLUInt;

constexpr int64_t kMaxExtent = int64_t{1} << 48;  // sane upper bound
constexpr int64_t kMaxStride = int64_t{1} << 56;  // |stride| * 8 fits int64

// Copies one 320-byte parameter. A plain memcpy of this size compiles to
// `rep movsq`, whose start-up cost was half of a cache hit; 16-byte moves
// are several times faster.
inline void CopyParam(void* dst, const void* src) {
#if defined(__SSE2__)
  auto* d = static_cast<__m128i*>(dst);
  const auto* s = static_cast<const __m128i*>(src);
#pragma GCC unroll 20
  for (int i = 0; i < 20; ++i) _mm_storeu_si128(d + i, _mm_loadu_si128(s + i));
#else
  std::memcpy(dst, src, sizeof(fj::tensor_param));
#endif
}

// The oob field as the int it is in memory: a caller may store any value,
// and loading an out-of-range enum is undefined in C++.
int32_t RawOob(const fj_tensor_arg* arg) {
  int32_t oob;
  std::memcpy(&oob,
              reinterpret_cast<const char*>(arg) + offsetof(fj_tensor_arg, oob),
              sizeof(oob));
  return oob;
}

// The swizzle field as the int it is in memory; NONE for a 1.0 caller.
int32_t RawSwizzle(const fj_tensor_arg* arg) {
  if (arg->struct_size < offsetof(fj_tensor_arg, swizzle) + sizeof(int32_t))
    return FJ_SWIZZLE_NONE;
  int32_t swizzle;
  std::memcpy(
      &swizzle,
      reinterpret_cast<const char*>(arg) + offsetof(fj_tensor_arg, swizzle),
      sizeof(swizzle));
  return swizzle;
}

absl::Status ArgError(size_t arg_index, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("argument ", arg_index, " (tensor): ", message));
}

// ---------------------------------------------------------------------------
// The per-thread cache of encoded parameters.

// Everything the encoded parameter depends on, read straight from the
// caller's structs. No padding, zeroed beyond ndim: compared with memcmp.
struct alignas(16) TensorKey {
  const void* encode_fn;  // the driver entry point (tests swap it)
  uint64_t data;
  uint64_t byte_offset;
  int64_t shape[FJ_TP_MAX_RANK];
  int64_t strides[FJ_TP_MAX_RANK];
  uint32_t box[FJ_TP_MAX_RANK];
  int32_t ndim;
  int32_t device_type;
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
  int32_t oob;
  int32_t flags;  // bit 0: strides given; bit 1: TMA wanted; 2-9: swizzle
};
static_assert(sizeof(TensorKey) == 144, "TensorKey must have no padding");

// memcmp of two keys, in nine 16-byte compares (a memcmp call was a tenth
// of a cache hit).
inline bool SameKey(const TensorKey& a, const TensorKey& b) {
#if defined(__SSE2__)
  const auto* x = reinterpret_cast<const __m128i*>(&a);
  const auto* y = reinterpret_cast<const __m128i*>(&b);
  __m128i diff = _mm_setzero_si128();
#pragma GCC unroll 9
  for (int i = 0; i < 9; ++i) {
    diff = _mm_or_si128(
        diff, _mm_xor_si128(_mm_load_si128(x + i), _mm_load_si128(y + i)));
  }
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) == 0xFFFF;
#else
  return std::memcmp(&a, &b, sizeof(TensorKey)) == 0;
#endif
}

struct alignas(64) CacheEntry {
  fj::tensor_param param;
  TensorKey key;
  bool fallback;  // TMA cannot describe it: ThreadCache::ReasonOf says why
};
static_assert(sizeof(CacheEntry) == 512, "one entry, eight cache lines");

// The cache is addressed by content, not by kernel: the parameter depends
// only on the key, so every kernel (and every argument slot) that passes
// the same tensor shares its entry. Each thread that launches with tensors
// gets kSets sets of kWays entries (128 KiB) on the heap at its first
// tensor, freed when the thread ends. A tensor's set comes from its address
// and extents; a full set gives up its least recently used entry. 256
// entries hold a model's weights and activations across its layers, where
// a smaller cache, cycled through, would miss on every launch; 8 ways keep
// a set from overflowing until well past 100 tensors.
constexpr size_t kWays = 8;
constexpr size_t kSets = 32;
constexpr size_t kReasonBytes = 128;

struct ThreadCache {
  // Per set, each way's key.data (0: empty; a cached tensor's data is never
  // NULL): one cache line that a lookup scans before any entry.
  struct alignas(64) Tags {
    uint64_t data[kWays];
  };
  static_assert(sizeof(Tags) == 64, "a set's tags fill one cache line");
  Tags tags[kSets];
  uint32_t last_use[kSets][kWays];  // the set's clock at the last hit/fill
  uint32_t clock[kSets];
  CacheEntry entries[kSets][kWays];
  // Fallback reasons, made at the first fallback (most threads have none).
  char (*reasons)[kReasonBytes] = nullptr;
  // The kept-tensor generation (g_generation) the entries belong to.
  uint64_t generation = 0;

  ThreadCache() = default;
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;
  ~ThreadCache() { delete[] reasons; }

  // The set of a key with these data, byte_offset, shape[0] and flags.
  static size_t SetOf(uint64_t data, uint64_t byte_offset, int64_t shape0,
                      int32_t flags) {
    uint64_t h = (data + byte_offset) ^ (static_cast<uint64_t>(shape0) << 40) ^
                 static_cast<uint64_t>(flags);
    h *= 0x9E3779B97F4A7C15ull;
    static_assert(kSets == 32, "SetOf takes the hash's top five bits");
    return static_cast<size_t>(h >> 59);
  }
  static size_t SetOf(const TensorKey& key) {
    return SetOf(key.data, key.byte_offset, key.shape[0], key.flags);
  }

  // The entry of `set` whose tag is `data` (non-zero) and whose key
  // `same(key)` accepts, or null. A hit becomes its set's most recent.
  template <typename Same>
  const CacheEntry* Find(size_t set, uint64_t data, const Same& same) {
    for (size_t w = 0; w < kWays; ++w) {
      if (tags[set].data[w] == data && same(entries[set][w].key)) {
        last_use[set][w] = ++clock[set];
        return &entries[set][w];
      }
    }
    return nullptr;
  }

  // The way a new key of `set` takes, emptied: an empty one, else the
  // least recently used.
  size_t Take(size_t set) {
    size_t victim = 0;
    for (size_t w = 0; w < kWays; ++w) {
      if (tags[set].data[w] == 0) {
        victim = w;
        break;
      }
      // Unsigned distance from the clock: right across its wrap.
      if (clock[set] - last_use[set][w] > clock[set] - last_use[set][victim])
        victim = w;
    }
    tags[set].data[victim] = 0;
    return victim;
  }

  // Marks way `w` of `set` (from Take) filled under `key`, with `reason`
  // ("" or why TMA cannot describe the tensor).
  void Fill(size_t set, size_t w, const TensorKey& key,
            const std::string& reason) {
    CacheEntry& entry = entries[set][w];
    entry.key = key;
    entry.fallback = !reason.empty();
    if (entry.fallback) {
      if (reasons == nullptr)
        reasons = new (std::nothrow) char[kSets * kWays][kReasonBytes];
      if (reasons != nullptr) {
        char* kept = reasons[set * kWays + w];
        const size_t n = std::min(reason.size(), kReasonBytes - 1);
        std::memcpy(kept, reason.data(), n);
        kept[n] = '\0';
      }
    }
    last_use[set][w] = ++clock[set];
    tags[set].data[w] = key.data;
  }

  // Drops every entry (their tags go to empty) for `new_generation`.
  void Empty(uint64_t new_generation) {
    std::memset(tags, 0, sizeof(tags));
    generation = new_generation;
  }

  // Why `entry` (a fallback) has no tensor map.
  const char* ReasonOf(const CacheEntry* entry) const {
    const size_t index = static_cast<size_t>(entry - &entries[0][0]);
    return reasons != nullptr ? reasons[index]
                              : "TMA cannot describe it (reason not kept)";
  }
};

// Bumped by ForgetKeptTensors: a thread's cache filled under an older
// generation is emptied at its next use.
std::atomic<uint64_t> g_generation{1};

// This thread's cache. The pointer is trivially destructible, so reading it
// is one thread_local access; the holder, touched once per thread, frees
// the cache at thread exit (and keeps the library loaded until then: glibc
// pins a library whose thread_local destructors are pending).
thread_local ThreadCache* t_cache = nullptr;
thread_local bool t_cache_gone = false;  // the thread is ending: no cache

struct ThreadCacheHolder {
  ThreadCache* cache = nullptr;
  ~ThreadCacheHolder() {
    t_cache = nullptr;
    t_cache_gone = true;
    delete cache;
  }
};

__attribute__((noinline)) ThreadCache* MakeThreadCache() {
  if (t_cache_gone) return nullptr;  // encoding still works, uncached
  thread_local ThreadCacheHolder holder;
  // Value-initialised: every entry invalid. Out of memory: no cache.
  auto* cache = new (std::nothrow) ThreadCache();
  if (cache == nullptr) return nullptr;
  cache->generation = g_generation.load(std::memory_order_acquire);
  holder.cache = cache;
  t_cache = cache;
  return cache;
}

// This thread's cache, made at its first use and emptied at the first use
// after a ForgetKeptTensors; null when there is none.
inline ThreadCache* ThisThreadCache() {
  ThreadCache* cache = t_cache;
  if (cache == nullptr) return MakeThreadCache();
  const uint64_t generation = g_generation.load(std::memory_order_acquire);
  if (__builtin_expect(cache->generation != generation, 0))
    cache->Empty(generation);
  return cache;
}

}  // namespace

void ForgetKeptTensors() {
  g_generation.fetch_add(1, std::memory_order_acq_rel);
}

namespace {

// The driver entry point a key records (tests swap it).
const void* EncodeFn(const DriverApi* api) {
  return api != nullptr
             ? reinterpret_cast<const void*>(api->cuTensorMapEncodeTiled)
             : nullptr;
}

// The key of a tensor already described (TensorEncoder::EncodeDescribed):
// the description's own fields, parameter order, marked by flag bit 10 so
// it never equals a wire key.
TensorKey KeyOfDesc(const TensorDesc& d, const void* encode_fn, bool want_tma) {
  TensorKey key{};
  key.encode_fn = encode_fn;
  key.data = d.address;
  key.ndim = d.rank;
  key.code = static_cast<uint8_t>(d.dtype);
  key.bits = static_cast<uint8_t>(d.elem_bytes);
  key.oob = d.oob;
  key.flags =
      (want_tma ? 2 : 0) | (static_cast<int32_t>(d.swizzle) << 2) | (1 << 10);
  for (int i = 0; i < d.rank && i < FJ_TP_MAX_RANK; ++i) {
    key.shape[i] = d.shape[i];
    key.strides[i] = d.stride[i];
    key.box[i] = static_cast<uint32_t>(d.box[i]);
  }
  return key;
}

// Whether BuildKey keys `arg`: false when the tensor is too malformed (the
// slow path reports it).
bool Keyable(const fj_tensor_arg* arg) {
  if (arg == nullptr || arg->struct_size < kTensorArgV1Size) return false;
  const fj_tensor* t = arg->tensor;
  // NULL data is refused by the slow path, and a key's data is never 0 (an
  // empty way's tag).
  if (t == nullptr || t->ndim < 1 || t->ndim > FJ_TP_MAX_RANK ||
      t->shape == nullptr || t->data == nullptr) {
    return false;
  }
  const int32_t swizzle = RawSwizzle(arg);
  return swizzle >= 0 && swizzle <= 255;
}

// TensorKey::flags of a keyable `arg`.
int32_t KeyFlags(const fj_tensor_arg* arg, bool want_tma) {
  return (arg->tensor->strides != nullptr ? 1 : 0) | (want_tma ? 2 : 0) |
         (RawSwizzle(arg) << 2);
}

// The key of a keyable `arg`.
TensorKey BuildKey(const fj_tensor_arg* arg, const void* encode_fn,
                   bool want_tma) {
  const fj_tensor* t = arg->tensor;
  TensorKey key{};
  key.encode_fn = encode_fn;
  key.data = reinterpret_cast<uintptr_t>(t->data);
  key.byte_offset = t->byte_offset;
  key.ndim = t->ndim;
  key.device_type = t->device.device_type;
  key.code = t->dtype.code;
  key.bits = t->dtype.bits;
  key.lanes = t->dtype.lanes;
  key.oob = RawOob(arg);
  key.flags = KeyFlags(arg, want_tma);
  for (int i = 0; i < t->ndim; ++i) {
    key.shape[i] = t->shape[i];
    key.box[i] = arg->box[i];
    if (t->strides != nullptr) key.strides[i] = t->strides[i];
  }
  return key;
}

// Whether `key` is BuildKey(arg, encode_fn, ...) for a keyable `arg` whose
// KeyFlags are `flags` and whose data matched the key's tag, compared field
// by field in the caller's structs (BuildKey zeroes what lies past ndim, and
// equal ndim and flags leave nothing else to compare). A launch that hits
// builds no key: writing one and reading it back as 16-byte words cost
// more than the compare.
bool KeyIs(const TensorKey& key, const fj_tensor_arg* arg,
           const void* encode_fn, int32_t flags) {
  const fj_tensor* t = arg->tensor;
  if (key.byte_offset != t->byte_offset || key.ndim != t->ndim ||
      key.flags != flags || key.encode_fn != encode_fn ||
      key.device_type != t->device.device_type || key.code != t->dtype.code ||
      key.bits != t->dtype.bits || key.lanes != t->dtype.lanes ||
      key.oob != RawOob(arg)) {
    return false;
  }
  for (int i = 0; i < t->ndim; ++i) {
    if (key.shape[i] != t->shape[i] || key.box[i] != arg->box[i]) return false;
  }
  if (t->strides != nullptr) {
    for (int i = 0; i < t->ndim; ++i) {
      if (key.strides[i] != t->strides[i]) return false;
    }
  }
  return true;
}

// The parameter of `desc` (flags, and the tensor map when TMA is wanted and
// can describe it) into `param`; the reason of a TMA fallback, or "".
std::string EncodeFresh(const DriverApi* api, const TensorDesc& desc,
                        bool want_tma, fj::tensor_param* param) {
  FillTensorParam(desc, param);
  std::string reason;
  if (!want_tma) return reason;
  reason = TmaRejection(desc);
  if (!reason.empty()) return reason;
  if (api == nullptr) return "no CUDA driver to encode a tensor map";
  absl::Status encoded = EncodeTensorMap(*api, desc, param);
  if (encoded.ok()) {
    param->flags |= FJ_TP_HAS_TMAP;
  } else {
    reason = std::string(encoded.message());
    std::memset(param->tmap, 0, sizeof(param->tmap));
  }
  return reason;
}

// Encodes `desc` (EncodeFresh) straight into the entry `cache` gives up
// in `set` for `key`, or into a local parameter when `cache` is null, and
// copies the parameter to `out`. The fallback reason, or "".
std::string EncodeAndKeep(const DriverApi* api, const TensorDesc& desc,
                          bool want_tma, ThreadCache* cache, size_t set,
                          const TensorKey& key, void* out) {
  if (cache == nullptr) {
    fj::tensor_param param;  // 64-byte aligned, as the driver's encoder needs
    std::string reason = EncodeFresh(api, desc, want_tma, &param);
    CopyParam(out, &param);
    return reason;
  }
  const size_t way = cache->Take(set);
  fj::tensor_param* param = &cache->entries[set][way].param;  // aligned too
  std::string reason = EncodeFresh(api, desc, want_tma, param);
  cache->Fill(set, way, key, reason);
  CopyParam(out, param);
  return reason;
}

}  // namespace

// ---------------------------------------------------------------------------

absl::Status CheckDeclaredTensor(size_t arg_index, int rank, int dtype,
                                 int32_t declared_rank,
                                 int32_t declared_dtype) {
  if (declared_dtype < -1) {
    // No dtype, but the element's size (jit::DeclaredElemBytes).
    const int bytes = -1 - declared_dtype;
    if (bytes != fj::dtype_info(dtype).bytes) {
      return ArgError(
          arg_index,
          absl::StrCat("the kernel declares ", bytes,
                       "-byte elements but the "
                       "caller passed ",
                       DtypeName(dtype), " (", fj::dtype_info(dtype).bytes,
                       " bytes); shape and box count the tensor's own "
                       "elements, so a wider element type reads the wrong "
                       "data"));
    }
    declared_dtype = -1;
  }
  if (declared_rank > 0 && rank != declared_rank) {
    return ArgError(arg_index,
                    absl::StrCat("the kernel declares a rank-", declared_rank,
                                 " tensor but the caller passed rank ", rank));
  }
  if (declared_dtype >= 0 && dtype != declared_dtype) {
    return ArgError(
        arg_index,
        absl::StrCat("the kernel declares dtype ", DtypeName(declared_dtype),
                     " but the caller passed ", DtypeName(dtype)));
  }
  return absl::OkStatus();
}

int DtypeBytes(int dtype) { return fj::dtype_info(dtype).bytes; }

std::string DtypeName(int dtype) {
  const char* name = fj::dtype_info(dtype).name;
  return name != nullptr ? name : absl::StrCat("dtype#", dtype);
}

bool DtypeIsFloat(int dtype) { return fj::dtype_info(dtype).is_float; }

absl::StatusOr<fj::dtype_code> DtypeFromDlpack(DlDtype dtype) {
  if (dtype.lanes != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector dtypes (lanes=", dtype.lanes,
                     ") are not supported; lanes must be 1"));
  }
  switch (dtype.code) {
    case kDLInt:
      switch (dtype.bits) {
        case 8:
          return fj::dtype_i8;
        case 16:
          return fj::dtype_i16;
        case 32:
          return fj::dtype_i32;
        case 64:
          return fj::dtype_i64;
      }
      break;
    case kDLUInt:
      switch (dtype.bits) {
        case 8:
          return fj::dtype_u8;
        case 16:
          return fj::dtype_u16;
        case 32:
          return fj::dtype_u32;
      }
      break;
    case kDLFloat:
      switch (dtype.bits) {
        case 16:
          return fj::dtype_f16;
        case 32:
          return fj::dtype_f32;
        case 64:
          return fj::dtype_f64;
      }
      break;
    case kDLBfloat:
      if (dtype.bits == 16) return fj::dtype_bf16;
      break;
    case kDLBool:
      if (dtype.bits == 8) return fj::dtype_u8;
      break;
    case FJ_DL_FLOAT8_E4M3:
      if (dtype.bits == 8) return fj::dtype_f8e4m3;
      break;
    case FJ_DL_FLOAT8_E5M2:
      if (dtype.bits == 8) return fj::dtype_f8e5m2;
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported dtype (DLPack code ", dtype.code, ", ", dtype.bits,
      " bits); supported: int 8/16/32/64, uint 8/16/32, float 16/32/64, "
      "bfloat 16, bool 8, FJ_DL_FLOAT8_E4M3/E5M2 8"));
}

absl::StatusOr<TensorDesc> DescribeTensor(const DlTensor& tensor,
                                          const uint32_t* box, int32_t oob,
                                          int32_t swizzle, size_t arg_index) {
  const DlTensor* t = &tensor;
  if (t->ndim < 1 || t->ndim > FJ_TP_MAX_RANK) {
    return ArgError(arg_index,
                    absl::StrCat("ndim is ", t->ndim, "; tensors have 1..",
                                 FJ_TP_MAX_RANK, " dimensions"));
  }
  int32_t dt = t->device_type;
  if (dt != kDLCUDA && dt != kDLCUDAHost && dt != kDLCUDAManaged) {
    return ArgError(
        arg_index,
        absl::StrCat("device_type is ", dt,
                     "; pass CUDA memory (kDLCUDA 2, kDLCUDAHost 3 or "
                     "kDLCUDAManaged 13)"));
  }
  auto dtype_or = DtypeFromDlpack(t->dtype);
  if (!dtype_or.ok()) return ArgError(arg_index, dtype_or.status().message());
  if (t->shape == nullptr) return ArgError(arg_index, "shape is NULL");
  if (t->data == 0) return ArgError(arg_index, "data is NULL");

  // A box of another rank than the tensor's is a caller's mistake (a 3-D
  // box for a 2-D tensor), refused rather than cut to the tensor's rank.
  int box_rank = 0;
  for (int i = 0; i < FJ_TP_MAX_RANK; ++i) {
    if (box[i] != 0) box_rank = i + 1;
  }
  if (box_rank > t->ndim) {
    return ArgError(
        arg_index,
        absl::StrCat("a rank-", box_rank, " box (box[", box_rank - 1,
                     "] = ", box[box_rank - 1], ") on a rank-", t->ndim,
                     " tensor: box has one entry per dimension, outermost-"
                     "first like shape, and entries past ndim must be 0"));
  }

  TensorDesc d;
  d.rank = t->ndim;
  d.dtype = *dtype_or;
  d.elem_bytes = fj::dtype_info(d.dtype).bytes;
  uint64_t base = t->data;
  if (__builtin_add_overflow(base, t->byte_offset, &d.address)) {
    return ArgError(arg_index, absl::StrCat("data + byte_offset (",
                                            t->byte_offset, ") overflows"));
  }
  if (d.address % d.elem_bytes != 0) {
    return ArgError(arg_index,
                    absl::StrFormat("address 0x%x (data + byte_offset) is not "
                                    "aligned to the %d-byte element",
                                    d.address, d.elem_bytes));
  }
  const int n = d.rank;
  for (int i = 0; i < n; ++i) {
    if (t->shape[i] < 0 || t->shape[i] > kMaxExtent) {
      return ArgError(arg_index,
                      absl::StrCat("shape[", i, "] is ", t->shape[i]));
    }
  }
  // DLPack index i is parameter dimension n-1-i.
  int64_t compact = 1;
  for (int i = n - 1; i >= 0; --i) {
    const int dim = n - 1 - i;
    d.shape[dim] = t->shape[i];
    if (t->strides != nullptr) {
      int64_t s = t->strides[i];
      if (s <= -kMaxStride || s >= kMaxStride) {
        return ArgError(arg_index, absl::StrCat("strides[", i, "] is ", s));
      }
      d.stride[dim] = s;
    } else {
      d.stride[dim] = compact;
      if (__builtin_mul_overflow(compact, std::max<int64_t>(t->shape[i], 1),
                                 &compact) ||
          compact >= kMaxStride) {
        return ArgError(arg_index, "the tensor's element count overflows");
      }
    }
    uint32_t b = box[i];
    if (b == 0) {
      int64_t whole = std::max<int64_t>(t->shape[i], 1);
      if (whole > INT32_MAX) {
        return ArgError(
            arg_index,
            absl::StrCat("box[", i, "] is 0 (whole extent) but shape[", i,
                         "] = ", t->shape[i],
                         " exceeds the 2^31-1 tile limit; give a box"));
      }
      b = static_cast<uint32_t>(whole);
    } else if (b > static_cast<uint32_t>(INT32_MAX)) {
      return ArgError(arg_index,
                      absl::StrCat("box[", i, "] is ", b, ", over 2^31-1"));
    }
    d.box[dim] = static_cast<int32_t>(b);
  }
  // Under PROMISE_IN_BOUNDS no tile of a box larger than the tensor lies
  // inside it; the implementations would disagree on what the rest reads.
  for (int i = 0; oob == FJ_OOB_PROMISE_IN_BOUNDS && i < n; ++i) {
    const int dim = n - 1 - i;
    if (t->shape[i] > 0 && d.box[dim] > t->shape[i]) {
      bool reversed_fits = true;
      for (int j = 0; j < n; ++j) {
        const int64_t rb = d.box[j];  // box[n-1-j] read innermost-first
        if (t->shape[j] > 0 && rb > t->shape[j]) reversed_fits = false;
      }
      return ArgError(
          arg_index,
          absl::StrCat(
              "box[", i, "] = ", d.box[dim], " exceeds shape[", i,
              "] = ", t->shape[i],
              " under FJ_OOB_PROMISE_IN_BOUNDS (box and shape are both "
              "outermost-first)",
              reversed_fits ? "; the box reversed would fit: was it given "
                              "innermost-first?"
                            : "",
              "; give FJ_OOB_ZEROS or FJ_OOB_NAN to read the part outside as "
              "the fill, or a smaller box"));
    }
  }
  switch (oob) {
    case FJ_OOB_PROMISE_IN_BOUNDS:
      d.oob = fj::oob_promise_in_bounds;
      break;
    case FJ_OOB_ZEROS:
      d.oob = fj::oob_zeros;
      break;
    case FJ_OOB_NAN:
      if (!fj::dtype_info(d.dtype).is_float) {
        return ArgError(
            arg_index,
            absl::StrCat("oob FJ_OOB_NAN needs a floating-point dtype, "
                         "not ",
                         DtypeName(d.dtype)));
      }
      d.oob = fj::oob_nan;
      break;
    default:
      return ArgError(arg_index,
                      absl::StrCat("oob is ", oob, ", not an fj_oob value"));
  }
  if (swizzle < FJ_SWIZZLE_NONE || swizzle > FJ_SWIZZLE_128B) {
    return ArgError(arg_index, absl::StrCat("swizzle is ", swizzle,
                                            ", not an fj_swizzle value"));
  }
  d.swizzle = static_cast<fj::swizzle_mode>(swizzle);
  if (swizzle != FJ_SWIZZLE_NONE) {
    const int64_t width = int64_t{16} << swizzle;
    const int64_t row = static_cast<int64_t>(d.box[0]) * d.elem_bytes;
    if (row != width) {
      return ArgError(arg_index,
                      absl::StrCat("swizzle ", width,
                                   "B needs the innermost box extent "
                                   "(box[",
                                   n - 1, "]) times the element size to be ",
                                   width, " bytes; it is ", d.box[0], " x ",
                                   d.elem_bytes, " = ", row));
    }
  }
  return d;
}

absl::StatusOr<TensorDesc> DescribeTensor(const fj_tensor_arg* arg,
                                          size_t arg_index) {
  if (arg == nullptr) {
    return ArgError(arg_index, "fj_arg.v.tensor is NULL");
  }
  if (arg->struct_size < kTensorArgV1Size) {
    return ArgError(
        arg_index,
        absl::StrCat("fj_tensor_arg.struct_size is ", arg->struct_size,
                     ", smaller than the first version (", kTensorArgV1Size,
                     ")"));
  }
  if (arg->tensor == nullptr) {
    return ArgError(arg_index, "fj_tensor_arg.tensor is NULL");
  }
  return DescribeTensor(DlTensorOf(*arg->tensor), arg->box, RawOob(arg),
                        RawSwizzle(arg), arg_index);
}

// ---------------------------------------------------------------------------

void TensorEncoder::ReportFallback(size_t arg_index, const char* reason) const {
  if (fallbacks_ != nullptr)
    fallbacks_->fetch_add(1, std::memory_order_relaxed);
  if (reported_ == nullptr || logger_ == nullptr ||
      !logger_->Enabled(LogLevel::kInfo))
    return;
  const uint64_t bit = uint64_t{1} << (arg_index < 63 ? arg_index : 63);
  if ((reported_->load(std::memory_order_relaxed) & bit) != 0) return;
  if ((reported_->fetch_or(bit, std::memory_order_relaxed) & bit) != 0) return;
  logger_->Log(
      LogLevel::kInfo,
      absl::StrCat("launch: ", kernel_name_, ": tensor arg ", arg_index,
                   ": TMA cannot describe it (", reason, "); using cp_async"));
}

__attribute__((hot)) absl::Status TensorEncoder::Encode(
    size_t arg_index, const fj_tensor_arg* arg, int32_t declared_rank,
    int32_t declared_dtype, jit::CopyImpl impl, void* out) const {
  const bool want_tma = impl == jit::CopyImpl::kTma;
  const void* encode_fn = EncodeFn(api_);
  ThreadCache* cache = nullptr;  // none: the tensor is encoded, not kept
  size_t set = 0;
  const CacheEntry* entry = nullptr;
  if (cache_enabled_ && Keyable(arg) &&
      (cache = ThisThreadCache()) != nullptr) {
    const fj_tensor* t = arg->tensor;
    const uint64_t data = reinterpret_cast<uintptr_t>(t->data);
    const int32_t flags = KeyFlags(arg, want_tma);
    set = ThreadCache::SetOf(data, t->byte_offset, t->shape[0], flags);
    entry = cache->Find(set, data, [&](const TensorKey& key) {
      return KeyIs(key, arg, encode_fn, flags);
    });
    // The common case: the declared rank and dtype, when given, are the
    // tensor's, and TMA describes it.
    if (entry != nullptr && !entry->fallback &&
        (declared_rank <= 0 || entry->param.rank == declared_rank) &&
        (declared_dtype == -1 || entry->param.dtype == declared_dtype)) {
      CopyParam(out, &entry->param);
      return absl::OkStatus();
    }
  }
  return EncodeRest(arg_index, arg, declared_rank, declared_dtype, want_tma,
                    encode_fn, cache, set, entry, out);
}

__attribute__((noinline)) absl::Status TensorEncoder::EncodeRest(
    size_t arg_index, const fj_tensor_arg* arg, int32_t declared_rank,
    int32_t declared_dtype, bool want_tma, const void* encode_fn,
    void* cache_ptr, size_t set, const void* hit, void* out) const {
  auto* cache = static_cast<ThreadCache*>(cache_ptr);
  if (const auto* entry = static_cast<const CacheEntry*>(hit)) {
    absl::Status declared =
        CheckDeclaredTensor(arg_index, entry->param.rank, entry->param.dtype,
                            declared_rank, declared_dtype);
    if (!declared.ok()) return declared;
    CopyParam(out, &entry->param);
    if (entry->fallback) ReportFallback(arg_index, cache->ReasonOf(entry));
    return absl::OkStatus();
  }
  absl::StatusOr<TensorDesc> desc = DescribeTensor(arg, arg_index);
  if (!desc.ok()) return desc.status();
  absl::Status declared = CheckDeclaredTensor(
      arg_index, desc->rank, desc->dtype, declared_rank, declared_dtype);
  if (!declared.ok()) return declared;
  const TensorKey key =
      cache != nullptr ? BuildKey(arg, encode_fn, want_tma) : TensorKey{};
  const std::string reason =
      EncodeAndKeep(api_, *desc, want_tma, cache, set, key, out);
  if (!reason.empty()) ReportFallback(arg_index, reason.c_str());
  return absl::OkStatus();
}

absl::Status TensorEncoder::EncodeDescribed(size_t arg_index,
                                            const TensorDesc& desc,
                                            jit::CopyImpl impl,
                                            fj::tensor_param* out) const {
  const bool want_tma = impl == jit::CopyImpl::kTma;
  TensorKey key;
  ThreadCache* cache = nullptr;
  size_t set = 0;
  if (cache_enabled_ && desc.address != 0 &&
      (cache = ThisThreadCache()) != nullptr) {
    key = KeyOfDesc(desc, EncodeFn(api_), want_tma);
    set = ThreadCache::SetOf(key);
    const CacheEntry* entry = cache->Find(
        set, key.data, [&](const TensorKey& k) { return SameKey(k, key); });
    if (entry != nullptr) {
      CopyParam(out, &entry->param);
      if (entry->fallback) ReportFallback(arg_index, cache->ReasonOf(entry));
      return absl::OkStatus();
    }
  }
  const std::string reason =
      EncodeAndKeep(api_, desc, want_tma, cache, set, key, out);
  if (!reason.empty()) ReportFallback(arg_index, reason.c_str());
  return absl::OkStatus();
}

}  // namespace fleetjit
