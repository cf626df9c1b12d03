#include "cache/kernel_store.h"

#include <chrono>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "generator/render.h"

namespace spark {

std::string_view to_string(BuildSource s) {
  switch (s) {
    case BuildSource::kCacheHit: return "cached";
    case BuildSource::kCompiled: return "compiled";
    case BuildSource::kCompiledInMemory: return "compiled (not cached)";
  }
  return "?";
}

KernelStore::KernelStore(std::filesystem::path root) : cache_(std::move(root)) {}

namespace {

Manifest make_manifest(const CacheId& id, const RenderedSource& src, const CompiledKernel& c,
                       const std::string& nvrtc) {
  Manifest m;
  m.key = src.key.name();
  m.hash = id.hash;
  m.generator_version = kGeneratorVersion;
  m.nvrtc_version = nvrtc;
  m.templates_digest = templates_digest();
  m.options = c.options;
  m.tile = src.tile.describe();
  m.threads = src.threads;
  m.smem_bytes = src.smem_bytes;
  m.cubin_size = c.cubin.size();
  m.cubin_xxh3 = checksum_hex(c.cubin);
  m.source_size = src.source.size();
  m.compile_ms = c.compile_ms;
  m.resources = c.resources;
  m.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return m;
}

}  // namespace

BuiltKernel KernelStore::get(const KernelKey& key) {
  const auto start = std::chrono::steady_clock::now();
  BuiltKernel out;
  out.key = key;
  out.rendered = render(key);
  const std::string nvrtc = nvrtc_version();
  const std::vector<std::string> options = compile_options(key.arch);
  const CacheId id = cache_id(out.rendered, options, nvrtc);
  auto finish = [&](BuildSource source) {
    out.source = source;
    out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return out;
  };
  auto take = [&](CachedKernel&& k) {
    out.manifest = std::move(k.manifest);
    out.cubin = std::move(k.cubin);
    out.dir = std::move(k.dir);
  };

  if (auto hit = cache_.lookup(id)) {
    ++metrics_.hits;
    take(std::move(*hit));
    return finish(BuildSource::kCacheHit);
  }
  ++metrics_.misses;
  SPARK_CHECK(jit_enabled(), SPARK_ERROR_JIT_DISABLED,
              "kernel {} is not in the cache {} and SPARK_JIT=0 forbids compiling it", key.name(),
              cache_.root().string());

  auto compile_counted = [&] {
    CompiledKernel c = compile(out.rendered);
    ++metrics_.compiles;
    metrics_.compile_us += static_cast<uint64_t>(c.compile_ms * 1000);
    return c;
  };

  if (!cache_.ensure_writable()) {
    std::call_once(readonly_warning_, [&] {
      log().warn("cache directory {} is not writable: compiling in memory, nothing is cached",
                 cache_.root().string());
    });
    CompiledKernel c = compile_counted();
    out.manifest = make_manifest(id, out.rendered, c, nvrtc);
    out.cubin = std::move(c.cubin);
    return finish(BuildSource::kCompiledInMemory);
  }

  // One compile per entry across processes: whoever holds the lock compiles; the others
  // wait, then find the published entry.
  EntryLock lock = cache_.lock(id);
  if (auto hit = cache_.lookup(id)) {
    ++metrics_.hits;
    take(std::move(*hit));
    return finish(BuildSource::kCacheHit);
  }
  CompiledKernel c = compile_counted();
  const Manifest m = make_manifest(id, out.rendered, c, nvrtc);
  take(cache_.publish(id, out.rendered, c, m));
  return finish(BuildSource::kCompiled);
}

}  // namespace spark
