// Per-entry locks between processes, on files in a cache's .locks/ directory.
//
// flock(2) is used because the kernel drops it when its holder dies: a process killed
// while compiling never leaves a lock that others wait on forever.  Writers (compile +
// publish, eviction, import) hold it exclusively; readers hold it shared while they read
// an entry, so eviction (which only ever tries, never waits) cannot remove an entry that
// another process is publishing or loading.
//
// The lock is taken on a read-only descriptor (flock needs no write access), and lock files
// are created 0666 less the umask, so the members of a group sharing a cache can all lock a
// file whoever created it.  A lock file is opened relative to the .locks/ descriptor without
// following links, and must be a regular file: a link or FIFO planted in its place is
// refused, never written through or waited on.
//
// Lock files may be unlinked (eviction, clear) by a holder of the exclusive lock.  Every
// acquisition therefore checks that the file it locked is still the one at that name, and
// retries otherwise; without that, a waiter could end up holding a lock on an orphaned
// inode while a newcomer locks a fresh file of the same name.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/dir.h"

namespace spark {

class EntryLock {
 public:
  // Not holding anything.
  EntryLock() = default;
  // Blocks until the exclusive lock on `dir`/`file` is held; records "pid N host H" in the
  // file where it may write it, for whoever inspects a lock that seems stuck.  Throws CACHE
  // when the file cannot be created, opened or locked.
  static EntryLock exclusive(const Dir& dir, std::string_view file);
  // Never blocks: nullopt when another holder (any process, or another descriptor in this
  // one) has the lock, or when it cannot be taken at all.
  static std::optional<EntryLock> try_exclusive(const Dir& dir, std::string_view file);
  // Blocks until a shared lock is held.  Best effort: where the lock file cannot be opened
  // or created (a read-only cache) it returns an unlocked object, because a read-only cache
  // has no writer to exclude on this host.
  static EntryLock shared(const Dir& dir, std::string_view file);

  EntryLock(EntryLock&& other) noexcept;
  EntryLock& operator=(EntryLock&& other) noexcept;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  ~EntryLock();

  bool held() const { return fd_ >= 0; }
  // Removes the lock file while the exclusive lock is held (see the file comment).
  void unlink_file();

 private:
  // The exclusive lock just taken on `fd`, holder recorded.
  static EntryLock held_exclusive(const Dir& dir, const std::string& file, int fd);
  void release() noexcept;
  int fd_ = -1;
  int dir_fd_ = -1;
  std::string file_;
};

}  // namespace spark
