// Archives for import, written member by member with libarchive, independently of the
// exporter: what another tool, a broken copy or an attacker could hand to `spark-cache import`.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cache/archive.h"
#include "cache/entry.h"
#include "cache/manifest.h"
#include "tests/cache/cache_test_util.h"

namespace spark_test {

struct TarMember {
  TarMember(std::string n, std::string d, unsigned t = AE_IFREG, std::string l = {}, bool hard = false)
      : name(std::move(n)), data(std::move(d)), type(t), link(std::move(l)), hardlink(hard) {}
  std::string name;
  std::string data;
  unsigned type = AE_IFREG;  // AE_IFLNK, AE_IFDIR, AE_IFCHR, AE_IFIFO ...
  std::string link;          // symlink target, or (with hardlink) the member it links to
  bool hardlink = false;
};

inline la_ssize_t append_to_string(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

// A pax tar of the members, zstd-compressed unless `zstd` is false.
inline std::string tar_bytes(const std::vector<TarMember>& members, bool zstd = true) {
  std::string out;
  archive* a = archive_write_new();
  if (zstd) archive_write_add_filter_zstd(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open(a, &out, nullptr, append_to_string, nullptr) != ARCHIVE_OK)
    throw std::runtime_error(archive_error_string(a));
  for (const TarMember& m : members) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_filetype(e, m.type);
    archive_entry_set_perm(e, 0644);
    if (m.hardlink) archive_entry_set_hardlink(e, m.link.c_str());
    else if (m.type == AE_IFLNK) archive_entry_set_symlink(e, m.link.c_str());
    archive_entry_set_size(e, m.type == AE_IFREG ? static_cast<la_int64_t>(m.data.size()) : 0);
    if (archive_write_header(a, e) != ARCHIVE_OK) throw std::runtime_error(archive_error_string(a));
    if (m.type == AE_IFREG && !m.data.empty()) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// Raw bytes compressed with zstd alone (a hand-made tar stream).
inline std::string zstd_bytes(const std::string& raw) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_add_filter_zstd(a);
  archive_write_set_format_raw(a);
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open(a, &out, nullptr, append_to_string, nullptr);
  archive_entry* e = archive_entry_new();
  archive_entry_set_filetype(e, AE_IFREG);
  archive_write_header(a, e);
  archive_write_data(a, raw.data(), raw.size());
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// One ustar header block for a regular file whose size field says `size` (base-256 when it
// does not fit 11 octal digits), with no data after it.
inline std::string ustar_header(const std::string& name, uint64_t size) {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  std::memcpy(&h[100], "0000644", 7);
  std::memcpy(&h[108], "0000000", 7);
  std::memcpy(&h[116], "0000000", 7);
  if (size < (uint64_t(1) << 33)) {
    const std::string octal = fmt::format("{:011o}", size);
    std::memcpy(&h[124], octal.data(), 11);
  } else {
    h[124] = static_cast<char>(0x80);
    for (int i = 0; i < 8; ++i) h[135 - i] = static_cast<char>((size >> (8 * i)) & 0xff);
  }
  std::memcpy(&h[136], "00000000000", 11);
  h[156] = '0';
  std::memcpy(&h[257], "ustar", 6);
  std::memcpy(&h[263], "00", 2);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  const std::string chk = fmt::format("{:06o}", sum);
  std::memcpy(&h[148], chk.data(), 6);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

// spark-archive.json as export writes it, with the versions given.
inline std::string archive_header(int archive_format = spark::kArchiveFormatVersion,
                                  int cache_format = spark::kCacheFormatVersion) {
  return fmt::format("{{\"format\": \"spark-cache-archive\", \"archive_format\": {}, \"cache_format\": {}}}\n",
                     archive_format, cache_format);
}

// "<xxh3> <size> <name>\n" for each member: spark-archive.sums.
inline std::string sums_of(const std::vector<TarMember>& members) {
  std::string s;
  for (const TarMember& m : members)
    s += fmt::format("{} {} {}\n", spark::checksum_hex(m.data), m.data.size(), m.name);
  return s;
}

}  // namespace spark_test
