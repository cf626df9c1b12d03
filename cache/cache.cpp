#include "cache/cache.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <unistd.h>
#include <xxhash.h>

#include "cache/scratch.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"

namespace spark {

namespace fs = std::filesystem;

CacheKeyParts cache_key_parts(const RenderedSource& src, const std::vector<std::string>& options,
                              const std::string& nvrtc_version) {
  CacheKeyParts p;
  p.key = src.key.name();
  p.source = src.source;
  p.templates_digest = templates_digest();
  p.nvrtc_version = nvrtc_version;
  p.options = options;
  return p;
}

CacheId cache_id(const CacheKeyParts& parts) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto feed = [&](std::string_view field, std::string_view value) {
    const uint64_t sizes[2] = {field.size(), value.size()};
    XXH3_128bits_update(st, sizes, sizeof sizes);
    XXH3_128bits_update(st, field.data(), field.size());
    XXH3_128bits_update(st, value.data(), value.size());
  };
  feed("format", std::to_string(parts.format_version));
  feed("generator", std::to_string(parts.generator_version));
  feed("key", parts.key);
  feed("source", parts.source);
  feed("templates", parts.templates_digest);
  feed("nvrtc", parts.nvrtc_version);
  for (const std::string& o : parts.options) feed("option", o);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  CacheId id;
  id.hash = fmt::format("{:016x}{:016x}", h.high64, h.low64);
  id.name = parts.key + "-" + id.hash.substr(0, 16);
  return id;
}

CacheId cache_id(const RenderedSource& src, const std::vector<std::string>& options,
                 const std::string& nvrtc_version) {
  return cache_id(cache_key_parts(src, options, nvrtc_version));
}

KernelCache::KernelCache(fs::path root) : root_(std::move(root)) {}

fs::path KernelCache::lock_file(const std::string& name) const { return root_ / kLocksDir / (name + ".lock"); }

bool KernelCache::ensure_writable() const {
  std::error_code ec;
  for (const char* sub : {kTmpDir, kLocksDir}) {
    fs::create_directories(root_ / sub, ec);
    if (ec) return false;
  }
  return ::access(root_.c_str(), W_OK) == 0 && ::access((root_ / kTmpDir).c_str(), W_OK) == 0 &&
         ::access((root_ / kLocksDir).c_str(), W_OK) == 0;
}

std::vector<std::string> KernelCache::entry_names() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(root_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    const std::string name = it->path().filename().string();
    if (is_entry_name(name) && it->is_directory(e2)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<CachedKernel> KernelCache::read_verified(const CacheId& id, std::string* corruption) const {
  const fs::path dir = entry_dir(id.name);
  EntryCheck c = check_entry(dir, id.hash);
  if (c.ok()) {
    stamp_last_used(dir);
    return CachedKernel{dir, std::move(*c.manifest), std::move(c.cubin)};
  }
  if (c.missing) return std::nullopt;  // evicted between the existence check and the read
  if (c.unreadable) {
    log().warn("cannot read cache entry {} ({}); leaving it in place and building without it", dir.string(),
               c.problem);
    return std::nullopt;
  }
  log().warn("cache entry {} is corrupt ({}); moving it aside and rebuilding", dir.string(), c.problem);
  if (corruption) *corruption = c.problem;
  move_aside(id.name);
  return std::nullopt;
}

std::optional<CachedKernel> KernelCache::lookup(const CacheId& id, std::string* corruption) const {
  std::error_code ec;
  if (!fs::is_directory(entry_dir(id.name), ec)) return std::nullopt;  // plain misses take no lock
  fs::create_directories(root_ / kLocksDir, ec);  // a copied cache may lack it; read-only is fine too
  const EntryLock reading = EntryLock::shared(lock_file(id.name));
  return read_verified(id, corruption);
}

std::optional<CachedKernel> KernelCache::lookup_holding_lock(const CacheId& id, std::string* corruption) const {
  std::error_code ec;
  if (!fs::is_directory(entry_dir(id.name), ec)) return std::nullopt;
  return read_verified(id, corruption);
}

void KernelCache::move_aside(const std::string& name) const {
  std::error_code ec;
  fs::create_directories(root_ / kCorruptDir, ec);
  fs::rename(entry_dir(name), root_ / kCorruptDir / scratch_name(name), ec);
}

bool KernelCache::publish_files(const std::string& name, const std::vector<EntryFile>& files) const {
  const fs::path final_dir = entry_dir(name);
  const fs::path tmp = root_ / kTmpDir / scratch_name(name);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  SPARK_CHECK(!ec, SPARK_ERROR_CACHE, "cannot create {}: {}", tmp.string(), ec.message());
  try {
    for (const EntryFile& f : files) write_file_synced(tmp / f.name, f.bytes);
    stamp_last_used(tmp);  // published entries start as just used
    fsync_dir(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // rename(2) replaces only an empty directory; a published entry is never empty.
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    if (err == EEXIST || err == ENOTEMPTY) return false;
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot publish {}: {}", final_dir.string(), std::strerror(err));
  }
  fsync_dir(root_);
  return true;
}

CachedKernel KernelCache::publish(const CacheId& id, const RenderedSource& src, const CompiledKernel& compiled,
                                  const Manifest& manifest) const {
  // The manifest goes last: an entry is only trusted once it verifies against it.
  const std::vector<EntryFile> files = {{kCubinFile, compiled.cubin},
                                        {kSourceFile, src.source},
                                        {kLogFile, compiled.log},
                                        {kManifestFile, manifest.to_json()}};
  // A second attempt follows a corrupt entry in the way, which the lookup moved aside.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (publish_files(id.name, files)) return CachedKernel{entry_dir(id.name), manifest, compiled.cubin};
    if (auto existing = lookup_holding_lock(id)) return *existing;  // published by someone without the lock
  }
  SPARK_FAIL(SPARK_ERROR_CACHE, "cannot publish {}: an unusable entry of that name is in the way",
             entry_dir(id.name).string());
}

EntryLock KernelCache::lock(const std::string& name) const { return EntryLock::exclusive(lock_file(name)); }

}  // namespace spark
