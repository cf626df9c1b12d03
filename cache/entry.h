// The layout of one cache entry, and how any entry is checked on its own: from its
// directory name and manifest, without knowing how it was built.  Shared by loads,
// `spark-cache verify` and import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cache/cache_id.h"
#include "cache/manifest.h"
#include "core/dir.h"

namespace spark {

inline constexpr const char* kCubinFile = "kernel.cubin";
inline constexpr const char* kSourceFile = "kernel.cu";
inline constexpr const char* kLogFile = "nvrtc.log";
inline constexpr const char* kManifestFile = "manifest.json";
// Unix milliseconds of the last load, written by the cache itself (atime is often
// disabled, and a copy resets it).  Not covered by the manifest: it changes on every load.
inline constexpr const char* kLastUsedFile = "last_used";

// The most spark reads of each file of an entry: far above what it writes (a cubin is
// ~100 KB, a manifest ~1 KB), far below what would hurt a process that reads it.  A larger
// file is damage or an attack, and the entry is refused.
inline constexpr uint64_t kMaxManifestBytes = uint64_t(64) << 10;
inline constexpr uint64_t kMaxCubinBytes = uint64_t(64) << 20;
inline constexpr uint64_t kMaxSourceBytes = uint64_t(4) << 20;
inline constexpr uint64_t kMaxLogBytes = uint64_t(4) << 20;
inline constexpr uint64_t kMaxLastUsedBytes = 64;
// The cap of one of the four files an entry publishes; 0 for any other name.
uint64_t entry_file_cap(std::string_view file);

struct EntryCheck {
  std::optional<Manifest> manifest;  // set when the manifest parsed
  std::string cubin;                 // the verified bytes, when ok
  std::string source;                // the verified kernel.cu, when ok
  std::string manifest_text;         // the manifest's bytes, when ok
  std::string problem;               // empty when the entry is sound
  bool missing = false;              // the directory is gone (evicted meanwhile): a miss, not corruption
  bool unreadable = false;           // a file could not be read (EMFILE, EIO, EACCES...): not corruption
  bool ok() const { return problem.empty() && !missing; }
};

// Reads the entry `name` of the cache root `root` and checks it: a directory (not a link)
// that other users cannot write, holding regular files within their caps; the manifest
// parses at this cache format and names the directory's key and hash (and `expected_hash`
// when given); that hash is the one the manifest's own inputs and the source give; the
// cubin and source have the sizes and XXH3 checksums it records; and the cubin is a cubin
// for the key's arch holding spark's kernel.
EntryCheck check_entry(const Dir& root, std::string_view name, std::string_view expected_hash = {});
// The same for an entry directory given by path (tools and tests).
EntryCheck check_entry(const std::filesystem::path& dir, std::string_view expected_hash = {});

// The same checks on an entry's bytes (for import, before anything is written).
EntryCheck check_entry_bytes(std::string_view name, const std::string& manifest_text, std::string cubin,
                             std::string source, std::string_view expected_hash = {});

// Best effort (a read-only cache cannot be stamped): records "now" as the entry's last use.
void stamp_last_used(const Dir& entry);
// The stamp; else the manifest's modification time; 0 when neither can be read.
int64_t last_used_ms(const Dir& root, std::string_view name);
int64_t last_used_ms(const std::filesystem::path& dir);
// Bytes of the regular files under a path (recursively, links not followed), or of a file.
uint64_t disk_bytes(const std::filesystem::path& path);

int64_t unix_ms_now();

}  // namespace spark
