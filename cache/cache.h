// The on-disk cubin cache (SPEC §3).  An entry is a directory named "<key>-<hash16>"
// holding kernel.cubin, kernel.cu, nvrtc.log and manifest.json (entry.h), published by
// one atomic rename of a fully written and fsynced temporary directory, so a process
// killed at any instant leaves either no entry or a complete one.  Writers of an entry
// hold its exclusive lock, readers a shared one (entry_lock.h).
//
//   <root>/<key>-<hash16>/   entries
//   <root>/.tmp/             entries being built; leftovers of dead processes are removed
//   <root>/.locks/           one lock file per entry, plus stats.lock
//   <root>/.corrupt/         entries that failed verification, kept for a post-mortem
//   <root>/.trash/           evicted entries on their way out
//   <root>/stats.json        counters summed over every process that used the cache
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/manifest.h"
#include "generator/nvrtc_compile.h"
#include "generator/render.h"

namespace spark {

inline constexpr const char* kTmpDir = ".tmp";
inline constexpr const char* kLocksDir = ".locks";
inline constexpr const char* kCorruptDir = ".corrupt";
inline constexpr const char* kTrashDir = ".trash";

// Everything an entry's content hash covers.  No path: a cache copied to another
// directory or host still hits.  The key's name includes the arch.
struct CacheKeyParts {
  int format_version = kCacheFormatVersion;
  int generator_version = kGeneratorVersion;
  std::string key;
  std::string source;
  std::string templates_digest;
  std::string nvrtc_version;
  std::vector<std::string> options;
};

// The parts for a rendered source, with this build's format, generator and templates.
CacheKeyParts cache_key_parts(const RenderedSource& src, const std::vector<std::string>& options,
                              const std::string& nvrtc_version);

// Where an entry lives: its content hash and its directory name.
struct CacheId {
  std::string hash;  // 32 hex digits
  std::string name;  // "<key>-<first 16 hex digits>"
};

CacheId cache_id(const CacheKeyParts& parts);
CacheId cache_id(const RenderedSource& src, const std::vector<std::string>& options,
                 const std::string& nvrtc_version);

struct CachedKernel {
  std::filesystem::path dir;
  Manifest manifest;
  std::string cubin;
};

struct EntryFile {
  std::string name;
  std::string bytes;
};

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path entry_dir(const std::string& name) const { return root_ / name; }
  std::filesystem::path lock_file(const std::string& name) const;

  // Creates the root and its working directories if needed; false (and nothing
  // written) when it cannot be written.
  bool ensure_writable() const;
  // Names of the published entries (directories only; working directories excluded).
  std::vector<std::string> entry_names() const;

  // The verified entry, or nullopt; read under a shared lock so it cannot be evicted
  // mid-read, and stamped as used.  A corrupt entry (bad manifest, size or checksum) is
  // logged, moved aside under .corrupt/, reported through `corruption`, and is a miss.
  std::optional<CachedKernel> lookup(const CacheId& id, std::string* corruption = nullptr) const;
  // The same, for a caller that already holds the entry's exclusive lock.
  std::optional<CachedKernel> lookup_holding_lock(const CacheId& id, std::string* corruption = nullptr) const;

  // Publishes atomically; if the entry appeared meanwhile, returns the one on disk.
  CachedKernel publish(const CacheId& id, const RenderedSource& src, const CompiledKernel& compiled,
                       const Manifest& manifest) const;
  // Builds `files` (manifest last) in .tmp/, fsyncs, renames to <root>/<name>.  False,
  // and nothing changed, when a directory of that name already exists.
  bool publish_files(const std::string& name, const std::vector<EntryFile>& files) const;
  // Moves an entry under .corrupt/ (atomically; another process may have done it already).
  void move_aside(const std::string& name) const;

  // The entry's exclusive lock (blocking); for compiling and publishing it.
  EntryLock lock(const CacheId& id) const { return lock(id.name); }
  EntryLock lock(const std::string& name) const;

 private:
  std::optional<CachedKernel> read_verified(const CacheId& id, std::string* corruption) const;
  std::filesystem::path root_;
};

}  // namespace spark
