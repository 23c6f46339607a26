// The artifact encoding. All integers are little-endian; strings and lists
// are length-prefixed:
//
//   magic "FJART\0\0\0" (8)   version u32 (1 or 2; written: 2)
//   target: arch u32, suffix u8 ('\0', 'a', 'f'), ptx u8 (0/1)
//   copy_impl u8 (0..2)   is_ptx u8 (0/1)
//   image, ptx, log, compiler: string (u64 length + bytes)
//   compile_ms: f64 (IEEE-754 bits as u64), finite and >= 0
//   kernels: u32 count, then per kernel:
//     name, lowered_name: string
//     params: u32 count, then per param:
//       kind u8 (0..7), offset u32, size u32, align u32,
//       tensor_dtype i32, tensor_rank i32, type_name: string
//     param_bytes u32
//   thunk_object: string
//   version 2 only: globals: u32 count, then per global name, lowered_name
//   (end of input: trailing bytes are an error)
//
// A new Artifact field goes at the end and bumps the version. The reader
// takes every version up to its own (an older entry reads with the later
// fields empty: version 1 has no globals); the cache treats a newer one as
// malformed and rebuilds it.
//
// The reader trusts nothing: every length is checked against what is left
// before anything is read or allocated, so a hostile or truncated input
// costs at most one pass over its bytes.
#include "jit/artifact.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fleetjit::jit {
namespace {

constexpr char kMagic[8] = {'F', 'J', 'A', 'R', 'T', '\0', '\0', '\0'};
constexpr uint32_t kVersion = 2;
constexpr uint32_t kMinVersion = 1;

// Smallest encodings, used to bound list counts before allocating.
constexpr size_t kMinParamBytes = 1 + 4 * 5 + 8;
constexpr size_t kMinKernelBytes = 8 + 8 + 4 + 4;

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}
  void Bytes(const void* p, size_t n) {
    out_.append(static_cast<const char*>(p), n);
  }
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) U8(static_cast<uint8_t>(v >> (8 * i)));
  }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void String(absl::string_view s) {
    U64(s.size());
    Bytes(s.data(), s.size());
  }

 private:
  std::string& out_;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}

  size_t remaining() const { return in_.size() - pos_; }
  const absl::Status& status() const { return status_; }

  bool Bytes(void* out, size_t n, absl::string_view what) {
    if (!Need(n, what)) return false;
    std::memcpy(out, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool U8(uint8_t& v, absl::string_view what) { return Bytes(&v, 1, what); }
  bool U32(uint32_t& v, absl::string_view what) {
    uint8_t b[4];
    if (!Bytes(b, 4, what)) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{b[i]} << (8 * i);
    return true;
  }
  bool U64(uint64_t& v, absl::string_view what) {
    uint8_t b[8];
    if (!Bytes(b, 8, what)) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{b[i]} << (8 * i);
    return true;
  }
  bool I32(int32_t& v, absl::string_view what) {
    uint32_t u;
    if (!U32(u, what)) return false;
    v = static_cast<int32_t>(u);
    return true;
  }
  bool Bool(bool& v, absl::string_view what) {
    uint8_t b;
    if (!U8(b, what)) return false;
    if (b > 1) return Fail(what, absl::StrCat("is ", b, ", not 0 or 1"));
    v = b == 1;
    return true;
  }
  bool String(std::string& s, absl::string_view what) {
    uint64_t n;
    if (!U64(n, what) || !Need(n, what)) return false;
    s.assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // Reads a list count whose elements take at least `min_element_bytes`.
  bool Count(uint32_t& n, size_t min_element_bytes, absl::string_view what) {
    if (!U32(n, what)) return false;
    if (n > remaining() / min_element_bytes) {
      return Fail(what, absl::StrCat("count ", n, " exceeds the ", remaining(),
                                     " bytes left"));
    }
    return true;
  }

  bool Fail(absl::string_view what, absl::string_view problem) {
    if (status_.ok()) {
      status_ = absl::DataLossError(absl::StrCat(
          "malformed artifact: ", what, " at byte ", pos_, ": ", problem));
    }
    return false;
  }

 private:
  bool Need(uint64_t n, absl::string_view what) {
    if (n > remaining()) {
      return Fail(what, absl::StrCat("needs ", n, " bytes, ", remaining(),
                                     " left (truncated?)"));
    }
    return true;
  }

  absl::string_view in_;
  size_t pos_ = 0;
  absl::Status status_;
};

bool ReadParam(Reader& r, ParamSpec& p) {
  uint8_t kind;
  if (!r.U8(kind, "param kind")) return false;
  if (kind > static_cast<uint8_t>(ParamKind::kStruct)) {
    return r.Fail("param kind", absl::StrCat("unknown value ", kind));
  }
  p.kind = static_cast<ParamKind>(kind);
  return r.U32(p.offset, "param offset") && r.U32(p.size, "param size") &&
         r.U32(p.align, "param align") &&
         r.I32(p.tensor_dtype, "param tensor dtype") &&
         r.I32(p.tensor_rank, "param tensor rank") &&
         r.String(p.type_name, "param type name");
}

bool ReadKernel(Reader& r, KernelEntry& k) {
  uint32_t count;
  if (!r.String(k.name, "kernel name") ||
      !r.String(k.lowered_name, "kernel lowered name") ||
      !r.Count(count, kMinParamBytes, "param count")) {
    return false;
  }
  k.params.resize(count);
  for (ParamSpec& p : k.params) {
    if (!ReadParam(r, p)) return false;
  }
  return r.U32(k.param_bytes, "kernel param bytes");
}

bool ReadArtifact(Reader& r, Artifact& a) {
  char magic[sizeof(kMagic)];
  if (!r.Bytes(magic, sizeof(magic), "magic")) return false;
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return r.Fail("magic", "not a fleetjit artifact");
  }
  uint32_t version;
  if (!r.U32(version, "version")) return false;
  if (version < kMinVersion || version > kVersion) {
    return r.Fail("version", absl::StrCat("unsupported version ", version,
                                          " (this build reads ", kMinVersion,
                                          " to ", kVersion, ")"));
  }

  uint32_t arch;
  uint8_t suffix, copy_impl;
  if (!r.U32(arch, "target arch")) return false;
  if (arch > 0x7fffffff) {
    return r.Fail("target arch", absl::StrCat("out of range: ", arch));
  }
  a.target.arch = static_cast<int>(arch);
  if (!r.U8(suffix, "target suffix")) return false;
  if (suffix != 0 && suffix != 'a' && suffix != 'f') {
    return r.Fail("target suffix", absl::StrCat("unknown value ", suffix));
  }
  a.target.suffix = static_cast<char>(suffix);
  if (!r.Bool(a.target.ptx, "target ptx flag") ||
      !r.U8(copy_impl, "copy implementation")) {
    return false;
  }
  if (copy_impl > static_cast<uint8_t>(CopyImpl::kTma)) {
    return r.Fail("copy implementation",
                  absl::StrCat("unknown value ", copy_impl));
  }
  a.copy_impl = static_cast<CopyImpl>(copy_impl);

  uint64_t compile_ms_bits;
  if (!r.Bool(a.is_ptx, "is_ptx flag") || !r.String(a.image, "image") ||
      !r.String(a.ptx, "ptx") || !r.String(a.log, "log") ||
      !r.String(a.compiler, "compiler") ||
      !r.U64(compile_ms_bits, "compile time")) {
    return false;
  }
  a.compile_ms = std::bit_cast<double>(compile_ms_bits);
  if (!std::isfinite(a.compile_ms) || a.compile_ms < 0) {
    return r.Fail("compile time", "not a finite, non-negative number");
  }

  uint32_t count;
  if (!r.Count(count, kMinKernelBytes, "kernel count")) return false;
  a.kernels.resize(count);
  for (KernelEntry& k : a.kernels) {
    if (!ReadKernel(r, k)) return false;
  }
  if (!r.String(a.thunk_object, "thunk object")) return false;
  if (version >= 2) {
    uint32_t globals;
    if (!r.Count(globals, 16, "global count")) return false;
    a.globals.resize(globals);
    for (GlobalEntry& g : a.globals) {
      if (!r.String(g.name, "global name") ||
          !r.String(g.lowered_name, "global lowered name")) {
        return false;
      }
    }
  }
  if (r.remaining() != 0) {
    return r.Fail("end", absl::StrCat(r.remaining(), " trailing bytes"));
  }
  return true;
}

}  // namespace

const KernelEntry* Artifact::FindKernel(absl::string_view name) const {
  for (const KernelEntry& k : kernels) {
    if (k.name == name) return &k;
  }
  // An extern "C" kernel's lowered name is its name; a mangled one may be
  // asked for by symbol (e.g. from a PTX listing).
  for (const KernelEntry& k : kernels) {
    if (k.lowered_name == name) return &k;
  }
  return nullptr;
}

std::string Artifact::GlobalSymbol(absl::string_view name) const {
  // NVRTC's form of a variable's name expression is its address
  // ("&ns::table"); either spelling finds it.
  for (const GlobalEntry& g : globals) {
    absl::string_view bare = g.name;
    if (!bare.empty() && bare.front() == '&') bare.remove_prefix(1);
    absl::string_view asked = name;
    if (!asked.empty() && asked.front() == '&') asked.remove_prefix(1);
    if (bare == asked) return g.lowered_name;
  }
  if (!name.empty() && name.front() == '&') name.remove_prefix(1);
  return std::string(name);
}

std::string SerializeArtifact(const Artifact& a) {
  std::string out;
  size_t estimate = 128 + a.image.size() + a.ptx.size() + a.log.size() +
                    a.compiler.size() + a.thunk_object.size();
  for (const KernelEntry& k : a.kernels) {
    estimate += kMinKernelBytes + k.name.size() + k.lowered_name.size();
    for (const ParamSpec& p : k.params) {
      estimate += kMinParamBytes + p.type_name.size();
    }
  }
  out.reserve(estimate);

  Writer w(out);
  w.Bytes(kMagic, sizeof(kMagic));
  w.U32(kVersion);
  w.U32(static_cast<uint32_t>(a.target.arch));
  w.U8(static_cast<uint8_t>(a.target.suffix));
  w.U8(a.target.ptx ? 1 : 0);
  w.U8(static_cast<uint8_t>(a.copy_impl));
  w.U8(a.is_ptx ? 1 : 0);
  w.String(a.image);
  w.String(a.ptx);
  w.String(a.log);
  w.String(a.compiler);
  // A NaN or negative time (a clock quirk) is written as 0 so that every
  // artifact round-trips.
  double compile_ms =
      std::isfinite(a.compile_ms) && a.compile_ms >= 0 ? a.compile_ms : 0.0;
  w.U64(std::bit_cast<uint64_t>(compile_ms));
  w.U32(static_cast<uint32_t>(a.kernels.size()));
  for (const KernelEntry& k : a.kernels) {
    w.String(k.name);
    w.String(k.lowered_name);
    w.U32(static_cast<uint32_t>(k.params.size()));
    for (const ParamSpec& p : k.params) {
      w.U8(static_cast<uint8_t>(p.kind));
      w.U32(p.offset);
      w.U32(p.size);
      w.U32(p.align);
      w.I32(p.tensor_dtype);
      w.I32(p.tensor_rank);
      w.String(p.type_name);
    }
    w.U32(k.param_bytes);
  }
  w.String(a.thunk_object);
  w.U32(static_cast<uint32_t>(a.globals.size()));
  for (const GlobalEntry& g : a.globals) {
    w.String(g.name);
    w.String(g.lowered_name);
  }
  return out;
}

absl::StatusOr<Artifact> DeserializeArtifact(absl::string_view bytes) {
  Reader r(bytes);
  Artifact a;
  if (!ReadArtifact(r, a)) return r.status();
  return a;
}

}  // namespace fleetjit::jit
