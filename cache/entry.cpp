#include "cache/entry.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>

#include "core/error.h"
#include "core/cubin_elf.h"
#include "core/key_name.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

// Errors that say nothing about an entry's bytes: the process or the system is out of
// file descriptors or memory, the device failed, or permissions forbid the read.
bool environmental(int err) {
  return err == EMFILE || err == ENFILE || err == ENOMEM || err == EIO || err == EACCES || err == EPERM ||
         err == EAGAIN || err == ESTALE;
}

bool lowercase_hex(std::string_view s) {
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

uint64_t entry_file_cap(std::string_view file) {
  if (file == kManifestFile) return kMaxManifestBytes;
  if (file == kCubinFile) return kMaxCubinBytes;
  if (file == kSourceFile) return kMaxSourceBytes;
  if (file == kLogFile) return kMaxLogBytes;
  return 0;
}

EntryCheck check_entry_bytes(std::string_view name, const std::string& manifest_text, std::string cubin,
                             std::string source, std::string_view expected_hash) {
  EntryCheck c;
  try {
    c.manifest = Manifest::from_json(manifest_text);
  } catch (const Error& e) {
    c.problem = e.what();
    return c;
  }
  const Manifest& m = *c.manifest;
  if (m.hash.size() != 32 || !lowercase_hex(m.hash)) {
    c.problem = "manifest hash is not 32 lowercase hex digits";
  } else if (!expected_hash.empty() && m.hash != expected_hash) {
    c.problem = fmt::format("manifest hash {} is not the expected {}", m.hash, expected_hash);
  } else if (!is_entry_name(name) || name != m.key + "-" + m.hash.substr(0, 16)) {
    c.problem = fmt::format("manifest names key {} hash {}, not this entry", m.key, m.hash);
  } else if (cubin.size() != m.cubin_size) {
    c.problem = fmt::format("cubin is {} bytes, the manifest says {}", cubin.size(), m.cubin_size);
  } else if (checksum_hex(cubin) != m.cubin_xxh3) {
    c.problem = "cubin checksum does not match the manifest";
  } else if (source.size() != m.source_size || checksum_hex(source) != m.source_xxh3) {
    c.problem = "source does not match the manifest's size and checksum";
  } else if (cache_id(cache_key_parts(m, source)).hash != m.hash) {
    c.problem = "manifest hash is not the hash of the entry's own key, source, versions and options";
  } else if (std::string why = cubin_problem(cubin, key_arch(m.key), kernel_symbol(key_op(m.key))); !why.empty()) {
    c.problem = why;
  } else {
    c.cubin = std::move(cubin);
    c.source = std::move(source);
    c.manifest_text = manifest_text;
  }
  return c;
}

EntryCheck check_entry(const Dir& root, std::string_view name, std::string_view expected_hash) {
  EntryCheck c;
  const fs::path where = root / name;
  struct stat st {};
  if (const int err = root.stat_child(name, st); err != 0) {
    c.missing = err == ENOENT;
    c.unreadable = environmental(err);
    c.problem = fmt::format("cannot stat {}: {}", where.string(), file_error_text(err));
    return c;
  }
  if (!S_ISDIR(st.st_mode)) {
    c.problem = fmt::format("{} is {}, not a directory", where.string(), S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
    return c;
  }
  Dir entry;
  if (const int err = root.open_child(name, false, entry); err != 0) {
    c.missing = err == ENOENT;
    c.unreadable = environmental(err);
    c.problem = fmt::format("cannot open {}: {}", where.string(), file_error_text(err));
    return c;
  }
  if (entry.stat_self(st) != 0) st.st_mode |= S_IWOTH;  // cannot happen on an open directory: refuse
  if (std::string why = trust_problem(st); !why.empty()) {
    c.problem = fmt::format("{} is not trusted: {}", where.string(), why);
    return c;
  }
  std::string bytes[3];
  const char* const names[3] = {kManifestFile, kCubinFile, kSourceFile};
  for (int i = 0; i < 3; ++i) {
    struct stat fst {};
    const int err = entry.read_file(names[i], entry_file_cap(names[i]), bytes[i], &fst);
    if (err == 0 && (fst.st_mode & S_IWOTH)) {
      c.problem = fmt::format("{} is writable by every user", (entry / names[i]).string());
      return c;
    }
    if (err == 0) continue;
    c.unreadable = environmental(err);
    c.problem = fmt::format("cannot read {}: {}", (entry / names[i]).string(), file_error_text(err));
    if (err == ENOENT && !root.is_child_dir(name)) c.missing = true;  // evicted while we read
    return c;
  }
  try {
    c = check_entry_bytes(name, bytes[0], std::move(bytes[1]), std::move(bytes[2]), expected_hash);
  } catch (const Error& e) {
    c.problem = e.what();
  }
  return c;
}

EntryCheck check_entry(const fs::path& dir, std::string_view expected_hash) {
  Dir root;
  if (const int err = Dir::open(dir.parent_path(), root); err != 0) {
    EntryCheck c;
    c.missing = err == ENOENT;
    c.problem = fmt::format("cannot open {}: {}", dir.parent_path().string(), file_error_text(err));
    return c;
  }
  return check_entry(root, dir.filename().string(), expected_hash);
}

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void stamp_last_used(const Dir& entry) {
  // One fixed-width pwrite: a reader sees the old or the new stamp, never a mix, and
  // no temporary file is left in the entry if the process dies here.
  const int fd = entry.open_for_update(kLastUsedFile);
  if (fd < 0) return;
  const std::string stamp = fmt::format("{:020d}\n", unix_ms_now());
  if (::pwrite(fd, stamp.data(), stamp.size(), 0) < 0) {
    // best effort: the manifest's time stands in
  }
  ::close(fd);
}

int64_t last_used_ms(const Dir& root, std::string_view name) {
  Dir entry;
  if (root.open_child(name, false, entry) != 0) return 0;
  std::string text;
  if (entry.read_file(kLastUsedFile, kMaxLastUsedBytes, text) == 0) {
    int64_t v = 0;
    const size_t digits = text.find_first_not_of("0123456789");
    const auto [end, ec] = std::from_chars(text.data(), text.data() + std::min(digits, text.size()), v);
    if (ec == std::errc() && v > 0 && end != text.data()) return v;
  }
  struct stat st {};
  if (entry.stat_child(kManifestFile, st) != 0) return 0;
  return int64_t(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int64_t last_used_ms(const fs::path& dir) {
  Dir root;
  if (Dir::open(dir.parent_path(), root) != 0) return 0;
  return last_used_ms(root, dir.filename().string());
}

uint64_t disk_bytes(const fs::path& path) {
  Dir parent;
  if (Dir::open(path.parent_path(), parent) != 0) return 0;
  return parent.disk_bytes(path.filename().string());
}

}  // namespace spark
