// The module cache's key: everything that changes a build's output, and
// nothing that changes from run to run.
//
// MakeCacheKey encodes the inputs canonically and hashes the encoding with
// SHA-256. The hex digest names the entry (memory map key, file name); the
// canonical encoding is stored in the entry and compared on load, so an
// entry found under a digest is only used if its full key matches.
//
//   CacheKeyInputs in;
//   in.source = source;
//   in.headers = {{"fleetjit/copy.cuh", copy_cuh}, ...};
//   in.options = jit::BuildOptions(request);
//   in.target = "sm_90a";
//   in.copy_impl = "tma";
//   in.compiler = *CompilerIdentity(*ResolveNvrtcLibrary(""));
//   CacheKey key = MakeCacheKey(in);
//
// Source and header contents enter the canonical encoding as their SHA-256
// digests (a Merkle step): the key stays small and readable while still
// covering every byte. Hashing dominates the cost (about 1 ms per 1.5 MB of
// source and headers with SHA-NI); a runtime that builds the same request
// many times should keep the key rather than recompute it.
#ifndef FLEETJIT_RUNTIME_CACHE_CACHE_KEY_H_
#define FLEETJIT_RUNTIME_CACHE_CACHE_KEY_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fleetjit {

// Changes whenever the key encoding, the entry file layout or the artifact
// encoding changes; old entries then simply stop matching and age out.
inline constexpr int kCacheFormatVersion = 1;

struct CacheKeyInputs {
  std::string source;
  // (include name, content): every embedded header. Order does not matter:
  // the key sorts them.
  std::vector<std::pair<std::string, std::string>> headers;
  // (include name, SHA-256 hex of its content or "absent"), sorted by name:
  // the headers a build may read from disk (jit::IncludeScan::key_records).
  // A view, already hashed: it must outlive the MakeCacheKey call.
  absl::Span<const std::pair<std::string, std::string>> disk_headers;
  std::vector<std::string> options;  // full NVRTC option list, in order
  std::string target;                // "sm_90a", "compute_80"
  std::string copy_impl;             // "tma"
  std::string compiler;              // CompilerIdentity()
  int driver_version = 0;  // 0 when the image does not depend on the driver
  std::vector<std::string> name_expressions;
  bool emit_ptx = false;
};

struct CacheKey {
  std::string digest;     // 64 lowercase hex chars: SHA-256 of `canonical`
  std::string canonical;  // full key material, canonical encoding
};

CacheKey MakeCacheKey(const CacheKeyInputs& inputs);

// The name expression that marks the key of a precompiled header entry
// (runtime/module_builder.cc): no C++ name expression reads so.
inline constexpr char kPchNameExpression[] = "<precompiled header>";
// The one that marks a tuning result's key (runtime/tune/tune_record.h).
inline constexpr char kTuneNameExpression[] = "<tuning result>";

// True for 64 lowercase hex characters: the only digests the disk tier
// turns into file names.
bool IsCacheDigest(absl::string_view digest);

// The canonical encoding is a sequence of records "<field>=<length>:<value>\n"
// (length in decimal bytes), e.g. "target=6:sm_90a\n". Fields, in order:
// format, target, copy_impl, compiler, driver_version, emit_ptx,
// option (repeated), name_expression (repeated), source_sha256,
// header (repeated, "<sha256 hex> <include name>", sorted by name),
// disk_header (repeated, "<sha256 hex|absent> <include name>", in the
// order given: sorted by name).
// ParseCanonicalKey splits one into (field, value) pairs; DATA_LOSS if it is
// not well formed.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseCanonicalKey(absl::string_view canonical);

// The same records one at a time, as views into the text (which must
// outlive the reader), with no allocation: for long texts read once, such as
// tuning records (runtime/tune/tune_record.cc).
class CanonicalReader {
 public:
  explicit CanonicalReader(absl::string_view text) : text_(text) {}
  bool done() const { return pos_ >= text_.size(); }
  // The next record; DATA_LOSS at the end or where the text is malformed.
  absl::Status Next(absl::string_view& field, absl::string_view& value);

 private:
  absl::string_view text_;
  size_t pos_ = 0;
};

// The first value of `field` in a canonical key, or "" (for listings).
std::string CanonicalKeyField(absl::string_view canonical,
                              absl::string_view field);

// Hosts without a compiler (the rule).
//
// A key names its compiler, so a host with the driver alone cannot compute
// the key a compiling host published under: it does not know which NVRTC
// built the entry, and must not guess one. Instead:
//  1. The compiler-agnostic key of a build is its key with compiler = ""
//     (every other input identical: source, headers, options, target with
//     suffix, copy implementation, driver_version, name expressions,
//     output kind, format version). A compiling host never uses one as a
//     key.
//  2. A host that publishes an entry under its full key K also publishes a
//     signed pointer record "<prefix>latest:<agnostic digest> -> K's
//     digest" (runtime/cache/remote_tier.h). The last publisher wins.
//  3. A host without NVRTC computes the agnostic key, follows the pointer,
//     and uses the entry only if (a) the entry's full canonical key, with
//     its compiler record emptied, equals the agnostic key byte for byte,
//     and (b) the compiler the entry records passes
//     CheckPublishedCompiler (published_compiler.h): a well-formed NVRTC
//     identity whose output the local driver can load for that target.
//     Any NVRTC that produced an image for exactly that target is fine.
//  4. The accepted entry is kept locally under the agnostic key, so later
//     processes on that host hit without the network.
// A host with NVRTC always looks up its own full key: it never takes an
// image from another compiler.
CacheKey CompilerAgnosticKey(const CacheKeyInputs& inputs);
// The agnostic key of an existing full canonical key (its compiler record
// emptied); DATA_LOSS if `canonical` is malformed.
absl::StatusOr<CacheKey> CompilerAgnosticKeyOf(absl::string_view canonical);

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_CACHE_CACHE_KEY_H_
