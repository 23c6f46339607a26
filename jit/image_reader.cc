#include "jit/image_reader.h"

#include <cstdint>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "jit/param_layout.h"

namespace fleetjit::jit {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr unsigned char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};

// A bounds-checked little-endian reader over one image.
class Bytes {
 public:
  explicit Bytes(absl::string_view data) : data_(data) {}
  size_t size() const { return data_.size(); }
  // True when [offset, offset + n) lies inside the image (no overflow).
  bool Has(uint64_t offset, uint64_t n) const {
    return offset <= data_.size() && n <= data_.size() - offset;
  }
  template <typename T>
  T Read(uint64_t offset) const {  // callers check Has() first
    T v;
    std::memcpy(&v, data_.data() + offset, sizeof(T));
    return v;
  }
  // The NUL-terminated string at `offset` within [begin, begin + size).
  std::optional<absl::string_view> CStr(uint64_t begin, uint64_t size,
                                        uint64_t offset) const {
    if (!Has(begin, size) || offset >= size) return std::nullopt;
    absl::string_view table = data_.substr(begin, size);
    size_t end = table.find('\0', offset);
    if (end == absl::string_view::npos) return std::nullopt;
    return table.substr(offset, end - offset);
  }

 private:
  absl::string_view data_;
};

absl::Status Malformed(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed cubin (ELF): ", what));
}

struct Section {
  uint32_t name, type, link;
  uint64_t offset, size, entsize;
};

constexpr uint32_t kShtSymtab = 2;
constexpr uint8_t kSttFunc = 2;
constexpr uint8_t kStbGlobal = 1, kStbWeak = 2;
constexpr uint8_t kStoCudaEntry = 0x10;

absl::StatusOr<std::vector<Section>> ReadSections(const Bytes& elf) {
  if (!elf.Has(0, 64)) return Malformed("shorter than its header");
  if (elf.Read<uint8_t>(4) != 2) return Malformed("not ELF64");
  if (elf.Read<uint8_t>(5) != 1) return Malformed("not little-endian");
  uint64_t shoff = elf.Read<uint64_t>(40);
  uint16_t shentsize = elf.Read<uint16_t>(58);
  uint16_t shnum = elf.Read<uint16_t>(60);
  if (shnum == 0) return std::vector<Section>{};
  if (shentsize < 64) return Malformed("section header entries too small");
  if (!elf.Has(shoff, uint64_t{shnum} * shentsize))
    return Malformed("section headers out of bounds");
  std::vector<Section> sections(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    uint64_t at = shoff + uint64_t{i} * shentsize;
    Section& s = sections[i];
    s.name = elf.Read<uint32_t>(at + 0);
    s.type = elf.Read<uint32_t>(at + 4);
    s.offset = elf.Read<uint64_t>(at + 24);
    s.size = elf.Read<uint64_t>(at + 32);
    s.link = elf.Read<uint32_t>(at + 40);
    s.entsize = elf.Read<uint64_t>(at + 56);
  }
  return sections;
}

bool IsElf(absl::string_view image) {
  return image.size() >= 4 && std::memcmp(image.data(), kElfMagic, 4) == 0;
}

}  // namespace

absl::StatusOr<ImageKind> SniffImageKind(absl::string_view image) {
  if (IsElf(image)) return ImageKind::kCubin;
  if (image.size() >= 4) {
    uint32_t magic;
    std::memcpy(&magic, image.data(), 4);
    if (magic == kFatbinMagic) return ImageKind::kFatbin;
  }
  absl::string_view text = absl::StripLeadingAsciiWhitespace(image);
  if (absl::StartsWith(text, "//") || absl::StartsWith(text, ".version")) {
    return ImageKind::kPtx;
  }
  return absl::InvalidArgumentError(
      "image is neither a cubin (ELF), a fatbin (magic 0xBA55ED50) nor PTX "
      "text "
      "(starting with '//' or '.version'); name its kind to skip the sniffing");
}

namespace {

absl::StatusOr<std::vector<std::string>> KernelNames(absl::string_view image,
                                                     bool entry_bit_only) {
  if (!IsElf(image)) return Malformed("no ELF magic");
  Bytes elf(image);
  FJ_ASSIGN_OR_RETURN(std::vector<Section> sections, ReadSections(elf));
  uint16_t shstrndx = elf.Read<uint16_t>(62);
  absl::flat_hash_set<std::string> info_sections;
  if (shstrndx < sections.size()) {
    const Section& names = sections[shstrndx];
    for (const Section& s : sections) {
      auto name = elf.CStr(names.offset, names.size, s.name);
      if (name.has_value() && absl::StartsWith(*name, ".nv.info.")) {
        info_sections.insert(std::string(name->substr(strlen(".nv.info."))));
      }
    }
  }
  std::vector<std::string> kernels;
  for (const Section& symtab : sections) {
    if (symtab.type != kShtSymtab) continue;
    if (symtab.entsize < 24) return Malformed("symbol entries too small");
    if (!elf.Has(symtab.offset, symtab.size))
      return Malformed("symbol table out of bounds");
    if (symtab.link >= sections.size())
      return Malformed("symbol table without strings");
    const Section& strtab = sections[symtab.link];
    for (uint64_t at = symtab.offset; at + 24 <= symtab.offset + symtab.size;
         at += symtab.entsize) {
      uint8_t info = elf.Read<uint8_t>(at + 4);
      uint8_t other = elf.Read<uint8_t>(at + 5);
      uint16_t shndx = elf.Read<uint16_t>(at + 6);
      uint8_t bind = info >> 4;
      if ((info & 0xf) != kSttFunc || shndx == 0) continue;
      if (bind != kStbGlobal && bind != kStbWeak) continue;
      auto name = elf.CStr(strtab.offset, strtab.size, elf.Read<uint32_t>(at));
      if (!name.has_value()) return Malformed("symbol name out of bounds");
      if (name->empty()) continue;
      if ((other & kStoCudaEntry) == 0 &&
          (entry_bit_only || !info_sections.contains(*name)))
        continue;
      kernels.emplace_back(*name);
    }
  }
  return kernels;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> CubinKernelNames(
    absl::string_view image) {
  return KernelNames(image, /*entry_bit_only=*/false);
}

absl::StatusOr<std::vector<std::string>> CubinEntryNames(
    absl::string_view image) {
  return KernelNames(image, /*entry_bit_only=*/true);
}

absl::StatusOr<std::vector<std::pair<std::string, int>>> CubinRegisterCounts(
    absl::string_view image) {
  if (!IsElf(image)) return Malformed("no ELF magic");
  Bytes elf(image);
  FJ_ASSIGN_OR_RETURN(std::vector<Section> sections, ReadSections(elf));
  const uint16_t shstrndx = elf.Read<uint16_t>(62);
  if (shstrndx >= sections.size()) return Malformed("no section names");
  const Section& names = sections[shstrndx];
  const Section* symtab = nullptr;
  for (const Section& s : sections) {
    if (s.type == kShtSymtab) symtab = &s;
  }
  if (symtab == nullptr || symtab->entsize < 24 ||
      symtab->link >= sections.size() ||
      !elf.Has(symtab->offset, symtab->size)) {
    return Malformed("no usable symbol table");
  }
  const Section& strtab = sections[symtab->link];
  // Records of `.nv.info`: a format byte and an attribute byte, then (format
  // 4, EIFMT_SVAL) a 16-bit size and that many bytes, else two more bytes.
  // EIATTR_REGCOUNT (0x2f) holds the symbol index and the count.
  constexpr uint8_t kSval = 4, kRegCount = 0x2f;
  std::vector<std::pair<std::string, int>> counts;
  for (const Section& s : sections) {
    auto name = elf.CStr(names.offset, names.size, s.name);
    if (!name.has_value() || *name != ".nv.info") continue;
    if (!elf.Has(s.offset, s.size)) return Malformed(".nv.info out of bounds");
    const uint64_t end = s.offset + s.size;
    for (uint64_t at = s.offset; at + 4 <= end;) {
      const uint8_t format = elf.Read<uint8_t>(at);
      const uint8_t attribute = elf.Read<uint8_t>(at + 1);
      if (format != kSval) {
        at += 4;
        continue;
      }
      const uint16_t size = elf.Read<uint16_t>(at + 2);
      if (at + 4 + size > end) return Malformed(".nv.info record overruns");
      if (attribute == kRegCount && size == 8) {
        const uint32_t symbol = elf.Read<uint32_t>(at + 4);
        const uint64_t entry =
            symtab->offset + uint64_t{symbol} * symtab->entsize;
        if (entry + 24 > symtab->offset + symtab->size)
          return Malformed("register count of a symbol out of range");
        auto fn =
            elf.CStr(strtab.offset, strtab.size, elf.Read<uint32_t>(entry));
        if (!fn.has_value()) return Malformed("symbol name out of bounds");
        counts.emplace_back(std::string(*fn),
                            static_cast<int>(elf.Read<uint32_t>(at + 8)));
      }
      at += 4 + size;
    }
  }
  return counts;
}

absl::StatusOr<Target> CubinTarget(absl::string_view image) {
  if (!IsElf(image) || image.size() < 64) return Malformed("no ELF header");
  Bytes elf(image);
  uint32_t flags = elf.Read<uint32_t>(48);
  uint8_t abi_version = elf.Read<uint8_t>(8);
  // CUDA's ELF ABI: before version 8 (CUDA < 13) the SM is e_flags & 0xff;
  // from 8 on it sits in bits 8-15.
  int arch = abi_version >= 8 ? static_cast<int>((flags >> 8) & 0xff)
                              : static_cast<int>(flags & 0xff);
  if (arch < 10)
    return Malformed(
        absl::StrCat("unknown architecture in e_flags 0x", absl::Hex(flags)));
  return ParseTarget(absl::StrCat("sm_", arch));
}

namespace {

absl::Status MalformedFatbin(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed fatbin: ", what));
}

// The fatbin container, as nvcc, nvJitLink and fatbinary write it: a
// 16-byte header (magic, version, header size, then the bytes of entries
// that follow it), then entries, each a header (kind, version, header size,
// payload size; the architecture, e.g. 90, at 28; flags at 40) and its
// payload. Containers may follow one
// another, 8-byte aligned.
constexpr uint64_t kFatbinHeaderBytes = 16;
constexpr uint64_t kFatbinEntryHeaderBytes = 64;
constexpr uint16_t kFatbinEntryPtx = 1, kFatbinEntryCubin = 2;
// Payload compression: LZ4 (CUDA 11-12) and zstd (CUDA 13).
constexpr uint64_t kFatbinCompressed = 0x2000 | 0x8000;

}  // namespace

namespace {

// One entry of a fatbin, as WalkFatbin hands it over.
struct RawFatbinEntry {
  int index = 0;
  uint16_t kind = 0;
  uint32_t arch = 0;
  uint64_t flags = 0;
  absl::string_view payload;
};

// Calls `visit` for each entry of each container of `fatbin`, in order;
// stops at the first error `visit` returns. INVALID_ARGUMENT when the
// container is malformed or holds no entries.
template <typename Visit>
absl::Status WalkFatbin(absl::string_view fatbin, Visit visit) {
  const Bytes bytes(fatbin);
  if (!bytes.Has(0, kFatbinHeaderBytes) ||
      bytes.Read<uint32_t>(0) != kFatbinMagic) {
    return absl::InvalidArgumentError(
        "not a fatbin: it does not start with a fatbin header (magic "
        "0xBA55ED50); name the image's kind (cubin, PTX) or let it be "
        "sniffed");
  }
  int entries = 0;
  uint64_t at = 0;
  while (bytes.Has(at, kFatbinHeaderBytes) &&
         bytes.Read<uint32_t>(at) == kFatbinMagic) {
    const uint64_t header_bytes = bytes.Read<uint16_t>(at + 6);
    const uint64_t body_bytes = bytes.Read<uint64_t>(at + 8);
    if (header_bytes < kFatbinHeaderBytes || !bytes.Has(at, header_bytes)) {
      return MalformedFatbin(
          absl::StrCat("a header of ", header_bytes, " bytes at offset ", at));
    }
    const uint64_t body = at + header_bytes;
    if (!bytes.Has(body, body_bytes)) {
      return MalformedFatbin(absl::StrCat("the header at offset ", at,
                                          " claims ", body_bytes,
                                          " bytes of entries; the image has ",
                                          bytes.size() - body, " after it"));
    }
    const uint64_t end = body + body_bytes;
    for (uint64_t e = body; e < end;) {
      RawFatbinEntry entry;
      entry.index = entries++;
      if (end - e < kFatbinEntryHeaderBytes) {
        return MalformedFatbin(
            absl::StrCat("entry ", entry.index, " is cut short at offset ", e));
      }
      entry.kind = bytes.Read<uint16_t>(e);
      const uint64_t entry_header = bytes.Read<uint32_t>(e + 4);
      const uint64_t payload_bytes = bytes.Read<uint64_t>(e + 8);
      entry.arch = bytes.Read<uint32_t>(e + 28);
      entry.flags = bytes.Read<uint64_t>(e + 40);
      if (entry_header < kFatbinEntryHeaderBytes || entry_header > end - e ||
          payload_bytes > end - e - entry_header) {
        return MalformedFatbin(absl::StrCat(
            "entry ", entry.index, " at offset ", e, " (a header of ",
            entry_header, " bytes and a payload of ", payload_bytes,
            ") overruns its container"));
      }
      entry.payload = fatbin.substr(e + entry_header, payload_bytes);
      e += entry_header + payload_bytes;
      FJ_RETURN_IF_ERROR(visit(entry));
    }
    at = (end + 7) & ~uint64_t{7};  // the next container, if any
  }
  if (entries == 0) return MalformedFatbin("it holds no entries");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<FatbinEntry>> FatbinEntries(
    absl::string_view fatbin) {
  std::vector<FatbinEntry> out;
  FJ_RETURN_IF_ERROR(WalkFatbin(fatbin, [&](const RawFatbinEntry& raw) {
    FatbinEntry entry;
    entry.kind = raw.kind == kFatbinEntryPtx     ? FatbinEntry::Kind::kPtx
                 : raw.kind == kFatbinEntryCubin ? FatbinEntry::Kind::kCubin
                                                 : FatbinEntry::Kind::kOther;
    entry.arch = static_cast<int>(raw.arch);
    entry.compressed = (raw.flags & kFatbinCompressed) != 0;
    entry.payload_bytes = raw.payload.size();
    out.push_back(entry);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<std::string>> FatbinKernelNames(
    absl::string_view fatbin) {
  std::vector<std::string> names;
  absl::flat_hash_set<std::string> seen;
  int entries = 0, cubins = 0, compressed = 0, ptx = 0;
  FJ_RETURN_IF_ERROR(WalkFatbin(fatbin, [&](const RawFatbinEntry& entry) {
    ++entries;
    if ((entry.flags & kFatbinCompressed) != 0) {
      ++compressed;
      return absl::OkStatus();
    }
    if (entry.kind == kFatbinEntryPtx) ++ptx;
    if (entry.kind != kFatbinEntryCubin) return absl::OkStatus();
    auto kernels = CubinKernelNames(entry.payload);
    if (!kernels.ok()) {
      return MalformedFatbin(absl::StrCat(
          "entry ", entry.index, " (a cubin): ", kernels.status().message()));
    }
    ++cubins;
    for (std::string& k : *kernels) {
      if (seen.insert(k).second) names.push_back(std::move(k));
    }
    return absl::OkStatus();
  }));
  if (cubins == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the fatbin holds no uncompressed cubin whose kernels could be listed "
        "(",
        entries, " entries: ", compressed, " compressed, ", ptx,
        " PTX; compressed fatbins are not read: load the cubin or PTX "
        "instead)"));
  }
  return names;
}

absl::StatusOr<Artifact> ArtifactFromImage(absl::string_view image,
                                           ImageKind kind,
                                           std::optional<Target> target) {
  if (image.empty()) return absl::InvalidArgumentError("the image is empty");
  if (kind == ImageKind::kAuto) {
    FJ_ASSIGN_OR_RETURN(kind, SniffImageKind(image));
  }
  Artifact artifact;
  artifact.image = std::string(image);
  artifact.compiler = "loaded image";
  std::vector<std::string> names;
  switch (kind) {
    case ImageKind::kPtx: {
      artifact.is_ptx = true;
      artifact.ptx = artifact.image;
      if (!target.has_value()) {
        size_t at = image.find(".target ");
        if (at == absl::string_view::npos) {
          return absl::InvalidArgumentError(
              "PTX without a .target line: name the target");
        }
        absl::string_view arch = image.substr(at + strlen(".target "));
        arch = arch.substr(0, arch.find_first_of(", \t\r\n"));
        if (!absl::ConsumePrefix(&arch, "sm_")) {
          return absl::InvalidArgumentError(
              absl::StrCat("PTX .target '", arch, "' is not sm_XX"));
        }
        FJ_ASSIGN_OR_RETURN(target, ParseTarget(absl::StrCat("compute_", arch)),
                            "reading the PTX .target");
      }
      for (const std::string& name : PtxEntryNames(image)) {
        KernelEntry entry;
        entry.name = entry.lowered_name = name;
        auto params = ParsePtxParams(image, name);
        if (!params.ok()) {  // the caller's text, not our bug
          return absl::InvalidArgumentError(
              absl::StrCat("reading the parameters of ", name, ": ",
                           params.status().message()));
        }
        entry.params = std::move(*params);
        FJ_RETURN_IF_ERROR(ApplyCxxSignature(name, entry.params),
                           absl::StrCat("reading the signature of ", name));
        entry.param_bytes = ParamBufferBytes(entry.params);
        artifact.kernels.push_back(std::move(entry));
      }
      break;
    }
    case ImageKind::kCubin: {
      if (!target.has_value()) {
        FJ_ASSIGN_OR_RETURN(target, CubinTarget(image));
      }
      FJ_ASSIGN_OR_RETURN(names, CubinKernelNames(image));
      break;
    }
    case ImageKind::kFatbin: {
      if (!target.has_value())
        target = Target{0, '\0', true};  // the driver picks
      FJ_ASSIGN_OR_RETURN(names, FatbinKernelNames(image));
      break;
    }
    case ImageKind::kAuto:
      break;
  }
  for (std::string& name : names) {
    KernelEntry entry;
    entry.name = entry.lowered_name = std::move(name);
    artifact.kernels.push_back(std::move(entry));
  }
  artifact.target = *target;
  return artifact;
}

}  // namespace fleetjit::jit
