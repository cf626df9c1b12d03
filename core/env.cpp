#include "core/env.h"

#include <cctype>
#include <cstdlib>
#include <mutex>

#include <pwd.h>
#include <unistd.h>

#include "core/log.h"

namespace spark {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::filesystem::path default_cache_dir() {
  if (auto dir = env_string("SPARK_CACHE_DIR")) return *dir;
  if (auto xdg = env_string("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "spark";
  std::string home = env_string("HOME").value_or("");
  if (home.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home.empty()) home = "/tmp";
  return std::filesystem::path(home) / ".cache" / "spark";
}

bool jit_enabled() {
  const auto v = env_string("SPARK_JIT");
  return !(v && (*v == "0" || *v == "off" || *v == "false"));
}

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 19) return std::nullopt;
  const uint64_t number = std::strtoull(std::string(text.substr(0, digits)).c_str(), nullptr, 10);
  std::string unit;
  for (const char c : text.substr(digits)) unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* suffix : {"IB", "B"}) {
    const std::string_view s(suffix);
    if (unit.size() >= s.size() && unit.compare(unit.size() - s.size(), s.size(), s) == 0) {
      unit.resize(unit.size() - s.size());
      break;
    }
  }
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (!unit.empty()) return std::nullopt;
  if (shift > 0 && number > (UINT64_MAX >> shift)) return std::nullopt;
  return number << shift;
}

std::optional<uint64_t> cache_max_bytes() {
  const auto v = env_string("SPARK_CACHE_MAX_BYTES");
  if (!v) return std::nullopt;
  const auto bytes = parse_byte_size(*v);
  if (!bytes) {
    static std::once_flag warned;
    std::call_once(warned, [&] {
      log().warn("SPARK_CACHE_MAX_BYTES='{}' is not a size (e.g. 1073741824, 512M, 2G); no cap applied", *v);
    });
  }
  return bytes;
}

std::optional<std::filesystem::path> dump_dir() {
  if (auto d = env_string("SPARK_DUMP_DIR")) return std::filesystem::path(*d);
  return std::nullopt;
}

}  // namespace spark
