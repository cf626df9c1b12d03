// The on-disk cubin cache (docs/cache.md).  An entry is a directory named "<key>-<hash16>"
// holding kernel.cubin, kernel.cu, nvrtc.log and manifest.json (entry.h), published by
// one atomic rename of a fully written and fsynced temporary directory, so a process
// killed at any instant leaves either no entry or a complete one.  Writers of an entry
// hold its exclusive lock, readers a shared one (entry_lock.h).
//
//   <root>/<key>-<hash16>/   entries
//   <root>/.tmp/             entries being built; leftovers of dead processes are removed
//   <root>/.locks/           one lock file per entry, plus stats.lock and housekeeping.lock
//   <root>/.corrupt/         entries that failed verification, kept for a post-mortem
//   <root>/.trash/           evicted entries on their way out
//   <root>/stats.json        counters summed over every process that used the cache
//
// Trust (README, "Who may write the cache"): the root is used only when it is owned by this
// user, by root or by a group of this user, and is not writable by every user; so are its
// working directories.  Inside it every path is one component resolved relative to an open
// directory (core/dir.h): no symbolic link is followed, only regular files of bounded size
// are read, and only names spark itself makes are ever removed.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache_id.h"
#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/manifest.h"
#include "core/dir.h"

namespace spark {

inline constexpr const char* kTmpDir = ".tmp";
inline constexpr const char* kLocksDir = ".locks";
inline constexpr const char* kCorruptDir = ".corrupt";
inline constexpr const char* kTrashDir = ".trash";

struct CachedKernel {
  std::filesystem::path dir;
  Manifest manifest;
  std::string cubin;
};

struct EntryFile {
  std::string name;
  std::string bytes;
};

// What this process may do with a cache directory.
struct CacheAccess {
  bool trusted = false;   // its entries may be read
  bool writable = false;  // entries may be published: root, .tmp and .locks exist, are trusted and writable
  std::string problem;    // why not, for the one warning
};

class KernelCache {
 public:
  // A relative root is made absolute here, once.
  explicit KernelCache(std::filesystem::path root);
  const std::filesystem::path& root() const { return root_; }
  // Paths for messages and tools; the cache itself never opens by path below the root.
  std::filesystem::path entry_dir(const std::string& name) const { return root_ / name; }
  std::filesystem::path lock_file(const std::string& name) const;

  // Opens the root: 0, ENOENT when there is no cache there yet, EPERM when it is not
  // trusted (`why` says why), or another errno.
  int open_root(Dir& root, std::string* why = nullptr) const;
  // Opens a working directory (kTmpDir, ...) of an open root without following a link,
  // creating it when asked, and checks it is trusted: 0, EPERM (see `why`) or an errno.
  int open_work_dir(const Dir& root, const char* name, bool create, Dir& out, std::string* why = nullptr) const;

  // Creates the root and its working directories where it may and says what this process
  // may do with the cache.  Writes nothing into a directory it does not trust.
  CacheAccess prepare() const;
  bool ensure_writable() const { return prepare().writable; }
  // Names of the published entries: directories (not links) with an entry's name.
  std::vector<std::string> entry_names() const;

  // The verified entry, or nullopt; read under a shared lock so it cannot be evicted
  // mid-read, and stamped as used.  A corrupt entry (bad manifest, size or checksum) is
  // logged, moved aside under .corrupt/, reported through `corruption`, and is a miss.
  // An untrusted root is never read: always a miss.
  std::optional<CachedKernel> lookup(const CacheId& id, std::string* corruption = nullptr) const;
  // The same, for a caller that already holds the entry's exclusive lock.
  std::optional<CachedKernel> lookup_holding_lock(const CacheId& id, std::string* corruption = nullptr) const;

  // Publishes atomically; if the entry appeared meanwhile, returns the one on disk.
  // `manifest` describes the other three files.
  CachedKernel publish(const CacheId& id, const std::string& source, const std::string& cubin,
                       const std::string& log, const Manifest& manifest) const;
  // Builds `files` (manifest last) in .tmp/, fsyncs, renames to <root>/<name>.  False,
  // and nothing changed, when something of that name already exists.
  bool publish_files(const std::string& name, const std::vector<EntryFile>& files) const;
  // Moves an entry (or whatever is in its place) under .corrupt/; removes it where .corrupt/
  // cannot be used.  Another process may have done it already.
  void move_aside(const std::string& name) const;

  // The entry's exclusive lock (blocking); for compiling and publishing it.  Throws CACHE.
  EntryLock lock(const CacheId& id) const { return lock(id.name); }
  EntryLock lock(const std::string& name) const;
  // Never blocks; nullopt when busy or impossible.
  std::optional<EntryLock> try_lock(const std::string& name) const;
  // A shared lock for reading an entry; unlocked where the lock file cannot be had.
  EntryLock shared_lock(const Dir& root, const std::string& name) const;
  // A lock of the cache as a whole ("stats", "housekeeping"), exclusive.  Throws CACHE.
  EntryLock cache_lock(const char* what) const;

 private:
  EntryLock cache_lock_file(const std::string& file) const;
  std::optional<CachedKernel> read_verified(const Dir& root, const CacheId& id, std::string* corruption) const;
  std::filesystem::path root_;
};

}  // namespace spark
