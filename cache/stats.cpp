#include "cache/stats.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cache/cache.h"
#include "cache/entry_lock.h"
#include "cache/scratch.h"
#include "core/dir.h"

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

namespace {

// stats.json is written by any process that uses the cache; a value that is not what spark
// writes (negative, fractional, NaN, absurdly large) means the file is not to be believed.
constexpr double kMaxMs = 1e15;  // ~31,000 years

uint64_t counter(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
    throw std::range_error(name);
  return it->get<uint64_t>();
}

double milliseconds(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  const double v = it->is_number() ? it->get<double>() : -1;
  if (!(v >= 0 && v <= kMaxMs)) throw std::range_error(name);  // also NaN
  return v;
}

int64_t unix_ms(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) throw std::range_error(name);
  return it->get<int64_t>();
}

}  // namespace

PersistentStats read_persistent_stats(const fs::path& root_path) {
  PersistentStats s;
  Dir root;
  std::string text;
  if (Dir::open(root_path, root) != 0 || root.read_file(kStatsFile, kMaxStatsBytes, text) != 0) return s;
  try {
    const auto j = nlohmann::json::parse(text);
    if (!j.is_object()) return s;
    CacheCounters& c = s.counters;
    c.hits = counter(j, "hits");
    c.misses = counter(j, "misses");
    c.compiles = counter(j, "compiles");
    c.corrupt_entries = counter(j, "corrupt_entries");
    c.evictions = counter(j, "evictions");
    c.compile_ms = milliseconds(j, "compile_ms");
    c.load_ms = milliseconds(j, "load_ms");
    s.since_unix_ms = unix_ms(j, "since_unix_ms");
    s.updated_unix_ms = unix_ms(j, "updated_unix_ms");
  } catch (const std::exception&) {
    s = PersistentStats{};  // absent, torn by a power loss, or not spark's: start again from zero
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

void add_persistent_stats(const KernelCache& cache, const CacheCounters& delta) noexcept {
  try {
    Dir root, tmp;
    if (cache.open_root(root) != 0 || cache.open_work_dir(root, kTmpDir, false, tmp) != 0) return;
    const EntryLock lock = cache.cache_lock("stats");
    PersistentStats s = read_persistent_stats(cache.root());
    s.counters += delta;
    const int64_t now = unix_ms_now();
    if (s.since_unix_ms == 0) s.since_unix_ms = now;
    s.updated_unix_ms = now;
    // Not fsynced: advisory numbers are not worth a disk flush on every load.  A failed
    // write removes its temporary (write_new_file does), so a full disk leaves nothing.
    const std::string scratch = scratch_name(kStatsFile);
    tmp.write_new_file(scratch, persistent_stats_json(s), /*sync=*/false);
    if (tmp.rename(scratch, root, kStatsFile) != 0) tmp.remove_file(scratch);
  } catch (...) {
  }
}

}  // namespace spark
