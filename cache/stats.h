// Cache counters summed over every process that used a cache directory, kept in
// <root>/stats.json, so `spark-cache stats` shows what prewarms and servers did.
// Each process adds its own deltas under .locks/stats.lock; the file is replaced by a
// rename, so a process killed mid-update leaves the previous totals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace spark {

inline constexpr const char* kStatsFile = "stats.json";
inline constexpr uint64_t kMaxStatsBytes = uint64_t(64) << 10;

class KernelCache;

struct CacheCounters {
  uint64_t hits = 0;             // kernels served from a verified entry
  uint64_t misses = 0;           // kernels not in the cache (compiled, or refused under SPARK_JIT=0)
  uint64_t compiles = 0;         // NVRTC compiles
  uint64_t corrupt_entries = 0;  // entries that failed verification and were moved aside
  uint64_t evictions = 0;        // entries removed to respect SPARK_CACHE_MAX_BYTES
  double compile_ms = 0;
  double load_ms = 0;  // reading + verifying entries, and loading modules onto a device

  CacheCounters& operator+=(const CacheCounters& o);
};

struct PersistentStats {
  CacheCounters counters;
  int64_t since_unix_ms = 0;    // first update since the file was created or reset
  int64_t updated_unix_ms = 0;  // last update
};

// Adds delta to the cache's totals.  Best effort and never throws: a read-only or
// untrusted cache keeps no totals, and stats must never fail a kernel load.
void add_persistent_stats(const KernelCache& cache, const CacheCounters& delta) noexcept;
// The totals as the JSON object stats.json holds (spark-cache stats --json reuses it).
std::string persistent_stats_json(const PersistentStats& s);
// Zeros when the file is absent, unreadable, not a regular file of at most
// kMaxStatsBytes, or holds a value spark never writes (negative, NaN, not a number).
PersistentStats read_persistent_stats(const std::filesystem::path& root);

}  // namespace spark
