#include "cache/evict.h"

#include <algorithm>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/scratch.h"
#include "cache/stats.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> children(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.push_back(it->path());
  return out;
}

// Serialises evictions and clears across processes.
EntryLock housekeeping_lock(const KernelCache& cache) {
  std::error_code ec;
  fs::create_directories(cache.root() / kLocksDir, ec);
  return EntryLock::exclusive(cache.root() / kLocksDir / "housekeeping.lock");
}

}  // namespace

uint64_t cache_bytes(const KernelCache& cache) {
  uint64_t total = 0;
  for (const std::string& name : cache.entry_names()) total += disk_bytes(cache.entry_dir(name));
  for (const char* sub : {kTmpDir, kTrashDir, kCorruptDir}) total += disk_bytes(cache.root() / sub);
  return total;
}

bool remove_entry(const KernelCache& cache, const std::string& name,
                  const std::function<bool(const fs::path&)>& should_remove) {
  std::error_code ec;
  fs::create_directories(cache.root() / kLocksDir, ec);
  std::optional<EntryLock> lock = EntryLock::try_exclusive(cache.lock_file(name));
  if (!lock) return false;
  const fs::path dir = cache.entry_dir(name);
  bool removed = false;
  if (fs::is_directory(dir, ec) && (!should_remove || should_remove(dir))) {
    fs::create_directories(cache.root() / kTrashDir, ec);
    const fs::path victim = cache.root() / kTrashDir / scratch_name(name);
    fs::rename(dir, victim, ec);
    if (!ec) {
      removed = true;
      fs::remove_all(victim, ec);  // if we die here, remove_leftovers finishes the job
    }
  }
  // Unlinked while held: waiters notice the swap and retry on a fresh file.
  lock->unlink_file();
  return removed;
}

size_t remove_leftovers(const KernelCache& cache, bool include_corrupt) {
  size_t n = 0;
  std::error_code ec;
  for (const char* sub : {kTmpDir, kTrashDir})
    for (const fs::path& p : children(cache.root() / sub))
      if (scratch_is_abandoned(p, kScratchMaxAge) && fs::remove_all(p, ec) > 0) ++n;
  if (include_corrupt)
    for (const fs::path& p : children(cache.root() / kCorruptDir))
      if (fs::remove_all(p, ec) > 0) ++n;
  return n;
}

RemovalReport evict_to_fit(const KernelCache& cache, uint64_t max_bytes) {
  const EntryLock serialised = housekeeping_lock(cache);
  RemovalReport r;
  r.bytes_before = cache_bytes(cache);
  if (r.bytes_before <= max_bytes) {
    r.bytes_after = r.bytes_before;
    return r;
  }
  r.leftovers = remove_leftovers(cache, /*include_corrupt=*/true);
  uint64_t total = cache_bytes(cache);

  struct Candidate {
    std::string name;
    int64_t last_used;
    uint64_t bytes;
  };
  std::vector<Candidate> candidates;
  for (const std::string& name : cache.entry_names())
    candidates.push_back({name, last_used_ms(cache.entry_dir(name)), disk_bytes(cache.entry_dir(name))});
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.last_used != b.last_used ? a.last_used < b.last_used : a.name < b.name;
  });
  for (const Candidate& c : candidates) {
    if (total <= max_bytes) break;
    if (remove_entry(cache, c.name)) {
      r.removed.push_back(c.name);
      total -= std::min(total, c.bytes);
    } else {
      ++r.busy;
    }
  }
  r.bytes_after = cache_bytes(cache);
  return r;
}

RemovalReport clear_cache(const KernelCache& cache) {
  const EntryLock serialised = housekeeping_lock(cache);
  RemovalReport r;
  r.bytes_before = cache_bytes(cache);
  for (const std::string& name : cache.entry_names()) {
    if (remove_entry(cache, name)) r.removed.push_back(name);
    else ++r.busy;
  }
  r.leftovers = remove_leftovers(cache, /*include_corrupt=*/true);
  std::error_code ec;
  // Lock files of entries that no longer exist; entry_names() only lists directories.
  for (const fs::path& p : children(cache.root() / kLocksDir)) {
    const std::string file = p.filename().string();
    if (file.size() < 6 || file.compare(file.size() - 5, 5, ".lock") != 0) continue;
    const std::string name = file.substr(0, file.size() - 5);
    if (!is_entry_name(name) || fs::exists(cache.entry_dir(name), ec)) continue;
    if (std::optional<EntryLock> held = EntryLock::try_exclusive(p)) held->unlink_file();
  }
  {
    const EntryLock stats = EntryLock::exclusive(cache.root() / kLocksDir / "stats.lock");
    fs::remove(cache.root() / kStatsFile, ec);
  }
  r.bytes_after = cache_bytes(cache);
  return r;
}

}  // namespace spark
