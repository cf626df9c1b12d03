// One file that carries a prewarmed cache to a fleet: `spark-cache export FILE` on a
// build box, `spark-cache import FILE` on every server.
//
// Format 2: a POSIX tar (pax) archive compressed with zstd, so `tar --zstd -tf` lists it
// and `tar --zstd -xf` unpacks it into a directory laid out like a cache.  Members, in order:
//   spark-archive.json            {"format": "spark-cache-archive", "archive_format": 2,
//                                  "cache_format": N}: read first, so an archive of another
//                                  version is refused before any entry is read
//   <entry>/manifest.json         per entry ("<key>-<hash16>"), these four regular files in
//   <entry>/kernel.cubin          this order
//   <entry>/kernel.cu
//   <entry>/nvrtc.log
//   spark-archive.sums            last: "<xxh3-64 hex> <size> <member>\n" for every member
//                                 above, in order; the end of the archive follows it
//
// An archive is untrusted input.  Import reads it as a stream (never the whole file in
// memory; each member at most its cap, entry.h, checked from its header before its bytes
// are read), takes only regular-file members with exactly the names above (no absolute
// path, "..", link, device or directory), checks every entry against its manifest (hash,
// sizes, checksums, a cubin for the key's arch) as soon as its four files are in, stages
// the entries in the cache's .tmp/, and publishes nothing until the checksum list has been
// read, matched member for member, and the archive has ended.  A truncated or corrupt
// archive, one of another format, one larger than SPARK_CACHE_MAX_BYTES, or a full disk
// while staging imports nothing.  Each entry is then published atomically under its lock;
// a sound entry already in the cache is kept, one that cannot be read is left alone, and
// if a publish fails the entries this import published are taken back out.
//
// This code is the static library spark_archive (libarchive), which libspark.so does not
// link: a server loading spark never loads libarchive.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache.h"

namespace spark {

inline constexpr uint32_t kArchiveFormatVersion = 2;
// The members that frame the entries.
inline constexpr const char* kArchiveHeaderMember = "spark-archive.json";
inline constexpr const char* kArchiveSumsMember = "spark-archive.sums";

struct ExportReport {
  std::vector<std::string> exported;
  std::vector<std::string> skipped;  // "<name>: <problem>" for entries that failed verification
  uint64_t bytes = 0;                // archive size
};

// Which entries an export takes: all, or those of the listed archs whose name starts with
// the prefix.
struct ExportFilter {
  std::vector<std::string> archs;  // empty: every arch
  std::string prefix;              // of the entry name ("mla_qproj.h8"); empty: every entry
  bool matches(std::string_view entry_name) const;
};

// Writes every sound entry the filter takes to `file` (atomically: a temporary beside it,
// fsynced, then renamed and the directory fsynced).  An existing file is replaced only
// with `overwrite`; otherwise INVALID_ARGUMENT ('FILE') and nothing is written.  Throws
// CACHE when the file cannot be written.
ExportReport export_cache(const KernelCache& cache, const std::filesystem::path& file,
                          const ExportFilter& filter = {}, bool overwrite = false);
// The same, streamed to an open descriptor (standard output); `label` names it in errors.
ExportReport export_cache_to_fd(const KernelCache& cache, int fd, const std::string& label,
                                const ExportFilter& filter = {});

struct ImportReport {
  std::vector<std::string> imported;
  std::vector<std::string> kept;        // already in the cache and sound
  std::vector<std::string> replaced;    // were in the cache but corrupt: moved aside, replaced
  std::vector<std::string> unreadable;  // in the cache but unreadable here (EACCES...): left alone
  uint64_t bytes = 0;                   // of the entries' files
};

// Throws INVALID_ARGUMENT ('FILE') for an archive that is not a regular file, unreadable,
// truncated, corrupt, of another format version or holding a refused entry (nothing is
// imported then), CACHE when the cache cannot be written or the archive does not fit
// SPARK_CACHE_MAX_BYTES.
ImportReport import_cache(const KernelCache& cache, const std::filesystem::path& file);
// The same from an open descriptor (standard input: a pipe or a file, not a terminal).
ImportReport import_cache_from_fd(const KernelCache& cache, int fd, const std::string& label);

// Reads and checks a whole archive held in memory exactly as import does, writing nothing;
// returns the entry names in order.  Throws like import_cache.  (The fuzz target's entry.)
std::vector<std::string> verify_archive_bytes(std::string_view bytes);

}  // namespace spark
