// The environment variables spark reads (core/env.h), without a GPU: SPARK_JIT's spellings,
// SPARK_CACHE_MAX_BYTES (and the sizes it takes), and where the cache directory is.
// Warnings are once per process, so each test case below owns the first bad value of its
// variable; doctest runs them in file order.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/log.h"
#include "tests/support/captured_log.h"
#include "tests/support/scoped_env.h"

namespace fs = std::filesystem;
using namespace spark;
using spark_test::CapturedLog;
using spark_test::ScopedEnv;

namespace {

// The working directory when the process started, which is when libspark was loaded.
const fs::path kStartDir = fs::current_path();

// Runs a scope in another working directory.
class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

}  // namespace

TEST_CASE("SPARK_JIT takes the usual spellings, in any case") {
  CapturedLog log;
  {
    ScopedEnv unset("SPARK_JIT", std::nullopt);
    CHECK(jit_enabled());
  }
  for (const char* off : {"0", "false", "FALSE", "False", "off", "OFF", "Off", "no", "NO", "No"}) {
    CAPTURE(std::string(off));
    ScopedEnv v("SPARK_JIT", off);
    CHECK_FALSE(jit_enabled());
  }
  for (const char* on : {"1", "true", "TRUE", "True", "on", "ON", "yes", "YES", "Yes"}) {
    CAPTURE(std::string(on));
    ScopedEnv v("SPARK_JIT", on);
    CHECK(jit_enabled());
  }
  CHECK(log.count("SPARK_JIT") == 0);
}

TEST_CASE("an unknown SPARK_JIT value warns once, naming it, and leaves JIT on") {
  CapturedLog log;
  {
    ScopedEnv v("SPARK_JIT", "maybe");
    CHECK(jit_enabled());
    CHECK(jit_enabled());
  }
  {
    ScopedEnv v("SPARK_JIT", "disable");
    CHECK(jit_enabled());
  }
  INFO("log: " << log.text());
  CHECK(log.count("SPARK_JIT") == 1);
  CHECK(log.count("'maybe'") == 1);
}

TEST_CASE("SPARK_CACHE_MAX_BYTES=0 is no cap (with a warning), never 'evict everything'") {
  CapturedLog log;
  {
    ScopedEnv v("SPARK_CACHE_MAX_BYTES", "0");
    CHECK_FALSE(cache_max_bytes().has_value());
    CHECK_FALSE(cache_max_bytes().has_value());
  }
  {
    ScopedEnv v("SPARK_CACHE_MAX_BYTES", "0G");
    CHECK_FALSE(cache_max_bytes().has_value());
  }
  {
    ScopedEnv v("SPARK_CACHE_MAX_BYTES", "512M");
    CHECK(cache_max_bytes() == (uint64_t{512} << 20));
  }
  {
    ScopedEnv v("SPARK_CACHE_MAX_BYTES", std::nullopt);
    CHECK_FALSE(cache_max_bytes().has_value());
  }
  INFO("log: " << log.text());
  CHECK(log.count("SPARK_CACHE_MAX_BYTES") == 1);  // once, for the first value
  CHECK(log.count("'0'") == 1);
  // A size of 0 is still a size: `spark-cache prune --max-bytes 0` empties a cache.
  CHECK(parse_byte_size("0") == uint64_t{0});
}

TEST_CASE("parse_byte_size: decimal digits and a unit, never an overflow") {
  const struct {
    const char* text;
    uint64_t bytes;
  } good[] = {
      {"0", 0},
      {"1", 1},
      {"1048576", 1048576},
      {"1B", 1},
      {"512K", uint64_t{512} << 10},
      {"512k", uint64_t{512} << 10},
      {"512KB", uint64_t{512} << 10},
      {"512KiB", uint64_t{512} << 10},
      {"512kib", uint64_t{512} << 10},
      {"64M", uint64_t{64} << 20},
      {"2G", uint64_t{2} << 30},
      {"2GiB", uint64_t{2} << 30},
      {"1T", uint64_t{1} << 40},
      {"1tb", uint64_t{1} << 40},
      {"18446744073709551615", UINT64_MAX},
      {"16777215T", uint64_t{16777215} << 40},
      {"17179869183G", uint64_t{17179869183} << 30},
      {"000000000000000000000000001", 1},  // leading zeros are still the number 1
  };
  for (const auto& g : good) {
    CAPTURE(std::string(g.text));
    CHECK(parse_byte_size(g.text) == g.bytes);
  }
  const std::vector<std::string> bad = {
      "",    "K",    "B",      "iB",   "1iB",  "1ib", "-1",   "+1",  " 1",  "1 ",   "1\n",
      "1 K", "1.5G", "0x10",   "1e9",  "1KK",  "1KBB", "1Ki", "1P",  "1E",  "1KIB2",
      "18446744073709551616",  "99999999999999999999999999",     "16777216T",  "17179869184G",
      "18014398509481984K",    std::string("1\0", 2),            std::string("1K\0", 3),
      "\xef\xbc\x91",  // a fullwidth digit one
      "1\xc4\xb1" "B",  // a dotless i, which some locales upper-case to I
  };
  for (const std::string& b : bad) {
    CAPTURE(b);
    CHECK_FALSE(parse_byte_size(b).has_value());
  }
}

TEST_CASE("a relative cache directory is anchored where spark was loaded, so a chdir does not move it") {
  const fs::path elsewhere = fs::temp_directory_path();
  REQUIRE(elsewhere.is_absolute());
  ScopedEnv no_dir("SPARK_CACHE_DIR", std::nullopt);
  ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
  {
    ScopedEnv v("SPARK_CACHE_DIR", "rel/cache");
    const fs::path before = default_cache_dir();
    ScopedCwd cwd(elsewhere);
    CHECK(default_cache_dir() == kStartDir / "rel/cache");
    CHECK(default_cache_dir() == before);
  }
  {
    ScopedEnv v("XDG_CACHE_HOME", "xdg");
    ScopedCwd cwd(elsewhere);
    CHECK(default_cache_dir() == kStartDir / "xdg" / "spark");
  }
  {
    ScopedEnv v("HOME", "somebody");
    ScopedCwd cwd(elsewhere);
    CHECK(default_cache_dir() == kStartDir / "somebody" / ".cache" / "spark");
  }
  {
    ScopedEnv v("SPARK_CACHE_DIR", "/abs/spark-cache");
    CHECK(default_cache_dir() == fs::path("/abs/spark-cache"));
  }
  {
    ScopedEnv v("XDG_CACHE_HOME", "/abs/xdg");
    CHECK(default_cache_dir() == fs::path("/abs/xdg/spark"));
  }
  {
    ScopedEnv v("HOME", std::nullopt);
    CHECK(default_cache_dir().is_absolute());  // the passwd entry, else /tmp
  }
  CHECK(default_cache_dir().is_absolute());
}
