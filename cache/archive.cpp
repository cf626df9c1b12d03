#include "cache/archive.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include <xxhash.h>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/scratch.h"
#include "core/error.h"
#include "core/files.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kMagic = "SPKCACHE";
constexpr std::string_view kEndMarker = "SPKCEND\n";
// The files an archive may carry; anything else (a path, "..") is refused.
const char* const kArchivedFiles[] = {kManifestFile, kCubinFile, kSourceFile, kLogFile};

bool is_archived_file(std::string_view name) {
  for (const char* f : kArchivedFiles)
    if (name == f) return true;
  return false;
}

template <class T>
void put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

void put_text(std::string& out, std::string_view s) {
  put<uint32_t>(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

uint64_t xxh3(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Reads the archive's fields with bounds checks; every failure names the file.
class Reader {
 public:
  Reader(std::string_view bytes, const fs::path& file) : bytes_(bytes), file_(file) {}
  template <class T>
  T get() {
    const std::string_view raw = take(sizeof(T));
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    return static_cast<T>(v);
  }
  std::string_view take(uint64_t n) {
    SPARK_CHECK_ARG(n <= bytes_.size() - pos_, "FILE", "{} is truncated or corrupt (a field at byte {} runs past its end)",
                    file_.string(), pos_);
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view text() { return take(get<uint32_t>()); }
  size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string_view bytes_;
  const fs::path& file_;
  size_t pos_ = 0;
};

struct ArchivedEntry {
  std::string name;
  std::map<std::string, std::string> files;
};

// Parses and checks the whole archive; nothing is written.
std::vector<ArchivedEntry> read_archive(const std::string& bytes, const fs::path& file) {
  const size_t header = kMagic.size() + 4 + 4 + 8, trailer = 8 + kEndMarker.size();
  SPARK_CHECK_ARG(bytes.size() >= kMagic.size() && std::string_view(bytes).substr(0, kMagic.size()) == kMagic, "FILE",
                  "{} is not a spark cache archive", file.string());
  Reader head(bytes, file);
  head.take(kMagic.size());
  const uint32_t archive_version = head.get<uint32_t>();
  SPARK_CHECK_ARG(archive_version == kArchiveFormatVersion, "FILE",
                  "{} has archive format {}, this spark reads format {}", file.string(), archive_version,
                  kArchiveFormatVersion);
  const uint32_t cache_version = head.get<uint32_t>();
  SPARK_CHECK_ARG(cache_version == static_cast<uint32_t>(kCacheFormatVersion), "FILE",
                  "{} holds entries of cache format {}, this spark uses format {}; export it with this spark's "
                  "spark-cache, or prewarm instead",
                  file.string(), cache_version, kCacheFormatVersion);
  SPARK_CHECK_ARG(bytes.size() >= header + trailer &&
                      std::string_view(bytes).substr(bytes.size() - kEndMarker.size()) == kEndMarker,
                  "FILE", "{} is truncated (no end marker)", file.string());
  const std::string_view body = std::string_view(bytes).substr(0, bytes.size() - trailer);
  Reader tail(std::string_view(bytes).substr(body.size(), 8), file);
  SPARK_CHECK_ARG(tail.get<uint64_t>() == xxh3(body), "FILE", "{} is corrupt (archive checksum mismatch)",
                  file.string());

  Reader r(body, file);
  r.take(header - 8);
  const uint64_t count = r.get<uint64_t>();
  std::vector<ArchivedEntry> entries;
  for (uint64_t i = 0; i < count; ++i) {
    ArchivedEntry e;
    e.name = std::string(r.text());
    SPARK_CHECK_ARG(is_entry_name(e.name), "FILE", "{}: entry {} has an invalid name '{}'", file.string(), i, e.name);
    const uint32_t files = r.get<uint32_t>();
    for (uint32_t f = 0; f < files; ++f) {
      const std::string name(r.text());
      const uint64_t size = r.get<uint64_t>();
      const uint64_t sum = r.get<uint64_t>();
      const std::string_view data = r.take(size);
      SPARK_CHECK_ARG(is_archived_file(name) && !e.files.count(name), "FILE", "{}: entry {} has an unexpected file '{}'",
                      file.string(), e.name, name);
      SPARK_CHECK_ARG(xxh3(data) == sum, "FILE", "{}: {}/{} does not match its checksum", file.string(), e.name, name);
      e.files[name] = std::string(data);
    }
    for (const char* required : {kManifestFile, kCubinFile, kSourceFile})
      SPARK_CHECK_ARG(e.files.count(required), "FILE", "{}: entry {} lacks {}", file.string(), e.name, required);
    const EntryCheck c =
        check_entry_bytes(e.name, e.files[kManifestFile], e.files[kCubinFile], e.files[kSourceFile]);
    SPARK_CHECK_ARG(c.ok(), "FILE", "{}: entry {} fails verification: {}", file.string(), e.name, c.problem);
    entries.push_back(std::move(e));
  }
  SPARK_CHECK_ARG(r.remaining() == 0, "FILE", "{} is corrupt ({} bytes after the last entry)", file.string(),
                  r.remaining());
  return entries;
}

}  // namespace

ExportReport export_cache(const KernelCache& cache, const fs::path& file) {
  ExportReport report;
  uint64_t count = 0;
  std::string entries;
  std::error_code ec;
  fs::create_directories(cache.root() / kLocksDir, ec);
  for (const std::string& name : cache.entry_names()) {
    std::vector<std::pair<std::string, std::string>> files;
    EntryCheck c;
    {
      const EntryLock reading = EntryLock::shared(cache.lock_file(name));
      const fs::path dir = cache.entry_dir(name);
      c = check_entry(dir);
      if (c.ok()) {
        try {
          for (const char* f : kArchivedFiles) files.emplace_back(f, read_file(dir / f));
        } catch (const Error& e) {
          c.problem = e.what();
        }
      }
    }
    if (c.missing) continue;
    if (!c.problem.empty()) {
      report.skipped.push_back(name + ": " + c.problem);
      continue;
    }
    put_text(entries, name);
    put<uint32_t>(entries, static_cast<uint32_t>(files.size()));
    for (const auto& [fname, data] : files) {
      put_text(entries, fname);
      put<uint64_t>(entries, data.size());
      put<uint64_t>(entries, xxh3(data));
      entries.append(data);
    }
    report.exported.push_back(name);
    ++count;
  }
  std::string body(kMagic);
  put<uint32_t>(body, kArchiveFormatVersion);
  put<uint32_t>(body, static_cast<uint32_t>(kCacheFormatVersion));
  put<uint64_t>(body, count);
  body.append(entries);
  put<uint64_t>(body, xxh3(body));
  body.append(kEndMarker);

  const fs::path tmp = file.parent_path() / scratch_name("." + file.filename().string());
  try {
    write_file_synced(tmp, body);
  } catch (...) {
    fs::remove(tmp, ec);  // a full disk leaves no partial archive behind
    throw;
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    fs::remove(tmp, ec);
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot write {}: {}", file.string(), std::strerror(err));
  }
  report.bytes = body.size();
  return report;
}

ImportReport import_cache(const KernelCache& cache, const fs::path& file) {
  std::string bytes;
  try {
    bytes = read_file(file);
  } catch (const Error& e) {
    SPARK_FAIL(SPARK_ERROR_INVALID_ARGUMENT, "argument 'FILE': {}", e.what());
  }
  const std::vector<ArchivedEntry> entries = read_archive(bytes, file);
  SPARK_CHECK(cache.ensure_writable(), SPARK_ERROR_CACHE, "cannot write the cache directory {}",
              cache.root().string());
  ImportReport report;
  for (const ArchivedEntry& e : entries) {
    const EntryLock writing = cache.lock(e.name);
    const fs::path dir = cache.entry_dir(e.name);
    std::error_code ec;
    bool replacing = false;
    if (fs::exists(dir, ec)) {
      if (check_entry(dir).ok()) {
        report.kept.push_back(e.name);  // never overwrite a sound entry
        continue;
      }
      cache.move_aside(e.name);
      replacing = true;
    }
    std::vector<EntryFile> files;
    for (const char* f : kArchivedFiles) {
      const auto it = e.files.find(f);
      if (it != e.files.end() && std::string_view(f) != kManifestFile) files.push_back({f, it->second});
    }
    files.push_back({kManifestFile, e.files.at(kManifestFile)});  // last, as in every publish
    if (!cache.publish_files(e.name, files)) report.kept.push_back(e.name);
    else (replacing ? report.replaced : report.imported).push_back(e.name);
  }
  return report;
}

}  // namespace spark
