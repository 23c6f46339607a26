#include "tools/junit_xml.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fleetjit::cli {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// The length of the valid UTF-8 sequence at text[i] and its code point,
// or 0 when the bytes there are not one.
size_t DecodeUtf8(absl::string_view text, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t b0 = byte(0);
  size_t len;
  uint32_t min;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(k) & 0x3F);
  }
  const bool surrogate = *cp >= 0xD800 && *cp <= 0xDFFF;
  if (*cp < min || *cp > 0x10FFFF || surrogate) return 0;  // overlong etc.
  return len;
}

// The entity or character reference that stands for `cp`, or nullptr.
const char* Entity(uint32_t cp, bool attribute) {
  if (cp == '&') return "&amp;";
  if (cp == '<') return "&lt;";
  if (cp == '>') return "&gt;";
  if (cp == '\r') return "&#13;";
  if (!attribute) return nullptr;
  if (cp == '"') return "&quot;";
  if (cp == '\'') return "&apos;";
  if (cp == '\n') return "&#10;";
  if (cp == '\t') return "&#9;";
  return nullptr;
}

}  // namespace

std::string XmlEscape(absl::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    if (len == 0) {  // one bad byte, one replacement
      out += kReplacement;
      ++i;
      continue;
    }
    if (const char* entity = Entity(cp, attribute)) {
      out += entity;
    } else if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0xFFFE ||
               cp == 0xFFFF) {
      out += kReplacement;  // not allowed in XML 1.0, even as &#..;
    } else {
      out.append(text.data() + i, len);
    }
    i += len;
  }
  return out;
}

std::string JUnitXml(absl::string_view suite_name,
                     const std::vector<JUnitCase>& cases) {
  int failures = 0;
  double seconds = 0;
  for (const JUnitCase& c : cases) {
    failures += c.failed;
    seconds += c.seconds;
  }
  std::string xml = absl::StrFormat(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuite tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\" "
      "time=\"%.3f\" name=\"%s\">\n",
      cases.size(), failures, seconds, XmlEscape(suite_name, true));
  for (const JUnitCase& c : cases) {
    absl::StrAppendFormat(&xml,
                          "  <testcase classname=\"%s\" name=\"%s\" "
                          "time=\"%.3f\"",
                          XmlEscape(c.classname, true), XmlEscape(c.name, true),
                          c.seconds);
    if (!c.failed) {
      xml += "/>\n";
      continue;
    }
    absl::StrAppend(
        &xml, ">\n    <failure message=\"", XmlEscape(c.failure_message, true),
        "\">", XmlEscape(c.failure_text, false), "</failure>\n  </testcase>\n");
  }
  return xml + "</testsuite>\n";
}

}  // namespace fleetjit::cli
