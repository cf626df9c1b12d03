// A cache directory prepared by someone else: links planted where spark expects its own
// directories and files, FIFOs and devices in place of files, another user's directory,
// and a cache shared by the members of one group.  Every case here was reproduced against
// the cache before it resolved names relative to directory descriptors.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "cache/evict.h"
#include "jit/kernel_store.h"
#include "cache/scratch.h"
#include "cache/stats.h"
#include "core/error.h"
#include "core/files.h"
#include "tests/cache/cache_test_util.h"

using namespace spark;
using namespace spark_test;

namespace {

// Someone else's files: a directory with an old file (older than the hour after which
// spark considers its own temporaries abandoned) and a file with known contents.
struct Victim {
  TempDir dir;
  fs::path old_file, file;
  Victim() {
    old_file = dir.path / "thesis.tex";
    file = dir.path / "notes.txt";
    write_file_synced(old_file, "chapter 1\n");
    write_file_synced(file, "precious\n");
    fs::last_write_time(old_file, fs::file_time_type::clock::now() - std::chrono::hours(48));
  }
  bool intact() const {
    std::error_code ec;
    return fs::exists(old_file, ec) && read_file(old_file) == "chapter 1\n" && read_file(file) == "precious\n";
  }
};

void age(const fs::path& p) { fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(48)); }

}  // namespace

TEST_CASE("a .tmp or .trash linked to another directory: nothing there is removed") {
  for (const char* sub : {kTmpDir, kTrashDir}) {
    CAPTURE(sub);
    Victim victim;
    TempDir dir;
    fs::create_symlink(victim.dir.path, dir.path / sub);
    // A leftover with spark's own name pattern, old enough to be collected if followed.
    const fs::path bait = victim.dir.path / scratch_name("mla_qproj.bait");
    fs::create_directories(bait);
    age(bait);
    CapturedLog log;
    KernelStore store(dir.path);
    const BuiltKernel k = store.get(render(small_key()));
    CHECK(!k.cubin.empty());
    remove_leftovers(store.cache(), true);
    evict_to_fit(store.cache(), 0);
    clear_cache(store.cache());
    CHECK(victim.intact());
    CHECK(fs::exists(bait));
    CHECK(fs::is_symlink(dir.path / sub));  // the link itself is left alone too
  }
}

TEST_CASE("a .corrupt linked to another directory: clear, prune and eviction leave its target alone") {
  Victim victim;
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel k = store.get(render(small_key()));
  fs::create_symlink(victim.dir.path, dir.path / kCorruptDir);
  const fs::path bait = victim.dir.path / scratch_name(k.dir.filename().string());
  fs::create_directories(bait);
  write_file_synced(k.dir / kCubinFile, "damaged");  // a corrupt entry to move aside
  KernelStore other(dir.path);
  CHECK(other.get(render(small_key())).source == BuildSource::kCompiled);  // damage detected, rebuilt
  evict_to_fit(store.cache(), 0);
  clear_cache(store.cache());
  CHECK(victim.intact());
  CHECK(fs::exists(bait));
  CHECK(fs::is_empty(victim.dir.path / bait.filename()));
}

TEST_CASE("lock files and last_used stamps linked to another file are never written through") {
  Victim victim;
  TempDir dir;
  const KernelKey key = small_key();
  const CacheId id = id_of(key);
  KernelCache(dir.path).ensure_writable();
  fs::create_symlink(victim.file, dir.path / kLocksDir / (id.name + ".lock"));
  fs::create_symlink(victim.file, dir.path / kLocksDir / "stats.lock");
  fs::create_symlink(victim.file, dir.path / kLocksDir / "housekeeping.lock");
  CapturedLog log;
  {
    KernelStore store(dir.path);
    const BuiltKernel k = store.get(render(key));  // the lock cannot be had: compiled in memory, one warning
    CHECK(k.source == BuildSource::kCompiledInMemory);
    CHECK(log.count("cannot lock") == 1);
    CHECK(store.get(render(key)).source == BuildSource::kCompiledInMemory);
    CHECK(log.count("cannot lock") == 1);
  }
  CHECK(victim.intact());

  // An entry whose last_used stamp is a link to someone's file: loads never write through it.
  TempDir other;
  const BuiltKernel built = KernelStore(other.path).get(render(key));
  fs::remove(built.dir / kLastUsedFile);
  fs::create_symlink(victim.file, built.dir / kLastUsedFile);
  const fs::path hard = built.dir.parent_path() / "hard-link-target";
  write_file_synced(hard, "keep me\n");
  CHECK(KernelStore(other.path).get(render(key)).source == BuildSource::kCacheHit);
  fs::remove(built.dir / kLastUsedFile);
  fs::create_hard_link(hard, built.dir / kLastUsedFile);  // a second name of another file
  CHECK(KernelStore(other.path).get(render(key)).source == BuildSource::kCacheHit);
  CHECK(victim.intact());
  CHECK(read_file(hard) == "keep me\n");
}

TEST_CASE("a directory of one's own with a .tmp of its own: only spark's temporaries are ever removed") {
  TempDir dir;
  fs::create_directories(dir.path / kTmpDir / "my-project");
  write_file_synced(dir.path / kTmpDir / "build.log", "mine\n");
  write_file_synced(dir.path / kTmpDir / "my-project" / "a.c", "int main;\n");
  for (const char* p : {"build.log", "my-project"}) age(dir.path / kTmpDir / p);
  KernelStore store(dir.path);
  CHECK(store.get(render(small_key())).source == BuildSource::kCompiled);
  clear_cache(store.cache());
  CHECK(read_file(dir.path / kTmpDir / "build.log") == "mine\n");
  CHECK(read_file(dir.path / kTmpDir / "my-project" / "a.c") == "int main;\n");
}

TEST_CASE("entries planted under names no key has are not entries: never listed, loaded or removed") {
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel k = store.get(render(small_key()));
  const std::string real = k.dir.filename().string();
  const std::string forged[] = {
      "mla_qproj\x1b[31m.h8-0123456789abcdef",                              // an escape sequence
      "mla_qproj.h8.k128.n512.r64.m1-16.wbf16.obf16.sm_90a\n-0123456789abcdef",  // a newline
      std::string(220, 'a') + "-0123456789abcdef",                           // not a key, too long to lock
      "mla_qproj.h08.k128.n512.r64.m1-16.wbf16.obf16.sm_90a-0123456789abcdef",  // not as a key prints
  };
  for (const std::string& f : forged) fs::create_directories(dir.path / f);
  fs::create_symlink(k.dir, dir.path / (real.substr(0, real.size() - 16) + "ffffffffffffffff"));
  CHECK(store.cache().entry_names() == std::vector<std::string>{real});
  clear_cache(store.cache());
  for (const std::string& f : forged) CHECK(fs::is_directory(dir.path / f));
}

TEST_CASE("FIFOs and devices in place of files never hang or exhaust a loader") {
  TempDir dir;
  const KernelKey key = small_key();
  const BuiltKernel k = KernelStore(dir.path).get(render(key));
  auto replace_with_fifo = [](const fs::path& p) {
    fs::remove(p);
    REQUIRE(::mkfifo(p.c_str(), 0644) == 0);
  };
  SUBCASE("kernel.cubin a FIFO") { replace_with_fifo(k.dir / kCubinFile); }
  SUBCASE("manifest.json linked to /dev/zero") {
    fs::remove(k.dir / kManifestFile);
    fs::create_symlink("/dev/zero", k.dir / kManifestFile);
  }
  SUBCASE("manifest.json a huge sparse file") {
    const int fd = ::open((k.dir / kManifestFile).c_str(), O_WRONLY | O_TRUNC);
    REQUIRE(::ftruncate(fd, off_t(8) << 30) == 0);
    ::close(fd);
  }
  SUBCASE("kernel.cubin above its cap") {
    const int fd = ::open((k.dir / kCubinFile).c_str(), O_WRONLY);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(kMaxCubinBytes + 1)) == 0);
    ::close(fd);
  }
  SUBCASE("stats.json a FIFO") { replace_with_fifo(dir.path / kStatsFile); }
  // A child with a timer (and, without ASan's shadow memory, a 4 GiB address-space cap): a
  // hang or a runaway read fails it.  SPARK_JIT=0: a refused entry ends the load, no compile.
  const int rc = with_timeout(30, [&] {
#if !defined(__SANITIZE_ADDRESS__)
    const rlimit mem{rlim_t(1) << 32, rlim_t(1) << 32};
    ::setrlimit(RLIMIT_AS, &mem);
#endif
    ::setenv("SPARK_JIT", "0", 1);
    KernelStore store(dir.path);
    (void)read_persistent_stats(dir.path);
    try {
      return store.get(render(key)).cubin == k.cubin ? 0 : 1;
    } catch (const Error& e) {
      return e.status() == SPARK_ERROR_JIT_DISABLED && store.metrics().corrupt == 1 ? 0 : 2;
    }
  });
  CHECK(rc == 0);
}

TEST_CASE("a cache root or working directory other users can write is not used") {
  if (!is_root()) {
    MESSAGE("skipped: needs root to create directories owned by other users");
    return;
  }
  const uid_t user = 51001, other = 51002;
  const gid_t group = 51000, other_group = 51009;
  TempDir base;
  fs::permissions(base.path, fs::perms::all);  // others may reach what is below
  auto make = [&](const char* name, uid_t uid, gid_t gid, mode_t mode) {
    const fs::path p = base.path / name;
    fs::create_directories(p);
    REQUIRE(::chown(p.c_str(), uid, gid) == 0);
    REQUIRE(::chmod(p.c_str(), mode) == 0);
    return p;
  };
  struct Case {
    const char* name;
    uid_t owner;
    gid_t gid;
    mode_t mode;
    bool used;
  };
  const Case cases[] = {
      {"own-0755", user, group, 0755, true},
      {"own-0777", user, group, 0777, false},          // anyone could plant entries
      {"sticky-1777", user, group, 01777, false},      // /tmp-like: anyone could add entries
      {"other-0755", other, other_group, 0755, false},  // someone else's cache
      {"group-2775", other, group, 02775, true},       // a cache shared by a group of ours
      {"root-0755", 0, 0, 0755, true},                 // installed by the administrator (read only)
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const fs::path root = make(c.name, c.owner, c.gid, c.mode);
    const int rc = as_user(user, group, {group}, 002, [&] {
      CapturedLog log;
      KernelStore store(root);
      const BuiltKernel k = store.get(render(small_key()));
      const bool announced = log.count("is not used") == 1;
      if (c.used) return announced ? 1 : 0;
      if (!announced || k.source != BuildSource::kCompiledInMemory) return 2;
      return fs::is_empty(root) ? 0 : 3;  // nothing created, locked or stamped in it
    });
    CHECK(rc == 0);
  }
  // A trusted root whose .locks is another user's, writable by all: not written either.
  const fs::path root = make("own-with-open-locks", user, group, 0755);
  const fs::path locks = root / kLocksDir;
  fs::create_directories(locks);
  REQUIRE(::chown(locks.c_str(), other, other_group) == 0);
  REQUIRE(::chmod(locks.c_str(), 0777) == 0);
  CHECK(as_user(user, group, {group}, 002, [&] {
          CapturedLog log;
          const BuiltKernel k = KernelStore(root).get(render(small_key()));
          return k.source == BuildSource::kCompiledInMemory && log.count("not writable") == 1 &&
                         fs::is_empty(locks)
                     ? 0
                     : 1;
        }) == 0);
}

TEST_CASE("a cache shared by a group: a member's killed compile leaves the others working") {
  if (!is_root()) {
    MESSAGE("skipped: needs root to run as two users of one group");
    return;
  }
  const uid_t alice = 52001, bob = 52002;
  const gid_t team = 52000;
  TempDir base;
  fs::permissions(base.path, fs::perms::all);
  const fs::path root = base.path / "team-cache";
  fs::create_directories(root);
  REQUIRE(::chown(root.c_str(), 0, team) == 0);
  REQUIRE(::chmod(root.c_str(), 02775) == 0);  // setgid: everything below gets the team's group
  const KernelKey first = small_key(8), second = small_key(16);
  const CacheId first_id = id_of(first);

  // Alice publishes one kernel, then is SIGKILLed holding the lock of another (her lock file
  // stays behind, 0664 from her umask 002).
  CHECK(as_user(alice, team, {team}, 002, [&] {
          KernelStore(root).get(render(second));
          const EntryLock held = KernelCache(root).lock(first_id);
          ::raise(SIGKILL);
          return 0;
        }) == 200 + SIGKILL);
  // And one of her lock files is 0644 (written under umask 022): Bob can still lock it.
  const fs::path strict_lock = KernelCache(root).lock_file(id_of(small_key(32)).name);
  CHECK(as_user(alice, team, {team}, 022, [&] {
          const int fd = ::open(strict_lock.c_str(), O_RDONLY | O_CREAT, 0666);
          return fd >= 0 ? 0 : 1;
        }) == 0);

  CHECK(as_user(bob, team, {team}, 002, [&] {
          CapturedLog log;
          KernelStore store(root);
          if (store.get(render(first)).source != BuildSource::kCompiled) return 1;         // Alice's dead lock taken over
          if (store.get(render(second)).source != BuildSource::kCacheHit) return 2;        // her entry read
          if (store.get(render(small_key(32))).source != BuildSource::kCompiled) return 3;  // her 0644 lock file locked
          if (log.count("warn") != 0 && log.text().find("Permission denied") != std::string::npos) return 4;
          // Evicting her entry and clearing work as well (group-writable directories).
          const RemovalReport r = clear_cache(store.cache());
          return r.removed.size() == 3 && r.busy == 0 ? 0 : 5;
        }) == 0);
}

TEST_CASE("a cache directory planted by another user in /tmp cannot touch the files of whoever uses it") {
  if (!is_root()) {
    MESSAGE("skipped: needs root to run as two users");
    return;
  }
  const uid_t mallory = 53001, victim = 53002;
  TempDir base;
  fs::permissions(base.path, fs::perms::all | fs::perms::sticky_bit);  // a /tmp
  const fs::path home = base.path / "home", cache = base.path / "spark-cache";
  fs::create_directories(home / "work");
  write_file_synced(home / "notes.txt", "precious\n");
  write_file_synced(home / "work" / "draft.tex", "chapter 1\n");
  age(home / "work" / "draft.tex");
  for (const fs::path& p : {home, home / "work", home / "notes.txt", home / "work" / "draft.tex"})
    REQUIRE(::chown(p.c_str(), victim, victim) == 0);
  const std::string name = id_of(small_key(8, OutDtype::kBf16, 128)).name;
  CHECK(as_user(mallory, mallory, {mallory}, 0, [&] {
          for (const char* sub : {"", "/.locks", "/.corrupt"}) fs::create_directories(cache.string() + sub);
          fs::create_directory_symlink(home / "work", cache / kTmpDir);
          fs::create_directory_symlink(home / "work", cache / kTrashDir);
          fs::create_symlink(home / "notes.txt", cache / kLocksDir / (name + ".lock"));
          fs::create_symlink(home / "notes.txt", cache / kStatsFile);
          return ::chmod(cache.c_str(), 0777) == 0 ? 0 : 1;
        }) == 0);
  // The victim runs a copy of spark-prewarm (it links spark statically): the build tree may
  // sit in a directory only its owner can enter, as a checkout under `mktemp -d` does.
  const fs::path prewarm = base.path / "spark-prewarm";
  fs::copy_file(SPARK_PREWARM_EXE, prewarm);
  fs::permissions(prewarm, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  const int rc = as_user(victim, victim, {victim}, 022, [&] {
    const std::string dir = cache.string();
    ::execl(prewarm.c_str(), prewarm.c_str(), "--heads", "8", "--nope", "128", "--max-m", "16", "--out", "bf16",
            "--arch", "sm_90a", "--cache-dir", dir.c_str(), "-q", static_cast<char*>(nullptr));
    return 127;
  });
  CHECK(rc == 1);  // compiled, but nothing could be cached: reported as a failure
  CHECK(read_file(home / "notes.txt") == "precious\n");
  CHECK(read_file(home / "work" / "draft.tex") == "chapter 1\n");
}

TEST_CASE("spark-cache list --json on a cache root whose path is not UTF-8") {
  TempDir base;
  const fs::path root = base.path / "caf\xe9-cache";  // Latin-1, as an old system may name it
  KernelStore(root).get(render(small_key()));
  const std::string out = (base.path / "list.json").string();
  const std::string command = std::string(SPARK_CACHE_EXE) + " list --json --cache-dir '" + root.string() + "' > '" +
                              out + "' 2>&1";
  CHECK(std::system(command.c_str()) == 0);
  const std::string text = read_file(out);
  CHECK(text.find("\"name\": \"mla_qproj.h8") != std::string::npos);
  CHECK(text.find("caf\xef\xbf\xbd-cache") != std::string::npos);  // U+FFFD in place of the byte
}
