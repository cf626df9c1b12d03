#include "cache/entry_lock.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace spark {

namespace {

enum class Acquire { kDone, kBusy, kStale, kFailed };

// flock on an open descriptor, then check that the path still names the locked inode.
Acquire acquire(int fd, const std::filesystem::path& file, int operation) {
  while (::flock(fd, operation) != 0) {
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? Acquire::kBusy : Acquire::kFailed;
  }
  struct stat locked {}, current {};
  if (::fstat(fd, &locked) != 0) return Acquire::kFailed;
  if (::stat(file.c_str(), &current) != 0 || current.st_ino != locked.st_ino || current.st_dev != locked.st_dev)
    return Acquire::kStale;  // unlinked (and maybe recreated) while we waited
  return Acquire::kDone;
}

void record_holder(int fd) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = fmt::format("pid {} host {}\n", ::getpid(), host);
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, holder.data(), holder.size(), 0) < 0) {
    // informational only
  }
}

}  // namespace

EntryLock EntryLock::exclusive(const std::filesystem::path& file) {
  for (;;) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    SPARK_CHECK(fd >= 0, SPARK_ERROR_CACHE, "cannot open lock {}: {}", file.string(), std::strerror(errno));
    const Acquire a = acquire(fd, file, LOCK_EX);
    if (a == Acquire::kDone) {
      record_holder(fd);
      return EntryLock(fd, file);
    }
    const int err = errno;
    ::close(fd);
    SPARK_CHECK(a == Acquire::kStale, SPARK_ERROR_CACHE, "cannot lock {}: {}", file.string(), std::strerror(err));
  }
}

std::optional<EntryLock> EntryLock::try_exclusive(const std::filesystem::path& file) {
  for (;;) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return std::nullopt;
    const Acquire a = acquire(fd, file, LOCK_EX | LOCK_NB);
    if (a == Acquire::kDone) {
      record_holder(fd);
      return EntryLock(fd, file);
    }
    ::close(fd);
    if (a != Acquire::kStale) return std::nullopt;
  }
}

EntryLock EntryLock::shared(const std::filesystem::path& file) {
  for (;;) {
    int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);  // flock needs no write access
    if (fd < 0) return EntryLock(-1, file);
    const Acquire a = acquire(fd, file, LOCK_SH);
    if (a == Acquire::kDone) return EntryLock(fd, file);
    ::close(fd);
    if (a != Acquire::kStale) return EntryLock(-1, file);
  }
}

EntryLock::EntryLock(EntryLock&& other) noexcept : fd_(other.fd_), file_(std::move(other.file_)) {
  other.fd_ = -1;
}

EntryLock& EntryLock::operator=(EntryLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    file_ = std::move(other.file_);
    other.fd_ = -1;
  }
  return *this;
}

EntryLock::~EntryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

void EntryLock::unlink_file() {
  if (fd_ >= 0) ::unlink(file_.c_str());
}

}  // namespace spark
