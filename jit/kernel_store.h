// Kernel spec -> verified cubin: the cache in front of NVRTC.  Knows no op: an op renders
// the spec, this finds or compiles and publishes its cubin.  Shared by the runtime and
// spark-prewarm.
#pragma once

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>

#include "cache/cache.h"
#include "cache/stats.h"
#include "jit/compile.h"
#include "jit/kernel_spec.h"

namespace spark {

// What a spec's entry hash covers: the spec's key, source and renderer version, this
// build's cache format and templates, the NVRTC version and the compile options.
CacheKeyParts cache_key_parts(const KernelSpec& spec, const std::vector<std::string>& options,
                              const std::string& nvrtc_version);
CacheId cache_id(const KernelSpec& spec, const std::vector<std::string>& options, const std::string& nvrtc_version);

enum class BuildSource {
  kCacheHit,         // verified entry found on disk
  kCompiled,         // compiled here and published
  kCompiledInMemory  // compiled here; the cache could not be written
};

std::string_view to_string(BuildSource s);

struct BuiltKernel {
  KernelSpec spec;
  Manifest manifest;
  std::string cubin;
  std::filesystem::path dir;  // empty when compiled in memory
  BuildSource source = BuildSource::kCacheHit;
  double ms = 0;  // time spent in get(): lookup, lock wait and compile
};

// This store's counters (stats.h says what each one counts).
struct StoreMetrics {
  std::atomic<uint64_t> hits{0}, misses{0}, compiles{0}, corrupt{0}, evictions{0};
  std::atomic<uint64_t> compile_us{0}, load_us{0};
  CacheCounters snapshot() const;
};

class KernelStore {
 public:
  explicit KernelStore(std::filesystem::path root);
  const KernelCache& cache() const { return cache_; }

  // The kernel of a spec: from the cache, or compiled (once across processes) and
  // published.  Throws COMPILE, CACHE, or JIT_DISABLED under SPARK_JIT=0.  Honours
  // SPARK_CACHE_MAX_BYTES after each publish.
  BuiltKernel get(const KernelSpec& spec);
  const StoreMetrics& metrics() const { return metrics_; }
  // Time spent loading a built kernel onto a device (the runtime measures it).
  void record_module_load(double ms);
  // What the cache directory allows, checked once (an untrusted one is announced then; a
  // read-only one at its first compile).
  const CacheAccess& access();

 private:
  // Adds delta to the in-memory metrics and the directory's persistent totals.
  void count(const CacheCounters& delta);

  KernelCache cache_;
  StoreMetrics metrics_;
  std::once_flag access_checked_, lock_warning_, readonly_warning_;
  CacheAccess access_;
};

}  // namespace spark
