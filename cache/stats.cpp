#include "cache/stats.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cache/entry_lock.h"
#include "cache/scratch.h"
#include "core/files.h"

namespace spark {

namespace fs = std::filesystem;

CacheCounters& CacheCounters::operator+=(const CacheCounters& o) {
  hits += o.hits;
  misses += o.misses;
  compiles += o.compiles;
  corrupt_entries += o.corrupt_entries;
  evictions += o.evictions;
  compile_ms += o.compile_ms;
  load_ms += o.load_ms;
  return *this;
}

PersistentStats read_persistent_stats(const fs::path& root) {
  PersistentStats s;
  try {
    const auto j = nlohmann::json::parse(read_file(root / kStatsFile));
    CacheCounters& c = s.counters;
    c.hits = j.value("hits", uint64_t{0});
    c.misses = j.value("misses", uint64_t{0});
    c.compiles = j.value("compiles", uint64_t{0});
    c.corrupt_entries = j.value("corrupt_entries", uint64_t{0});
    c.evictions = j.value("evictions", uint64_t{0});
    c.compile_ms = j.value("compile_ms", 0.0);
    c.load_ms = j.value("load_ms", 0.0);
    s.since_unix_ms = j.value("since_unix_ms", int64_t{0});
    s.updated_unix_ms = j.value("updated_unix_ms", int64_t{0});
  } catch (const std::exception&) {
    s = PersistentStats{};  // absent, or torn by a power loss: start again from zero
  }
  return s;
}

std::string persistent_stats_json(const PersistentStats& s) {
  const CacheCounters& c = s.counters;
  const nlohmann::ordered_json j = {{"hits", c.hits},
                                    {"misses", c.misses},
                                    {"compiles", c.compiles},
                                    {"corrupt_entries", c.corrupt_entries},
                                    {"evictions", c.evictions},
                                    {"compile_ms", c.compile_ms},
                                    {"load_ms", c.load_ms},
                                    {"since_unix_ms", s.since_unix_ms},
                                    {"updated_unix_ms", s.updated_unix_ms}};
  return j.dump(2) + "\n";
}

void add_persistent_stats(const fs::path& root, const CacheCounters& delta) noexcept {
  try {
    const EntryLock lock = EntryLock::exclusive(root / kLocksDir / "stats.lock");
    PersistentStats s = read_persistent_stats(root);
    s.counters += delta;
    const int64_t now = unix_ms_now();
    if (s.since_unix_ms == 0) s.since_unix_ms = now;
    s.updated_unix_ms = now;
    // Not fsynced: advisory numbers are not worth a disk flush on every load.
    const fs::path tmp = root / kTmpDir / scratch_name(kStatsFile);
    write_file(tmp, persistent_stats_json(s));
    if (std::rename(tmp.c_str(), (root / kStatsFile).c_str()) != 0) {
      std::error_code ec;
      fs::remove(tmp, ec);
    }
  } catch (...) {
  }
}

}  // namespace spark
