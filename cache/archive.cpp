#include "cache/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <set>

#include <archive.h>
#include <archive_entry.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/evict.h"
#include "cache/scratch.h"
#include "core/env.h"
#include "core/error.h"
#include "core/key_name.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kFormatName = "spark-cache-archive";
// The files every entry carries, in the order export writes them and import expects them.
const char* const kArchivedFiles[] = {kManifestFile, kCubinFile, kSourceFile, kLogFile};
constexpr uint64_t kMaxHeaderBytes = 4096;
// zstd level 19: an export is made once and imported on every server, so a slower,
// smaller archive pays (cubins and sources compress well; bench in docs/tools.md).
constexpr const char* kZstdLevel = "19";

#define SPARK_ARCHIVE_CHECK(cond, ...) SPARK_CHECK_ARG(cond, "FILE", __VA_ARGS__)

uint64_t xxh3(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// One line of spark-archive.sums.
std::string sum_line(std::string_view member, std::string_view data) {
  return fmt::format("{:016x} {} {}\n", xxh3(data), data.size(), member);
}

// Owns a libarchive handle.
struct ReadHandle {
  archive* a = archive_read_new();
  ~ReadHandle() { archive_read_free(a); }
};
struct WriteHandle {
  archive* a = archive_write_new();
  ~WriteHandle() { archive_write_free(a); }
};

struct ArchivedEntry {
  std::string name;
  std::map<std::string, std::string> files;
};

// Reads the archive's members in order, with the checks of the format's rules.
class Reader {
 public:
  Reader(archive* a, std::string label) : a_(a), label_(std::move(label)) {}
  const std::string& label() const { return label_; }

  // The next member's header; false at the end of the archive.
  bool next(archive_entry*& e) {
    const int r = archive_read_next_header(a_, &e);
    if (r == ARCHIVE_EOF) return false;
    SPARK_ARCHIVE_CHECK(r == ARCHIVE_OK || r == ARCHIVE_WARN, "{} is truncated or corrupt ({})", label_, error());
    if (!checked_filter_) {
      // Only zstd-compressed tar: the format this spark writes and nothing else.
      checked_filter_ = true;
      SPARK_ARCHIVE_CHECK(archive_filter_count(a_) == 2 && archive_filter_code(a_, 0) == ARCHIVE_FILTER_ZSTD,
                          "{} is not a spark cache archive (not a zstd-compressed tar file)", label_);
    }
    ++members_;
    return true;
  }

  // A regular file member of at most `cap` bytes (checked from its header before any byte
  // of it is read), read whole.
  // No link, device, directory, FIFO or sparse file, whatever its name.
  void require_regular_file(archive_entry* e) {
    SPARK_ARCHIVE_CHECK(archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e) &&
                            !archive_entry_symlink(e) && archive_entry_sparse_count(e) == 0,
                        "{}: member {} is not a regular file", label_, members_);
  }

  std::string data(archive_entry* e, uint64_t cap, const std::string& what) {
    require_regular_file(e);
    SPARK_ARCHIVE_CHECK(archive_entry_size_is_set(e) && archive_entry_size(e) >= 0,
                        "{}: member {} ({}) has no size", label_, members_, what);
    const uint64_t size = static_cast<uint64_t>(archive_entry_size(e));
    SPARK_ARCHIVE_CHECK(size <= cap, "{}: {} is {} bytes, above the {}-byte cap", label_, what, size, cap);
    std::string out(static_cast<size_t>(size), '\0');
    size_t done = 0;
    while (done < size) {
      const la_ssize_t got = archive_read_data(a_, out.data() + done, out.size() - done);
      SPARK_ARCHIVE_CHECK(got >= 0, "{} is truncated or corrupt ({})", label_, error());
      SPARK_ARCHIVE_CHECK(got > 0, "{} is truncated ({} ends early)", label_, what);
      done += static_cast<size_t>(got);
    }
    return out;
  }

 private:
  std::string error() const {
    const char* why = archive_error_string(a_);
    return why ? why : "unknown error";
  }
  archive* a_;
  std::string label_;
  bool checked_filter_ = false;
  uint64_t members_ = 0;
};

// Opening reads the first block to recognise the format: what fails there is not an archive
// of any kind libarchive was asked to read, or one cut short.
void open_check(archive* a, int r, const std::string& label) {
  const char* why = archive_error_string(a);
  SPARK_ARCHIVE_CHECK(r == ARCHIVE_OK, "{} is not a spark cache archive, or is truncated or corrupt ({})", label,
                      why ? why : "unreadable");
}

// The member's name, or "" where libarchive has none it can give.
std::string member_name(archive_entry* e) {
  const char* name = archive_entry_pathname(e);
  return name ? name : "";
}

// Parses and checks the whole archive, handing each verified entry to `sink` as it goes;
// returns once the checksum list and the end are checked.  Nothing is published here.
void read_archive(Reader& r, const std::function<void(ArchivedEntry&&)>& sink) {
  const std::string& file = r.label();
  archive_entry* e = nullptr;
  SPARK_ARCHIVE_CHECK(r.next(e), "{} is not a spark cache archive (it is empty)", file);
  SPARK_ARCHIVE_CHECK(member_name(e) == kArchiveHeaderMember, "{} is not a spark cache archive (no {} first)", file,
                      kArchiveHeaderMember);
  const std::string header = r.data(e, kMaxHeaderBytes, kArchiveHeaderMember);
  std::string sums = sum_line(kArchiveHeaderMember, header);
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception&) {
    SPARK_ARCHIVE_CHECK(false, "{} is not a spark cache archive ({} is not JSON)", file, kArchiveHeaderMember);
  }
  const auto number = [&](const char* field) -> int64_t {
    SPARK_ARCHIVE_CHECK(h.is_object() && h.contains(field) && h[field].is_number_integer(),
                        "{} is not a spark cache archive ({} has no integer \"{}\")", file, kArchiveHeaderMember,
                        field);
    return h[field].get<int64_t>();
  };
  SPARK_ARCHIVE_CHECK(h.is_object() && h.value("format", "") == kFormatName, "{} is not a spark cache archive", file);
  const int64_t archive_version = number("archive_format");
  SPARK_ARCHIVE_CHECK(archive_version == kArchiveFormatVersion, "{} has archive format {}, this spark reads format {}",
                      file, archive_version, kArchiveFormatVersion);
  const int64_t cache_version = number("cache_format");
  SPARK_ARCHIVE_CHECK(cache_version == kCacheFormatVersion,
                      "{} holds entries of cache format {}, this spark uses format {}; export it with this spark's "
                      "spark-cache, or prewarm instead",
                      file, cache_version, kCacheFormatVersion);

  std::set<std::string> seen;
  ArchivedEntry current;  // the entry whose files are being read
  size_t count = 0;
  const auto finish_entry = [&] {
    if (current.name.empty()) return;
    SPARK_ARCHIVE_CHECK(current.files.size() == std::size(kArchivedFiles),
                        "{}: entry {} has {} files, not the {} every entry has", file, current.name,
                        current.files.size(), std::size(kArchivedFiles));
    const EntryCheck c = check_entry_bytes(current.name, current.files[kManifestFile], current.files[kCubinFile],
                                           current.files[kSourceFile]);
    SPARK_ARCHIVE_CHECK(c.ok(), "{}: entry {} fails verification: {}", file, current.name, c.problem);
    sink(std::move(current));
    current = ArchivedEntry();
  };
  for (;;) {
    SPARK_ARCHIVE_CHECK(r.next(e), "{} is truncated (it ends before {})", file, kArchiveSumsMember);
    const std::string member = member_name(e);
    r.require_regular_file(e);
    if (member == kArchiveSumsMember) break;
    // "<entry>/<file>", nothing else: no absolute path, no "..", no "./", no subdirectory.
    const size_t slash = member.find('/');
    const std::string entry = member.substr(0, slash);
    SPARK_ARCHIVE_CHECK(slash != std::string::npos && is_entry_name(entry),
                        "{}: entry {} has a name no cache entry has", file, count);
    const std::string fname = member.substr(slash + 1);
    // A new entry starts with a new name, or with the same name once four files are in (a
    // duplicate, refused below).
    if (entry != current.name || current.files.size() == std::size(kArchivedFiles)) {
      finish_entry();
      SPARK_ARCHIVE_CHECK(seen.insert(entry).second, "{}: entry {} appears twice", file, entry);
      current.name = entry;
      ++count;
    }
    const size_t index = current.files.size();
    SPARK_ARCHIVE_CHECK(index < std::size(kArchivedFiles) && fname == kArchivedFiles[index],
                        "{}: entry {} has an unexpected file (or its files out of order)", file, entry);
    std::string data = r.data(e, entry_file_cap(fname), entry + "/" + fname);
    sums += sum_line(member, data);
    current.files[fname] = std::move(data);
  }
  finish_entry();
  // The list covers every member's bytes; what it says must be exactly what was read.
  const std::string listed = r.data(e, sums.size(), kArchiveSumsMember);
  SPARK_ARCHIVE_CHECK(listed == sums, "{} is corrupt ({} does not match the members)", file, kArchiveSumsMember);
  SPARK_ARCHIVE_CHECK(!r.next(e), "{} is corrupt (members after {})", file, kArchiveSumsMember);
}

// Where an archive is written: buffered by libarchive, handed to a descriptor here.
struct Sink {
  int fd;
  std::string label;
  uint64_t bytes = 0;
  int error = 0;  // errno of a failed write
};

la_ssize_t sink_write(archive*, void* data, const void* buf, size_t n) {
  Sink& s = *static_cast<Sink*>(data);
  const char* p = static_cast<const char*>(buf);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::write(s.fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      s.error = errno;
      return -1;
    }
    done += static_cast<size_t>(w);
  }
  s.bytes += n;
  return static_cast<la_ssize_t>(n);
}

// Writes the archive's members to a sink, throwing CACHE naming it on any failure.
class Writer {
 public:
  explicit Writer(Sink& sink) : sink_(sink) {
    archive* a = h_.a;
    check(archive_write_add_filter_zstd(a));
    check(archive_write_set_filter_option(a, "zstd", "compression-level", kZstdLevel));
    check(archive_write_set_format_pax_restricted(a));
    check(archive_write_set_bytes_in_last_block(a, 1));  // no padding after the compressed stream
    check(archive_write_open(a, &sink_, nullptr, sink_write, nullptr));
  }
  void member(const std::string& name, std::string_view data) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(e, now_, 0);
    const int r = archive_write_header(h_.a, e);
    archive_entry_free(e);
    check(r);
    for (size_t done = 0; done < data.size();) {
      const la_ssize_t w = archive_write_data(h_.a, data.data() + done, data.size() - done);
      if (w <= 0) check(ARCHIVE_FATAL);
      done += static_cast<size_t>(w);
    }
    sums_ += sum_line(name, data);
  }
  void finish() {
    const std::string sums = std::move(sums_);
    member(kArchiveSumsMember, sums);
    check(archive_write_close(h_.a));
  }

 private:
  void check(int r) {
    if (r == ARCHIVE_OK || r == ARCHIVE_WARN) return;
    const char* why = archive_error_string(h_.a);
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot write {}: {}", sink_.label,
               sink_.error ? std::strerror(sink_.error) : why ? why : "unknown error");
  }
  Sink& sink_;
  WriteHandle h_;
  std::string sums_;
  const time_t now_ = ::time(nullptr);
};

// Writes every sound entry the filter takes; returns what went in and what was skipped.
ExportReport write_archive(const KernelCache& cache, Sink& sink, const ExportFilter& filter) {
  ExportReport report;
  Dir root;
  std::string why;
  SPARK_CHECK(cache.open_root(root, &why) == 0, SPARK_ERROR_CACHE, "cannot export {}", why);
  Writer w(sink);
  const std::string header = nlohmann::ordered_json{{"format", kFormatName},
                                                    {"archive_format", kArchiveFormatVersion},
                                                    {"cache_format", kCacheFormatVersion}}
                                 .dump(2) +
                             "\n";
  w.member(kArchiveHeaderMember, header);
  // One entry at a time, read and checked under its shared lock: only sound entries go in.
  for (const std::string& name : cache.entry_names()) {
    if (!filter.matches(name)) continue;
    ArchivedEntry e;
    EntryCheck c;
    {
      const EntryLock reading = cache.shared_lock(root, name);
      c = check_entry(root, name);
      Dir dir;
      std::string log;
      int err = c.ok() ? root.open_child(name, false, dir) : 0;
      if (c.ok() && err == 0) err = dir.read_file(kLogFile, kMaxLogBytes, log);
      if (c.ok() && err != 0) c.problem = fmt::format("cannot read {}: {}", kLogFile, file_error_text(err));
      if (c.ok()) {
        e.files[kManifestFile] = std::move(c.manifest_text);
        e.files[kCubinFile] = std::move(c.cubin);
        e.files[kSourceFile] = std::move(c.source);
        e.files[kLogFile] = std::move(log);
      }
    }
    if (c.missing) continue;
    if (!c.problem.empty()) {
      report.skipped.push_back(name + ": " + c.problem);
      continue;
    }
    for (const char* f : kArchivedFiles) w.member(name + "/" + f, e.files.at(f));
    report.exported.push_back(name);
  }
  w.finish();
  report.bytes = sink.bytes;
  return report;
}

// Removes a directory tree in .tmp/ when it goes out of scope (staged imports).
struct StagingGuard {
  const Dir& tmp;
  std::string name;
  ~StagingGuard() { tmp.remove_tree(name); }
};

}  // namespace

bool ExportFilter::matches(std::string_view entry_name) const {
  if (entry_name.substr(0, prefix.size()) != prefix) return false;
  if (archs.empty()) return true;
  if (!is_entry_name(entry_name)) return false;
  const std::string_view key = entry_name.substr(0, entry_name.size() - 17);  // "-<hash16>"
  return std::find(archs.begin(), archs.end(), key_arch(key)) != archs.end();
}

std::vector<std::string> verify_archive_bytes(std::string_view bytes) {
  ReadHandle h;
  archive_read_support_filter_zstd(h.a);
  archive_read_support_format_tar(h.a);
  open_check(h.a, archive_read_open_memory(h.a, bytes.data(), bytes.size()), "the archive");
  Reader r(h.a, "the archive");
  std::vector<std::string> names;
  read_archive(r, [&](ArchivedEntry&& e) { names.push_back(std::move(e.name)); });
  return names;
}

ExportReport export_cache_to_fd(const KernelCache& cache, int fd, const std::string& label,
                                const ExportFilter& filter) {
  Sink sink{fd, label};
  ExportReport report = write_archive(cache, sink, filter);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    SPARK_CHECK(::fsync(fd) == 0, SPARK_ERROR_CACHE, "cannot fsync {}: {}", label, std::strerror(errno));
  return report;
}

ExportReport export_cache(const KernelCache& cache, const fs::path& file, const ExportFilter& filter,
                          bool overwrite) {
  Dir parent;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const int perr = Dir::open(dir, parent);
  SPARK_CHECK(perr == 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(perr));
  const std::string base = file.filename().string();
  struct stat st {};
  SPARK_ARCHIVE_CHECK(overwrite || parent.stat_child(base, st) == ENOENT,
                      "{} already exists (give --force to replace it)", file.string());
  const std::string tmp = scratch_name("." + base);
  const int fd = ::openat(parent.fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  SPARK_CHECK(fd >= 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(errno));
  ExportReport report;
  try {
    report = export_cache_to_fd(cache, fd, file.string(), filter);
    SPARK_CHECK(::close(fd) == 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(errno));
  } catch (...) {
    ::close(fd);
    parent.remove_file(tmp);  // a full disk leaves no partial archive behind
    throw;
  }
  // Without overwrite, a file that appeared meanwhile is not replaced either: link() never
  // replaces its target.
  const int moved = overwrite ? ::renameat(parent.fd(), tmp.c_str(), parent.fd(), base.c_str())
                              : ::linkat(parent.fd(), tmp.c_str(), parent.fd(), base.c_str(), 0);
  const int err = moved == 0 ? 0 : errno;
  if (err != 0 || !overwrite) parent.remove_file(tmp);
  SPARK_ARCHIVE_CHECK(err != EEXIST, "{} already exists (give --force to replace it)", file.string());
  SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(err));
  const int serr = parent.sync();
  SPARK_CHECK(serr == 0, SPARK_ERROR_CACHE, "wrote {} but cannot fsync its directory: {}", file.string(),
              std::strerror(serr));
  return report;
}

namespace {

ImportReport import_stream(const KernelCache& cache, int fd, const std::string& label);

}  // namespace

ImportReport import_cache(const KernelCache& cache, const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  SPARK_ARCHIVE_CHECK(fd >= 0, "cannot open {}: {}", file.string(), std::strerror(errno));
  struct FdGuard {
    int fd;
    ~FdGuard() { ::close(fd); }
  } guard{fd};
  struct stat st {};
  SPARK_ARCHIVE_CHECK(::fstat(fd, &st) == 0 && S_ISREG(st.st_mode),
                      "{} is not a regular file (a FIFO, device or directory is never read as an archive)",
                      file.string());
  return import_stream(cache, fd, file.string());
}

ImportReport import_cache_from_fd(const KernelCache& cache, int fd, const std::string& label) {
  struct stat st {};
  SPARK_ARCHIVE_CHECK(::fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)),
                      "{} is not a file or a pipe", label);
  SPARK_ARCHIVE_CHECK(!::isatty(fd), "{} is a terminal, not an archive", label);
  return import_stream(cache, fd, label);
}

namespace {

ImportReport import_stream(const KernelCache& cache, int fd, const std::string& label) {
  struct stat st {};
  const CacheAccess access = cache.prepare();
  SPARK_CHECK(access.writable, SPARK_ERROR_CACHE, "cannot import into {}: {}", cache.root().string(),
              access.problem);
  Dir root, tmp, staging;
  std::string why;
  SPARK_CHECK(cache.open_root(root, &why) == 0 && cache.open_work_dir(root, kTmpDir, true, tmp, &why) == 0,
              SPARK_ERROR_CACHE, "cannot import: {}", why);
  const std::string stage = scratch_name("import");
  const int made = tmp.make_dir(stage);
  SPARK_CHECK(made == 0 && tmp.open_child(stage, false, staging) == 0, SPARK_ERROR_CACHE, "cannot create {}: {}",
              (tmp / stage).string(), std::strerror(made ? made : errno));
  const StagingGuard cleanup{tmp, stage};

  // 1. Stream, check and stage every entry; nothing is published before the end is checked.
  ImportReport report;
  std::vector<std::string> staged;
  ReadHandle h;
  archive_read_support_filter_zstd(h.a);
  archive_read_support_format_tar(h.a);
  open_check(h.a, archive_read_open_fd(h.a, fd, 64 << 10), label);
  Reader reader(h.a, label);
  read_archive(reader, [&](ArchivedEntry&& e) {
    SPARK_CHECK(staging.make_dir(e.name) == 0, SPARK_ERROR_CACHE, "cannot stage {}: {}", e.name, std::strerror(errno));
    Dir entry;
    SPARK_CHECK(staging.open_child(e.name, false, entry) == 0, SPARK_ERROR_CACHE, "cannot stage {}", e.name);
    for (const char* f : kArchivedFiles) {  // manifest first here: nothing is trusted until published
      entry.write_new_file(f, e.files[f], /*sync=*/true);
      report.bytes += e.files[f].size();
    }
    stamp_last_used(entry);
    const int err = entry.sync();
    SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot fsync {}: {}", entry.path().string(), std::strerror(err));
    staged.push_back(std::move(e.name));
  });
  const auto cap = cache_max_bytes();
  SPARK_CHECK(!cap || report.bytes <= *cap, SPARK_ERROR_CACHE,
              "{} holds {} bytes of entries, more than SPARK_CACHE_MAX_BYTES ({}); nothing imported", label,
              report.bytes, *cap);

  // 2. Publish each under its lock; on a failure take back what this import published.
  std::vector<std::string> published;
  try {
    for (const std::string& name : staged) {
      const EntryLock writing = cache.lock(name);
      bool replacing = false;
      if (root.stat_child(name, st) == 0) {
        const EntryCheck c = check_entry(root, name);
        if (c.ok()) {
          report.kept.push_back(name);  // never overwrite a sound entry
          continue;
        }
        if (c.unreadable) {
          report.unreadable.push_back(name + ": " + c.problem);
          continue;
        }
        if (!c.missing) {
          cache.move_aside(name);
          replacing = true;
        }
      }
      const int err = staging.rename(name, root, name);
      if (err == EEXIST || err == ENOTEMPTY) {
        report.kept.push_back(name);  // published by someone without the lock
        continue;
      }
      SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot publish {}: {}", cache.entry_dir(name).string(),
                  std::strerror(err));
      published.push_back(name);
      (replacing ? report.replaced : report.imported).push_back(name);
    }
    const int err = root.sync();
    SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot fsync {}: {}", cache.root().string(), std::strerror(err));
  } catch (...) {
    for (const std::string& name : published) remove_entry(cache, name);
    throw;
  }
  if (cap) evict_to_fit(cache, *cap);
  return report;
}

}  // namespace

}  // namespace spark
