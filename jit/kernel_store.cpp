#include "jit/kernel_store.h"

#include <chrono>

#include "cache/evict.h"
#include "core/env.h"
#include "core/error.h"
#include "core/key_name.h"
#include "core/log.h"
#include "jit/templates.h"

namespace spark {

std::string_view to_string(BuildSource s) {
  switch (s) {
    case BuildSource::kCacheHit: return "cached";
    case BuildSource::kCompiled: return "compiled";
    case BuildSource::kCompiledInMemory: return "compiled (not cached)";
  }
  return "?";
}

CacheCounters StoreMetrics::snapshot() const {
  CacheCounters c;
  c.hits = hits;
  c.misses = misses;
  c.compiles = compiles;
  c.corrupt_entries = corrupt;
  c.evictions = evictions;
  c.compile_ms = static_cast<double>(compile_us.load()) / 1000.0;
  c.load_ms = static_cast<double>(load_us.load()) / 1000.0;
  return c;
}

CacheKeyParts cache_key_parts(const KernelSpec& spec, const std::vector<std::string>& options,
                              const std::string& nvrtc_version) {
  CacheKeyParts p;
  p.generator_version = spec.generator_version;
  p.key = spec.key;
  p.source = spec.source;
  p.templates_digest = templates_digest();
  p.nvrtc_version = nvrtc_version;
  p.options = options;
  return p;
}

CacheId cache_id(const KernelSpec& spec, const std::vector<std::string>& options, const std::string& nvrtc_version) {
  return cache_id(cache_key_parts(spec, options, nvrtc_version));
}

KernelStore::KernelStore(std::filesystem::path root) : cache_(std::move(root)) {}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

Manifest make_manifest(const CacheId& id, const KernelSpec& src, const CompiledKernel& c,
                       const std::string& nvrtc) {
  Manifest m;
  m.key = src.key;
  m.hash = id.hash;
  m.generator_version = src.generator_version;
  m.nvrtc_version = nvrtc;
  m.templates_digest = templates_digest();
  m.options = c.options;
  m.tile = src.summary;
  m.threads = src.threads;
  m.smem_bytes = src.smem_bytes;
  m.cubin_size = c.cubin.size();
  m.cubin_xxh3 = checksum_hex(c.cubin);
  m.source_size = src.source.size();
  m.source_xxh3 = checksum_hex(src.source);
  m.compile_ms = c.compile_ms;
  m.resources = c.resources;
  m.created_unix_ms = unix_ms_now();
  return m;
}

}  // namespace

const CacheAccess& KernelStore::access() {
  std::call_once(access_checked_, [&] {
    access_ = cache_.prepare();
    // Builds that killed processes left behind; once per store is often enough.
    if (access_.writable) remove_leftovers(cache_, /*include_corrupt=*/false);
    // An untrusted directory is announced at once: not even its entries are used.
    if (!access_.trusted)
      log().warn("cache directory {} is not used: {}; spark neither reads nor writes it and compiles in memory "
                 "(see README, \"Who may write the cache\")",
                 cache_.root().string(), access_.problem);
  });
  return access_;
}

void KernelStore::count(const CacheCounters& d) {
  metrics_.hits += d.hits;
  metrics_.misses += d.misses;
  metrics_.compiles += d.compiles;
  metrics_.corrupt += d.corrupt_entries;
  metrics_.evictions += d.evictions;
  metrics_.compile_us += static_cast<uint64_t>(d.compile_ms * 1000);
  metrics_.load_us += static_cast<uint64_t>(d.load_ms * 1000);
  if (access().writable) add_persistent_stats(cache_, d);
}

void KernelStore::record_module_load(double ms) {
  CacheCounters d;
  d.load_ms = ms;
  count(d);
}

BuiltKernel KernelStore::get(const KernelSpec& spec) {
  const auto start = Clock::now();
  SPARK_CHECK(is_key_name(spec.key) && key_arch(spec.key) == spec.arch, SPARK_ERROR_INTERNAL,
              "kernel spec '{}' for {}: not a key name of that arch", spec.key, spec.arch);
  BuiltKernel out;
  out.spec = spec;
  const std::string nvrtc = nvrtc_version();
  const std::vector<std::string> options = compile_options(spec.arch);
  const CacheId id = cache_id(spec, options, nvrtc);
  CacheCounters delta;
  auto finish = [&](BuildSource source) {
    out.source = source;
    out.ms = ms_since(start);
    count(delta);
    return out;
  };
  // A lookup that reads the entry: a hit, or a corrupt entry moved aside (a miss).
  auto try_load = [&](bool holding_lock) {
    const auto t = Clock::now();
    std::string corruption;
    auto hit = holding_lock ? cache_.lookup_holding_lock(id, &corruption) : cache_.lookup(id, &corruption);
    if (!corruption.empty()) ++delta.corrupt_entries;
    if (!hit) return false;
    ++delta.hits;
    delta.load_ms += ms_since(t);
    out.manifest = std::move(hit->manifest);
    out.cubin = std::move(hit->cubin);
    out.dir = std::move(hit->dir);
    return true;
  };

  const CacheAccess& dir = access();
  if (dir.trusted && try_load(false)) return finish(BuildSource::kCacheHit);
  if (!jit_enabled()) {
    ++delta.misses;
    count(delta);
    SPARK_FAIL(SPARK_ERROR_JIT_DISABLED, "kernel {} is not in the cache {}{} and SPARK_JIT=0 forbids compiling it",
               spec.key, cache_.root().string(), dir.trusted ? "" : " (not used: " + dir.problem + ")");
  }
  auto compile_counted = [&] {
    ++delta.misses;
    try {
      CompiledKernel c = compile(spec);
      ++delta.compiles;
      delta.compile_ms += c.compile_ms;
      return c;
    } catch (...) {
      count(delta);  // a failed compile is still a miss
      throw;
    }
  };
  auto in_memory = [&] {
    if (dir.trusted && !dir.writable)
      std::call_once(readonly_warning_, [&] {
        log().warn("cache directory {} is not writable ({}): compiling in memory, nothing is cached",
                   cache_.root().string(), dir.problem);
      });
    CompiledKernel c = compile_counted();
    out.manifest = make_manifest(id, spec, c, nvrtc);
    out.cubin = std::move(c.cubin);
    return finish(BuildSource::kCompiledInMemory);
  };
  if (!dir.writable) return in_memory();

  // One compile per entry across processes: whoever holds the lock compiles; the others
  // wait, then load the published entry.  A holder that dies drops the lock with it.  A lock
  // that cannot be had at all (a lock file planted or left unusable) costs the cache, not
  // the kernel.
  EntryLock lock;
  try {
    lock = cache_.lock(id);
  } catch (const Error& e) {
    std::call_once(lock_warning_, [&] { log().warn("{}; compiling in memory", e.what()); });
    return in_memory();
  }
  if (try_load(true)) return finish(BuildSource::kCacheHit);
  CompiledKernel c = compile_counted();
  Manifest manifest = make_manifest(id, spec, c, nvrtc);
  try {
    const CachedKernel published = cache_.publish(id, spec.source, c.cubin, c.log, manifest);
    out.manifest = published.manifest;
    out.cubin = published.cubin;
    out.dir = published.dir;
  } catch (const Error& e) {
    // A full disk must not fail a load that has its cubin: use it, cache nothing.
    log().warn("cannot cache {} ({}); using the kernel compiled in memory", spec.key, e.what());
    out.manifest = std::move(manifest);
    out.cubin = std::move(c.cubin);
    return finish(BuildSource::kCompiledInMemory);
  }
  // Still holding this entry's lock, so the cap never evicts what was just published.
  if (const auto cap = cache_max_bytes()) {
    try {
      delta.evictions += evict_to_fit(cache_, *cap).removed.size();
    } catch (const Error& e) {
      log().warn("cannot apply SPARK_CACHE_MAX_BYTES to {}: {}", cache_.root().string(), e.what());
    }
  }
  return finish(BuildSource::kCompiled);
}

}  // namespace spark
