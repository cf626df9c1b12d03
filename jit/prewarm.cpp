#include "jit/prewarm.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

namespace spark {

std::vector<PrewarmResult> prewarm(KernelStore& store, const std::vector<PrewarmJob>& keys, int jobs,
                                   const std::function<void(const PrewarmResult&, size_t)>& on_done) {
  std::vector<PrewarmResult> results(keys.size());
  std::atomic<size_t> next{0};
  size_t done = 0;
  std::mutex mu;
  auto worker = [&] {
    for (size_t i; (i = next++) < keys.size();) {
      PrewarmResult& r = results[i];
      r.key = keys[i].key;
      try {
        const BuiltKernel k = store.get(keys[i].spec());
        if (k.source != BuildSource::kCacheHit) log().info("compiled {} in {:.0f} ms (prewarm)", r.key, k.ms);
        r.source = k.source;
        r.ms = k.ms;
        r.resources = k.manifest.resources;
        r.dir = k.dir;
        r.ok = k.source != BuildSource::kCompiledInMemory;
        if (!r.ok) {
          const CacheAccess& dir = store.access();
          r.error = fmt::format("compiled, but not cached: the cache at {} {}", store.cache().root().string(),
                                dir.writable ? "could not take it (see the warning above)"
                                             : "cannot be written: " + dir.problem);
        }
      } catch (const Error& e) {
        r.error = e.what();
      } catch (const std::exception& e) {
        r.error = e.what();
      }
      std::lock_guard<std::mutex> g(mu);
      ++done;
      if (on_done) on_done(r, done);
    }
  };
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(keys.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  // A cache capped below the kernels' total size evicts some of them as the later ones are
  // published: a prewarm that leaves them out has not done its job.
  std::error_code ec;
  for (PrewarmResult& r : results) {
    if (!r.ok || std::filesystem::is_directory(r.dir, ec)) continue;
    r.ok = false;
    r.failed_after_report = true;
    r.error = fmt::format("built, but no longer in the cache (evicted: is SPARK_CACHE_MAX_BYTES = {} below the "
                          "kernels' total size?)",
                          env_string("SPARK_CACHE_MAX_BYTES").value_or("unset"));
  }
  return results;
}

}  // namespace spark
