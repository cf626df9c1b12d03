// A directory held by descriptor, and the file operations spark performs inside a cache
// directory that other users may share.  Every name is one path component resolved
// relative to the descriptor, and no symbolic link is ever followed: a link planted where
// spark expects a file or a directory is refused (ELOOP), never traversed, so nothing
// outside the directory is read, written or removed through it.  Only regular files are
// read, each up to a size cap, and a FIFO or device node is never opened for reading.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spark {

// errno-style results of Dir::read_file beyond the system's own.
inline constexpr int kNotRegularFile = -1;  // a FIFO, socket, device or directory
inline constexpr int kFileTooLarge = -2;    // larger than the caller's cap
// "is a symbolic link", "is not a regular file", strerror() for the rest.
std::string file_error_text(int err);

// Why a directory (or file) should not be trusted with the cache: empty when it is owned by
// this user, by root, or by a group this user belongs to, and is not writable by others.
// A directory anyone can write lets anyone plant entries, links and lock files in it.
std::string trust_problem(const struct stat& st);

class Dir {
 public:
  Dir() = default;
  Dir(Dir&& other) noexcept;
  Dir& operator=(Dir&& other) noexcept;
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  ~Dir();

  // Opens an existing directory by path: 0 or errno.  Symbolic links in `path` itself are
  // followed (the caller chose it, e.g. a cache root on another disk).
  static int open(const std::filesystem::path& path, Dir& out);
  // Opens the directory `name` inside this one without following a link; with create, makes
  // it first (mode 0777 less the umask; a setgid parent gives it its group).  0 or errno
  // (ELOOP: a link, ENOTDIR: something else is in the way).
  int open_child(std::string_view name, bool create, Dir& out) const;

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // For messages only: every operation goes through the descriptor.
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / std::string(name); }
  // fstat of the directory itself.
  int stat_self(struct stat& st) const;

  // lstat of an item: 0 or errno.
  int stat_child(std::string_view name, struct stat& st) const;
  bool is_child_dir(std::string_view name) const;
  // Names in the directory except "." and "..", sorted.
  std::vector<std::string> list() const;

  // The bytes of a regular file of at most max_bytes: 0, an errno, kNotRegularFile or
  // kFileTooLarge.  Opened non-blocking, so a FIFO put in a file's place never hangs.  With
  // `st`, also its fstat.
  int read_file(std::string_view name, uint64_t max_bytes, std::string& out, struct stat* st = nullptr) const;
  // Creates a new file holding `bytes` (mode 0666 less the umask; never replaces anything),
  // fsynced when sync.  Throws CACHE naming the file; on failure the partial file is removed.
  void write_new_file(std::string_view name, std::string_view bytes, bool sync) const;
  // Opens an existing regular file, or creates it, for writing in place (O_NOFOLLOW, no
  // truncation), refusing anything but a regular file with one link: an fd, or -1.
  int open_for_update(std::string_view name) const;
  // mkdirat: 0 or errno.
  int make_dir(std::string_view name) const;
  // renameat(this/name, to/to_name): 0 or errno.  Moves the link itself, never its target.
  int rename(std::string_view name, const Dir& to, std::string_view to_name) const;
  // Removes `name` and, for a directory, everything under it, without following links (a
  // link is removed, not what it points to) or crossing into another filesystem.  True when
  // it is gone.
  bool remove_tree(std::string_view name) const;
  // unlinkat of a non-directory: 0 or errno.
  int remove_file(std::string_view name) const;
  // Bytes of the regular files under `name` (or of it, when a file), links not followed.
  uint64_t disk_bytes(std::string_view name) const;
  // fsync of the directory: 0 or errno.
  int sync() const;

 private:
  int fd_ = -1;
  std::filesystem::path path_;
};

// True when `name` is a single, ordinary path component ("", ".", ".." and names with '/'
// or NUL are not).
bool is_plain_name(std::string_view name);

}  // namespace spark
