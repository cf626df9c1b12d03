// Cache policies with real files and processes: read-only directories, a full disk,
// LRU eviction under SPARK_CACHE_MAX_BYTES that spares entries in use, leftovers of
// dead processes, and the counters.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <thread>

#include "cache/evict.h"
#include "jit/kernel_store.h"
#include "cache/scratch.h"
#include "cache/stats.h"
#include "core/env.h"
#include "core/files.h"
#include "tests/cache/cache_test_util.h"

using namespace spark;
using namespace spark_test;

namespace {

// Every file under dir with its size and modification time: "nothing was written".
std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<uintmax_t, fs::file_time_type>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out[e.path().string()] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  return out;
}

void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

TEST_CASE("a cache directory that cannot be created: compile in memory, warn once") {
  TempDir dir;
  write_file_synced(dir.path / "a-file", "x");
  CapturedLog log;
  KernelStore store(dir.path / "a-file" / "cache");  // below a regular file: mkdir fails even for root
  CHECK(store.get(render(small_key(8, OutDtype::kBf16))).source == BuildSource::kCompiledInMemory);
  CHECK(store.get(render(small_key(8, OutDtype::kE4m3))).source == BuildSource::kCompiledInMemory);
  CHECK(store.metrics().compiles == 2);
  CHECK(log.count("not writable") == 1);
}

TEST_CASE("a read-only cache directory still serves its entries and compiles the rest in memory") {
  // Root ignores permission bits, so as root the reader drops to "nobody"; otherwise it
  // makes the tree read-only.  Either way the kernel, not spark, refuses the writes: this
  // proves behaviour on a directory the process truly cannot write (not on a mocked check).
  TempDir dir;
  const KernelKey cached = small_key(8, OutDtype::kBf16), missing = small_key(8, OutDtype::kE4m3);
  KernelStore(dir.path).get(render(cached));
  const auto before = snapshot(dir.path);
  const bool as_root = ::geteuid() == 0;
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  std::vector<fs::path> dirs = {dir.path};
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.is_directory()) dirs.push_back(e.path());
  if (!as_root)
    for (const fs::path& d : dirs) fs::permissions(d, fs::perms::owner_write, fs::perm_options::remove);

  const int rc = in_child([&] {
    if (as_root && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return 90;
    CapturedLog log;
    KernelStore store(dir.path);
    const BuiltKernel hit = store.get(render(cached));
    const BuiltKernel compiled = store.get(render(missing));
    const BuiltKernel again = store.get(render(missing));
    if (hit.source != BuildSource::kCacheHit) return 1;
    if (compiled.source != BuildSource::kCompiledInMemory || again.source != BuildSource::kCompiledInMemory) return 2;
    if (log.count("not writable") != 1) return 3;
    return 0;
  });
  if (!as_root)
    for (const fs::path& d : dirs) fs::permissions(d, fs::perms::owner_write, fs::perm_options::add);
  CHECK(rc == 0);
  CHECK(snapshot(dir.path) == before);  // not a byte written: no stamp, no stats, no lock file
}

TEST_CASE("a full disk while publishing: the compiled kernel is used, nothing half-written stays") {
  TempDir dir;
  KernelCache(dir.path).ensure_writable();
  // RLIMIT_FSIZE makes the cubin's write fail (EFBIG) the way ENOSPC would, without root.
  const int rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 90;
    CapturedLog log;
    KernelStore store(dir.path);
    const BuiltKernel k = store.get(render(small_key()));
    if (k.source != BuildSource::kCompiledInMemory || k.cubin.empty()) return 1;
    return log.count("cannot cache") == 1 ? 0 : 2;
  });
  CHECK(rc == 0);
  CHECK(KernelCache(dir.path).entry_names().empty());
  CHECK(fs::is_empty(dir.path / kTmpDir));
}

TEST_CASE("SPARK_CACHE_MAX_BYTES evicts the least recently used entry by the cache's own stamp") {
  TempDir dir;
  const KernelKey a = small_key(8), b = small_key(16), c = small_key(32), d = small_key(11);  // one tile, entries of one size
  KernelStore store(dir.path);
  const BuiltKernel ka = store.get(render(a));
  pause_ms(5);
  const BuiltKernel kb = store.get(render(b));
  pause_ms(5);
  const BuiltKernel kc = store.get(render(c));
  pause_ms(5);
  CHECK(store.get(render(a)).source == BuildSource::kCacheHit);  // a load refreshes a's stamp
  CHECK(last_used_ms(ka.dir) > last_used_ms(kc.dir));
  CHECK(read_file(ka.dir / kLastUsedFile).size() == 21);

  // Room for the three entries plus a fourth minus one: exactly one must go, and it is b.
  const KernelCache& cache = store.cache();
  const uint64_t entry = disk_bytes(kb.dir);
  ::setenv("SPARK_CACHE_MAX_BYTES", std::to_string(cache_bytes(cache) + entry / 2).c_str(), 1);
  pause_ms(5);
  const BuiltKernel kd = store.get(render(d));
  ::unsetenv("SPARK_CACHE_MAX_BYTES");
  CHECK(kd.source == BuildSource::kCompiled);
  CHECK(store.metrics().evictions == 1);
  CHECK(!fs::exists(kb.dir));
  for (const fs::path& p : {ka.dir, kc.dir, kd.dir}) CHECK(check_entry(p).ok());
  CHECK(!fs::exists(cache.lock_file(id_of(b).name)));  // its lock file went with it
  CHECK(fs::is_empty(dir.path / kTrashDir));

  // Suffixes, and a value that is not a size is ignored (with a warning), not fatal.
  CHECK(parse_byte_size("64M") == (64ull << 20));
  CHECK(parse_byte_size("2GiB") == (2ull << 30));
  CHECK(parse_byte_size("1000") == 1000u);
  CHECK(!parse_byte_size("lots").has_value());
  ::setenv("SPARK_CACHE_MAX_BYTES", "lots", 1);
  CHECK(!cache_max_bytes().has_value());
  ::unsetenv("SPARK_CACHE_MAX_BYTES");
}

TEST_CASE("eviction never removes an entry another process is loading or publishing") {
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel loading = store.get(render(small_key(8))), publishing = store.get(render(small_key(16)));
  const BuiltKernel idle = store.get(render(small_key(32)));
  const KernelCache& cache = store.cache();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    // The locks a loader (shared) and a publisher (exclusive) hold.
    const Dir locks = open_dir(dir.path / kLocksDir);
    EntryLock reader = EntryLock::shared(locks, loading.dir.filename().string() + ".lock");
    EntryLock writer = EntryLock::exclusive(locks, publishing.dir.filename().string() + ".lock");
    if (!reader.held() || ::write(ready[1], "R", 1) != 1) std::_Exit(3);
    for (;;) ::pause();
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  const RemovalReport r = evict_to_fit(cache, 0);
  CHECK(r.removed == std::vector<std::string>{idle.dir.filename().string()});
  CHECK(r.busy == 2);
  CHECK(check_entry(loading.dir).ok());
  CHECK(check_entry(publishing.dir).ok());
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  CHECK(evict_to_fit(cache, 0).removed.size() == 2);  // free once the holder is gone
  CHECK(cache.entry_names().empty());
}

TEST_CASE("temporaries of dead processes are removed, a live process's are kept") {
  TempDir dir;
  KernelCache cache(dir.path);
  REQUIRE(cache.ensure_writable());
  int names[2];
  REQUIRE(::pipe(names) == 0);
  // A process that "dies mid-publish": its scratch name records its pid.
  CHECK(in_child([&] {
          const std::string n = scratch_name("mla_qproj.dead") + "\n";
          return ::write(names[1], n.data(), n.size()) == static_cast<ssize_t>(n.size()) ? 0 : 1;
        }) == 0);
  char buf[256] = {0};
  REQUIRE(::read(names[0], buf, sizeof buf - 1) > 0);
  const fs::path dead = dir.path / kTmpDir / std::string(buf, std::strlen(buf) - 1);
  const fs::path live = dir.path / kTmpDir / scratch_name("mla_qproj.live");
  for (const fs::path& p : {dead, live}) {
    fs::create_directories(p);
    write_file_synced(p / kCubinFile, "half");
  }
  const Dir tmp = open_dir(dir.path / kTmpDir);
  CHECK(scratch_is_abandoned(tmp, dead.filename().string(), kScratchMaxAge));
  CHECK(!scratch_is_abandoned(tmp, live.filename().string(), kScratchMaxAge));
  KernelStore store(dir.path);
  store.get(render(small_key()));  // a store cleans up once, on first use
  CHECK(!fs::exists(dead));
  CHECK(fs::exists(live));
}

TEST_CASE("metrics: hits, misses, compiles, compile and load time, corrupt entries; summed on disk") {
  TempDir dir;
  const KernelKey key = small_key();
  {
    KernelStore store(dir.path);
    store.get(render(key));
    store.get(render(key));
    const CacheCounters m = store.metrics().snapshot();
    CHECK(m.misses == 1);
    CHECK(m.compiles == 1);
    CHECK(m.hits == 1);
    CHECK(m.compile_ms > 0);
    CHECK(m.load_ms > 0);
    CHECK(m.corrupt_entries == 0);
    store.record_module_load(2.5);  // what the runtime adds per cuModuleLoadData
    CHECK(store.metrics().snapshot().load_ms >= 2.5);
  }
  {
    KernelStore other(dir.path);  // "another process" of the same directory
    other.get(render(key));
  }
  const PersistentStats s = read_persistent_stats(dir.path);
  CHECK(s.counters.compiles == 1);
  CHECK(s.counters.hits == 2);
  CHECK(s.counters.misses == 1);
  CHECK(s.counters.load_ms >= 2.5);
  CHECK(s.since_unix_ms > 0);
}
