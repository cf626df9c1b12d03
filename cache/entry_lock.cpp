#include "cache/entry_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace spark {

namespace {

enum class Acquire { kDone, kBusy, kStale, kFailed };

struct Attempt {
  Acquire result = Acquire::kFailed;
  int fd = -1;
  int err = 0;
};

// Opens (creating when allowed) the lock file read-only and without following a link,
// takes the flock, then checks the name still leads to the locked inode.
Attempt attempt(const Dir& dir, const std::string& file, int operation) {
  Attempt a;
  if (!is_plain_name(file)) {
    a.err = EINVAL;
    return a;
  }
  constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = ::openat(dir.fd(), file.c_str(), kFlags | O_CREAT, 0666);
  if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM))
    fd = ::openat(dir.fd(), file.c_str(), kFlags);  // a directory we may not create in
  if (fd < 0) {
    a.err = errno;
    return a;
  }
  struct stat locked {}, current {};
  if (::fstat(fd, &locked) != 0 || !S_ISREG(locked.st_mode)) {
    a.err = S_ISREG(locked.st_mode) || locked.st_mode == 0 ? errno : kNotRegularFile;
    ::close(fd);
    return a;
  }
  while (::flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    a.err = errno;
    a.result = errno == EWOULDBLOCK ? Acquire::kBusy : Acquire::kFailed;
    ::close(fd);
    return a;
  }
  if (::fstatat(dir.fd(), file.c_str(), &current, AT_SYMLINK_NOFOLLOW) != 0 || current.st_ino != locked.st_ino ||
      current.st_dev != locked.st_dev) {
    ::close(fd);  // unlinked (and maybe recreated) while we waited
    a.result = Acquire::kStale;
    return a;
  }
  a.result = Acquire::kDone;
  a.fd = fd;
  return a;
}

// Informational only: written where this user may write the file, never through a link or
// into a file with other names (a hard link to someone else's file).
void record_holder(const Dir& dir, const std::string& file, int locked_fd) {
  const int fd = ::openat(dir.fd(), file.c_str(), O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return;
  struct stat a {}, b {};
  if (::fstat(fd, &a) == 0 && ::fstat(locked_fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
      S_ISREG(a.st_mode) && a.st_nlink == 1) {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    const std::string holder = fmt::format("pid {} host {}\n", ::getpid(), host);
    if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, holder.data(), holder.size(), 0) < 0) {
      // informational only
    }
  }
  ::close(fd);
}

}  // namespace

EntryLock EntryLock::exclusive(const Dir& dir, std::string_view name) {
  const std::string file(name);
  for (;;) {
    const Attempt a = attempt(dir, file, LOCK_EX);
    if (a.result == Acquire::kDone) return held_exclusive(dir, file, a.fd);
    SPARK_CHECK(a.result == Acquire::kStale, SPARK_ERROR_CACHE, "cannot lock {}: {}", (dir / file).string(),
                file_error_text(a.err));
  }
}

std::optional<EntryLock> EntryLock::try_exclusive(const Dir& dir, std::string_view name) {
  const std::string file(name);
  for (;;) {
    const Attempt a = attempt(dir, file, LOCK_EX | LOCK_NB);
    if (a.result == Acquire::kDone) return held_exclusive(dir, file, a.fd);
    if (a.result != Acquire::kStale) return std::nullopt;
  }
}

EntryLock EntryLock::held_exclusive(const Dir& dir, const std::string& file, int fd) {
  record_holder(dir, file, fd);
  EntryLock l;
  l.fd_ = fd;
  l.dir_fd_ = ::fcntl(dir.fd(), F_DUPFD_CLOEXEC, 0);  // for unlink_file()
  l.file_ = file;
  return l;
}

EntryLock EntryLock::shared(const Dir& dir, std::string_view name) {
  const std::string file(name);
  for (;;) {
    const Attempt a = attempt(dir, file, LOCK_SH);
    if (a.result == Acquire::kDone) {
      EntryLock l;
      l.fd_ = a.fd;
      l.file_ = file;
      return l;
    }
    if (a.result != Acquire::kStale) return EntryLock();
  }
}

EntryLock::EntryLock(EntryLock&& other) noexcept
    : fd_(other.fd_), dir_fd_(other.dir_fd_), file_(std::move(other.file_)) {
  other.fd_ = other.dir_fd_ = -1;
}

EntryLock& EntryLock::operator=(EntryLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    dir_fd_ = other.dir_fd_;
    file_ = std::move(other.file_);
    other.fd_ = other.dir_fd_ = -1;
  }
  return *this;
}

void EntryLock::release() noexcept {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
  if (dir_fd_ >= 0) ::close(dir_fd_);
  fd_ = dir_fd_ = -1;
}

EntryLock::~EntryLock() { release(); }

void EntryLock::unlink_file() {
  if (fd_ >= 0 && dir_fd_ >= 0) ::unlinkat(dir_fd_, file_.c_str(), 0);
}

}  // namespace spark
