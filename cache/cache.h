// The on-disk cubin cache (SPEC §3).  An entry is a directory named "<key>-<hash16>"
// holding kernel.cubin, kernel.cu, nvrtc.log and manifest.json, published by one
// atomic rename of a fully written and fsynced temporary directory.  Compiles of one
// entry are serialised across processes by a per-entry flock whose file records the
// holder; the kernel drops the lock when its holder dies, so a killed process never
// leaves a lock that others wait on forever.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "cache/manifest.h"
#include "generator/nvrtc_compile.h"
#include "generator/render.h"

namespace spark {

// Where an entry lives: its content hash and its directory name.
struct CacheId {
  std::string hash;  // 32 hex digits
  std::string name;  // "<key>-<first 16 hex digits>"
};

// The content hash covers the format version, the generator version, the key, the
// source, every template byte, the NVRTC version and the options.  No path.
CacheId cache_id(const RenderedSource& src, const std::vector<std::string>& options,
                 const std::string& nvrtc_version);

struct CachedKernel {
  std::filesystem::path dir;
  Manifest manifest;
  std::string cubin;
};

// An exclusive per-entry lock held for the object's lifetime.
class EntryLock {
 public:
  EntryLock(const std::filesystem::path& file);
  ~EntryLock();
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  int fd_ = -1;
};

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }

  // Creates the root if needed; false (and nothing written) when it cannot be written.
  bool ensure_writable() const;
  // The verified entry, or nullopt.  A corrupt entry (bad manifest, size or checksum)
  // is logged, moved aside under .corrupt/, and reported as a miss.
  std::optional<CachedKernel> lookup(const CacheId& id) const;
  // Publishes atomically; if another process published the same entry first, returns theirs.
  CachedKernel publish(const CacheId& id, const RenderedSource& src, const CompiledKernel& compiled,
                       const Manifest& manifest) const;
  EntryLock lock(const CacheId& id) const;

 private:
  std::filesystem::path root_;
};

}  // namespace spark
