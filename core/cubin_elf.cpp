#include "core/cubin_elf.h"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include <fmt/format.h>

namespace spark {

namespace {

constexpr uint16_t kEmCuda = 190;
// CUDA ELF ABI: EI_OSABI 0x41 with ABI version 8 (NVRTC 12.8 and later) keeps the SM
// number in bits 8-15 of e_flags; the older 0x33 keeps it in bits 0-7.
constexpr uint8_t kOsabiCudaV2 = 0x41, kOsabiCudaV1 = 0x33;

// EIATTR codes of .nv.info entries (per-function attributes keyed by symbol index).
constexpr uint8_t kEiattrFrameSize = 0x11;
constexpr uint8_t kEiattrRegcount = 0x2f;
constexpr uint8_t kEifmtSval = 0x04;  // u16 size + payload; other formats: 2-byte value

// A bounds-checked view of an ELF64 image's sections.
class Elf {
 public:
  // nullopt when the header or the section table does not fit the bytes.
  static std::optional<Elf> parse(std::string_view b) {
    if (b.size() < sizeof(Elf64_Ehdr) || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0 ||
        b[EI_CLASS] != ELFCLASS64 || b[EI_DATA] != ELFDATA2LSB)
      return std::nullopt;
    Elf e;
    e.b_ = b;
    std::memcpy(&e.eh_, b.data(), sizeof e.eh_);
    const uint64_t table = uint64_t(e.eh_.e_shnum) * sizeof(Elf64_Shdr);
    if (e.eh_.e_shentsize != sizeof(Elf64_Shdr) || e.eh_.e_shoff > b.size() || table > b.size() - e.eh_.e_shoff ||
        e.eh_.e_shstrndx >= e.eh_.e_shnum)
      return std::nullopt;
    const uint64_t programs = uint64_t(e.eh_.e_phnum) * sizeof(Elf64_Phdr);
    if (e.eh_.e_phnum > 0 && (e.eh_.e_phentsize != sizeof(Elf64_Phdr) || e.eh_.e_phoff > b.size() ||
                              programs > b.size() - e.eh_.e_phoff))
      return std::nullopt;
    // Every section with bytes in the file lies inside it: a cut or padded image is refused.
    for (int i = 0; i < e.sections(); ++i)
      if (const Elf64_Shdr sh = e.section(i); sh.sh_type != SHT_NOBITS && !e.in_bounds(sh)) return std::nullopt;
    return e;
  }
  const Elf64_Ehdr& header() const { return eh_; }
  int sections() const { return eh_.e_shnum; }
  Elf64_Shdr section(int i) const {
    Elf64_Shdr sh;
    std::memcpy(&sh, b_.data() + eh_.e_shoff + uint64_t(i) * sizeof sh, sizeof sh);
    return sh;
  }
  bool in_bounds(const Elf64_Shdr& sh) const { return sh.sh_offset <= b_.size() && sh.sh_size <= b_.size() - sh.sh_offset; }
  std::string_view bytes(const Elf64_Shdr& sh) const { return in_bounds(sh) ? b_.substr(sh.sh_offset, sh.sh_size) : ""; }
  std::string_view cstr(const Elf64_Shdr& table, uint64_t at) const {
    const std::string_view t = bytes(table);
    if (at >= t.size()) return {};
    const std::string_view s = t.substr(at);
    return s.substr(0, std::min(s.size(), s.find('\0')));
  }
  std::string_view section_name(const Elf64_Shdr& sh) const { return cstr(section(eh_.e_shstrndx), sh.sh_name); }
  std::optional<Elf64_Shdr> find(std::string_view name) const {
    for (int i = 0; i < sections(); ++i)
      if (const Elf64_Shdr sh = section(i); section_name(sh) == name) return sh;
    return std::nullopt;
  }
  // The name of symbol `index` of a symbol table section; empty when out of range.
  std::string_view symbol_name(const Elf64_Shdr& symtab, uint64_t index) const {
    const std::string_view t = bytes(symtab);
    if (symtab.sh_link >= uint64_t(sections()) || index >= t.size() / sizeof(Elf64_Sym)) return {};
    Elf64_Sym sym;
    std::memcpy(&sym, t.data() + index * sizeof sym, sizeof sym);
    return cstr(section(static_cast<int>(symtab.sh_link)), sym.st_name);
  }

 private:
  std::string_view b_;
  Elf64_Ehdr eh_{};
};

int arch_number(std::string_view arch) {
  int n = 0;
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) n = n * 10 + (arch[i] - '0');
  return n;
}

}  // namespace

std::string cubin_problem(std::string_view cubin, std::string_view arch, std::string_view kernel) {
  const auto elf = Elf::parse(cubin);
  if (!elf) return "the cubin is not a 64-bit ELF image whose headers and sections lie inside it";
  const Elf64_Ehdr& h = elf->header();
  if (h.e_machine != kEmCuda || h.e_type != ET_EXEC)
    return fmt::format("the cubin is not a CUDA executable (ELF machine {}, type {})", h.e_machine, h.e_type);
  const uint8_t osabi = static_cast<uint8_t>(h.e_ident[EI_OSABI]);
  int sm = -1;
  if (osabi == kOsabiCudaV2) sm = static_cast<int>((h.e_flags >> 8) & 0xff);
  else if (osabi == kOsabiCudaV1) sm = static_cast<int>(h.e_flags & 0xff);
  if (sm < 0) return fmt::format("the cubin has an unknown CUDA ELF ABI (OS ABI {:#x})", osabi);
  if (sm != arch_number(arch)) return fmt::format("the cubin is for sm_{}, not {}", sm, arch);
  const auto symtab = elf->find(".symtab");
  if (symtab && elf->in_bounds(*symtab))
    for (uint64_t i = 0; i < symtab->sh_size / sizeof(Elf64_Sym); ++i)
      if (elf->symbol_name(*symtab, i) == kernel) return {};
  return fmt::format("the cubin has no kernel named {}", kernel);
}

void fill_resources_from_cubin(std::string_view cubin, std::string_view kernel, KernelResources& r) {
  const auto elf = Elf::parse(cubin);
  if (!elf) return;
  const auto shared = elf->find(".nv.shared." + std::string(kernel));
  if (r.shared_static_bytes < 0) r.shared_static_bytes = shared ? static_cast<int>(shared->sh_size) : 0;
  const auto info = elf->find(".nv.info"), symtab = elf->find(".symtab");
  if (!info || !symtab) return;
  const std::string_view entries = elf->bytes(*info);
  for (uint64_t p = 0; p + 4 <= entries.size();) {
    const char* e = entries.data() + p;
    const uint8_t format = static_cast<uint8_t>(e[0]), attr = static_cast<uint8_t>(e[1]);
    uint16_t payload = 0;
    std::memcpy(&payload, e + 2, 2);
    if (format != kEifmtSval) {
      p += 4;
      continue;
    }
    if (p + 4 + payload > entries.size()) break;
    if (payload == 8 && (attr == kEiattrRegcount || attr == kEiattrFrameSize)) {
      uint32_t sym = 0, value = 0;
      std::memcpy(&sym, e + 4, 4);
      std::memcpy(&value, e + 8, 4);
      if (elf->symbol_name(*symtab, sym) == kernel) {
        if (attr == kEiattrRegcount && r.registers < 0) r.registers = static_cast<int>(value);
        if (attr == kEiattrFrameSize && r.local_bytes < 0) r.local_bytes = static_cast<int>(value);
      }
    }
    p += 4 + payload;
  }
}

}  // namespace spark
