#include "cache/evict.h"

#include <algorithm>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/scratch.h"
#include "cache/stats.h"

namespace spark {

namespace {

// Leftovers in a working directory: only names spark made there (scratch names), so a
// directory pointed at by mistake loses nothing of its own.
size_t remove_scratch(const KernelCache& cache, const Dir& root, const char* sub, bool abandoned_only) {
  Dir dir;
  if (cache.open_work_dir(root, sub, false, dir) != 0) return 0;
  size_t n = 0;
  for (const std::string& name : dir.list()) {
    if (!is_scratch_name(name)) continue;
    if (abandoned_only && !scratch_is_abandoned(dir, name, kScratchMaxAge)) continue;
    if (dir.remove_tree(name)) ++n;
  }
  return n;
}

}  // namespace

uint64_t cache_bytes(const KernelCache& cache) {
  Dir root;
  if (cache.open_root(root) != 0) return 0;
  uint64_t total = 0;
  for (const std::string& name : cache.entry_names()) total += root.disk_bytes(name);
  for (const char* sub : {kTmpDir, kTrashDir, kCorruptDir}) total += root.disk_bytes(sub);
  return total;
}

bool remove_entry(const KernelCache& cache, const std::string& name,
                  const std::function<bool(const Dir& root, const std::string& name)>& should_remove) {
  Dir root, trash;
  if (!is_entry_name(name) || cache.open_root(root) != 0) return false;
  std::optional<EntryLock> lock = cache.try_lock(name);
  if (!lock) return false;
  bool removed = false;
  if (root.is_child_dir(name) && (!should_remove || should_remove(root, name)) &&
      cache.open_work_dir(root, kTrashDir, true, trash) == 0) {
    const std::string victim = scratch_name(name);
    if (root.rename(name, trash, victim) == 0) {
      removed = true;
      trash.remove_tree(victim);  // if we die here, remove_leftovers finishes the job
    }
  }
  // Unlinked while held: waiters notice the swap and retry on a fresh file.
  lock->unlink_file();
  return removed;
}

size_t remove_leftovers(const KernelCache& cache, bool include_corrupt) {
  Dir root;
  if (cache.open_root(root) != 0) return 0;
  size_t n = remove_scratch(cache, root, kTmpDir, true) + remove_scratch(cache, root, kTrashDir, true);
  if (include_corrupt) n += remove_scratch(cache, root, kCorruptDir, false);
  return n;
}

RemovalReport evict_to_fit(const KernelCache& cache, uint64_t max_bytes) {
  const EntryLock serialised = cache.cache_lock("housekeeping");
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
  Dir root;
  if (cache.open_root(root) == 0)
    for (const std::string& name : cache.entry_names())
      candidates.push_back({name, last_used_ms(root, name), root.disk_bytes(name)});
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
  const EntryLock serialised = cache.cache_lock("housekeeping");
  RemovalReport r;
  r.bytes_before = cache_bytes(cache);
  for (const std::string& name : cache.entry_names()) {
    if (remove_entry(cache, name)) r.removed.push_back(name);
    else ++r.busy;
  }
  r.leftovers = remove_leftovers(cache, /*include_corrupt=*/true);
  Dir root, locks;
  if (cache.open_root(root) == 0) {
    // Lock files of entries that no longer exist; nothing else in .locks/ is touched.
    if (cache.open_work_dir(root, kLocksDir, false, locks) == 0)
      for (const std::string& file : locks.list()) {
        if (file.size() < 6 || file.compare(file.size() - 5, 5, ".lock") != 0) continue;
        const std::string name = file.substr(0, file.size() - 5);
        if (!is_entry_name(name) || root.is_child_dir(name)) continue;
        if (std::optional<EntryLock> held = EntryLock::try_exclusive(locks, file)) held->unlink_file();
      }
    const EntryLock stats = cache.cache_lock("stats");
    struct stat st {};
    if (root.stat_child(kStatsFile, st) == 0 && !S_ISDIR(st.st_mode)) root.remove_file(kStatsFile);
  }
  r.bytes_after = cache_bytes(cache);
  return r;
}

}  // namespace spark
