// One file that carries a prewarmed cache to a fleet: `spark-cache export FILE` on a
// build box, `spark-cache import FILE` on every server.
//
// Format (all integers little-endian):
//   "SPKCACHE"                     8-byte magic
//   u32  archive format version    (kArchiveFormatVersion)
//   u32  cache format version      of every entry inside (kCacheFormatVersion)
//   u64  entry count
//   per entry:
//     u32 name length, name        the entry's directory name, "<key>-<hash16>"
//     u32 file count               4: manifest.json, kernel.cubin, kernel.cu, nvrtc.log
//     per file: u32 name length, name, u64 size, u64 XXH3-64 of the bytes, the bytes
//   u64  XXH3-64 of every byte above
//   "SPKCEND\n"                    8-byte end marker
//
// An archive is untrusted input.  Import reads it as a stream (never the whole file in
// memory; each file at most its cap, entry.h), checks every field as it goes (names an
// entry may have, each of the four files exactly once, every file's checksum, every entry
// against its manifest: hash, sizes, checksums, and a cubin for the key's arch), stages the
// entries in the cache's .tmp/, and publishes nothing until the end marker and the archive
// checksum have been read and checked.  A truncated or corrupt archive, one of another
// format, one larger than SPARK_CACHE_MAX_BYTES, or a full disk while staging imports
// nothing.  Each entry is then published atomically under its lock; a sound entry already
// in the cache is kept, one that cannot be read is left alone, and if a publish fails the
// entries this import published are taken back out.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache.h"

namespace spark {

inline constexpr uint32_t kArchiveFormatVersion = 1;

struct ExportReport {
  std::vector<std::string> exported;
  std::vector<std::string> skipped;  // "<name>: <problem>" for entries that failed verification
  uint64_t bytes = 0;                // archive size
};

// Writes every sound entry to `file` (atomically: a temporary beside it, fsynced, then
// renamed and the directory fsynced).  Throws CACHE when the file cannot be written.
ExportReport export_cache(const KernelCache& cache, const std::filesystem::path& file);

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

// Reads and checks a whole archive held in memory exactly as import does, writing nothing;
// returns the entry names in order.  Throws like import_cache.  (The fuzz target's entry.)
std::vector<std::string> verify_archive_bytes(std::string_view bytes);

}  // namespace spark
