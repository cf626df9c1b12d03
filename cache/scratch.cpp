#include "cache/scratch.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <ctime>
#include <random>

#include <fmt/format.h>
#include <unistd.h>
#include <xxhash.h>

namespace spark {

namespace {

// The host name and the pid namespace: containers that share a host name (and a cache)
// still get different tags, so one never judges the other's pids.
const std::string& host_tag() {
  static const std::string tag = [] {
    char host[256] = {0}, pid_ns[64] = {0};
    ::gethostname(host, sizeof host - 1);
    if (::readlink("/proc/self/ns/pid", pid_ns, sizeof pid_ns - 1) < 0) pid_ns[0] = 0;
    const std::string owner = std::string(host) + "/" + pid_ns;
    return fmt::format("{:08x}", static_cast<uint32_t>(XXH3_64bits(owner.data(), owner.size())));
  }();
  return tag;
}

bool process_exists(long pid) {
  if (pid <= 0) return true;  // not a pid we can judge: assume alive
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

bool all_hex(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (const char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

struct Owner {
  std::string_view base, host;
  long pid = 0;
};

// Splits "<base>.<host>-<pid>-<random>"; false when the name is not of that form.
bool parse_owner(std::string_view name, Owner& o) {
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string_view owner = name.substr(dot + 1);
  const size_t dash1 = owner.find('-'), dash2 = owner.rfind('-');
  if (dash1 == std::string_view::npos || dash1 == dash2) return false;
  const std::string_view pid = owner.substr(dash1 + 1, dash2 - dash1 - 1);
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), o.pid);
  if (pid.empty() || ec != std::errc() || end != pid.data() + pid.size() || o.pid <= 0) return false;
  if (!all_hex(owner.substr(0, dash1), 8) || !all_hex(owner.substr(dash2 + 1), 12)) return false;
  o.base = name.substr(0, dot);
  o.host = owner.substr(0, dash1);
  return true;
}

}  // namespace

std::string scratch_name(std::string_view base) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{}-{}-{:012x}", base, host_tag(), ::getpid(), rng() & 0xffffffffffffull);
}

bool is_scratch_name(std::string_view name, std::string* base) {
  Owner o;
  if (!is_plain_name(name) || !parse_owner(name, o)) return false;
  if (base) *base = std::string(o.base);
  return true;
}

bool scratch_is_abandoned(const Dir& dir, std::string_view name, std::chrono::seconds max_age) {
  Owner o;
  if (!is_plain_name(name) || !parse_owner(name, o)) return false;
  struct stat st {};
  if (dir.stat_child(name, st) != 0) return false;
  if (std::time(nullptr) - st.st_mtime > max_age.count()) return true;
  return o.host == host_tag() && !process_exists(o.pid);
}

}  // namespace spark
