// The generic packer and the JIT-built thunks produce bit-identical
// parameter buffers, and reject exactly the same calls with the same
// status. Runs on the CPU: tensor maps come from a fake
// cuTensorMapEncodeTiled. Every round uses fresh random values, and each
// path packs into a buffer poisoned with a different byte, so a byte that
// either path fails to write shows up as a difference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "jit/thunk/arg_rules.h"
#include "jit/thunk/thunk_codegen.h"
#include "jit/thunk/thunk_jit.h"
#include "runtime/launch/launch.h"
#include "tests/runtime/launch/launch_test_util.h"

namespace fleetjit {
namespace {

using jit::CopyImpl;
using jit::KernelEntry;
using testing::BF16;
using testing::F;
using testing::I;
using testing::MakeEntry;
using testing::Param;
using testing::Ptr;
using testing::Struct;
using testing::Tensor;
using testing::TestTensor;
using testing::U;
using testing::Unknown;

constexpr CopyImpl kImpls[] = {CopyImpl::kSync, CopyImpl::kCpAsync,
                               CopyImpl::kTma};

jit::ThunkJit& Jit() {
  static jit::ThunkJit* jit = [] {
    auto created = jit::ThunkJit::Create();
    if (!created.ok()) {
      ADD_FAILURE() << created.status();
      return static_cast<jit::ThunkJit*>(nullptr);
    }
    return created->release();
  }();
  return *jit;
}

// Generates, loads and returns the thunk for (entry, impl).
const LaunchThunk* ThunkFor(const KernelEntry& entry, CopyImpl impl) {
  auto object = jit::EmitThunkObject({entry}, impl);
  EXPECT_TRUE(object.ok()) << object.status();
  if (!object.ok()) return nullptr;
  auto library = Jit().Load(*object);
  EXPECT_TRUE(library.ok()) << library.status();
  if (!library.ok()) return nullptr;
  auto thunk = Jit().Find(*library, entry, impl);
  EXPECT_TRUE(thunk.ok()) << thunk.status();
  return thunk.ok() ? *thunk : nullptr;
}

// fj_arg elements `stride` bytes apart, as a newer caller would lay them out.
class ArgArray {
 public:
  ArgArray(size_t n, size_t stride)
      : n_(n), stride_(stride), storage_((n * stride + 7) / 8 + 1) {
    for (size_t i = 0; i < n; ++i) {
      at(i) = fj_arg{};
      at(i).struct_size = stride;
    }
  }
  fj_arg& at(size_t i) {
    return *reinterpret_cast<fj_arg*>(reinterpret_cast<char*>(storage_.data()) +
                                      i * stride_);
  }
  const fj_arg* data() const {
    return reinterpret_cast<const fj_arg*>(storage_.data());
  }
  size_t size() const { return n_; }
  size_t stride() const { return stride_; }

 private:
  size_t n_;
  size_t stride_;
  std::vector<uint64_t> storage_;
};

struct Packed {
  absl::Status status;
  std::vector<uint8_t> bytes;
};

// Packs through PackForLaunch (the launcher's own entry), with or without
// the kernel's thunk.
Packed Pack(const KernelEntry& entry, CopyImpl impl, const LaunchThunk* thunk,
            const ArgArray& args, size_t n, uint8_t poison,
            const DriverApi& api) {
  LoadedKernel k;
  k.entry = &entry;
  k.copy_impl = impl;
  k.display_name = "pack_test.cu:" + entry.name;
  k.thunk.store(thunk);
  // No stderr reports: each call is a fresh kernel, so each would print.
  TensorEncoder encoder(&api, k.display_name, &k.tma_fallbacks, nullptr);
  alignas(64) static thread_local uint8_t buffer[jit::kMaxParamBytes];
  std::memset(buffer, poison, sizeof(buffer));
  Packed out;
  out.status =
      PackForLaunch(k, args.data(), n, args.stride(), encoder,
                    /*use_thunk=*/thunk != nullptr, buffer, sizeof(buffer));
  out.bytes.assign(buffer, buffer + entry.param_bytes);
  // Nothing past param_bytes may be touched.
  for (size_t i = entry.param_bytes;
       i < entry.param_bytes + 64 && i < sizeof(buffer); ++i) {
    EXPECT_EQ(buffer[i], poison)
        << "byte " << i << " past the buffer was written";
  }
  return out;
}

// Random arguments for a signature, with the expected buffer.
class ArgFactory {
 public:
  explicit ArgFactory(std::mt19937_64& rng) : rng_(rng) {}

  void Fill(const KernelEntry& entry, CopyImpl impl, ArgArray& args,
            std::vector<uint8_t>& expected, const DriverApi& api) {
    expected.assign(entry.param_bytes, 0);
    TensorEncoder reference(&api, "reference", nullptr, nullptr);
    reference.set_cache_enabled(false);
    for (size_t i = 0; i < entry.params.size(); ++i) {
      const jit::ParamSpec& spec = entry.params[i];
      const jit::AcceptedArgs ok = jit::AcceptedArgsFor(spec);
      std::vector<int> kinds;
      for (int k = 1; k <= FJ_ARG_KIND_LAST; ++k) {
        if (ok.scalar_kinds & (1u << k)) kinds.push_back(k);
      }
      if (ok.bytes) kinds.push_back(FJ_ARG_BYTES);
      if (ok.c128) kinds.push_back(FJ_ARG_C128);
      if (ok.tensor) kinds.push_back(FJ_ARG_TENSOR);
      ASSERT_FALSE(kinds.empty()) << "parameter " << i << " accepts nothing";
      const int kind = kinds[rng_() % kinds.size()];
      fj_arg& a = args.at(i);
      a.kind = static_cast<fj_arg_kind>(kind);
      a.size = static_cast<uint32_t>(rng_());  // ignored unless BYTES
      a.v.u64 = rng_();                        // bytes past the size are noise
      uint8_t* dst = expected.data() + spec.offset;
      if (kind == FJ_ARG_C128) {
        auto& blob = blobs_.emplace_back(16);
        for (auto& b : blob) b = static_cast<uint8_t>(rng_());
        a.v.bytes = blob.data();
        std::memcpy(dst, blob.data(), 16);
      } else if (kind == FJ_ARG_BYTES) {
        auto& blob = blobs_.emplace_back(spec.size);
        for (auto& b : blob) b = static_cast<uint8_t>(rng_());
        a.size = spec.size;
        a.v.bytes = blob.data();
        std::memcpy(dst, blob.data(), spec.size);
      } else if (kind == FJ_ARG_TENSOR) {
        TestTensor& t = *tensors_.emplace_back(std::make_unique<TestTensor>());
        const int rank =
            spec.tensor_rank > 0 ? spec.tensor_rank : 1 + rng_() % 5;
        std::vector<int64_t> dims;
        for (int d = 0; d < rank; ++d) dims.push_back(1 + rng_() % 200);
        static const uint8_t kCodes[][2] = {
            {2, 32}, {2, 16}, {4, 16}, {0, 8}, {1, 32}, {FJ_DL_FLOAT8_E4M3, 8}};
        const uint8_t* code = kCodes[rng_() % 6];
        if (spec.tensor_dtype == fj::dtype_f32) code = kCodes[0];
        // Aligned to 16 or to the element only: both TMA and fallbacks.
        const uint64_t address =
            0x7f0000000000ull + (code[1] / 8) * (rng_() % 64);
        t.Set(address, rank, code[0], code[1], dims, rng_() % 2,
              rng_() % 2 ? 0 : rng_() % 5);
        for (int d = 0; d < rank; ++d)
          t.arg.box[d] = rng_() % 2 ? 0 : 1 + rng_() % 64;
        t.arg.oob = static_cast<fj_oob>(rng_() % 2);
        // PROMISE_IN_BOUNDS refuses a box past the tensor: keep it inside.
        for (int d = 0; t.arg.oob == FJ_OOB_PROMISE_IN_BOUNDS && d < rank; ++d)
          t.arg.box[d] = std::min<uint32_t>(t.arg.box[d], dims[d]);
        a.v.tensor = &t.arg;
        alignas(64) fj::tensor_param p;
        absl::Status s = reference.Encode(i, &t.arg, spec.tensor_rank,
                                          spec.tensor_dtype, impl, &p);
        ASSERT_TRUE(s.ok()) << s;
        std::memcpy(dst, &p, sizeof(p));
      } else {
        std::memcpy(dst, &a.v, spec.size);
      }
    }
  }

 private:
  std::mt19937_64& rng_;
  std::deque<std::vector<uint8_t>> blobs_;
  std::vector<std::unique_ptr<TestTensor>> tensors_;
};

struct Signature {
  std::string name;
  std::vector<Param> params;
  uint32_t trailing = 0;
};

std::vector<Signature> Signatures(std::mt19937_64& rng) {
  std::vector<Signature> s = {
      {"scalars",
       {I(1), I(8), I(2), Struct(12, 4), U(1), F(8), BF16(), Ptr(),
        Struct(24, 8), I(4), F(2), U(4), U(8), U(2), F(4)}},
      {"every_size_after_a_byte",
       {U(1), I(2), U(1), I(4), U(1), I(8), U(1), F(4), U(1), Struct(3, 1),
        U(1), Struct(12, 4), U(1), Struct(24, 8), U(1)}},
      {"extern_c_unknown",
       {Unknown(1, 1), Unknown(2, 2), Unknown(4, 4), Unknown(8, 8),
        Unknown(12, 4), Unknown(16, 8), Unknown(320, 64), Unknown(1, 1)}},
      {"pointers", {Ptr(), Ptr(), Ptr(), Ptr(), Ptr(), Ptr()}},
      {"tensors",
       {Ptr(), Tensor(2, fj::dtype_f32), I(4), Tensor(), F(4), Tensor(3),
        U(1)}},
      {"four_tensors", {Tensor(2), Tensor(2), Tensor(2), Tensor(2), I(4)}},
      {"big_struct_and_gaps",
       {U(1), Struct(300, 4), Struct(1000, 8), U(1)},
       400},
      {"trailing_padding", {I(8), U(1)}, 7},
      {"empty", {}},
  };
  const Param pool[] = {
      I(1), I(2), I(4), I(8), U(1), U(2), U(4), U(8), F(2), F(4), F(8), BF16(),
      Ptr(), Struct(12, 4), Struct(24, 8), Unknown(8, 8), Tensor(1), Tensor(),
      // cuFloatComplex and cuDoubleComplex (FJ_ARG_C64 / C128, since 1.3).
      Struct(8, 8), Struct(16, 16), Unknown(16, 16)};
  for (int variant = 0; variant < 3; ++variant) {
    Signature many{absl::StrCat("many_", variant), {}};
    for (int i = 0; i < 64; ++i)
      many.params.push_back(pool[rng() % std::size(pool)]);
    s.push_back(many);
  }
  return s;
}

TEST(LaunchPack, GenericAndThunkBuffersAreBitIdentical) {
  std::mt19937_64 rng =
      testing::SeededRng("GenericAndThunkBuffersAreBitIdentical");
  const DriverApi api = testing::FakeDriver();
  int rounds = 0;
  for (const Signature& sig : Signatures(rng)) {
    const KernelEntry entry = MakeEntry(sig.name, sig.params, sig.trailing);
    ASSERT_TRUE(jit::ValidateKernelLayout(entry).ok()) << sig.name;
    for (CopyImpl impl : kImpls) {
      SCOPED_TRACE(absl::StrCat(sig.name, " under ", jit::CopyImplName(impl)));
      const LaunchThunk* thunk = ThunkFor(entry, impl);
      ASSERT_NE(thunk, nullptr);
      for (int round = 0; round < 40; ++round, ++rounds) {
        const size_t stride = round % 2 ? sizeof(fj_arg) : sizeof(fj_arg) + 16;
        ArgArray args(entry.params.size(), stride);
        ArgFactory factory(rng);
        std::vector<uint8_t> expected;
        factory.Fill(entry, impl, args, expected, api);
        Packed generic =
            Pack(entry, impl, nullptr, args, args.size(), 0xA5, api);
        Packed thunked = Pack(entry, impl, thunk, args, args.size(), 0x5A, api);
        ASSERT_TRUE(generic.status.ok()) << generic.status;
        ASSERT_TRUE(thunked.status.ok()) << thunked.status;
        ASSERT_EQ(generic.bytes, expected) << "round " << round;
        ASSERT_EQ(thunked.bytes, expected) << "round " << round;
      }
    }
  }
  std::printf("[ info     ] %d rounds packed through both paths\n", rounds);
}

TEST(LaunchPack, KernelsWithOneSignatureShareOneThunk) {
  const KernelEntry a = MakeEntry("a", {Ptr(), I(4)});
  const KernelEntry b = MakeEntry("b", {Ptr(), I(4)});
  const KernelEntry c = MakeEntry("c", {Ptr(), U(4)});
  EXPECT_EQ(jit::ThunkSymbol(a, CopyImpl::kSync),
            jit::ThunkSymbol(b, CopyImpl::kSync));
  EXPECT_NE(jit::ThunkSymbol(a, CopyImpl::kSync),
            jit::ThunkSymbol(c, CopyImpl::kSync));
  EXPECT_NE(jit::ThunkSymbol(a, CopyImpl::kSync),
            jit::ThunkSymbol(a, CopyImpl::kTma));
  jit::ThunkCodegenStats stats;
  std::vector<KernelEntry> kernels = {a, b, c};
  ASSERT_TRUE(jit::EmitThunkObject(kernels, CopyImpl::kSync, &stats).ok());
  EXPECT_EQ(stats.thunks, 2);
}

// A signature with one parameter of each family, and calls that break it.
struct BadCall {
  std::string name;
  std::function<void(ArgArray&, size_t& n)> mutate;
  std::string message;  // a substring of the status message
  absl::StatusCode code = absl::StatusCode::kInvalidArgument;
};

TEST(LaunchPack, BadCallsFailTheSameWayOnBothPaths) {
  std::mt19937_64 rng = testing::SeededRng("BadCallsFailTheSameWayOnBothPaths");
  const DriverApi api = testing::FakeDriver();
  const KernelEntry entry = MakeEntry(
      "k", {Ptr(), I(4), F(4), Struct(12, 4), Tensor(2, fj::dtype_f32), U(8)});
  static TestTensor bad_tensor;
  static fj_tensor_arg short_arg;
  const std::vector<BadCall> calls = {
      {"one too few", [](ArgArray&, size_t& n) { n -= 1; },
       "takes 6 arguments, the call passed 5"},
      {"one too many", [](ArgArray&, size_t& n) { n += 1; }, "passed 7"},
      {"none", [](ArgArray&, size_t& n) { n = 0; }, "passed 0"},
      {"kind 0",
       [](ArgArray& a, size_t&) { a.at(1).kind = static_cast<fj_arg_kind>(0); },
       "argument 1: kind 0 is not"},
      {"kind 99",
       [](ArgArray& a, size_t&) {
         a.at(1).kind = static_cast<fj_arg_kind>(99);
       },
       "argument 1: kind 99"},
      {"kind -5",
       [](ArgArray& a, size_t&) {
         a.at(2).kind = static_cast<fj_arg_kind>(-5);
       },
       "argument 2: kind -5"},
      {"i64 for a pointer",
       [](ArgArray& a, size_t&) { a.at(0).kind = FJ_ARG_I64; },
       "argument 0: the kernel expects pointer, got FJ_ARG_I64"},
      {"f32 for an int",
       [](ArgArray& a, size_t&) { a.at(1).kind = FJ_ARG_F32; },
       "argument 1: the kernel expects 4-byte integer, got FJ_ARG_F32"},
      {"i32 for a float",
       [](ArgArray& a, size_t&) { a.at(2).kind = FJ_ARG_I32; }, "argument 2"},
      {"pointer for a u64",
       [](ArgArray& a, size_t&) { a.at(5).kind = FJ_ARG_POINTER; },
       "argument 5"},
      {"i64 for an i32",
       [](ArgArray& a, size_t&) { a.at(1).kind = FJ_ARG_I64; },
       "got FJ_ARG_I64 (8 bytes)"},
      {"i16 for an i32",
       [](ArgArray& a, size_t&) { a.at(1).kind = FJ_ARG_I16; }, "(2 bytes)"},
      {"f64 for an f32",
       [](ArgArray& a, size_t&) { a.at(2).kind = FJ_ARG_F64; },
       "argument 2: the kernel expects 4-byte float, got FJ_ARG_F64"},
      {"bytes for an int",
       [](ArgArray& a, size_t&) {
         a.at(1).kind = FJ_ARG_BYTES;
         a.at(1).size = 4;
       },
       "got FJ_ARG_BYTES"},
      {"11-byte struct", [](ArgArray& a, size_t&) { a.at(3).size = 11; },
       "argument 3: FJ_ARG_BYTES of 11 bytes"},
      {"13-byte struct", [](ArgArray& a, size_t&) { a.at(3).size = 13; },
       "13 bytes"},
      {"null struct", [](ArgArray& a, size_t&) { a.at(3).v.bytes = nullptr; },
       "NULL v.bytes"},
      {"tensor for a pointer",
       [](ArgArray& a, size_t&) { a.at(0).kind = FJ_ARG_TENSOR; },
       "got FJ_ARG_TENSOR"},
      {"pointer for a tensor",
       [](ArgArray& a, size_t&) { a.at(4).kind = FJ_ARG_POINTER; },
       "argument 4"},
      {"null tensor arg",
       [](ArgArray& a, size_t&) { a.at(4).v.tensor = nullptr; },
       "argument 4 (tensor): fj_arg.v.tensor is NULL"},
      {"short tensor arg",
       [](ArgArray& a, size_t&) {
         short_arg = *a.at(4).v.tensor;
         short_arg.struct_size = 16;
         a.at(4).v.tensor = &short_arg;
       },
       "struct_size is 16"},
      {"rank 3 for rank 2",
       [](ArgArray& a, size_t&) {
         bad_tensor.Set(0x7f0000000000ull, 3, 2, 32, {4, 4, 4}, false);
         a.at(4).v.tensor = &bad_tensor.arg;
       },
       "argument 4 (tensor): the kernel declares a rank-2 tensor but the "
       "caller passed rank 3"},
      {"bf16 for f32",
       [](ArgArray& a, size_t&) {
         bad_tensor.Set(0x7f0000000000ull, 2, 4, 16, {4, 4}, false);
         a.at(4).v.tensor = &bad_tensor.arg;
       },
       "declares dtype f32 but the caller passed bf16"},
      {"nan on ints",
       [](ArgArray& a, size_t&) {
         bad_tensor.Set(0x7f0000000000ull, 2, 0, 32, {4, 4}, false);
         bad_tensor.arg.oob = FJ_OOB_NAN;
         a.at(4).v.tensor = &bad_tensor.arg;
       },
       "FJ_OOB_NAN"},
      {"null data",
       [](ArgArray& a, size_t&) {
         bad_tensor.Set(0, 2, 2, 32, {4, 4}, false);
         a.at(4).v.tensor = &bad_tensor.arg;
       },
       "data is NULL"},
      {"mixed struct_size",
       [](ArgArray& a, size_t&) { a.at(3).struct_size += 8; },
       "argument 3: struct_size is"},
  };
  for (CopyImpl impl : kImpls) {
    const LaunchThunk* thunk = ThunkFor(entry, impl);
    ASSERT_NE(thunk, nullptr);
    for (const BadCall& call : calls) {
      SCOPED_TRACE(absl::StrCat(call.name, " under ", jit::CopyImplName(impl)));
      ArgArray args(entry.params.size(), sizeof(fj_arg));
      ArgFactory factory(rng);
      std::vector<uint8_t> expected;
      factory.Fill(entry, impl, args, expected, api);
      size_t n = args.size();
      ArgArray wide(n + 1, sizeof(fj_arg));  // room for "one too many"
      for (size_t i = 0; i < n; ++i) wide.at(i) = args.at(i);
      wide.at(n) = args.at(0);
      call.mutate(wide, n);
      Packed generic = Pack(entry, impl, nullptr, wide, n, 0xA5, api);
      Packed thunked = Pack(entry, impl, thunk, wide, n, 0x5A, api);
      EXPECT_EQ(generic.status.code(), call.code) << generic.status;
      EXPECT_EQ(thunked.status, generic.status);
      EXPECT_TRUE(absl::StrContains(generic.status.message(), call.message))
          << generic.status;
    }
  }
}

// PackEncoded (the runtime's own kernels' launcher, runtime/copy/) writes
// the same buffer as the wire's packer when handed each parameter already
// encoded: every parameter at its offset, zeros between, nothing past.
TEST(LaunchPack, EncodedParamsPackLikeTheWire) {
  std::mt19937_64 rng = testing::SeededRng("EncodedParamsPackLikeTheWire");
  const DriverApi api = testing::FakeDriver();
  int rounds = 0;
  for (const Signature& sig : Signatures(rng)) {
    const KernelEntry entry = MakeEntry(sig.name, sig.params, sig.trailing);
    for (CopyImpl impl : kImpls) {
      SCOPED_TRACE(absl::StrCat(sig.name, " under ", jit::CopyImplName(impl)));
      for (int round = 0; round < 10; ++round, ++rounds) {
        ArgArray args(entry.params.size(), sizeof(fj_arg));
        ArgFactory factory(rng);
        std::vector<uint8_t> expected;
        factory.Fill(entry, impl, args, expected, api);
        Packed wire = Pack(entry, impl, nullptr, args, args.size(), 0xA5, api);
        ASSERT_TRUE(wire.status.ok()) << wire.status;
        // Each parameter's bytes, taken from a copy of the wire's buffer.
        const std::vector<uint8_t> source = wire.bytes;
        std::vector<EncodedParam> params;
        for (const jit::ParamSpec& spec : entry.params) {
          params.push_back({source.data() + spec.offset, spec.size});
        }
        alignas(64) static uint8_t buffer[jit::kMaxParamBytes];
        std::memset(buffer, 0x3C, sizeof(buffer));
        absl::Status st = PackEncoded(entry, params, buffer, sizeof(buffer));
        ASSERT_TRUE(st.ok()) << st;
        ASSERT_EQ(std::vector<uint8_t>(buffer, buffer + entry.param_bytes),
                  expected)
            << "round " << round;
        for (size_t i = entry.param_bytes;
             i < entry.param_bytes + 64 && i < sizeof(buffer); ++i) {
          ASSERT_EQ(buffer[i], 0x3C) << "byte " << i << " past the buffer";
        }
      }
    }
  }
  std::printf("[ info     ] %d rounds packed from encoded parameters\n",
              rounds);
}

// PackEncoded's refusals: a count, a size or a NULL that does not match
// the kernel, and a tensor of another rank or dtype than it declares.
TEST(LaunchPack, EncodedParamsThatDoNotFitAreRefused) {
  std::mt19937_64 rng = testing::SeededRng("EncodedParamsThatDoNotFit");
  const KernelEntry entry =
      MakeEntry("k", {Tensor(2, fj::dtype_f32), I(4), Struct(12, 4)});
  alignas(64) fj::tensor_param t{};
  t.rank = 2;
  t.dtype = fj::dtype_f32;
  t.elem_bytes = 4;
  t.data = reinterpret_cast<void*>(rng() & ~uint64_t{63});
  const int32_t scalar = static_cast<int32_t>(rng());
  uint8_t block[12];
  for (uint8_t& b : block) b = static_cast<uint8_t>(rng());
  alignas(64) static uint8_t buffer[4096];
  auto pack = [&](std::vector<EncodedParam> p) {
    return PackEncoded(entry, p, buffer, sizeof(buffer));
  };
  ASSERT_TRUE(pack({{&t, 320}, {&scalar, 4}, {block, 12}}).ok());
  fj::tensor_param packed;
  std::memcpy(static_cast<void*>(&packed), buffer + entry.params[0].offset,
              sizeof(packed));
  EXPECT_EQ(packed.data, t.data);
  EXPECT_EQ(std::memcmp(buffer + entry.params[2].offset, block, 12), 0);

  absl::Status s = pack({{&t, 320}, {&scalar, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "takes 3 arguments")) << s;
  s = pack({{&t, 320}, {&scalar, 8}, {block, 12}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "argument 1: 8 encoded bytes"))
      << s;
  s = pack({{&t, 320}, {&scalar, 4}, {nullptr, 12}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "at NULL")) << s;
  t.rank = 3;
  s = pack({{&t, 320}, {&scalar, 4}, {block, 12}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "rank-2 tensor")) << s;
  t.rank = 2;
  t.dtype = fj::dtype_bf16;
  s = pack({{&t, 320}, {&scalar, 4}, {block, 12}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "declares dtype f32")) << s;
}

TEST(LaunchPack, BadArrays) {
  const DriverApi api = testing::FakeDriver();
  const KernelEntry entry = MakeEntry("k", {Ptr(), I(4)});
  const LaunchThunk* thunk = ThunkFor(entry, CopyImpl::kSync);
  ASSERT_NE(thunk, nullptr);
  for (const LaunchThunk* t :
       {static_cast<const LaunchThunk*>(nullptr), thunk}) {
    LoadedKernel k;
    k.entry = &entry;
    k.thunk.store(t);
    TensorEncoder encoder(&api, "k", nullptr, nullptr);
    alignas(64) uint8_t buffer[64];
    absl::Status s = PackForLaunch(k, nullptr, 2, sizeof(fj_arg), encoder, true,
                                   buffer, sizeof(buffer));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(s.message(), "args is NULL")) << s;
    ArgArray args(2, 16);  // an fj_arg shorter than the first version
    s = PackForLaunch(k, args.data(), 2, 16, encoder, true, buffer,
                      sizeof(buffer));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(
        absl::StrContains(s.message(), "smaller than the first version"))
        << s;
    // No arguments for a kernel with none: fine even with a NULL array.
    const KernelEntry none = MakeEntry("none", {});
    k.entry = &none;
    k.thunk.store(t ? ThunkFor(none, CopyImpl::kSync) : nullptr);
    EXPECT_TRUE(
        PackForLaunch(k, nullptr, 0, 0, encoder, true, buffer, sizeof(buffer))
            .ok());
  }
}

TEST(LaunchPack, ThunkReturnCodesNameTheArgument) {
  const KernelEntry entry = MakeEntry("k", {Ptr(), I(4), Struct(12, 4)});
  const LaunchThunk* thunk = ThunkFor(entry, CopyImpl::kSync);
  ASSERT_NE(thunk, nullptr);
  ArgArray args(3, sizeof(fj_arg));
  uint8_t blob[12] = {};
  args.at(0).kind = FJ_ARG_POINTER;
  args.at(1).kind = FJ_ARG_U32;
  args.at(2).kind = FJ_ARG_BYTES;
  args.at(2).size = 12;
  args.at(2).v.bytes = blob;
  alignas(64) uint8_t buffer[64];
  EXPECT_EQ(thunk->fn(args.data(), 3, sizeof(fj_arg), buffer, nullptr), 0);
  EXPECT_EQ(thunk->fn(args.data(), 2, sizeof(fj_arg), buffer, nullptr),
            kThunkBadCount);
  args.at(1).kind = FJ_ARG_F32;
  EXPECT_EQ(thunk->fn(args.data(), 3, sizeof(fj_arg), buffer, nullptr), 2);
  args.at(1).kind = FJ_ARG_I32;
  args.at(2).size = 8;
  EXPECT_EQ(thunk->fn(args.data(), 3, sizeof(fj_arg), buffer, nullptr), 3);
  args.at(2).size = 12;
  args.at(0).struct_size = 48;
  EXPECT_EQ(thunk->fn(args.data(), 3, sizeof(fj_arg), buffer, nullptr), 1);
}

TEST(LaunchPack, MalformedLayoutsAreStatusesAndGetNoThunk) {
  KernelEntry past_end = MakeEntry("past_end", {Ptr(), I(4)});
  past_end.param_bytes = 10;
  KernelEntry overlap = MakeEntry("overlap", {Ptr(), I(4)});
  overlap.params[1].offset = 4;
  KernelEntry small_tensor = MakeEntry("small_tensor", {Tensor()});
  small_tensor.params[0].size = 256;
  KernelEntry huge = MakeEntry("huge", {Struct(40000, 8)});
  EXPECT_EQ(jit::ValidateKernelLayout(past_end).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(jit::ValidateKernelLayout(overlap).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(jit::ValidateKernelLayout(small_tensor).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(jit::ValidateKernelLayout(huge).code(),
            absl::StatusCode::kOutOfRange);
  jit::ThunkCodegenStats stats;
  std::vector<KernelEntry> all = {past_end, overlap, small_tensor, huge};
  auto object = jit::EmitThunkObject(all, CopyImpl::kSync, &stats);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(stats.thunks, 0);
  EXPECT_EQ(stats.skipped, 4);
  // The generic path refuses them without writing out of bounds.
  const DriverApi api = testing::FakeDriver();
  TensorEncoder encoder(&api, "k", nullptr, nullptr);
  ArgArray args(2, sizeof(fj_arg));
  args.at(0).kind = FJ_ARG_POINTER;
  args.at(1).kind = FJ_ARG_I32;
  alignas(64) uint8_t buffer[jit::kMaxParamBytes];
  absl::Status s = PackParams(past_end, CopyImpl::kSync, args.data(), 2,
                              sizeof(fj_arg), &encoder, buffer, sizeof(buffer));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  ArgArray one(1, sizeof(fj_arg));
  s = PackParams(huge, CopyImpl::kSync, one.data(), 1, sizeof(fj_arg), &encoder,
                 buffer, sizeof(buffer));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
}

// --- Launch configuration checks (pure, no GPU) -----------------------------

DeviceFacts H200Facts() {
  DeviceFacts f;
  f.name = "NVIDIA H200";
  f.cc_major = 9;
  f.shared_per_block = 48 * 1024;
  f.shared_per_block_optin = 227 * 1024;
  f.max_threads_per_block = 1024;
  f.max_block_dim[0] = 1024;
  f.max_block_dim[1] = 1024;
  f.max_block_dim[2] = 64;
  f.max_grid_dim[0] = 2147483647;
  f.max_grid_dim[1] = 65535;
  f.max_grid_dim[2] = 65535;
  f.cluster_launch = true;
  return f;
}

LaunchConfig Config(std::initializer_list<uint32_t> grid,
                    std::initializer_list<uint32_t> block, uint32_t shared = 0,
                    std::initializer_list<uint32_t> cluster = {0, 0, 0}) {
  LaunchConfig c;
  std::copy(grid.begin(), grid.end(), c.grid);
  std::copy(block.begin(), block.end(), c.block);
  std::copy(cluster.begin(), cluster.end(), c.cluster);
  c.shared_bytes = shared;
  return c;
}

TEST(LaunchConfig, NormalisesAndAcceptsValidConfigs) {
  LaunchShape s;
  ASSERT_TRUE(
      CheckLaunchConfig(H200Facts(), 1024, 0, Config({0, 0, 0}, {0, 0, 0}), &s)
          .ok());
  EXPECT_EQ(s.grid[0] * s.grid[1] * s.grid[2], 1u);
  EXPECT_EQ(s.block[0] * s.block[1] * s.block[2], 1u);
  EXPECT_FALSE(s.has_cluster);
  ASSERT_TRUE(CheckLaunchConfig(
                  H200Facts(), 1024, 1024,
                  Config({132, 2, 1}, {128, 1, 1}, 200 * 1024, {2, 1, 0}), &s)
                  .ok());
  EXPECT_TRUE(s.has_cluster);
  EXPECT_FALSE(s.non_portable_cluster);
  EXPECT_EQ(s.cluster[2], 1u);
  EXPECT_EQ(s.dynamic_shared, 200u * 1024);
  ASSERT_TRUE(CheckLaunchConfig(H200Facts(), 0, 0,
                                Config({16, 1, 1}, {32, 1, 1}, 0, {16, 1, 1}),
                                &s)
                  .ok());
  EXPECT_TRUE(s.non_portable_cluster);
}

// A plain config (no flags, window or cluster) is accepted exactly when
// every extent is within each limit the device and the kernel report (0:
// none), and then every field of the shape is written, whatever the shape
// held before. Random configs around the limits, against the rules.
TEST(LaunchConfig, PlainConfigsAreAcceptedExactlyWithinTheLimits) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  auto pick = [&](uint32_t limit) -> uint32_t {
    switch (rng() % 5) {
      case 0:
        return 0;
      case 1:
        return limit;
      case 2:
        return limit + 1;
      case 3:
        return 1 + rng() % (limit + 1);
      default:
        return rng() % 8;
    }
  };
  int accepted = 0, refused = 0;
  for (int round = 0; round < 4000; ++round) {
    DeviceFacts f = H200Facts();
    // Some limits unreported (0), as a driver without the attribute gives.
    if (rng() % 4 == 0) f.max_grid_dim[rng() % 3] = 0;
    if (rng() % 4 == 0) f.max_block_dim[rng() % 3] = 0;
    if (rng() % 4 == 0) f.max_threads_per_block = 0;
    if (rng() % 4 == 0) f.shared_per_block_optin = 0;
    const int kernel_max = rng() % 3 == 0 ? 0 : 32 * (1 + rng() % 32);
    const int static_shared = rng() % 3 == 0 ? -(rng() % 64) : rng() % 4096;
    LaunchConfig cfg;
    for (int i = 0; i < 3; ++i) {
      cfg.grid[i] = pick(f.max_grid_dim[i] > 0 ? f.max_grid_dim[i] : 70000);
      cfg.block[i] = pick(f.max_block_dim[i] > 0 ? f.max_block_dim[i] : 2048);
    }
    cfg.shared_bytes = pick(232448);
    LaunchShape s;  // poisoned: every field must be overwritten
    std::fill_n(s.grid, 3, 0xdeadu);
    std::fill_n(s.block, 3, 0xdeadu);
    std::fill_n(s.cluster, 3, 7u);
    s.has_cluster = s.non_portable_cluster = s.cooperative = s.programmatic =
        s.has_window = true;
    s.dynamic_shared = 0xdead;
    s.l2_hit_ratio = 0.5f;
    s.l2_window_base = s.l2_window_bytes = 0xdead;
    const absl::Status st =
        CheckLaunchConfig(f, kernel_max, static_shared, cfg, &s);

    uint32_t g[3], b[3];
    bool ok = true;
    auto within = [](uint64_t v, int limit) {
      return limit <= 0 || v <= static_cast<uint64_t>(limit);
    };
    for (int i = 0; i < 3; ++i) {
      g[i] = std::max(cfg.grid[i], 1u);
      b[i] = std::max(cfg.block[i], 1u);
      ok = ok && within(g[i], f.max_grid_dim[i]) &&
           within(b[i], f.max_block_dim[i]);
    }
    const uint64_t threads = uint64_t{b[0]} * b[1] * b[2];
    ok = ok && within(threads, f.max_threads_per_block) &&
         within(threads, kernel_max) &&
         within(uint64_t{cfg.shared_bytes} + std::max(static_shared, 0),
                f.shared_per_block_optin);
    ASSERT_EQ(st.ok(), ok) << "round " << round << ": " << st;
    // The launch path's check, with the limits resolved at load, agrees.
    LaunchShape fast;
    ASSERT_EQ(FitsPlainLaunch(ResolveLaunchLimits(f, kernel_max, static_shared),
                              cfg, &fast),
              ok)
        << "round " << round;
    if (ok) {
      EXPECT_EQ(std::memcmp(fast.grid, s.grid, sizeof(s.grid)), 0);
      EXPECT_EQ(std::memcmp(fast.block, s.block, sizeof(s.block)), 0);
      EXPECT_EQ(fast.dynamic_shared, s.dynamic_shared);
    }
    if (!ok) {
      EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
      ++refused;
      continue;
    }
    ++accepted;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(s.grid[i], g[i]);
      EXPECT_EQ(s.block[i], b[i]);
      EXPECT_EQ(s.cluster[i], 1u);
    }
    EXPECT_FALSE(s.has_cluster || s.non_portable_cluster || s.cooperative ||
                 s.programmatic || s.has_window);
    EXPECT_EQ(s.dynamic_shared, cfg.shared_bytes);
    EXPECT_EQ(s.l2_hit_ratio, 0.0f);
    EXPECT_EQ(s.l2_window_base, 0u);
    EXPECT_EQ(s.l2_window_bytes, 0u);
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
}

// Only a plain launch takes the fast check: flags, a cluster or an L2
// window, and a kernel whose limits were never resolved, go through
// CheckLaunchConfig.
TEST(LaunchConfig, OnlyPlainLaunchesOfResolvedKernelsFitTheFastCheck) {
  const LaunchLimits limits = ResolveLaunchLimits(H200Facts(), 1024, 0);
  LaunchShape s;
  EXPECT_TRUE(FitsPlainLaunch(limits, Config({4, 1, 1}, {128, 1, 1}), &s));
  EXPECT_EQ(s.grid[0], 4u);
  EXPECT_EQ(s.block[0], 128u);
  EXPECT_FALSE(
      FitsPlainLaunch(LaunchLimits{}, Config({4, 1, 1}, {128, 1, 1}), &s))
      << "unresolved";
  EXPECT_FALSE(FitsPlainLaunch(
      limits, Config({4, 1, 1}, {128, 1, 1}, 0, {2, 1, 1}), &s));
  LaunchConfig flagged = Config({4, 1, 1}, {128, 1, 1});
  flagged.flags = FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
  EXPECT_FALSE(FitsPlainLaunch(limits, flagged, &s));
  LaunchConfig window = Config({4, 1, 1}, {128, 1, 1});
  window.l2_window_bytes = 1 << 20;
  window.l2_window_base = 0x10000;
  window.l2_hit_ratio = 1.0f;
  EXPECT_FALSE(FitsPlainLaunch(limits, window, &s));
  EXPECT_FALSE(FitsPlainLaunch(limits, Config({4, 1, 1}, {2048, 1, 1}), &s))
      << "over the limit: CheckLaunchConfig says why";
}

TEST(LaunchConfig, RejectsWhatTheDeviceCannotRun) {
  struct Case {
    const char* name;
    LaunchConfig cfg;
    DeviceFacts facts;
    int kernel_max_threads;
    int static_shared;
    absl::StatusCode code;
    const char* message;
  };
  DeviceFacts ampere = H200Facts();
  ampere.cc_major = 8;
  ampere.cluster_launch = false;
  const absl::StatusCode range = absl::StatusCode::kOutOfRange;
  const Case cases[] = {
      {"grid.y", Config({1, 65536, 1}, {1, 1, 1}), H200Facts(), 0, 0, range,
       "grid.y = 65536"},
      {"grid.x", Config({0x80000000u, 1, 1}, {1, 1, 1}), H200Facts(), 0, 0,
       range, "grid.x"},
      {"block.z", Config({1, 1, 1}, {1, 1, 65}), H200Facts(), 0, 0, range,
       "block.z = 65"},
      {"threads", Config({1, 1, 1}, {64, 32, 1}), H200Facts(), 0, 0, range,
       "2048 threads"},
      {"kernel threads", Config({1, 1, 1}, {512, 1, 1}), H200Facts(), 256, 0,
       range, "the 256 this kernel can run"},
      {"shared", Config({1, 1, 1}, {1, 1, 1}, 227 * 1024), H200Facts(), 0, 16,
       range, "opt-in limit 232448"},
      {"cluster on sm_80", Config({2, 1, 1}, {1, 1, 1}, 0, {2, 1, 1}), ampere,
       0, 0, absl::StatusCode::kFailedPrecondition,
       "cannot launch thread-block clusters"},
      {"cluster of 32", Config({32, 1, 1}, {1, 1, 1}, 0, {4, 8, 1}),
       H200Facts(), 0, 0, range, "32 blocks exceeds 16"},
      {"cluster divides grid", Config({6, 1, 1}, {1, 1, 1}, 0, {4, 1, 1}),
       H200Facts(), 0, 0, range,
       "grid.x = 6 is not a multiple of cluster.x = 4"},
  };
  for (const Case& c : cases) {
    LaunchShape s;
    absl::Status st = CheckLaunchConfig(c.facts, c.kernel_max_threads,
                                        c.static_shared, c.cfg, &s);
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), c.message))
        << c.name << ": " << st;
  }
}

TEST(LaunchConfig, StickyErrors) {
  for (CUresult r :
       {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
        CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_ASSERT, CUDA_ERROR_HARDWARE_STACK_ERROR}) {
    EXPECT_TRUE(IsStickyError(r)) << r;
  }
  for (CUresult r :
       {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_CLUSTER_SIZE}) {
    EXPECT_FALSE(IsStickyError(r)) << r;
  }
}

TEST(LaunchConfig, AnUnloadedKernelIsAStatus) {
  LoadedKernel k;
  LaunchConfig cfg = Config({1, 1, 1}, {1, 1, 1});
  absl::Status s = Launch(k, cfg, nullptr, nullptr, 0, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

// --- Since 1.3: complex scalars and the launch flags ------------------------

// A cuFloatComplex and a cuDoubleComplex land at their aligned offsets (8
// after a 4-byte int, 32 after another) as the two floats / doubles, on both
// paths.
TEST(LaunchPack, ComplexScalarsPackAsCuComplex) {
  std::mt19937_64 rng = testing::SeededRng("ComplexScalarsPackAsCuComplex");
  const DriverApi api = testing::FakeDriver();
  const KernelEntry entry =
      MakeEntry("cplx", {I(4), Struct(8, 8), I(4), Struct(16, 16), Ptr()});
  ASSERT_EQ(entry.params[1].offset, 8u);
  std::uniform_real_distribution<float> f(-1e3f, 1e3f);
  std::uniform_real_distribution<double> d(-1e9, 1e9);
  for (CopyImpl impl : kImpls) {
    const LaunchThunk* thunk = ThunkFor(entry, impl);
    ASSERT_NE(thunk, nullptr);
    for (int round = 0; round < 20; ++round) {
      const float c64[2] = {f(rng), f(rng)};
      const double c128[2] = {d(rng), d(rng)};
      const int32_t n = static_cast<int32_t>(rng());
      ArgArray args(5, sizeof(fj_arg));
      args.at(0).kind = FJ_ARG_I32;
      args.at(0).v.i32 = n;
      args.at(1).kind = FJ_ARG_C64;
      std::memcpy(&args.at(1).v, c64, sizeof(c64));
      args.at(2).kind = FJ_ARG_I32;
      args.at(2).v.i32 = ~n;
      args.at(3).kind = FJ_ARG_C128;
      args.at(3).v.bytes = c128;
      args.at(4).kind = FJ_ARG_POINTER;
      args.at(4).v.pointer = rng();
      std::vector<uint8_t> expected(entry.param_bytes, 0);
      std::memcpy(expected.data() + 0, &n, 4);
      std::memcpy(expected.data() + 8, c64, 8);
      const int32_t not_n = ~n;
      std::memcpy(expected.data() + 16, &not_n, 4);
      std::memcpy(expected.data() + 32, c128, 16);
      std::memcpy(expected.data() + 48, &args.at(4).v.pointer, 8);
      ASSERT_EQ(entry.params[2].offset, 16u);
      ASSERT_EQ(entry.params[3].offset, 32u);
      Packed generic = Pack(entry, impl, nullptr, args, 5, 0xA5, api);
      Packed thunked = Pack(entry, impl, thunk, args, 5, 0x5A, api);
      ASSERT_TRUE(generic.status.ok()) << generic.status;
      ASSERT_TRUE(thunked.status.ok()) << thunked.status;
      EXPECT_EQ(generic.bytes, expected);
      EXPECT_EQ(thunked.bytes, expected);
    }
  }
}

// C64 and C128 go only where their size fits a by-value parameter; a NULL
// C128 pointer is refused; both paths say the same.
TEST(LaunchPack, ComplexScalarsAreRefusedWhereTheyDoNotFit) {
  const DriverApi api = testing::FakeDriver();
  const double c128[2] = {1.5, -2.5};
  struct Case {
    std::vector<testing::Param> params;
    int kind;
    bool null_bytes;
    const char* message;
  };
  const Case cases[] = {
      {{F(8)}, FJ_ARG_C64, false, "expects 8-byte float, got FJ_ARG_C64"},
      {{Ptr()}, FJ_ARG_C64, false, "expects pointer, got FJ_ARG_C64"},
      {{Struct(16, 16)}, FJ_ARG_C64, false, "got FJ_ARG_C64 (8 bytes)"},
      {{Struct(8, 8)}, FJ_ARG_C128, false, "got FJ_ARG_C128 (16 bytes)"},
      {{I(8)}, FJ_ARG_C128, false, "got FJ_ARG_C128"},
      {{Struct(16, 16)}, FJ_ARG_C128, true, "FJ_ARG_C128 with a NULL v.bytes"},
  };
  for (const Case& c : cases) {
    const KernelEntry entry = MakeEntry("k", c.params);
    ArgArray args(1, sizeof(fj_arg));
    args.at(0).kind = static_cast<fj_arg_kind>(c.kind);
    args.at(0).v.bytes = c.null_bytes ? nullptr : c128;
    if (c.kind == FJ_ARG_C64) args.at(0).v.u64 = 0x3f8000003f800000ull;
    const LaunchThunk* thunk = ThunkFor(entry, CopyImpl::kSync);
    Packed generic = Pack(entry, CopyImpl::kSync, nullptr, args, 1, 0, api);
    Packed thunked = Pack(entry, CopyImpl::kSync, thunk, args, 1, 0, api);
    EXPECT_EQ(generic.status.code(), absl::StatusCode::kInvalidArgument)
        << c.message << ": " << generic.status;
    EXPECT_TRUE(absl::StrContains(generic.status.message(), c.message))
        << generic.status;
    EXPECT_EQ(thunked.status, generic.status);
  }
  EXPECT_EQ(jit::ArgKindName(FJ_ARG_C64), "FJ_ARG_C64");
  EXPECT_EQ(jit::ArgKindName(FJ_ARG_C128), "FJ_ARG_C128");
  EXPECT_EQ(jit::ArgKindName(FJ_ARG_C128 + 1), "kind 18");
}

TEST(LaunchConfig, CooperativeProgrammaticAndWindowFlags) {
  DeviceFacts hopper = H200Facts();
  hopper.cooperative_launch = true;
  hopper.max_access_policy_window_bytes = 128 << 20;
  LaunchShape s;
  LaunchConfig cfg = Config({4, 1, 1}, {32, 1, 1});
  cfg.flags = FJ_LAUNCH_COOPERATIVE | FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
  cfg.l2_window_base = 0x7f0000000000ull;
  cfg.l2_window_bytes = 1 << 20;
  cfg.l2_hit_ratio = 0.5f;
  ASSERT_TRUE(CheckLaunchConfig(hopper, 0, 0, cfg, &s).ok());
  EXPECT_TRUE(s.cooperative);
  EXPECT_TRUE(s.programmatic);
  EXPECT_TRUE(s.has_window);
  EXPECT_EQ(s.l2_window_bytes, 1u << 20);
  EXPECT_FLOAT_EQ(s.l2_hit_ratio, 0.5f);
  // No flags, no window: none of the three attributes.
  ASSERT_TRUE(
      CheckLaunchConfig(hopper, 0, 0, Config({4, 1, 1}, {32, 1, 1}), &s).ok());
  EXPECT_FALSE(s.cooperative || s.programmatic || s.has_window);
}

TEST(LaunchConfig, RefusesFlagsTheDeviceLacks) {
  DeviceFacts hopper = H200Facts();
  hopper.cooperative_launch = true;
  hopper.max_access_policy_window_bytes = 128 << 20;
  DeviceFacts ampere = hopper;
  ampere.cc_major = 8;
  DeviceFacts volta = hopper;
  volta.cc_major = 7;
  volta.max_access_policy_window_bytes = 0;
  DeviceFacts no_coop = hopper;
  no_coop.cooperative_launch = false;
  auto with = [](uint32_t flags, uint64_t window = 0, float ratio = 1.0f,
                 uint64_t base = 0x10000) {
    LaunchConfig c = Config({1, 1, 1}, {32, 1, 1});
    c.flags = flags;
    c.l2_window_bytes = window;
    c.l2_hit_ratio = ratio;
    c.l2_window_base = base;
    return c;
  };
  const absl::StatusCode pre = absl::StatusCode::kFailedPrecondition;
  const absl::StatusCode range = absl::StatusCode::kOutOfRange;
  struct Case {
    const char* name;
    DeviceFacts facts;
    LaunchConfig cfg;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {"unknown flag", hopper, with(1u << 7),
       absl::StatusCode::kInvalidArgument, "unknown bits 0x80"},
      {"PDL on sm_80", ampere, with(FJ_LAUNCH_PROGRAMMATIC_DEPENDENT), pre,
       "no programmatic dependent launch"},
      {"cooperative unsupported", no_coop, with(FJ_LAUNCH_COOPERATIVE), pre,
       "cannot launch cooperative kernels"},
      {"window on sm_70", volta, with(0, 4096), pre,
       "no L2 access-policy window"},
      {"window too large", hopper, with(0, (128u << 20) + 1), range,
       "exceeds the largest access-policy window"},
      {"hit ratio 0", hopper, with(0, 4096, 0.0f), range,
       "l2_hit_ratio = 0 is not in (0, 1]"},
      {"hit ratio above 1", hopper, with(0, 4096, 1.5f), range,
       "is not in (0, 1]"},
      {"window at 0", hopper, with(0, 4096, 1.0f, 0),
       absl::StatusCode::kInvalidArgument, "l2_window_base is 0"},
  };
  for (const Case& c : cases) {
    LaunchShape s;
    absl::Status st = CheckLaunchConfig(c.facts, 0, 0, c.cfg, &s);
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), c.message))
        << c.name << ": " << st;
  }
  // PDL and the window are fine on the devices that have them.
  LaunchShape s;
  EXPECT_TRUE(CheckLaunchConfig(ampere, 0, 0, with(0, 4096), &s).ok());
  EXPECT_TRUE(CheckLaunchConfig(hopper, 0, 0,
                                with(FJ_LAUNCH_PROGRAMMATIC_DEPENDENT), &s)
                  .ok());
}

}  // namespace
}  // namespace fleetjit
