// What `spark-cache list / show / verify / stats` report: entries, their manifests and
// health, and the cache's totals.  Returns data; the tool formats it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cache/stats.h"

namespace spark {

struct EntryInfo {
  std::string name;
  std::filesystem::path dir;
  std::optional<Manifest> manifest;  // absent when it does not parse (verify says why)
  uint64_t bytes = 0;
  int64_t last_used_ms = 0;
};

EntryInfo describe_entry(const KernelCache& cache, const std::string& name);
// One file of an entry (kSourceFile, ...), within its cap; throws CACHE saying why not.
std::string read_entry_file(const KernelCache& cache, const std::string& name, const char* file);
// Every entry, by name.  Reads manifests only; verify_entries() reads the cubins.
std::vector<EntryInfo> list_entries(const KernelCache& cache);
// Everything list and show report about an entry, as JSON.
nlohmann::ordered_json entry_json(const EntryInfo& e);

// The entry a user means: its directory name, its key's name, or a unique prefix of the
// directory name.  Throws INVALID_ARGUMENT ('KEY') when nothing or several match.
std::string find_entry(const KernelCache& cache, std::string_view query);

struct EntryVerdict {
  std::string name;
  std::string problem;  // empty: sound
  bool removed = false;
};
// Checks every entry's manifest, sizes and checksums under its shared lock; with fix,
// removes those that fail (unless in use: then removed stays false).
std::vector<EntryVerdict> verify_entries(const KernelCache& cache, bool fix);

struct CacheSummary {
  size_t entries = 0;
  uint64_t entry_bytes = 0;
  uint64_t total_bytes = 0;  // everything under the root
  size_t corrupt = 0;        // entries moved aside to .corrupt/
  size_t temporaries = 0;    // builds in progress or abandoned, trash
  PersistentStats stats;
};
CacheSummary summarize(const KernelCache& cache);

}  // namespace spark
