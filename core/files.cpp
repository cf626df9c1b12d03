#include "core/files.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"

namespace spark {

int try_read_file(const std::filesystem::path& path, std::string& out) {
  out.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return err;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

std::string read_file(const std::filesystem::path& path) {
  std::string out;
  const int err = try_read_file(path, out);
  SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot read {}: {}", path.string(), std::strerror(err));
  return out;
}

namespace {

void write_and_close(const std::filesystem::path& path, std::string_view bytes, bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  SPARK_CHECK(fd >= 0, SPARK_ERROR_CACHE, "cannot create {}: {}", path.string(), std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(path.c_str());  // no partial file stays behind
      SPARK_FAIL(SPARK_ERROR_CACHE, "cannot write {}: {}", path.string(), std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = !sync || ::fsync(fd) == 0;
  int err = errno;
  // Some filesystems (NFS) report a failed write only at close.
  const bool closed = ::close(fd) == 0;
  if (synced && !closed) err = errno;
  if (!synced || !closed) {
    ::unlink(path.c_str());
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot {} {}: {}", synced ? "close" : "fsync", path.string(), std::strerror(err));
  }
}

}  // namespace

void write_file(const std::filesystem::path& path, std::string_view bytes) { write_and_close(path, bytes, false); }

void write_file_synced(const std::filesystem::path& path, std::string_view bytes) {
  write_and_close(path, bytes, true);
}

}  // namespace spark
