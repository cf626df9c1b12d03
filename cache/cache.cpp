#include "cache/cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/scratch.h"
#include "core/error.h"
#include "core/log.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

fs::path absolute_or_same(const fs::path& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a;
}

// EPERM with `why` when an open directory may not be trusted.
int check_trust(const Dir& dir, std::string* why) {
  struct stat st {};
  if (const int err = dir.stat_self(st); err != 0) return err;
  std::string problem = trust_problem(st);
  if (problem.empty()) return 0;
  if (why) *why = fmt::format("{}: {}", dir.path().string(), problem);
  return EPERM;
}

bool may_write(const Dir& dir) { return ::faccessat(dir.fd(), ".", W_OK | X_OK, AT_EACCESS) == 0; }

}  // namespace

KernelCache::KernelCache(fs::path root) : root_(absolute_or_same(root)) {}

fs::path KernelCache::lock_file(const std::string& name) const { return root_ / kLocksDir / (name + ".lock"); }

int KernelCache::open_root(Dir& root, std::string* why) const {
  if (const int err = Dir::open(root_, root); err != 0) {
    if (why) *why = fmt::format("{}: {}", root_.string(), std::strerror(err));
    return err;
  }
  return check_trust(root, why);
}

int KernelCache::open_work_dir(const Dir& root, const char* name, bool create, Dir& out, std::string* why) const {
  if (const int err = root.open_child(name, create, out); err != 0) {
    if (why) *why = fmt::format("{}: {}", (root / name).string(), file_error_text(err));
    return err;
  }
  return check_trust(out, why);
}

CacheAccess KernelCache::prepare() const {
  CacheAccess a;
  std::error_code ec;
  fs::create_directories(root_, ec);  // the path up to the root is the user's choice
  Dir root;
  const int err = open_root(root, &a.problem);
  if (err != 0) {
    // A directory that cannot be opened has nothing to read: "not writable" says it all.
    a.trusted = err != EPERM;
    if (err != EPERM) a.problem = fmt::format("cannot open it: {}", std::strerror(err));
    else a.problem = "it is not trusted (" + a.problem + ")";
    return a;
  }
  a.trusted = true;
  if (!may_write(root)) {
    a.problem = "no write permission for this user";
    return a;
  }
  for (const char* sub : {kTmpDir, kLocksDir}) {
    Dir d;
    std::string why;
    if (open_work_dir(root, sub, true, d, &why) != 0) {
      a.problem = "its working directory is unusable (" + why + ")";
      return a;
    }
    if (!may_write(d)) {
      a.problem = fmt::format("no write permission for this user on {}", d.path().string());
      return a;
    }
  }
  a.writable = true;
  return a;
}

std::vector<std::string> KernelCache::entry_names() const {
  std::vector<std::string> names;
  Dir root;
  if (open_root(root) != 0) return names;
  for (std::string& n : root.list())
    if (is_entry_name(n) && root.is_child_dir(n)) names.push_back(std::move(n));
  return names;
}

std::optional<CachedKernel> KernelCache::read_verified(const Dir& root, const CacheId& id,
                                                       std::string* corruption) const {
  EntryCheck c = check_entry(root, id.name, id.hash);
  if (c.ok()) {
    Dir entry;
    if (root.open_child(id.name, false, entry) == 0) stamp_last_used(entry);
    return CachedKernel{entry_dir(id.name), std::move(*c.manifest), std::move(c.cubin)};
  }
  if (c.missing) return std::nullopt;  // evicted between the existence check and the read
  if (c.unreadable) {
    log().warn("cannot read cache entry {} ({}); leaving it in place and building without it",
               entry_dir(id.name).string(), c.problem);
    return std::nullopt;
  }
  log().warn("cache entry {} is corrupt ({}); moving it aside and rebuilding", entry_dir(id.name).string(),
             c.problem);
  if (corruption) *corruption = c.problem;
  move_aside(id.name);
  return std::nullopt;
}

EntryLock KernelCache::shared_lock(const Dir& root, const std::string& name) const {
  Dir locks;
  // A copied cache may lack .locks/; a read-only one cannot get it, and needs no lock.
  if (open_work_dir(root, kLocksDir, true, locks) != 0 && open_work_dir(root, kLocksDir, false, locks) != 0)
    return EntryLock();
  return EntryLock::shared(locks, name + ".lock");
}

std::optional<CachedKernel> KernelCache::lookup(const CacheId& id, std::string* corruption) const {
  Dir root;
  std::string why;
  if (const int err = open_root(root, &why); err != 0) {
    if (err != ENOENT && err != EPERM)  // out of descriptors, I/O error...: say so, then build without it
      log().warn("cannot read cache entry {} ({}); building without it", entry_dir(id.name).string(), why);
    return std::nullopt;
  }
  struct stat st {};
  if (root.stat_child(id.name, st) == ENOENT) return std::nullopt;  // plain misses take no lock
  const EntryLock reading = shared_lock(root, id.name);
  return read_verified(root, id, corruption);
}

std::optional<CachedKernel> KernelCache::lookup_holding_lock(const CacheId& id, std::string* corruption) const {
  Dir root;
  if (open_root(root) != 0) return std::nullopt;
  struct stat st {};
  if (root.stat_child(id.name, st) == ENOENT) return std::nullopt;
  return read_verified(root, id, corruption);
}

void KernelCache::move_aside(const std::string& name) const {
  Dir root, corrupt;
  if (open_root(root) != 0) return;
  if (open_work_dir(root, kCorruptDir, true, corrupt) == 0 && root.rename(name, corrupt, scratch_name(name)) == 0)
    return;
  root.remove_tree(name);  // no usable .corrupt/: the damage is not kept, but it goes
}

bool KernelCache::publish_files(const std::string& name, const std::vector<EntryFile>& files) const {
  Dir root, tmp, build;
  std::string why;
  SPARK_CHECK(open_root(root, &why) == 0, SPARK_ERROR_CACHE, "cannot publish {}: {}", name, why);
  SPARK_CHECK(open_work_dir(root, kTmpDir, true, tmp, &why) == 0, SPARK_ERROR_CACHE, "cannot publish {}: {}", name,
              why);
  const std::string scratch = scratch_name(name);
  const int made = tmp.make_dir(scratch);
  SPARK_CHECK(made == 0 && tmp.open_child(scratch, false, build) == 0, SPARK_ERROR_CACHE, "cannot create {}: {}",
              (tmp / scratch).string(), std::strerror(made ? made : errno));
  try {
    for (const EntryFile& f : files) build.write_new_file(f.name, f.bytes, /*sync=*/true);
    stamp_last_used(build);  // published entries start as just used
    const int err = build.sync();
    SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot fsync {}: {}", build.path().string(), std::strerror(err));
  } catch (...) {
    tmp.remove_tree(scratch);
    throw;
  }
  // rename(2) replaces only an empty directory; a published entry is never empty, and
  // anything else in the way (a file, a link) makes it fail too.
  if (const int err = tmp.rename(scratch, root, name); err != 0) {
    tmp.remove_tree(scratch);
    if (err == EEXIST || err == ENOTEMPTY || err == ENOTDIR || err == EISDIR) return false;
    SPARK_FAIL(SPARK_ERROR_CACHE, "cannot publish {}: {}", entry_dir(name).string(), std::strerror(err));
  }
  const int err = root.sync();
  SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "published {} but cannot fsync {}: {}", name, root_.string(),
              std::strerror(err));
  return true;
}

CachedKernel KernelCache::publish(const CacheId& id, const std::string& source, const std::string& cubin,
                                  const std::string& log, const Manifest& manifest) const {
  // The manifest goes last: an entry is only trusted once it verifies against it.
  const std::vector<EntryFile> files = {{kCubinFile, cubin},
                                        {kSourceFile, source},
                                        {kLogFile, log},
                                        {kManifestFile, manifest.to_json()}};
  // A second attempt follows a corrupt entry in the way, which the lookup moved aside.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (publish_files(id.name, files)) return CachedKernel{entry_dir(id.name), manifest, cubin};
    if (auto existing = lookup_holding_lock(id)) return *existing;  // published by someone without the lock
  }
  SPARK_FAIL(SPARK_ERROR_CACHE, "cannot publish {}: an unusable entry of that name is in the way",
             entry_dir(id.name).string());
}

EntryLock KernelCache::lock(const std::string& name) const { return cache_lock_file(name + ".lock"); }

EntryLock KernelCache::cache_lock(const char* what) const { return cache_lock_file(std::string(what) + ".lock"); }

std::optional<EntryLock> KernelCache::try_lock(const std::string& name) const {
  Dir root, locks;
  if (open_root(root) != 0 || open_work_dir(root, kLocksDir, true, locks) != 0) return std::nullopt;
  return EntryLock::try_exclusive(locks, name + ".lock");
}

EntryLock KernelCache::cache_lock_file(const std::string& file) const {
  Dir root, locks;
  std::string why;
  SPARK_CHECK(open_root(root, &why) == 0 && open_work_dir(root, kLocksDir, true, locks, &why) == 0,
              SPARK_ERROR_CACHE, "cannot lock {}: {}", file, why);
  return EntryLock::exclusive(locks, file);
}

}  // namespace spark
