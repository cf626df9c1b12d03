#include "cache/inspect.h"

#include <algorithm>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/evict.h"
#include "core/error.h"
#include "core/files.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

size_t count_children(const fs::path& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

// The key part of an entry name ("<key>-<hash16>").
std::string_view key_of(std::string_view name) { return name.substr(0, name.rfind('-')); }

}  // namespace

EntryInfo describe_entry(const KernelCache& cache, const std::string& name) {
  EntryInfo e;
  e.name = name;
  e.dir = cache.entry_dir(name);
  try {
    e.manifest = Manifest::from_json(read_file(e.dir / kManifestFile));
  } catch (const Error&) {
  }
  e.bytes = disk_bytes(e.dir);
  e.last_used_ms = last_used_ms(e.dir);
  return e;
}

std::vector<EntryInfo> list_entries(const KernelCache& cache) {
  std::vector<EntryInfo> out;
  for (const std::string& name : cache.entry_names()) out.push_back(describe_entry(cache, name));
  return out;
}

nlohmann::ordered_json entry_json(const EntryInfo& e) {
  nlohmann::ordered_json j;
  j["name"] = e.name;
  j["dir"] = e.dir.string();
  j["bytes"] = e.bytes;
  j["last_used_unix_ms"] = e.last_used_ms;
  j["cubin"] = (e.dir / kCubinFile).string();
  j["source"] = (e.dir / kSourceFile).string();
  j["log"] = (e.dir / kLogFile).string();
  if (e.manifest) j["manifest"] = nlohmann::ordered_json::parse(e.manifest->to_json());
  else j["manifest"] = nullptr;
  return j;
}

std::string find_entry(const KernelCache& cache, std::string_view query) {
  SPARK_CHECK_ARG(!query.empty(), "KEY", "must not be empty");
  const std::vector<std::string> names = cache.entry_names();
  if (std::find(names.begin(), names.end(), query) != names.end()) return std::string(query);
  std::vector<std::string> matches;
  for (const std::string& n : names)
    if (key_of(n) == query) matches.push_back(n);
  if (matches.empty())
    for (const std::string& n : names)
      if (n.compare(0, query.size(), query) == 0) matches.push_back(n);
  SPARK_CHECK_ARG(!matches.empty(), "KEY", "no entry of the cache {} matches '{}'", cache.root().string(), query);
  std::string list;
  for (const std::string& m : matches) list += "\n  " + m;
  SPARK_CHECK_ARG(matches.size() == 1, "KEY", "'{}' matches {} entries; give one of:{}", query, matches.size(),
                  list);
  return matches.front();
}

std::vector<EntryVerdict> verify_entries(const KernelCache& cache, bool fix) {
  std::vector<EntryVerdict> out;
  std::error_code ec;
  fs::create_directories(cache.root() / kLocksDir, ec);
  for (const std::string& name : cache.entry_names()) {
    EntryVerdict v;
    v.name = name;
    EntryCheck c;
    {
      const EntryLock reading = EntryLock::shared(cache.lock_file(name));
      c = check_entry(cache.entry_dir(name));
    }
    if (c.missing) continue;  // removed by another process meanwhile
    v.problem = c.problem;
    if (!v.problem.empty() && fix)
      v.removed = remove_entry(cache, name, [](const fs::path& dir) { return !check_entry(dir).ok(); });
    out.push_back(std::move(v));
  }
  return out;
}

CacheSummary summarize(const KernelCache& cache) {
  CacheSummary s;
  for (const std::string& name : cache.entry_names()) {
    ++s.entries;
    s.entry_bytes += disk_bytes(cache.entry_dir(name));
  }
  s.total_bytes = disk_bytes(cache.root());
  s.corrupt = count_children(cache.root() / kCorruptDir);
  s.temporaries = count_children(cache.root() / kTmpDir) + count_children(cache.root() / kTrashDir);
  s.stats = read_persistent_stats(cache.root());
  return s;
}

}  // namespace spark
