// Archives are untrusted input: every refusal import owes, archives built field by field the
// way an attacker (or a broken tool) would, and an import that runs out of disk halfway.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cache/archive.h"
#include "cache/inspect.h"
#include "jit/kernel_store.h"
#include "cache/stats.h"
#include "core/error.h"
#include "cache/evict.h"
#include "core/files.h"
#include "tests/cache/cache_test_util.h"
#include "tests/cache/tar_writer.h"

using namespace spark;
using namespace spark_test;

namespace {

struct Archived {
  std::string name;
  std::vector<std::pair<std::string, std::string>> files;  // in archive order
};

// The archive format of cache/archive.h, written independently of the exporter: the
// header member, each entry's files as "<name>/<file>", the checksum list.
std::string make_archive(const std::vector<Archived>& entries, const std::vector<TarMember>& extra = {}) {
  std::vector<TarMember> members{{kArchiveHeaderMember, archive_header()}};
  for (const Archived& e : entries)
    for (const auto& [name, data] : e.files) members.push_back({e.name + "/" + name, data});
  for (const TarMember& m : extra) members.push_back(m);
  std::vector<TarMember> listed = members;
  members.push_back({kArchiveSumsMember, sums_of(listed)});
  return tar_bytes(members);
}

// A real entry's files, as export writes them.
Archived archived(const BuiltKernel& k) {
  Archived a;
  a.name = k.dir.filename().string();
  for (const char* f : {kManifestFile, kCubinFile, kSourceFile, kLogFile}) a.files.emplace_back(f, read_file(k.dir / f));
  return a;
}

std::string& file_of(Archived& a, const char* name) {
  for (auto& [n, data] : a.files)
    if (n == name) return data;
  throw std::runtime_error(name);
}

// Replaces the cubin and makes every checksum agree with the new bytes.
void swap_cubin(Archived& a, const std::string& cubin) {
  file_of(a, kCubinFile) = cubin;
  auto m = nlohmann::ordered_json::parse(file_of(a, kManifestFile));
  m["cubin_size"] = cubin.size();
  m["cubin_xxh3"] = checksum_hex(cubin);
  file_of(a, kManifestFile) = m.dump(2) + "\n";
}

// The message of the Error import_cache throws; "" when it imports.
std::string import_refusal(const KernelCache& cache, const fs::path& file) {
  try {
    import_cache(cache, file);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("import refuses hostile entries before publishing anything") {
  TempDir build, target, files;
  KernelStore store(build.path);
  const BuiltKernel a = store.get(render(small_key(8))), b = store.get(render(small_key(16)));
  const BuiltKernel other_arch = [&] {
    KernelKey k = small_key(8);
    k.arch = "sm_100a";
    return store.get(render(k));
  }();
  const KernelCache cache(target.path);
  auto refuse = [&](const std::string& label, const std::vector<Archived>& entries, const std::string& expected) {
    CAPTURE(label);
    const fs::path f = files.path / (label + ".tar.zst");
    write_file_synced(f, make_archive(entries));
    const std::string why = import_refusal(cache, f);
    CHECK_MESSAGE(why.find(expected) != std::string::npos, why);
    CHECK(cache.entry_names().empty());  // the sound entry before the bad one is not published either
  };
  const Archived good = archived(a);
  REQUIRE(import_refusal(cache, [&] {
            write_file_synced(files.path / "good.tar.zst", make_archive({good, archived(b)}));
            return files.path / "good.tar.zst";
          }()) == "");
  REQUIRE(cache.entry_names().size() == 2);
  clear_cache(cache);

  Archived not_cubin = archived(b);
  swap_cubin(not_cubin, "NOT A CUBIN");
  refuse("not-a-cubin", {good, not_cubin}, "not a 64-bit ELF image");
  Archived wrong_arch = archived(b);
  swap_cubin(wrong_arch, read_file(other_arch.dir / kCubinFile));
  refuse("cubin-of-another-arch", {good, wrong_arch}, "the cubin is for sm_100, not sm_90a");

  Archived half_hash = archived(b);
  {
    auto m = nlohmann::ordered_json::parse(file_of(half_hash, kManifestFile));
    m["hash"] = m["hash"].get<std::string>().substr(0, 16) + std::string(16, '0');
    file_of(half_hash, kManifestFile) = m.dump(2) + "\n";
  }
  refuse("hash-matching-16-digits", {good, half_hash}, "is not the hash of the entry's own");

  for (const std::string& bad : {std::string("mla_qproj\x1b[2J.h8-0123456789abcdef"),
                                 std::string("mla_qproj.h8\nFAKE OUTPUT LINE-0123456789abcdef"),
                                 std::string(230, 'k') + "-0123456789abcdef", std::string("../../etc-0123456789abcdef"),
                                 std::string("/etc/cron.d/mla_qproj.h8-0123456789abcdef"), std::string("."),
                                 std::string("./") + b.dir.filename().string()}) {
    Archived forged = archived(b);
    forged.name = bad;
    refuse("forged-name", {good, forged}, "has a name no cache entry has");
  }
  refuse("duplicate", {good, archived(b), archived(b)}, "appears twice");
  Archived no_log = archived(b);
  no_log.files.pop_back();
  refuse("no-nvrtc-log", {good, no_log}, "has 3 files, not the 4");
  Archived extra = archived(b);
  extra.files.back().first = "run.sh";
  refuse("unexpected-file", {good, extra}, "has an unexpected file");
  Archived huge = archived(b);
  file_of(huge, kManifestFile) = std::string(kMaxManifestBytes + 1, ' ');
  refuse("manifest-above-cap", {good, huge}, "above the 65536-byte cap");

  // Members that are not regular files, in the place of an entry's file: never written anywhere.
  const std::string victim = archived(b).name;
  const auto refuse_member = [&](const std::string& label, const TarMember& m, const std::string& expected) {
    Archived e = archived(b);
    e.files.pop_back();
    std::vector<TarMember> members{{kArchiveHeaderMember, archive_header()}};
    for (const auto& [name, data] : good.files) members.push_back({good.name + "/" + name, data});
    for (const auto& [name, data] : e.files) members.push_back({e.name + "/" + name, data});
    TarMember in_place_of_log = m;  // where the entry's nvrtc.log belongs
    in_place_of_log.name = victim + "/" + kLogFile;
    members.push_back(in_place_of_log);
    std::vector<TarMember> listed = members;
    members.push_back({kArchiveSumsMember, sums_of(listed)});
    CAPTURE(label);
    const fs::path f = files.path / (label + ".tar.zst");
    write_file_synced(f, tar_bytes(members));
    const std::string why = import_refusal(cache, f);
    CHECK_MESSAGE(why.find(expected) != std::string::npos, why);
    CHECK(cache.entry_names().empty());
  };
  refuse_member("symlink", {"", "", AE_IFLNK, "/etc/passwd"}, "is not a regular file");
  refuse_member("hardlink", {"", "", AE_IFREG, good.name + "/" + kLogFile, true}, "is not a regular file");
  refuse_member("directory", {"", "", AE_IFDIR}, "is not a regular file");
  refuse_member("device", {"", "", AE_IFCHR}, "is not a regular file");
  refuse_member("fifo", {"", "", AE_IFIFO}, "is not a regular file");

  // Bytes that do not match the checksum list, a member after it, no list at all, another format.
  {
    std::vector<TarMember> members{{kArchiveHeaderMember, archive_header()}};
    for (const auto& [name, data] : good.files) members.push_back({good.name + "/" + name, data});
    std::vector<TarMember> listed = members;
    listed.back().data += "x";  // the log (no manifest covers it) as the list says it was
    const std::string sums = sums_of(listed);
    std::vector<TarMember> mismatched = members;
    mismatched.push_back({kArchiveSumsMember, sums});
    write_file_synced(files.path / "sums.tar.zst", tar_bytes(mismatched));
    CHECK(import_refusal(cache, files.path / "sums.tar.zst").find("does not match the members") != std::string::npos);
    std::vector<TarMember> after = members;
    after.push_back({kArchiveSumsMember, sums_of(members)});
    after.push_back({"run.sh", "#!/bin/sh\n"});
    write_file_synced(files.path / "after.tar.zst", tar_bytes(after));
    CHECK(import_refusal(cache, files.path / "after.tar.zst").find("members after") != std::string::npos);
    write_file_synced(files.path / "nosums.tar.zst", tar_bytes(members));
    CHECK(import_refusal(cache, files.path / "nosums.tar.zst").find("truncated") != std::string::npos);
    std::vector<TarMember> plain = members;
    plain.push_back({kArchiveSumsMember, sums_of(members)});
    write_file_synced(files.path / "plain.tar", tar_bytes(plain, /*zstd=*/false));
    CHECK(import_refusal(cache, files.path / "plain.tar").find("not a zstd-compressed tar") != std::string::npos);
    CHECK(cache.entry_names().empty());
  }
}

TEST_CASE("import reads only regular files and never a whole archive into memory") {
  TempDir target, files;
  const KernelCache cache(target.path);
  const fs::path fifo = files.path / "pipe.tar.zst";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  const fs::path sparse = files.path / "huge.tar.zst";
  {
    // An entry whose cubin's header says 16 GiB, and nothing after it: refused at the cap
    // from the header alone, never read (or allocated).
    const std::string name = id_of(small_key()).name;
    const std::string head =
        tar_bytes({{kArchiveHeaderMember, archive_header()}, {name + "/" + kManifestFile, "{}"}}, /*zstd=*/false);
    const std::string tar = head.substr(0, head.size() - 1024)  // without the end-of-archive blocks
                            + ustar_header(name + "/" + kCubinFile, uint64_t(16) << 30);
    write_file_synced(sparse, zstd_bytes(tar));
  }
  const int rc = with_timeout(30, [&] {
#if !defined(__SANITIZE_ADDRESS__)
    const rlimit mem{rlim_t(1) << 32, rlim_t(1) << 32};  // a runaway read fails, not the machine
    ::setrlimit(RLIMIT_AS, &mem);
#endif
    const std::string a = import_refusal(cache, fifo), b = import_refusal(cache, "/dev/zero"),
                      c = import_refusal(cache, sparse);
    if (a.find("is not a regular file") == std::string::npos) return 1;
    if (b.find("is not a regular file") == std::string::npos) return 2;
    return c.find("above the 67108864-byte cap") != std::string::npos ? 0 : 3;
  });
  CHECK(rc == 0);
}

TEST_CASE("an import that runs out of disk halfway publishes none of its entries") {
  TempDir build, target, files;
  KernelStore store(build.path);
  std::vector<Archived> entries;
  for (int h : {8, 16, 32}) entries.push_back(archived(store.get(render(small_key(h)))));
  // Every file of the first entry fits; the disk "fills" while the second entry is staged
  // (its compile log, which no manifest covers, is made the largest file).
  uint64_t first = 0;
  for (const auto& [name, data] : entries[0].files) first = std::max<uint64_t>(first, data.size());
  file_of(entries[1], kLogFile) = std::string(first + 4096, 'x');
  const fs::path f = files.path / "three.tar.zst";
  write_file_synced(f, make_archive(entries));
  const KernelCache cache(target.path);
  REQUIRE(cache.ensure_writable());
  const int rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{static_cast<rlim_t>(first + 16), static_cast<rlim_t>(first + 16)};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 90;
    const std::string why = import_refusal(cache, f);
    return why.find("cannot write") != std::string::npos ? 0 : 1;
  });
  CHECK(rc == 0);
  CHECK(cache.entry_names().empty());
  CHECK(fs::is_empty(target.path / kTmpDir));  // the staged entries went too
  // ... and then it fits.
  CHECK(import_cache(cache, f).imported.size() == 3);
}

TEST_CASE("import honours SPARK_CACHE_MAX_BYTES and leaves an unreadable entry alone") {
  TempDir build, target, files;
  KernelStore store(build.path);
  const BuiltKernel a = store.get(render(small_key(8))), b = store.get(render(small_key(16)));
  const fs::path f = files.path / "two.tar.zst";
  write_file_synced(f, make_archive({archived(a), archived(b)}));
  const KernelCache cache(target.path);
  ::setenv("SPARK_CACHE_MAX_BYTES", "4K", 1);
  const std::string why = import_refusal(cache, f);
  ::unsetenv("SPARK_CACHE_MAX_BYTES");
  CHECK(why.find("more than SPARK_CACHE_MAX_BYTES") != std::string::npos);
  CHECK(cache.entry_names().empty());

  if (!is_root()) {
    MESSAGE("skipped the unreadable-entry part: it runs as another user, which needs root");
    return;
  }
  // A cache of user 54001 whose entry's cubin that user cannot read (EACCES): import says so
  // and leaves it where it is, as a load does; it is not damage to move aside.
  TempDir base;
  fs::permissions(base.path, fs::perms::all);
  fs::permissions(files.path, fs::perms::all);
  const fs::path root = base.path / "cache";
  const int rc = as_user(54001, 54001, {54001}, 022, [&] {
    const BuiltKernel mine = KernelStore(root).get(render(small_key(8)));
    if (::chmod((mine.dir / kCubinFile).c_str(), 0) != 0) return 1;
    const ImportReport r = import_cache(KernelCache(root), f);
    if (r.unreadable.size() != 1 || r.imported.size() != 1) return 2;
    return fs::exists(mine.dir / kCubinFile) && !fs::exists(root / kCorruptDir) ? 0 : 3;
  });
  CHECK(rc == 0);
}

TEST_CASE("an entry that is not what its manifest says is refused by loads and verify too") {
  TempDir dir, other;
  KernelStore store(dir.path);
  const KernelKey key = small_key();
  const BuiltKernel k = store.get(render(key));
  KernelKey sm100 = key;
  sm100.arch = "sm_100a";
  const BuiltKernel foreign = KernelStore(other.path).get(render(sm100));
  // A cubin of another arch, with the manifest's size and checksum made to match.
  auto m = nlohmann::ordered_json::parse(read_file(k.dir / kManifestFile));
  m["cubin_size"] = foreign.cubin.size();
  m["cubin_xxh3"] = checksum_hex(foreign.cubin);
  write_file_synced(k.dir / kManifestFile, m.dump(2) + "\n");
  write_file_synced(k.dir / kCubinFile, foreign.cubin);
  const auto verdicts = verify_entries(store.cache(), false);
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].problem == "the cubin is for sm_100, not sm_90a");
  CapturedLog log;
  KernelStore fresh(dir.path);
  CHECK(fresh.get(render(key)).source == BuildSource::kCompiled);  // moved aside, rebuilt
  CHECK(fresh.metrics().corrupt == 1);
}

TEST_CASE("stats.json values spark never writes are not believed; a failed update leaves no temporary") {
  TempDir dir;
  KernelStore store(dir.path);
  store.get(render(small_key()));
  for (const char* bad : {R"({"hits": -1})", R"({"compile_ms": -5.0})", R"({"hits": 1.5})", R"({"misses": "7"})",
                          R"({"load_ms": 1e300})", R"([1, 2])"}) {
    CAPTURE(bad);
    write_file_synced(dir.path / kStatsFile, bad);
    const PersistentStats s = read_persistent_stats(dir.path);
    CHECK(s.counters.hits == 0);
    CHECK(s.counters.misses == 0);
    CHECK(s.counters.compile_ms == 0);
    CHECK(s.counters.load_ms == 0);
  }
  fs::remove(dir.path / kStatsFile);
  // A full disk during the update a hit makes: nothing, not even an empty file, stays in .tmp.
  const int rc = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{8, 8};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 90;
    return KernelStore(dir.path).get(render(small_key())).source == BuildSource::kCacheHit ? 0 : 1;
  });
  CHECK(rc == 0);
  CHECK(fs::is_empty(dir.path / kTmpDir));
}
