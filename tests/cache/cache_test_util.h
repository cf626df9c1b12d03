// Helpers shared by the cache tests: temporary cache directories, small keys that
// compile fast, child processes, and captured log warnings.
#pragma once

#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "core/dir.h"
#include "ops/mla_qproj/key.h"
#include "jit/compile.h"
#include "jit/kernel_store.h"
#include "ops/mla_qproj/render.h"
#include "tests/support/captured_log.h"

namespace spark_test {

namespace fs = std::filesystem;

// A fresh directory, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/spark-cache-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// An existing directory, opened (the cache's fd-based calls take one).
inline spark::Dir open_dir(const fs::path& path) {
  spark::Dir d;
  if (spark::Dir::open(path, d) != 0) throw std::runtime_error("cannot open " + path.string());
  return d;
}

// Keys of the {1,16} regime on sm_90a: about 0.15 s to compile each.
inline spark::KernelKey small_key(int heads = 8, spark::OutDtype out = spark::OutDtype::kBf16, int k = 128) {
  spark::KernelKey x;
  x.heads = heads;
  x.k = k;
  x.n = 512;
  x.r = 64;
  x.regime = {1, 16};
  x.out = out;
  x.arch = "sm_90a";
  return x;
}

// The cache entry name a key gets with this build.
inline spark::CacheId id_of(const spark::KernelKey& key) {
  return spark::cache_id(spark::render(key), spark::compile_options(key.arch), spark::nvrtc_version());
}

// Runs fn in a forked child; returns its exit code (200 + signal when killed).
template <class Fn>
int in_child(Fn&& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 100;
    try {
      rc = fn();
    } catch (...) {
      rc = 101;
    }
    std::_Exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

// Runs fn in a forked child as another user: uid, primary group gid, supplementary groups
// `groups`, and umask `mask` (root only; 90 when the switch fails).  SIGALRM after
// `timeout_s` turns a hang into exit code 200 + SIGALRM.
template <class Fn>
int as_user(uid_t uid, gid_t gid, std::vector<gid_t> groups, mode_t mask, Fn&& fn, unsigned timeout_s = 60) {
  return in_child([&] {
    ::alarm(timeout_s);
    ::umask(mask);
    if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) return 90;
    return fn();
  });
}

// The same in this user, with only the timeout.
template <class Fn>
int with_timeout(unsigned timeout_s, Fn&& fn) {
  return in_child([&] {
    ::alarm(timeout_s);
    return fn();
  });
}

inline bool is_root() { return ::geteuid() == 0; }

}  // namespace spark_test
