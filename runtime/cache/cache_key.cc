#include "runtime/cache/cache_key.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace fleetjit {
namespace {

void AppendRecord(std::string& out, absl::string_view field,
                  absl::string_view value) {
  absl::StrAppend(&out, field, "=", value.size(), ":", value, "\n");
}

}  // namespace

CacheKey MakeCacheKey(const CacheKeyInputs& in) {
  std::vector<std::pair<absl::string_view, std::string>> headers;
  headers.reserve(in.headers.size());
  for (const auto& [name, content] : in.headers) {
    headers.emplace_back(name, Sha256::Hex(Sha256::Hash(content)));
  }
  std::sort(headers.begin(), headers.end());

  CacheKey key;
  std::string& c = key.canonical;
  c.reserve(512 + 80 * (headers.size() + in.disk_headers.size()));
  AppendRecord(c, "format", absl::StrCat(kCacheFormatVersion));
  AppendRecord(c, "target", in.target);
  AppendRecord(c, "copy_impl", in.copy_impl);
  AppendRecord(c, "compiler", in.compiler);
  AppendRecord(c, "driver_version", absl::StrCat(in.driver_version));
  AppendRecord(c, "emit_ptx", in.emit_ptx ? "1" : "0");
  for (const std::string& option : in.options) {
    AppendRecord(c, "option", option);
  }
  for (const std::string& expression : in.name_expressions) {
    AppendRecord(c, "name_expression", expression);
  }
  AppendRecord(c, "source_sha256", Sha256::Hex(Sha256::Hash(in.source)));
  for (const auto& [name, digest] : headers) {
    AppendRecord(c, "header", absl::StrCat(digest, " ", name));
  }
  for (const auto& [name, digest] : in.disk_headers) {
    AppendRecord(c, "disk_header", absl::StrCat(digest, " ", name));
  }
  key.digest = Sha256::Hex(Sha256::Hash(c));
  return key;
}

CacheKey CompilerAgnosticKey(const CacheKeyInputs& inputs) {
  CacheKeyInputs agnostic = inputs;
  agnostic.compiler.clear();
  return MakeCacheKey(agnostic);
}

absl::StatusOr<CacheKey> CompilerAgnosticKeyOf(absl::string_view canonical) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> records =
      ParseCanonicalKey(canonical);
  if (!records.ok()) return records.status();
  CacheKey key;
  for (const auto& [field, value] : *records) {
    AppendRecord(key.canonical, field,
                 field == "compiler" ? absl::string_view() : value);
  }
  key.digest = Sha256::Hex(Sha256::Hash(key.canonical));
  return key;
}

bool IsCacheDigest(absl::string_view digest) {
  return digest.size() == 64 &&
         std::all_of(digest.begin(), digest.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

absl::Status CanonicalReader::Next(absl::string_view& field,
                                   absl::string_view& value) {
  const absl::string_view c = text_;
  const size_t pos = pos_;
  size_t eq = c.find('=', pos);  // npos at the end
  size_t colon = eq == absl::string_view::npos ? eq : c.find(':', eq);
  uint64_t length = 0;
  if (colon == absl::string_view::npos || eq == pos || colon - eq > 20 ||
      !absl::SimpleAtoi(c.substr(eq + 1, colon - eq - 1), &length) ||
      length > c.size() - colon - 1 || c.size() - colon - 1 - length < 1 ||
      c[colon + 1 + length] != '\n') {
    return absl::DataLossError(
        absl::StrCat("malformed cache key at byte ", pos));
  }
  field = c.substr(pos, eq - pos);
  value = c.substr(colon + 1, length);
  pos_ = colon + 1 + length + 1;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseCanonicalKey(absl::string_view c) {
  std::vector<std::pair<std::string, std::string>> records;
  CanonicalReader reader(c);
  absl::string_view field, value;
  while (!reader.done()) {
    FJ_RETURN_IF_ERROR(reader.Next(field, value));
    records.emplace_back(std::string(field), std::string(value));
  }
  return records;
}

std::string CanonicalKeyField(absl::string_view canonical,
                              absl::string_view field) {
  auto records = ParseCanonicalKey(canonical);
  if (!records.ok()) return "";
  for (auto& [name, value] : *records) {
    if (name == field) return std::move(value);
  }
  return "";
}

}  // namespace fleetjit
