#include "core/dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace spark {

namespace {

// Deep enough for every tree spark creates (an entry is one level); a deeper tree in a
// working directory is not spark's and is left alone rather than walked.
constexpr int kMaxDepth = 8;

int retry_close(int fd) { return ::close(fd); }  // close is never retried on Linux (EINTR still closes)

bool member_of(gid_t gid) {
  if (gid == ::getegid()) return true;
  const int n = ::getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = ::getgroups(n, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

}  // namespace

std::string file_error_text(int err) {
  if (err == kNotRegularFile) return "not a regular file";
  if (err == kFileTooLarge) return "larger than spark ever writes there";
  if (err == ELOOP) return "a symbolic link (never followed inside a cache)";
  return std::strerror(err);
}

std::string trust_problem(const struct stat& st) {
  if (st.st_mode & S_IWOTH) return fmt::format("it is writable by every user (mode {:04o})", st.st_mode & 07777);
  const uid_t me = ::geteuid();
  if (st.st_uid == me || st.st_uid == 0 || member_of(st.st_gid)) return {};
  return fmt::format("it is owned by uid {} and group {}, neither this user (uid {}), root, nor a group of this user",
                     st.st_uid, st.st_gid, me);
}

bool is_plain_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

Dir::Dir(Dir&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

Dir& Dir::operator=(Dir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) retry_close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

Dir::~Dir() {
  if (fd_ >= 0) retry_close(fd_);
}

int Dir::open(const std::filesystem::path& path, Dir& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  out = Dir();
  out.fd_ = fd;
  out.path_ = path;
  return 0;
}

int Dir::open_child(std::string_view name, bool create, Dir& out) const {
  if (!is_plain_name(name)) return EINVAL;
  const std::string n(name);
  if (create && ::mkdirat(fd_, n.c_str(), 0777) != 0 && errno != EEXIST) return errno;
  const int fd = ::openat(fd_, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    // O_NOFOLLOW | O_DIRECTORY on a link may answer ENOTDIR: say what is really there.
    if (err == ENOTDIR && ::fstatat(fd_, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      return ELOOP;
    return err;
  }
  out = Dir();
  out.fd_ = fd;
  out.path_ = path_ / n;
  return 0;
}

int Dir::stat_self(struct stat& st) const { return ::fstat(fd_, &st) == 0 ? 0 : errno; }

int Dir::stat_child(std::string_view name, struct stat& st) const {
  if (!is_plain_name(name)) return EINVAL;
  return ::fstatat(fd_, std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno;
}

bool Dir::is_child_dir(std::string_view name) const {
  struct stat st {};
  return stat_child(name, st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Dir::list() const {
  std::vector<std::string> names;
  // A fresh open file description: fdopendir on a dup would share (and move) our offset.
  const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return names;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    retry_close(fd);
    return names;
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

int Dir::read_file(std::string_view name, uint64_t max_bytes, std::string& out, struct stat* st_out) const {
  out.clear();
  if (!is_plain_name(name)) return EINVAL;
  const std::string n(name);
  struct stat st {};
  // Look before opening: opening a device node can have side effects of its own.
  if (::fstatat(fd_, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  if (S_ISLNK(st.st_mode)) return ELOOP;
  if (!S_ISREG(st.st_mode)) return kNotRegularFile;
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return kFileTooLarge;
  const int fd = ::openat(fd_, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return errno;
  // What was opened may not be what was looked at: check again on the descriptor.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    retry_close(fd);
    return kNotRegularFile;
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    retry_close(fd);
    return kFileTooLarge;
  }
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      retry_close(fd);
      out.clear();
      return err;
    }
    if (got == 0) break;
    if (out.size() + static_cast<uint64_t>(got) > max_bytes) {  // grew while being read
      retry_close(fd);
      out.clear();
      return kFileTooLarge;
    }
    out.append(buf, static_cast<size_t>(got));
  }
  retry_close(fd);
  if (st_out) *st_out = st;
  return 0;
}

void Dir::write_new_file(std::string_view name, std::string_view bytes, bool sync) const {
  SPARK_CHECK(is_plain_name(name), SPARK_ERROR_INTERNAL, "'{}' is not a file name", name);
  const std::string n(name);
  const int fd = ::openat(fd_, n.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  SPARK_CHECK(fd >= 0, SPARK_ERROR_CACHE, "cannot create {}: {}", (*this / n).string(), std::strerror(errno));
  int err = 0;
  const char* what = "write";
  for (size_t done = 0; done < bytes.size() && err == 0;) {
    const ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) err = errno;
    else done += static_cast<size_t>(put);
  }
  if (err == 0 && sync && ::fsync(fd) != 0) err = errno, what = "fsync";
  // Some filesystems (NFS) report a failed write only at close.
  if (retry_close(fd) != 0 && err == 0) err = errno, what = "close";
  if (err != 0) {
    ::unlinkat(fd_, n.c_str(), 0);  // no partial (or zero-length) file stays behind
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot {} {}: {}", what, (*this / n).string(), std::strerror(err));
  }
}

int Dir::open_for_update(std::string_view name) const {
  if (!is_plain_name(name)) return -1;
  const int fd = ::openat(fd_, std::string(name).c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                          0666);
  if (fd < 0) return -1;
  struct stat st {};
  // A hard link to someone else's file must not be overwritten through this name.
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    retry_close(fd);
    return -1;
  }
  return fd;
}

int Dir::make_dir(std::string_view name) const {
  if (!is_plain_name(name)) return EINVAL;
  return ::mkdirat(fd_, std::string(name).c_str(), 0777) == 0 ? 0 : errno;
}

int Dir::rename(std::string_view name, const Dir& to, std::string_view to_name) const {
  if (!is_plain_name(name) || !is_plain_name(to_name)) return EINVAL;
  return ::renameat(fd_, std::string(name).c_str(), to.fd_, std::string(to_name).c_str()) == 0 ? 0 : errno;
}

int Dir::remove_file(std::string_view name) const {
  if (!is_plain_name(name)) return EINVAL;
  return ::unlinkat(fd_, std::string(name).c_str(), 0) == 0 ? 0 : errno;
}

namespace {

bool remove_tree_at(const Dir& parent, const std::string& name, dev_t device, int depth) {
  struct stat st {};
  if (const int err = parent.stat_child(name, st); err != 0) return err == ENOENT;
  if (!S_ISDIR(st.st_mode)) return ::unlinkat(parent.fd(), name.c_str(), 0) == 0 || errno == ENOENT;
  if (st.st_dev != device || depth >= kMaxDepth) return false;
  Dir child;
  // A directory swapped for a link after the lstat is not opened (O_NOFOLLOW) and not removed.
  if (parent.open_child(name, false, child) != 0) return false;
  for (const std::string& n : child.list()) remove_tree_at(child, n, device, depth + 1);
  return ::unlinkat(parent.fd(), name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT;
}

uint64_t bytes_at(const Dir& parent, const std::string& name, dev_t device, int depth) {
  struct stat st {};
  if (parent.stat_child(name, st) != 0) return 0;
  if (S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  if (!S_ISDIR(st.st_mode) || st.st_dev != device || depth >= kMaxDepth) return 0;
  Dir child;
  if (parent.open_child(name, false, child) != 0) return 0;
  uint64_t total = 0;
  for (const std::string& n : child.list()) total += bytes_at(child, n, device, depth + 1);
  return total;
}

}  // namespace

bool Dir::remove_tree(std::string_view name) const {
  struct stat self {};
  if (!is_plain_name(name) || stat_self(self) != 0) return false;
  return remove_tree_at(*this, std::string(name), self.st_dev, 0);
}

uint64_t Dir::disk_bytes(std::string_view name) const {
  struct stat self {};
  if (!is_plain_name(name) || stat_self(self) != 0) return 0;
  return bytes_at(*this, std::string(name), self.st_dev, 0);
}

int Dir::sync() const { return ::fsync(fd_) == 0 ? 0 : errno; }

}  // namespace spark
