// Removing entries while other processes use the cache: size-capped least-recently-used
// eviction (SPARK_CACHE_MAX_BYTES, `spark-cache prune`), `spark-cache clear`, and the
// clean-up of what killed processes left behind.
//
// An entry is only removed while its exclusive lock is held, taken without waiting: an
// entry another process is publishing or loading (it holds the lock) is skipped, never
// removed.  The victim is first renamed into .trash/, so nobody ever sees it half deleted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cache/cache.h"

namespace spark {

struct RemovalReport {
  std::vector<std::string> removed;  // entry names, oldest use first
  size_t busy = 0;                   // entries in use by another process, kept
  size_t leftovers = 0;              // abandoned temporaries, trash, corrupt entries removed
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;
};

// Removes one entry unless it is in use.  False when in use or already gone, or when
// should_remove (asked while the lock is held, so the entry cannot change under it)
// says no.
bool remove_entry(const KernelCache& cache, const std::string& name,
                  const std::function<bool(const Dir& root, const std::string& name)>& should_remove = {});

// Removes abandoned temporaries in .tmp/ and .trash/ (scratch.h decides what is
// abandoned) and, with include_corrupt, the entries moved to .corrupt/.  Only names spark
// makes there are touched.  Returns the count.
size_t remove_leftovers(const KernelCache& cache, bool include_corrupt);

// Until the cache uses at most max_bytes of disk: leftovers and corrupt entries first,
// then entries by their last-used stamp, oldest first.  Runs of several processes are
// serialised, so two never evict the same bytes twice.
RemovalReport evict_to_fit(const KernelCache& cache, uint64_t max_bytes);

// Removes every entry not in use, every leftover, the corrupt entries, unused lock files
// and the stats.
RemovalReport clear_cache(const KernelCache& cache);

// What the cap limits: entries, builds in progress, trash and corrupt entries.  Lock
// files and stats.json (a few hundred bytes) are bookkeeping and not counted.
uint64_t cache_bytes(const KernelCache& cache);

}  // namespace spark
