// Per-entry locks between processes, on files under <cache>/.locks/.
//
// flock(2) is used because the kernel drops it when its holder dies: a process killed
// while compiling never leaves a lock that others wait on forever.  Writers (compile +
// publish, eviction, import) hold it exclusively; readers hold it shared while they read
// an entry, so eviction (which only ever tries, never waits) cannot remove an entry that
// another process is publishing or loading.
//
// Lock files may be unlinked (eviction, clear) by a holder of the exclusive lock.  Every
// acquisition therefore checks that the file it locked is still the one at the path, and
// retries otherwise; without that, a waiter could end up holding a lock on an orphaned
// inode while a newcomer locks a fresh file of the same name.
#pragma once

#include <filesystem>
#include <optional>

namespace spark {

class EntryLock {
 public:
  // Blocks until the exclusive lock is held; records "pid N host H" in the file for
  // whoever inspects a lock that seems stuck.  Throws CACHE when the file cannot be
  // created or locked.
  static EntryLock exclusive(const std::filesystem::path& file);
  // Never blocks: nullopt when another holder (any process, or another descriptor in
  // this one) has the lock.
  static std::optional<EntryLock> try_exclusive(const std::filesystem::path& file);
  // Blocks until a shared lock is held.  Best effort: where the lock file cannot be
  // opened or created (a read-only cache) it returns an unlocked object, because a
  // read-only cache has no writer to exclude on this host.
  static EntryLock shared(const std::filesystem::path& file);

  EntryLock(EntryLock&& other) noexcept;
  EntryLock& operator=(EntryLock&& other) noexcept;
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;
  ~EntryLock();

  bool held() const { return fd_ >= 0; }
  // Removes the lock file while the exclusive lock is held (see the file comment).
  void unlink_file();

 private:
  EntryLock(int fd, std::filesystem::path file) : fd_(fd), file_(std::move(file)) {}
  int fd_ = -1;
  std::filesystem::path file_;
};

}  // namespace spark
