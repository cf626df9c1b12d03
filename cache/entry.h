// The layout of one cache entry, and how any entry is checked on its own: from its
// directory name and manifest, without knowing how it was built.  Shared by loads,
// `spark-cache verify` and import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cache/manifest.h"

namespace spark {

inline constexpr const char* kCubinFile = "kernel.cubin";
inline constexpr const char* kSourceFile = "kernel.cu";
inline constexpr const char* kLogFile = "nvrtc.log";
inline constexpr const char* kManifestFile = "manifest.json";
// Unix milliseconds of the last load, written by the cache itself (atime is often
// disabled, and a copy resets it).  Not covered by the manifest: it changes on every load.
inline constexpr const char* kLastUsedFile = "last_used";

// "<key>-<16 hex digits>": a directory name the cache may have published.  Rejects
// anything with a path separator or a leading dot, so it is also safe for import.
bool is_entry_name(std::string_view name);

struct EntryCheck {
  std::optional<Manifest> manifest;  // set when the manifest parsed
  std::string cubin;                 // the verified bytes, when ok
  std::string problem;               // empty when the entry is sound
  bool missing = false;              // the directory is gone (evicted meanwhile): a miss, not corruption
  bool unreadable = false;           // a file could not be read (EMFILE, EIO, EACCES...): not corruption
  bool ok() const { return problem.empty() && !missing; }
};

// Reads the entry and checks it: the manifest parses at this cache format, names the
// key and hash of the directory (and `expected_hash` when given), and the cubin and
// source have the sizes and XXH3 checksums it records.
EntryCheck check_entry(const std::filesystem::path& dir, std::string_view expected_hash = {});

// The same checks on an entry's bytes (for import, before anything is written).
EntryCheck check_entry_bytes(std::string_view name, const std::string& manifest_text, std::string cubin,
                             const std::string& source, std::string_view expected_hash = {});

// Best effort (a read-only cache cannot be stamped): records "now" as the entry's last use.
void stamp_last_used(const std::filesystem::path& dir);
// The stamp; else the manifest's modification time; 0 when neither can be read.
int64_t last_used_ms(const std::filesystem::path& dir);
// Bytes of the regular files under a directory (recursively), or of a file.
uint64_t disk_bytes(const std::filesystem::path& path);

int64_t unix_ms_now();

}  // namespace spark
