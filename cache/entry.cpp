#include "cache/entry.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"

namespace spark {

namespace fs = std::filesystem;

bool is_entry_name(std::string_view name) {
  const size_t dash = name.rfind('-');
  if (name.empty() || name[0] == '.' || dash == std::string_view::npos || dash == 0 || name.size() - dash != 17)
    return false;
  for (const char c : name.substr(dash + 1))
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return false;
  return name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

EntryCheck check_entry_bytes(std::string_view name, const std::string& manifest_text, std::string cubin,
                             const std::string& source, std::string_view expected_hash) {
  EntryCheck c;
  try {
    c.manifest = Manifest::from_json(manifest_text);
  } catch (const Error& e) {
    c.problem = e.what();
    return c;
  }
  const Manifest& m = *c.manifest;
  if (!expected_hash.empty() && m.hash != expected_hash) {
    c.problem = fmt::format("manifest hash {} is not the expected {}", m.hash, expected_hash);
  } else if (m.hash.size() < 16 || name != m.key + "-" + m.hash.substr(0, 16)) {
    c.problem = fmt::format("manifest names key {} hash {}, not entry {}", m.key, m.hash, name);
  } else if (cubin.size() != m.cubin_size) {
    c.problem = fmt::format("cubin is {} bytes, the manifest says {}", cubin.size(), m.cubin_size);
  } else if (checksum_hex(cubin) != m.cubin_xxh3) {
    c.problem = "cubin checksum does not match the manifest";
  } else if (source.size() != m.source_size || checksum_hex(source) != m.source_xxh3) {
    c.problem = "source does not match the manifest's size and checksum";
  } else {
    c.cubin = std::move(cubin);
  }
  return c;
}

EntryCheck check_entry(const fs::path& dir, std::string_view expected_hash) {
  EntryCheck c;
  std::string bytes[3];
  const char* const names[3] = {kManifestFile, kCubinFile, kSourceFile};
  for (int i = 0; i < 3 && c.problem.empty(); ++i) {
    const int err = try_read_file(dir / names[i], bytes[i]);
    if (err == 0) continue;
    // A published entry lacking a file (or holding something unreadable in its place) is
    // damaged; these say nothing about the bytes: the process or the system is out of file
    // descriptors or memory, the device failed, or permissions forbid the read.
    c.unreadable = err == EMFILE || err == ENFILE || err == ENOMEM || err == EIO || err == EACCES ||
                   err == EPERM || err == EAGAIN || err == ESTALE;
    c.problem = fmt::format("cannot read {}: {}", (dir / names[i]).string(), std::strerror(err));
  }
  if (c.problem.empty()) {
    try {
      c = check_entry_bytes(dir.filename().string(), bytes[0], std::move(bytes[1]), bytes[2], expected_hash);
    } catch (const Error& e) {
      c.problem = e.what();
    }
  }
  std::error_code ec;
  if (!c.ok() && !fs::exists(dir, ec)) c.missing = true;
  return c;
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void stamp_last_used(const fs::path& dir) {
  // One fixed-width pwrite: a reader sees the old or the new stamp, never a mix, and
  // no temporary file is left in the entry if the process dies here.
  const int fd = ::open((dir / kLastUsedFile).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string stamp = fmt::format("{:020d}\n", unix_ms_now());
  if (::pwrite(fd, stamp.data(), stamp.size(), 0) < 0) {
    // best effort: the manifest's time stands in
  }
  ::close(fd);
}

int64_t last_used_ms(const fs::path& dir) {
  try {
    const std::string text = read_file(dir / kLastUsedFile);
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (v > 0 && end != text.c_str()) return v;
  } catch (const Error&) {
  }
  std::error_code ec;
  const auto t = fs::last_write_time(dir / kManifestFile, ec);
  if (ec) return 0;
  const auto sys = std::chrono::system_clock::now() + (t - fs::file_time_type::clock::now());
  return std::chrono::duration_cast<std::chrono::milliseconds>(sys.time_since_epoch()).count();
}

uint64_t disk_bytes(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(fs::symlink_status(path, ec))) return fs::file_size(path, ec);
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2)) {
      const uint64_t n = it->file_size(e2);
      if (!e2) total += n;
    }
  }
  return total;
}

}  // namespace spark
