#include "cache/archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <set>

#include <xxhash.h>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/evict.h"
#include "cache/scratch.h"
#include "core/env.h"
#include "core/error.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "SPKCACHE";
constexpr std::string_view kEndMarker = "SPKCEND\n";
// The files every entry carries, in the order export writes them.
const char* const kArchivedFiles[] = {kManifestFile, kCubinFile, kSourceFile, kLogFile};
constexpr uint32_t kMaxNameBytes = 255;

#define SPARK_ARCHIVE_CHECK(cond, ...) SPARK_CHECK_ARG(cond, "FILE", __VA_ARGS__)

// A streaming XXH3-64 state (opaque in xxhash.h, so on the heap).
struct HashState {
  HashState() : p(XXH3_createState()) {
    if (!p) throw std::bad_alloc();
  }
  ~HashState() { XXH3_freeState(p); }
  HashState(const HashState&) = delete;
  HashState& operator=(const HashState&) = delete;
  XXH3_state_t* get() const { return p; }
  XXH3_state_t* p;
};

// Where archive bytes come from: a file or memory.  read() returns 0 only at the end.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual size_t read(char* buf, size_t n) = 0;
};

class MemorySource : public ByteSource {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  size_t read(char* buf, size_t n) override {
    n = std::min(n, bytes_.size());
    std::memcpy(buf, bytes_.data(), n);
    bytes_.remove_prefix(n);
    return n;
  }

 private:
  std::string_view bytes_;
};

class FileSource : public ByteSource {
 public:
  FileSource(int fd, const fs::path& file) : fd_(fd), file_(file) {}
  size_t read(char* buf, size_t n) override {
    for (;;) {
      const ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) SPARK_ARCHIVE_CHECK(false, "cannot read {}: {}", file_.string(), std::strerror(errno));
    }
  }

 private:
  int fd_;
  const fs::path& file_;
};

// Reads the archive's fields in order, hashing every byte, with bounds on every length.
class Reader {
 public:
  Reader(ByteSource& src, std::string label) : src_(src), label_(std::move(label)) { XXH3_64bits_reset(state_.get()); }
  const std::string& label() const { return label_; }
  std::string take(uint64_t n, bool hashed = true) {
    std::string out;
    out.resize(static_cast<size_t>(n));
    size_t done = 0;
    while (done < n) {
      const size_t got = src_.read(out.data() + done, static_cast<size_t>(n) - done);
      SPARK_ARCHIVE_CHECK(got > 0, "{} is truncated (it ends inside a field at byte {})", label_, offset_ + done);
      done += got;
    }
    if (hashed) XXH3_64bits_update(state_.get(), out.data(), out.size());
    offset_ += n;
    return out;
  }
  // Up to n bytes: fewer only at the end.
  std::string take_some(size_t n) {
    std::string out(n, '\0');
    size_t done = 0;
    for (size_t got; done < n && (got = src_.read(out.data() + done, n - done)) > 0;) done += got;
    out.resize(done);
    XXH3_64bits_update(state_.get(), out.data(), out.size());
    offset_ += done;
    return out;
  }
  template <class T>
  T get(bool hashed = true) {
    const std::string raw = take(sizeof(T), hashed);
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    return static_cast<T>(v);
  }
  // A length-prefixed name of at most max bytes.
  std::string name(uint32_t max, const char* what) {
    const uint32_t n = get<uint32_t>();
    SPARK_ARCHIVE_CHECK(n <= max, "{} is corrupt ({} name of {} bytes at byte {})", label_, what, n, offset_);
    return take(n);
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_.get()); }
  bool at_end() {
    char c;
    return src_.read(&c, 1) == 0;
  }

 private:
  ByteSource& src_;
  std::string label_;
  HashState state_;
  uint64_t offset_ = 0;
};

struct ArchivedEntry {
  std::string name;
  std::map<std::string, std::string> files;
};

uint64_t xxh3(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Parses and checks the whole archive, handing each verified entry to `sink` as it goes;
// returns once the checksum and end marker are checked.  Nothing is published here.
void read_archive(Reader& r, const std::function<void(ArchivedEntry&&)>& sink) {
  const std::string& file = r.label();
  SPARK_ARCHIVE_CHECK(r.take_some(kMagic.size()) == kMagic, "{} is not a spark cache archive", file);
  const uint32_t archive_version = r.get<uint32_t>();
  SPARK_ARCHIVE_CHECK(archive_version == kArchiveFormatVersion, "{} has archive format {}, this spark reads format {}",
                      file, archive_version, kArchiveFormatVersion);
  const uint32_t cache_version = r.get<uint32_t>();
  SPARK_ARCHIVE_CHECK(cache_version == static_cast<uint32_t>(kCacheFormatVersion),
                      "{} holds entries of cache format {}, this spark uses format {}; export it with this spark's "
                      "spark-cache, or prewarm instead",
                      file, cache_version, kCacheFormatVersion);
  const uint64_t count = r.get<uint64_t>();
  std::set<std::string> seen;
  for (uint64_t i = 0; i < count; ++i) {
    ArchivedEntry e;
    e.name = r.name(kMaxNameBytes, "an entry");
    SPARK_ARCHIVE_CHECK(is_entry_name(e.name), "{}: entry {} has a name no cache entry has", file, i);
    SPARK_ARCHIVE_CHECK(seen.insert(e.name).second, "{}: entry {} appears twice", file, e.name);
    const uint32_t files = r.get<uint32_t>();
    SPARK_ARCHIVE_CHECK(files == std::size(kArchivedFiles), "{}: entry {} has {} files, not the {} every entry has",
                        file, e.name, files, std::size(kArchivedFiles));
    for (uint32_t f = 0; f < files; ++f) {
      const std::string fname = r.name(32, "a file");
      const uint64_t cap = entry_file_cap(fname);
      SPARK_ARCHIVE_CHECK(cap > 0 && !e.files.count(fname), "{}: entry {} has an unexpected file", file, e.name);
      const uint64_t size = r.get<uint64_t>();
      SPARK_ARCHIVE_CHECK(size <= cap, "{}: {}/{} is {} bytes, above the {}-byte cap", file, e.name, fname, size, cap);
      const uint64_t sum = r.get<uint64_t>();
      std::string data = r.take(size);
      SPARK_ARCHIVE_CHECK(xxh3(data) == sum, "{} is corrupt: {}/{} does not match its checksum", file, e.name,
                          fname);
      e.files[fname] = std::move(data);
    }
    const EntryCheck c =
        check_entry_bytes(e.name, e.files[kManifestFile], e.files[kCubinFile], e.files[kSourceFile]);
    SPARK_ARCHIVE_CHECK(c.ok(), "{}: entry {} fails verification: {}", file, e.name, c.problem);
    sink(std::move(e));
  }
  const uint64_t expected = r.digest();
  SPARK_ARCHIVE_CHECK(r.get<uint64_t>(false) == expected, "{} is corrupt (archive checksum mismatch)", file);
  SPARK_ARCHIVE_CHECK(r.take(kEndMarker.size(), false) == kEndMarker, "{} is truncated or corrupt (no end marker)",
                      file);
  SPARK_ARCHIVE_CHECK(r.at_end(), "{} is corrupt (bytes after the end marker)", file);
}

// Buffered, hashed writes to a new file; errors thrown as CACHE naming it.
class Writer {
 public:
  Writer(int fd, const fs::path& file) : fd_(fd), file_(file) { XXH3_64bits_reset(state_.get()); }
  void put_bytes(std::string_view s, bool hashed = true) {
    if (hashed) XXH3_64bits_update(state_.get(), s.data(), s.size());
    buf_.append(s);
    bytes_ += s.size();
    if (buf_.size() >= (1u << 20)) flush();
  }
  template <class T>
  void put(T v) {
    char raw[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) raw[i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    put_bytes(std::string_view(raw, sizeof raw));
  }
  void put_text(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    put_bytes(s);
  }
  void finish() {
    put<uint64_t>(XXH3_64bits_digest(state_.get()));
    put_bytes(kEndMarker, false);
    flush();
    SPARK_CHECK(::fsync(fd_) == 0, SPARK_ERROR_CACHE, "cannot fsync {}: {}", file_.string(), std::strerror(errno));
  }
  uint64_t bytes() const { return bytes_; }

 private:
  void flush() {
    for (size_t done = 0; done < buf_.size();) {
      const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      SPARK_CHECK(n >= 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file_.string(), std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    buf_.clear();
  }
  int fd_;
  const fs::path& file_;
  HashState state_;
  std::string buf_;
  uint64_t bytes_ = 0;
};

// Removes a directory tree in .tmp/ when it goes out of scope (staged imports).
struct StagingGuard {
  const Dir& tmp;
  std::string name;
  ~StagingGuard() { tmp.remove_tree(name); }
};

}  // namespace

std::vector<std::string> verify_archive_bytes(std::string_view bytes) {
  MemorySource src(bytes);
  Reader r(src, "the archive");
  std::vector<std::string> names;
  read_archive(r, [&](ArchivedEntry&& e) { names.push_back(std::move(e.name)); });
  return names;
}

ExportReport export_cache(const KernelCache& cache, const fs::path& file) {
  ExportReport report;
  Dir root;
  std::string why;
  SPARK_CHECK(cache.open_root(root, &why) == 0, SPARK_ERROR_CACHE, "cannot export {}", why);
  // Read every entry first: the count leads the archive, and only sound entries go in.
  std::vector<ArchivedEntry> entries;
  for (const std::string& name : cache.entry_names()) {
    ArchivedEntry e;
    e.name = name;
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
    entries.push_back(std::move(e));
  }

  Dir parent;
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  const int perr = Dir::open(dir, parent);
  SPARK_CHECK(perr == 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(perr));
  const std::string tmp = scratch_name("." + file.filename().string());
  const int fd = ::openat(parent.fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  SPARK_CHECK(fd >= 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(errno));
  try {
    Writer w(fd, file);
    w.put_bytes(kMagic);
    w.put<uint32_t>(kArchiveFormatVersion);
    w.put<uint32_t>(static_cast<uint32_t>(kCacheFormatVersion));
    w.put<uint64_t>(entries.size());
    for (const ArchivedEntry& e : entries) {
      w.put_text(e.name);
      w.put<uint32_t>(static_cast<uint32_t>(std::size(kArchivedFiles)));
      for (const char* f : kArchivedFiles) {
        const std::string& data = e.files.at(f);
        w.put_text(f);
        w.put<uint64_t>(data.size());
        w.put<uint64_t>(xxh3(data));
        w.put_bytes(data);
      }
      report.exported.push_back(e.name);
    }
    w.finish();
    report.bytes = w.bytes();
    SPARK_CHECK(::close(fd) == 0, SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(errno));
  } catch (...) {
    ::close(fd);
    parent.remove_file(tmp);  // a full disk leaves no partial archive behind
    throw;
  }
  if (::renameat(parent.fd(), tmp.c_str(), parent.fd(), file.filename().c_str()) != 0) {
    const int err = errno;
    parent.remove_file(tmp);
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(err));
  }
  const int serr = parent.sync();
  SPARK_CHECK(serr == 0, SPARK_ERROR_CACHE, "wrote {} but cannot fsync its directory: {}", file.string(),
              std::strerror(serr));
  return report;
}

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
  FileSource src(fd, file);
  Reader reader(src, file.string());
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
              "{} holds {} bytes of entries, more than SPARK_CACHE_MAX_BYTES ({}); nothing imported", file.string(),
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

}  // namespace spark
