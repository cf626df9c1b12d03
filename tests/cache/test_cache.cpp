#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "jit/kernel_store.h"
#include "core/error.h"
#include "core/files.h"
#include "tests/cache/cache_test_util.h"

using namespace spark;
namespace fs = std::filesystem;

using spark_test::in_child;
using spark_test::TempDir;

namespace {

KernelKey key(OutDtype out = OutDtype::kBf16, int heads = 8) { return spark_test::small_key(heads, out); }

}  // namespace

TEST_CASE("publish, then lookup and reload from a fresh process") {
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel first = store.get(render(key()));
  CHECK(first.source == BuildSource::kCompiled);
  CHECK(store.metrics().compiles == 1);
  REQUIRE(fs::is_directory(first.dir));
  CHECK(first.dir.parent_path() == dir.path);
  CHECK(first.dir.filename().string().rfind(key().name() + "-", 0) == 0);
  for (const char* f : {"kernel.cubin", "kernel.cu", "nvrtc.log", "manifest.json"}) CHECK(fs::exists(first.dir / f));
  CHECK(read_file(first.dir / "kernel.cu") == first.spec.source);
  const Manifest m = Manifest::from_json(read_file(first.dir / "manifest.json"));
  CHECK(m.key == key().name());
  CHECK(m.cubin_size == first.cubin.size());
  CHECK(m.resources.registers > 0);
  CHECK(m.format_version == kCacheFormatVersion);

  // Same process: a hit.
  CHECK(store.get(render(key())).source == BuildSource::kCacheHit);
  // A fresh process sees the same bytes without compiling.
  const std::string cubin = first.cubin;
  CHECK(in_child([&] {
          KernelStore fresh(dir.path);
          const BuiltKernel k = fresh.get(render(key()));
          return (k.source == BuildSource::kCacheHit && k.cubin == cubin && fresh.metrics().compiles == 0) ? 0 : 1;
        }) == 0);
  // Nothing temporary is left behind.
  CHECK(fs::is_empty(dir.path / ".tmp"));
}

TEST_CASE("a manifest's integer fields must be integers in range (8e46 once reached a float-to-int conversion)") {
  Manifest good;
  good.format_version = kCacheFormatVersion;
  good.key = key().name();
  good.cubin_size = 1234;
  good.resources.registers = 96;
  const Manifest back = Manifest::from_json(good.to_json());
  CHECK(back.cubin_size == 1234);
  CHECK(back.resources.registers == 96);
  const auto with = [&](const std::string& field, const std::string& value) {
    std::string text = good.to_json();
    const std::string tag = "\"" + field + "\": ";
    const size_t at = text.find(tag);
    REQUIRE(at != std::string::npos);
    const size_t end = text.find_first_of(",\n", at + tag.size());
    return text.replace(at + tag.size(), end - at - tag.size(), value);
  };
  // Resources may be -1 (not known), nothing lower.
  for (const std::string field : {"cubin_size", "threads", "smem_bytes", "created_unix_ms", "registers", "spill_bytes"}) {
    const bool resource = field == "registers" || field == "spill_bytes";
    for (const std::string value : {"8e46", resource ? "-2" : "-1", "1.5", "\"7\"", "null", "1e300"}) {
      CAPTURE(field);
      CAPTURE(value);
      CHECK_THROWS_AS(Manifest::from_json(with(field, value)), Error);
    }
  }
  CHECK_THROWS_AS(Manifest::from_json(with("threads", "4294967296")), Error);
  CHECK_THROWS_AS(Manifest::from_json(with("compile_ms", "-3")), Error);
  CHECK_THROWS_AS(Manifest::from_json(with("compile_ms", "1e400")), Error);
}

TEST_CASE("a copied cache still hits: the key holds no absolute path") {
  TempDir a, b;
  KernelStore(a.path).get(render(key()));
  fs::copy(a.path, b.path, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  KernelStore copy(b.path);
  CHECK(copy.get(render(key())).source == BuildSource::kCacheHit);
  CHECK(copy.metrics().compiles == 0);
}

TEST_CASE("a corrupt cubin is detected, moved aside and rebuilt") {
  TempDir dir;
  KernelStore store(dir.path);
  const BuiltKernel k = store.get(render(key(OutDtype::kE4m3)));
  {
    std::string bytes = read_file(k.dir / "kernel.cubin");
    bytes[bytes.size() / 2] ^= 0x40;  // one flipped bit, same size
    write_file_synced(k.dir / "kernel.cubin", bytes);
  }
  KernelStore again(dir.path);
  const BuiltKernel rebuilt = again.get(render(key(OutDtype::kE4m3)));
  CHECK(rebuilt.source == BuildSource::kCompiled);
  CHECK(rebuilt.cubin == k.cubin);
  CHECK(fs::is_directory(dir.path / ".corrupt"));
  CHECK(!fs::is_empty(dir.path / ".corrupt"));

  // A truncated manifest, likewise.
  write_file_synced(rebuilt.dir / "manifest.json", "{\"format_version\": 1, \"ke");
  CHECK(KernelStore(dir.path).get(render(key(OutDtype::kE4m3))).source == BuildSource::kCompiled);
}

TEST_CASE("processes prewarming one empty cache at once compile each key once") {
  TempDir dir;
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int rc = 100;
      try {
        KernelStore store(dir.path);
        const BuiltKernel k = store.get(render(key(OutDtype::kBf16, 16)));
        rc = k.cubin.empty() ? 99 : static_cast<int>(store.metrics().compiles.load());
      } catch (...) {
        rc = 101;
      }
      std::_Exit(rc);
    }
    pids.push_back(pid);
  }
  int compiles = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) <= 1);
    compiles += WEXITSTATUS(status);
  }
  CHECK(compiles == 1);
}

TEST_CASE("SPARK_JIT=0 turns a miss into an error and compiles nothing") {
  TempDir dir;
  ::setenv("SPARK_JIT", "0", 1);
  KernelStore store(dir.path);
  try {
    store.get(render(key()));
    FAIL("compiled with SPARK_JIT=0");
  } catch (const Error& e) {
    CHECK(e.status() == SPARK_ERROR_JIT_DISABLED);
    CHECK(std::string(e.what()).find("SPARK_JIT=0") != std::string::npos);
  }
  CHECK(store.metrics().compiles == 0);
  ::unsetenv("SPARK_JIT");
  store.get(render(key()));
  ::setenv("SPARK_JIT", "0", 1);
  CHECK(KernelStore(dir.path).get(render(key())).source == BuildSource::kCacheHit);  // hits still work
  ::unsetenv("SPARK_JIT");
}

TEST_CASE("anything that changes the compile changes the content hash") {
  const RenderedSource src = render(key());
  const auto opts = compile_options("sm_90a");
  const CacheId base = cache_id(src, opts, "13.0");
  CHECK(base.hash.size() == 32);
  CHECK(cache_id(src, opts, "13.1").hash != base.hash);
  auto more = opts;
  more.push_back("-DX");
  CHECK(cache_id(src, more, "13.0").hash != base.hash);
  RenderedSource edited = src;
  edited.source += " ";
  CHECK(cache_id(edited, opts, "13.0").hash != base.hash);
  CHECK(cache_id(render(key(OutDtype::kE4m3)), opts, "13.0").hash != base.hash);
  CHECK(cache_id(src, opts, "13.0").hash == base.hash);
}
