// Kernels and parameter layouts of the images the fake driver loads
// (fake_images.h).
#include "tests/common/fake_cuda/fake_images.h"

#include <string.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace fleetjit::fake_cuda {
namespace {

size_t TypeBytes(std::string_view type) {
  // .u8 .s16 .f32 .b64 .pred ...: the digits are the bits.
  if (type == ".pred") return 1;
  size_t bits = 0;
  for (char c : type) {
    if (c >= '0' && c <= '9') bits = bits * 10 + static_cast<size_t>(c - '0');
  }
  return bits / 8;
}

// ".param .align 8 .b8 k_param_1[24]" -> {size 24, align 8}.
bool ParseParam(std::string_view decl, size_t* size, size_t* align) {
  size_t element = 0, count = 1, explicit_align = 0;
  size_t pos = 0;
  while (pos < decl.size()) {
    while (pos < decl.size() && (decl[pos] == ' ' || decl[pos] == '\t' ||
                                 decl[pos] == '\n' || decl[pos] == '\r')) {
      ++pos;
    }
    size_t end = pos;
    while (end < decl.size() && decl[end] != ' ' && decl[end] != '\t' &&
           decl[end] != '\n' && decl[end] != '\r') {
      ++end;
    }
    std::string_view token = decl.substr(pos, end - pos);
    pos = end;
    if (token.empty()) continue;
    if (token == ".align") {
      // The next token is the alignment.
      while (pos < decl.size() && (decl[pos] == ' ' || decl[pos] == '\t'))
        ++pos;
      explicit_align =
          std::strtoul(std::string(decl.substr(pos, 8)).c_str(), nullptr, 10);
      while (pos < decl.size() && decl[pos] != ' ' && decl[pos] != '\t') ++pos;
    } else if (token[0] == '.' && token != ".param" && token != ".ptr" &&
               token != ".global" && token != ".shared" && token != ".const" &&
               token != ".local") {
      element = TypeBytes(token);
    } else if (token[0] != '.') {
      size_t bracket = token.find('[');
      if (bracket != std::string_view::npos) {
        count = std::strtoul(std::string(token.substr(bracket + 1)).c_str(),
                             nullptr, 10);
      }
    }
  }
  if (element == 0) return false;
  *size = element * count;
  *align = explicit_align != 0 ? explicit_align : element;
  return true;
}

}  // namespace

std::map<std::string, Layout> PtxKernels(const std::string& ptx) {
  std::map<std::string, Layout> kernels;
  size_t pos = 0;
  while ((pos = ptx.find(".entry", pos)) != std::string::npos) {
    pos += 6;
    size_t name_start = ptx.find_first_not_of(" \t", pos);
    size_t name_end = ptx.find_first_of(" \t\r\n(", name_start);
    if (name_start == std::string::npos || name_end == std::string::npos) break;
    Layout& layout = kernels[ptx.substr(name_start, name_end - name_start)];
    layout.known = true;
    size_t open = ptx.find('(', name_end);
    size_t brace = ptx.find('{', name_end);
    if (open != std::string::npos &&
        (brace == std::string::npos || open < brace)) {
      size_t close = ptx.find(')', open);
      if (close == std::string::npos) break;
      std::string_view list(ptx.data() + open + 1, close - open - 1);
      size_t offset = 0;
      while (!list.empty()) {
        size_t comma = list.find(',');
        std::string_view decl = list.substr(0, comma);
        size_t size = 0, align = 1;
        if (ParseParam(decl, &size, &align)) {
          offset = (offset + align - 1) / align * align;
          layout.params.push_back({offset, size});
          offset += size;
        }
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
      }
      layout.bytes = offset;
      pos = close;
    }
  }
  return kernels;
}

// A cubin: each kernel's parameters are EIATTR_KPARAM_INFO records (0x17)
// in its ".nv.info.<name>" section: {u32 index, u16 ordinal, u16 offset,
// u32 flags with the size in bits 18..31}. Records are {u8 format, u8
// attribute, ...}: format 4 carries a u16 length and that many bytes,
// formats 2 and 3 two bytes, format 1 none.
Layout CubinLayout(const std::string& elf, const std::string& kernel) {
  Layout layout;
  auto u16 = [&](size_t at) {
    uint16_t v;
    memcpy(&v, elf.data() + at, 2);
    return v;
  };
  auto u32 = [&](size_t at) {
    uint32_t v;
    memcpy(&v, elf.data() + at, 4);
    return v;
  };
  auto u64 = [&](size_t at) {
    uint64_t v;
    memcpy(&v, elf.data() + at, 8);
    return v;
  };
  if (elf.size() < 0x40) return layout;
  const uint64_t shoff = u64(0x28);
  const uint16_t shentsize = u16(0x3a), shnum = u16(0x3c), shstrndx = u16(0x3e);
  if (shstrndx >= shnum || shoff + uint64_t{shentsize} * shnum > elf.size())
    return layout;
  const uint64_t strings = u64(shoff + uint64_t{shstrndx} * shentsize + 0x18);
  const std::string wanted = ".nv.info." + kernel;
  for (uint16_t i = 0; i < shnum; ++i) {
    const size_t header = shoff + uint64_t{i} * shentsize;
    const uint64_t name_at = strings + u32(header);
    if (name_at >= elf.size() ||
        elf.compare(name_at, wanted.size() + 1, wanted.c_str(),
                    wanted.size() + 1) != 0) {
      continue;
    }
    const uint64_t off = u64(header + 0x18), size = u64(header + 0x20);
    if (off + size > elf.size()) return layout;
    std::map<uint16_t, Layout::Param> by_ordinal;
    for (uint64_t p = off; p + 2 <= off + size;) {
      const uint8_t format = static_cast<uint8_t>(elf[p]);
      const uint8_t attribute = static_cast<uint8_t>(elf[p + 1]);
      if (format == 4) {
        const uint16_t length = u16(p + 2);
        if (attribute == 0x17 && length >= 12) {
          by_ordinal[u16(p + 8)] =
              Layout::Param{u16(p + 10), u32(p + 12) >> 18};
        }
        p += 4 + length;
      } else if (format == 2 || format == 3) {
        p += 4;
      } else {
        p += 2;
      }
    }
    layout.known = true;
    for (const auto& [ordinal, param] : by_ordinal) {
      layout.params.push_back(param);
      layout.bytes = std::max(layout.bytes, param.offset + param.size);
    }
    return layout;
  }
  return layout;
}

}  // namespace fleetjit::fake_cuda
