// Filling the cache ahead of time: a parallel build of many kernels, of any op (the op
// says which: ops/mla_qproj/presets.h).  Used by spark-prewarm; needs no GPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/kernel_spec.h"
#include "jit/kernel_store.h"

namespace spark {

// One kernel to build: its key's name, and how to render its spec (which may throw, e.g.
// UNSUPPORTED: the failure is that kernel's result).
struct PrewarmJob {
  std::string key;
  std::function<KernelSpec()> spec;
};

struct PrewarmResult {
  std::string key;
  // False also for a kernel that compiled but is not in the cache when the prewarm ends
  // (the cache could not be written, or SPARK_CACHE_MAX_BYTES evicted it).
  bool ok = false;
  bool failed_after_report = false;  // found missing after on_done reported it built
  BuildSource source = BuildSource::kCacheHit;
  double ms = 0;
  std::string error;
  KernelResources resources;
  std::filesystem::path dir;  // the cache entry
};

// Builds every key with `jobs` threads; on_done is called (serialised) as each finishes.
// Then checks that every built kernel is still in the cache.
std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<PrewarmJob>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t done)>& on_done = {});

}  // namespace spark
