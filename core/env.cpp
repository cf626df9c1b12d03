#include "core/env.h"

#include <cstdlib>

#include <pwd.h>
#include <unistd.h>

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

std::optional<std::filesystem::path> dump_dir() {
  if (auto d = env_string("SPARK_DUMP_DIR")) return std::filesystem::path(*d);
  return std::nullopt;
}

}  // namespace spark
