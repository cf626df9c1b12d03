// What the key covers, and what a load does with a damaged entry: detect, report
// (warning + counter), move aside, rebuild.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include <doctest/doctest.h>

#include "jit/kernel_store.h"
#include "cache/stats.h"
#include "core/files.h"
#include "tests/cache/cache_test_util.h"

using namespace spark;
using namespace spark_test;

TEST_CASE("every input of a compile is in the key; change any and the entry misses") {
  TempDir dir;
  const KernelKey key = small_key(8, OutDtype::kBf16);
  KernelStore(dir.path).get(render(key));
  const KernelCache cache(dir.path);
  const CacheKeyParts base = cache_key_parts(render(key), compile_options(key.arch), nvrtc_version());
  REQUIRE(cache.lookup(cache_id(base)).has_value());

  std::vector<std::pair<std::string, CacheKeyParts>> variants;
  auto vary = [&](const char* what, auto&& change) {
    CacheKeyParts p = base;
    change(p);
    variants.emplace_back(what, p);
  };
  vary("format version", [](CacheKeyParts& p) { ++p.format_version; });
  vary("generator version", [](CacheKeyParts& p) { ++p.generator_version; });
  vary("template bytes", [](CacheKeyParts& p) { p.templates_digest[0] ^= 1; });
  vary("NVRTC version", [](CacheKeyParts& p) { p.nvrtc_version += ".1"; });
  vary("options", [](CacheKeyParts& p) { p.options.push_back("--use_fast_math"); });
  vary("source", [](CacheKeyParts& p) { p.source += "\n"; });
  KernelKey sm80 = key;
  sm80.arch = "sm_80";
  vary("arch", [&](CacheKeyParts& p) {
    p.key = sm80.name();
    p.options = compile_options("sm_80");
  });
  for (const auto& [what, parts] : variants) {
    CAPTURE(what);
    const CacheId id = cache_id(parts);
    CHECK(id.hash != cache_id(base).hash);
    std::string corruption;
    CHECK(!cache.lookup(id, &corruption).has_value());
    CHECK(corruption.empty());  // a miss, not a corrupt entry
  }
}

TEST_CASE("entries hold no absolute path: a cache copied elsewhere still hits") {
  TempDir a, b;
  const BuiltKernel k = KernelStore(a.path).get(render(small_key()));
  for (const char* f : {kManifestFile, kSourceFile}) CHECK(read_file(k.dir / f).find(a.path.string()) == std::string::npos);
  fs::copy(a.path, b.path / "moved", fs::copy_options::recursive);
  KernelStore copy(b.path / "moved");
  CHECK(copy.get(render(small_key())).source == BuildSource::kCacheHit);
  CHECK(copy.metrics().compiles == 0);
}

TEST_CASE("a truncated or bit-flipped cubin or manifest is detected, reported, moved aside and rebuilt") {
  TempDir dir;
  const KernelKey key = small_key(8, OutDtype::kE4m3);
  const BuiltKernel good = KernelStore(dir.path).get(render(key));
  const std::string cubin = read_file(good.dir / kCubinFile), manifest = read_file(good.dir / kManifestFile);

  struct Damage {
    const char* what;
    const char* file;
    std::string bytes;
  };
  std::string flipped_cubin = cubin, flipped_manifest = manifest;
  flipped_cubin[cubin.size() / 2] ^= 0x40;
  const size_t digit = manifest.find("\"cubin_xxh3\": \"") + 15;
  flipped_manifest[digit] ^= 0x01;  // still valid JSON, wrong checksum
  const std::vector<Damage> damages = {
      {"truncated cubin", kCubinFile, cubin.substr(0, cubin.size() - 100)},
      {"bit-flipped cubin", kCubinFile, flipped_cubin},
      {"truncated manifest", kManifestFile, manifest.substr(0, manifest.size() / 2)},
      {"bit-flipped manifest", kManifestFile, flipped_manifest},
  };
  uint64_t corrupt_before = 0;
  for (const Damage& d : damages) {
    CAPTURE(d.what);
    write_file_synced(good.dir / d.file, d.bytes);
    CapturedLog log;
    KernelStore store(dir.path);
    const BuiltKernel rebuilt = store.get(render(key));
    CHECK(rebuilt.source == BuildSource::kCompiled);
    CHECK(rebuilt.cubin == good.cubin);
    CHECK(store.metrics().corrupt == 1);
    CHECK(log.count("is corrupt") == 1);
    CHECK(check_entry(good.dir).ok());
    // Moved aside, not deleted: kept for a post-mortem.
    size_t aside = 0;
    for (const auto& e : fs::directory_iterator(dir.path / kCorruptDir)) aside += e.is_directory() ? 1 : 0;
    CHECK(aside == ++corrupt_before);
  }
  CHECK(read_persistent_stats(dir.path).counters.corrupt_entries == damages.size());
}

TEST_CASE("an entry that cannot be read for want of file descriptors is a miss, not corruption") {
  TempDir dir;
  const KernelKey key = small_key(8);
  const BuiltKernel good = KernelStore(dir.path).get(render(key));
  const KernelCache cache(dir.path);
  const CacheId id = id_of(key);

  // Use up a lowered descriptor limit, look the entry up, then give everything back.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = std::min<rlim_t>(old.rlim_cur, 256);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  CapturedLog log;
  std::vector<int> fds;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds.push_back(fd);
  const int open_errno = errno;
  std::string corruption;
  const auto starved = cache.lookup(id, &corruption);
  for (int fd : fds) ::close(fd);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);

  REQUIRE(open_errno == EMFILE);
  CHECK_FALSE(starved.has_value());
  CHECK(corruption.empty());
  CHECK(log.count("is corrupt") == 0);
  CHECK(log.count("cannot read cache entry") == 1);
  CHECK(fs::is_directory(good.dir));  // left in place
  const bool nothing_aside = !fs::exists(dir.path / kCorruptDir) || fs::is_empty(dir.path / kCorruptDir);
  CHECK(nothing_aside);
  const auto hit = cache.lookup(id);
  REQUIRE(hit.has_value());
  CHECK(hit->cubin == good.cubin);
}
