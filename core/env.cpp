#include "core/env.h"

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <system_error>

#include <pwd.h>
#include <unistd.h>

#include "core/log.h"

namespace spark {

namespace {

// The working directory when the library was loaded (empty if it could not be read): a
// relative cache directory is anchored there once, so a later chdir of the host does not
// move the cache under a running process.
const std::filesystem::path& load_dir() {
  static const std::filesystem::path dir = [] {
    std::error_code ec;
    std::filesystem::path cwd = std::filesystem::current_path(ec);
    return ec ? std::filesystem::path() : cwd;
  }();
  return dir;
}

// Taken while the library loads, before the host can chdir.
[[maybe_unused]] const bool g_load_dir_taken = !load_dir().empty();

// `path` made absolute against the load directory (nullopt, with a warning, where there is none).
std::optional<std::filesystem::path> anchored(const std::filesystem::path& path, const char* source) {
  if (path.is_absolute()) return path;
  if (!load_dir().empty()) return load_dir() / path;
  log().warn("{}: '{}' is relative and the working directory spark was loaded in is unknown; ignored", source,
             path.string());
  return std::nullopt;
}

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// ASCII only: the result must not depend on the host's locale.
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  return true;
}

}  // namespace

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::filesystem::path default_cache_dir() {
  if (auto dir = env_string("SPARK_CACHE_DIR"))
    if (auto path = anchored(*dir, "SPARK_CACHE_DIR")) return *path;
  if (auto xdg = env_string("XDG_CACHE_HOME"))
    if (auto path = anchored(std::filesystem::path(*xdg) / "spark", "XDG_CACHE_HOME")) return *path;
  std::string home = env_string("HOME").value_or("");
  if (home.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (!home.empty())
    if (auto path = anchored(std::filesystem::path(home) / ".cache" / "spark", "HOME")) return *path;
  return std::filesystem::path("/tmp") / ".cache" / "spark";
}

bool jit_enabled() {
  const auto v = env_string("SPARK_JIT");
  if (!v) return true;
  for (const char* off : {"0", "false", "off", "no"})
    if (iequals(*v, off)) return false;
  for (const char* on : {"1", "true", "on", "yes"})
    if (iequals(*v, on)) return true;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    log().warn("SPARK_JIT='{}' is not one of 0, false, off, no (never compile) or 1, true, on, yes; JIT stays enabled",
               *v);
  });
  return true;
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  uint64_t number = 0;
  if (std::from_chars(text.data(), text.data() + digits, number).ec != std::errc()) return std::nullopt;  // > 2^64 - 1
  // The unit, in any case: none or B (bytes), or K, M, G, T alone or followed by B or iB.
  std::string_view unit = text.substr(digits);
  if (iequals(unit, "B")) unit = {};
  int shift = 0;
  if (!unit.empty()) {
    const char prefix = ascii_lower(unit[0]);
    shift = prefix == 'k' ? 10 : prefix == 'm' ? 20 : prefix == 'g' ? 30 : prefix == 't' ? 40 : -1;
    const std::string_view rest = unit.substr(1);
    if (shift < 0 || !(rest.empty() || iequals(rest, "B") || iequals(rest, "iB"))) return std::nullopt;
  }
  if (number > (UINT64_MAX >> shift)) return std::nullopt;
  return number << shift;
}

std::optional<uint64_t> cache_max_bytes() {
  const auto v = env_string("SPARK_CACHE_MAX_BYTES");
  if (!v) return std::nullopt;
  const auto bytes = parse_byte_size(*v);
  if (!bytes || *bytes == 0) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      if (bytes)
        log().warn("SPARK_CACHE_MAX_BYTES='{}' would evict every kernel just built; no cap applied (unset it for "
                   "no cap, or give a size such as 512M)",
                   *v);
      else
        log().warn("SPARK_CACHE_MAX_BYTES='{}' is not a size (e.g. 1073741824, 512M, 2G); no cap applied", *v);
    });
    return std::nullopt;
  }
  return bytes;
}

std::optional<std::filesystem::path> dump_dir() {
  if (auto d = env_string("SPARK_DUMP_DIR")) return std::filesystem::path(*d);
  return std::nullopt;
}

}  // namespace spark
