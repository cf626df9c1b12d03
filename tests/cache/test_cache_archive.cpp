// export / import (one file a fleet imports) and the inspection behind spark-cache.
#include <doctest/doctest.h>

#include "cache/archive.h"
#include "cache/evict.h"
#include "cache/inspect.h"
#include "jit/kernel_store.h"
#include "core/error.h"
#include "core/files.h"
#include <unistd.h>
#include "tests/cache/cache_test_util.h"
#include "tests/cache/tar_writer.h"

using namespace spark;
using namespace spark_test;

namespace {

// The message of the INVALID_ARGUMENT that fn throws; "" if it does not.
template <class Fn>
std::string refusal(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.status() == SPARK_ERROR_INVALID_ARGUMENT ? e.what() : std::string("wrong status: ") + e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("export, then import on another host: every entry verified, published, and hit") {
  TempDir build_box, server, files;
  const std::vector<KernelKey> keys = {small_key(8, OutDtype::kBf16), small_key(8, OutDtype::kE4m3)};
  {
    KernelStore store(build_box.path);
    for (const KernelKey& k : keys) store.get(render(k));
  }
  const fs::path archive = files.path / "cache.tar.zst";
  const ExportReport ex = export_cache(KernelCache(build_box.path), archive);
  CHECK(ex.exported.size() == 2);
  CHECK(ex.skipped.empty());
  CHECK(fs::file_size(archive) == ex.bytes);

  const KernelCache target(server.path / "spark");
  const ImportReport im = import_cache(target, archive);
  CHECK(im.imported.size() == 2);
  for (const auto& v : verify_entries(target, false)) CHECK(v.problem.empty());
  KernelStore store(target.root());
  for (const KernelKey& k : keys) CHECK(store.get(render(k)).source == BuildSource::kCacheHit);
  CHECK(store.metrics().compiles == 0);

  // Importing again never overwrites a sound entry; a corrupt one is replaced.
  const fs::path entry = target.entry_dir(ex.exported[0]);
  const auto stamp = fs::last_write_time(entry / kCubinFile);
  write_file_synced(target.entry_dir(ex.exported[1]) / kCubinFile, "garbage");
  const ImportReport again = import_cache(target, archive);
  CHECK(again.kept == std::vector<std::string>{ex.exported[0]});
  CHECK(again.replaced == std::vector<std::string>{ex.exported[1]});
  CHECK(fs::last_write_time(entry / kCubinFile) == stamp);
  for (const auto& v : verify_entries(target, false)) CHECK(v.problem.empty());
}

TEST_CASE("import refuses a truncated, corrupt or other-version archive and imports nothing") {
  TempDir source, target, files;
  KernelStore(source.path).get(render(small_key()));
  const fs::path good = files.path / "good.tar.zst";
  export_cache(KernelCache(source.path), good);
  const std::string bytes = read_file(good);
  const KernelCache cache(target.path);

  auto refuse = [&](const std::string& label, const std::string& archive_bytes, const std::string& expected) {
    CAPTURE(label);
    const fs::path f = files.path / (label + ".tar.zst");
    write_file_synced(f, archive_bytes);
    const std::string why = refusal([&] { import_cache(cache, f); });
    CHECK(why.find("argument 'FILE'") != std::string::npos);
    CHECK_MESSAGE(why.find(expected) != std::string::npos, why);
    CHECK(cache.entry_names().empty());
  };
  refuse("truncated", bytes.substr(0, bytes.size() / 2), "truncated");
  refuse("cut-in-the-end-marker", bytes.substr(0, bytes.size() - 3), "truncated");
  // A flipped bit in the compressed stream surfaces as a zstd or tar error, a member that
  // fails its checks or a checksum mismatch, depending on where it lands: each is a refusal.
  // Only a bit of tar metadata nothing reads (a header's mtime, say) may pass, and then what
  // is imported is exactly what was exported.
  for (size_t i = 1; i < 32; ++i) {
    CAPTURE(i);
    std::string flipped = bytes;
    flipped[bytes.size() * i / 32] ^= 0x10;
    const fs::path f = files.path / "flipped.tar.zst";
    write_file_synced(f, flipped);
    const std::string why = refusal([&] { import_cache(cache, f); });
    if (why.empty()) {
      for (const auto& v : verify_entries(cache, false)) CHECK(v.problem.empty());
      clear_cache(cache);
      continue;
    }
    CHECK_MESSAGE(why.find("argument 'FILE'") != std::string::npos, why);
    CHECK(cache.entry_names().empty());
  }
  // Another version: the header member says so, and nothing after it is read.
  const auto with_header = [&](const std::string& header) {
    return tar_bytes({{kArchiveHeaderMember, header}, {kArchiveSumsMember, ""}});
  };
  refuse("archive-version", with_header(archive_header(9)), "archive format 9");
  refuse("cache-version", with_header(archive_header(kArchiveFormatVersion, 1)), "cache format 1");
  refuse("not-an-archive", "hello", "not a spark cache archive");
  refuse("another-tar", tar_bytes({{"README", "hello"}}), "not a spark cache archive");
  refuse("header-not-json", with_header("{"), "not a spark cache archive");
  CHECK(refusal([&] { import_cache(cache, files.path / "absent.spk"); }).find("FILE") != std::string::npos);
}

TEST_CASE("export filters by arch and name prefix, never replaces a file unless asked, and streams to a pipe") {
  TempDir dir, files, target;
  KernelStore store(dir.path);
  KernelKey sm100 = small_key(8);
  sm100.arch = "sm_100a";
  const BuiltKernel h8 = store.get(render(small_key(8))), h16 = store.get(render(small_key(16))), other = store.get(render(sm100));
  const KernelCache& cache = store.cache();
  const fs::path out = files.path / "out.tar.zst";
  CHECK(export_cache(cache, out, ExportFilter{{"sm_90a"}, ""}).exported.size() == 2);
  // An existing file stays as it is without overwrite.
  const std::string before = read_file(out);
  CHECK(refusal([&] { export_cache(cache, out, ExportFilter{{}, "mla_qproj.h16"}); }).find("already exists") !=
        std::string::npos);
  CHECK(read_file(out) == before);
  const ExportReport h16_only = export_cache(cache, out, ExportFilter{{"sm_90a"}, "mla_qproj.h16."}, true);
  CHECK(h16_only.exported == std::vector<std::string>{h16.dir.filename().string()});
  CHECK(export_cache(cache, files.path / "100.tar.zst", ExportFilter{{"sm_100a"}, ""}).exported ==
        std::vector<std::string>{other.dir.filename().string()});
  CHECK(export_cache(cache, files.path / "none.tar.zst", ExportFilter{{"sm_120a"}, ""}).exported.empty());
  for (const fs::directory_entry& e : fs::directory_iterator(files.path))  // no temporary left behind
    CHECK(e.path().filename().string().front() != '.');

  // Through a pipe both ways: export to a descriptor, import from one.
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const std::string all = [&] {
    TempDir t;
    const fs::path f = t.path / "all.tar.zst";
    export_cache(cache, f);
    return read_file(f);
  }();
  REQUIRE(all.size() < 65536);  // fits the pipe's buffer: written before it is read
  REQUIRE(::write(p[1], all.data(), all.size()) == static_cast<ssize_t>(all.size()));
  ::close(p[1]);
  const ImportReport im = import_cache_from_fd(KernelCache(target.path), p[0], "standard input");
  ::close(p[0]);
  CHECK(im.imported.size() == 3);
}

TEST_CASE("export skips an entry that fails verification") {
  TempDir dir, files;
  KernelStore store(dir.path);
  const BuiltKernel a = store.get(render(small_key(8))), b = store.get(render(small_key(16)));
  write_file_synced(b.dir / kSourceFile, "// edited by hand\n");
  const ExportReport r = export_cache(store.cache(), files.path / "x.tar.zst");
  CHECK(r.exported == std::vector<std::string>{a.dir.filename().string()});
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].find("source does not match") != std::string::npos);
}

TEST_CASE("show finds an entry by directory name, key name or unique prefix; verify --fix removes bad ones") {
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel bf16 = store.get(render(small_key(8, OutDtype::kBf16))), e4m3 = store.get(render(small_key(8, OutDtype::kE4m3)));
  const KernelCache& cache = store.cache();
  const std::string name = bf16.dir.filename().string();
  CHECK(find_entry(cache, name) == name);
  CHECK(find_entry(cache, small_key(8, OutDtype::kBf16).name()) == name);
  CHECK(find_entry(cache, name.substr(0, name.size() - 10)) == name);
  CHECK(refusal([&] { find_entry(cache, "mla_qproj.h8"); }).find("matches 2 entries") != std::string::npos);
  CHECK(refusal([&] { find_entry(cache, "nothing"); }).find("no entry") != std::string::npos);

  const std::vector<EntryInfo> listed = list_entries(cache);
  REQUIRE(listed.size() == 2);
  CHECK(listed[0].manifest->resources.registers > 0);
  CHECK(entry_json(listed[0])["manifest"]["resources"]["registers"].get<int>() > 0);

  write_file_synced(e4m3.dir / kCubinFile, "truncated");
  auto verdicts = verify_entries(cache, false);
  REQUIRE(verdicts.size() == 2);
  CHECK(verdicts[1].problem.find("cubin is 9 bytes") != std::string::npos);
  CHECK(fs::exists(e4m3.dir));
  verdicts = verify_entries(cache, true);
  CHECK(verdicts[1].removed);
  CHECK(!fs::exists(e4m3.dir));
  CHECK(verify_entries(cache, false).size() == 1);
}
