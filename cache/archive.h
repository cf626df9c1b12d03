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
//     u32 file count
//     per file: u32 name length, name, u64 size, u64 XXH3-64 of the bytes, the bytes
//   u64  XXH3-64 of every byte above
//   "SPKCEND\n"                    8-byte end marker
//
// Import checks the whole archive (end marker, archive checksum, every file's checksum,
// every entry against its manifest) before it writes anything, so a truncated or corrupt
// archive, or one of another format version, imports nothing.  Each entry is then
// published atomically under its lock; a sound entry already in the cache is kept.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cache/cache.h"

namespace spark {

inline constexpr uint32_t kArchiveFormatVersion = 1;

struct ExportReport {
  std::vector<std::string> exported;
  std::vector<std::string> skipped;  // "<name>: <problem>" for entries that failed verification
  uint64_t bytes = 0;                // archive size
};

// Writes every sound entry to `file` (atomically: a temporary beside it, then rename).
// Throws CACHE when the file cannot be written.
ExportReport export_cache(const KernelCache& cache, const std::filesystem::path& file);

struct ImportReport {
  std::vector<std::string> imported;
  std::vector<std::string> kept;      // already in the cache and sound
  std::vector<std::string> replaced;  // were in the cache but corrupt: moved aside, replaced
};

// Throws INVALID_ARGUMENT ('FILE') for an archive that is unreadable, truncated,
// corrupt or of another format version (nothing is imported then), CACHE when the cache
// cannot be written.
ImportReport import_cache(const KernelCache& cache, const std::filesystem::path& file);

}  // namespace spark
