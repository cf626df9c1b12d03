#include "cache/inspect.h"

#include <algorithm>

#include "cache/entry.h"
#include "cache/entry_lock.h"
#include "cache/evict.h"
#include "core/error.h"

namespace spark {

namespace fs = std::filesystem;

namespace {

size_t count_children(const KernelCache& cache, const Dir& root, const char* sub) {
  Dir dir;
  return cache.open_work_dir(root, sub, false, dir) == 0 ? dir.list().size() : 0;
}

// The key part of an entry name ("<key>-<hash16>").
std::string_view key_of(std::string_view name) { return name.substr(0, name.rfind('-')); }

}  // namespace

EntryInfo describe_entry(const KernelCache& cache, const std::string& name) {
  EntryInfo e;
  e.name = name;
  e.dir = cache.entry_dir(name);
  Dir root, entry;
  if (cache.open_root(root) != 0 || root.open_child(name, false, entry) != 0) return e;
  std::string text;
  if (entry.read_file(kManifestFile, kMaxManifestBytes, text) == 0) {
    try {
      e.manifest = Manifest::from_json(text);
    } catch (const Error&) {
    }
  }
  e.bytes = root.disk_bytes(name);
  e.last_used_ms = last_used_ms(root, name);
  return e;
}

std::string read_entry_file(const KernelCache& cache, const std::string& name, const char* file) {
  Dir root, entry;
  std::string why, text;
  int err = cache.open_root(root, &why);
  if (err == 0) err = root.open_child(name, false, entry);
  if (err == 0) err = entry.read_file(file, entry_file_cap(file), text);
  SPARK_CHECK(err == 0, SPARK_ERROR_CACHE, "cannot read {}: {}", (cache.entry_dir(name) / file).string(),
              why.empty() ? file_error_text(err) : why);
  return text;
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
  Dir root;
  if (cache.open_root(root) != 0) return out;
  for (const std::string& name : cache.entry_names()) {
    EntryVerdict v;
    v.name = name;
    EntryCheck c;
    {
      const EntryLock reading = cache.shared_lock(root, name);
      c = check_entry(root, name);
    }
    if (c.missing) continue;  // removed by another process meanwhile
    v.problem = c.problem;
    if (!v.problem.empty() && fix)
      v.removed = remove_entry(cache, name, [](const Dir& r, const std::string& n) { return !check_entry(r, n).ok(); });
    out.push_back(std::move(v));
  }
  return out;
}

CacheSummary summarize(const KernelCache& cache) {
  CacheSummary s;
  Dir root;
  if (cache.open_root(root) != 0) return s;
  for (const std::string& name : cache.entry_names()) {
    ++s.entries;
    s.entry_bytes += root.disk_bytes(name);
  }
  for (const std::string& name : root.list()) s.total_bytes += root.disk_bytes(name);
  s.corrupt = count_children(cache, root, kCorruptDir);
  s.temporaries = count_children(cache, root, kTmpDir) + count_children(cache, root, kTrashDir);
  s.stats = read_persistent_stats(cache.root());
  return s;
}

}  // namespace spark
