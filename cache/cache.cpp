#include "cache/cache.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCubinFile = "kernel.cubin";
constexpr const char* kSourceFile = "kernel.cu";
constexpr const char* kLogFile = "nvrtc.log";
constexpr const char* kManifestFile = "manifest.json";

std::string unique_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{:012x}", ::getpid(), rng() & 0xffffffffffffull);
}

}  // namespace

CacheId cache_id(const RenderedSource& src, const std::vector<std::string>& options,
                 const std::string& nvrtc_version) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_128bits_reset(st);
  auto feed = [&](std::string_view field, std::string_view value) {
    const uint64_t sizes[2] = {field.size(), value.size()};
    XXH3_128bits_update(st, sizes, sizeof sizes);
    XXH3_128bits_update(st, field.data(), field.size());
    XXH3_128bits_update(st, value.data(), value.size());
  };
  feed("format", std::to_string(kCacheFormatVersion));
  feed("generator", std::to_string(kGeneratorVersion));
  feed("key", src.key.name());
  feed("source", src.source);
  feed("templates", templates_digest());
  feed("nvrtc", nvrtc_version);
  for (const std::string& o : options) feed("option", o);
  const XXH128_hash_t h = XXH3_128bits_digest(st);
  XXH3_freeState(st);
  CacheId id;
  id.hash = fmt::format("{:016x}{:016x}", h.high64, h.low64);
  id.name = src.key.name() + "-" + id.hash.substr(0, 16);
  return id;
}

EntryLock::EntryLock(const fs::path& file) {
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  SPARK_CHECK(fd_ >= 0, SPARK_ERROR_CACHE, "cannot open lock {}: {}", file.string(), std::strerror(errno));
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot lock {}: {}", file.string(), std::strerror(err));
  }
  // Record the holder, for whoever inspects a lock that seems stuck.
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = fmt::format("pid {} host {}\n", ::getpid(), host);
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    // informational only
  }
}

EntryLock::~EntryLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

KernelCache::KernelCache(fs::path root) : root_(std::move(root)) {}

bool KernelCache::ensure_writable() const {
  std::error_code ec;
  fs::create_directories(root_ / ".tmp", ec);
  if (ec) return false;
  fs::create_directories(root_ / ".locks", ec);
  if (ec) return false;
  return ::access(root_.c_str(), W_OK) == 0 && ::access((root_ / ".tmp").c_str(), W_OK) == 0;
}

std::optional<CachedKernel> KernelCache::lookup(const CacheId& id) const {
  const fs::path dir = root_ / id.name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::string problem;
  try {
    CachedKernel k;
    k.dir = dir;
    k.manifest = Manifest::from_json(read_file(dir / kManifestFile));
    k.cubin = read_file(dir / kCubinFile);
    if (k.manifest.hash != id.hash) {
      problem = fmt::format("manifest hash {} does not match the entry's {}", k.manifest.hash, id.hash);
    } else if (k.cubin.size() != k.manifest.cubin_size) {
      problem = fmt::format("cubin is {} bytes, the manifest says {}", k.cubin.size(), k.manifest.cubin_size);
    } else if (checksum_hex(k.cubin) != k.manifest.cubin_xxh3) {
      problem = "cubin checksum does not match the manifest";
    } else {
      return k;
    }
  } catch (const Error& e) {
    problem = e.what();
  }
  // Move the bad entry aside (atomically; another process may have done it already).
  log().warn("cache entry {} is corrupt ({}); moving it aside and rebuilding", dir.string(), problem);
  fs::create_directories(root_ / ".corrupt", ec);
  fs::rename(dir, root_ / ".corrupt" / (id.name + "." + unique_suffix()), ec);
  return std::nullopt;
}

CachedKernel KernelCache::publish(const CacheId& id, const RenderedSource& src,
                                  const CompiledKernel& compiled, const Manifest& manifest) const {
  const fs::path final_dir = root_ / id.name;
  const fs::path tmp = root_ / ".tmp" / (id.name + "." + unique_suffix());
  std::error_code ec;
  fs::create_directories(tmp, ec);
  SPARK_CHECK(!ec, SPARK_ERROR_CACHE, "cannot create {}: {}", tmp.string(), ec.message());
  try {
    write_file_synced(tmp / kCubinFile, compiled.cubin);
    write_file_synced(tmp / kSourceFile, src.source);
    write_file_synced(tmp / kLogFile, compiled.log);
    // The manifest goes last: an entry is only trusted once it verifies against it.
    write_file_synced(tmp / kManifestFile, manifest.to_json());
    fsync_dir(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    const int err = errno;
    fs::remove_all(tmp, ec);
    if (err == EEXIST || err == ENOTEMPTY) {
      if (auto existing = lookup(id)) return *existing;  // someone else won the race
    }
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot publish {}: {}", final_dir.string(), std::strerror(err));
  }
  fsync_dir(root_);
  return CachedKernel{final_dir, manifest, compiled.cubin};
}

EntryLock KernelCache::lock(const CacheId& id) const {
  return EntryLock(root_ / ".locks" / (id.name + ".lock"));
}

}  // namespace spark
