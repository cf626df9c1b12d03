#include "cache/scratch.h"

#include <cerrno>
#include <cstdlib>
#include <csignal>
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

}  // namespace

std::string scratch_name(std::string_view base) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{}-{}-{:012x}", base, host_tag(), ::getpid(), rng() & 0xffffffffffffull);
}

bool scratch_is_abandoned(const std::filesystem::path& item, std::chrono::seconds max_age) {
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(item, ec);
  if (!ec && std::filesystem::file_time_type::clock::now() - written > max_age) return true;

  const std::string name = item.filename().string();
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  const std::string owner = name.substr(dot + 1);  // "<host tag>-<pid>-<random>"
  const size_t dash1 = owner.find('-');
  const size_t dash2 = dash1 == std::string::npos ? dash1 : owner.find('-', dash1 + 1);
  if (dash2 == std::string::npos || owner.substr(0, dash1) != host_tag()) return false;
  char* end = nullptr;
  const std::string pid_text = owner.substr(dash1 + 1, dash2 - dash1 - 1);
  const long pid = std::strtol(pid_text.c_str(), &end, 10);
  if (pid_text.empty() || *end != '\0') return false;
  return !process_exists(pid);
}

}  // namespace spark
