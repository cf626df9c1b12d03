// spark-cache: inspect and maintain spark's kernel cache (list, show, verify, prune,
// clear, stats, export, import).  Thin: the work is done by cache/inspect, evict and
// archive in the library; this file parses flags and prints.
//
// Exit codes: 0 fine, 1 a problem (bad entries, nothing matches, refused archive, a cap
// that could not be reached), CLI11's own codes for bad flags.
#include <ctime>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/archive.h"
#include "cache/evict.h"
#include "cache/inspect.h"
#include "core/env.h"
#include "core/error.h"

namespace {

using nlohmann::ordered_json;

// JSON for a terminal or a pipe: a path that is not UTF-8 (the cache root is the user's
// choice) is printed with replacement characters rather than failing the command.
std::string dump(const ordered_json& j) { return j.dump(2, ' ', false, ordered_json::error_handler_t::replace); }

std::string human_bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1u << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < (1u << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

std::string local_time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", fmt::localtime(static_cast<std::time_t>(unix_ms / 1000)));
}

int cmd_list(const spark::KernelCache& cache, bool json) {
  const auto entries = spark::list_entries(cache);
  if (json) {
    ordered_json j = ordered_json::array();
    for (const auto& e : entries) j.push_back(spark::entry_json(e));
    std::cout << dump(j) << "\n";
    return 0;
  }
  fmt::print("{:<72} {:>10} {:>5} {:>9} {:>7}  {}\n", "ENTRY", "SIZE", "REGS", "SMEM B", "LOCAL B", "LAST USED");
  uint64_t total = 0;
  for (const auto& e : entries) {
    total += e.bytes;
    if (!e.manifest) {
      fmt::print("{:<72} {:>10} {:>5} {:>9} {:>7}  {}   (manifest unreadable: run verify)\n", e.name,
                 human_bytes(e.bytes), "?", "?", "?", local_time(e.last_used_ms));
      continue;
    }
    const auto& m = *e.manifest;
    fmt::print("{:<72} {:>10} {:>5} {:>9} {:>7}  {}\n", e.name, human_bytes(e.bytes), m.resources.registers,
               m.smem_bytes + std::max(0, m.resources.shared_static_bytes), m.resources.local_bytes,
               local_time(e.last_used_ms));
  }
  fmt::print("{} entries, {} in {}\n", entries.size(), human_bytes(total), cache.root().string());
  return 0;
}

int cmd_show(const spark::KernelCache& cache, const std::string& query, bool json, bool source) {
  const std::string name = spark::find_entry(cache, query);
  const spark::EntryInfo e = spark::describe_entry(cache, name);
  const spark::EntryCheck check = spark::check_entry(e.dir);
  if (json) {
    ordered_json j = spark::entry_json(e);
    j["verified"] = check.ok();
    if (!check.ok()) j["problem"] = check.problem;
    if (source) j["source_text"] = spark::read_entry_file(cache, name, spark::kSourceFile);
    std::cout << dump(j) << "\n";
    return check.ok() ? 0 : 1;
  }
  fmt::print("entry       {}\n", e.name);
  fmt::print("status      {}\n", check.ok() ? "sound (manifest, sizes and checksums verified)" : "CORRUPT: " + check.problem);
  if (e.manifest) {
    const auto& m = *e.manifest;
    const auto& r = m.resources;
    fmt::print("key         {}\n", m.key);
    fmt::print("hash        {}\n", m.hash);
    fmt::print("tile        {}, {} threads, {} B dynamic shared memory\n", m.tile, m.threads, m.smem_bytes);
    fmt::print("resources   {} registers/thread, {} B static shared memory, {} B local memory/thread, "
               "{} B spills (ptxas, at compile time)\n",
               r.registers, r.shared_static_bytes, r.local_bytes, r.spill_bytes);
    fmt::print("cubin       {} ({} B, xxh3 {})\n", (e.dir / spark::kCubinFile).string(), m.cubin_size, m.cubin_xxh3);
    fmt::print("source      {} ({} B, xxh3 {})\n", (e.dir / spark::kSourceFile).string(), m.source_size,
               m.source_xxh3);
    fmt::print("log         {}\n", (e.dir / spark::kLogFile).string());
    fmt::print("compiled    {} in {:.1f} ms by NVRTC {} (generator {}, cache format {})\n",
               local_time(m.created_unix_ms), m.compile_ms, m.nvrtc_version, m.generator_version, m.format_version);
    fmt::print("options     {}\n", fmt::join(m.options, " "));
    fmt::print("templates   {}\n", m.templates_digest);
  }
  fmt::print("last used   {}\n", local_time(e.last_used_ms));
  fmt::print("disk        {}\n", human_bytes(e.bytes));
  if (source) fmt::print("\n{}", spark::read_entry_file(cache, name, spark::kSourceFile));
  return check.ok() ? 0 : 1;
}

int cmd_verify(const spark::KernelCache& cache, bool fix, bool json) {
  const auto verdicts = spark::verify_entries(cache, fix);
  size_t bad = 0, unfixed = 0;
  ordered_json j = ordered_json::array();
  for (const auto& v : verdicts) {
    if (json) j.push_back({{"name", v.name}, {"ok", v.problem.empty()}, {"problem", v.problem}, {"removed", v.removed}});
    if (v.problem.empty()) continue;
    ++bad;
    if (!v.removed) ++unfixed;
    if (!json)
      fmt::print("BAD {}: {}{}\n", v.name, v.problem,
                 v.removed ? " (removed)" : fix ? " (in use by another process: not removed)" : "");
  }
  if (json) {
    std::cout << dump(ordered_json{{"entries", verdicts.size()}, {"bad", bad}, {"unfixed", unfixed}, {"results", j}})
              << "\n";
  } else {
    fmt::print("{} entries: {} sound, {} bad{}\n", verdicts.size(), verdicts.size() - bad, bad,
               fix ? fmt::format(", {} removed", bad - unfixed) : (bad ? "; run with --fix to remove them" : ""));
  }
  return unfixed == 0 ? 0 : 1;
}

int cmd_prune(const spark::KernelCache& cache, const std::string& max_text) {
  const auto max = spark::parse_byte_size(max_text);
  SPARK_CHECK_ARG(max.has_value(), "--max-bytes", "'{}' is not a size (e.g. 1073741824, 512M, 2G)", max_text);
  const spark::RemovalReport r = spark::evict_to_fit(cache, *max);
  for (const auto& name : r.removed) fmt::print("removed {}\n", name);
  fmt::print("{} entries removed (least recently used first), {} leftovers removed, {} in use kept; {} -> {} "
             "(cap {})\n",
             r.removed.size(), r.leftovers, r.busy, human_bytes(r.bytes_before), human_bytes(r.bytes_after),
             human_bytes(*max));
  if (r.bytes_after > *max) {
    std::cerr << fmt::format("spark-cache prune: still above the cap: {} entries in use by other processes, or "
                             "builds in progress\n",
                             r.busy);
    return 1;
  }
  return 0;
}

int cmd_clear(const spark::KernelCache& cache) {
  const spark::RemovalReport r = spark::clear_cache(cache);
  fmt::print("{} entries and {} leftovers removed from {}; {} -> {}\n", r.removed.size(), r.leftovers,
             cache.root().string(), human_bytes(r.bytes_before), human_bytes(r.bytes_after));
  if (r.busy) {
    std::cerr << fmt::format("spark-cache clear: {} entries in use by other processes were kept\n", r.busy);
    return 1;
  }
  return 0;
}

int cmd_stats(const spark::KernelCache& cache, bool json) {
  const spark::CacheSummary s = spark::summarize(cache);
  const spark::CacheCounters& c = s.stats.counters;
  if (json) {
    ordered_json j = {{"cache_dir", cache.root().string()},
                      {"entries", s.entries},
                      {"entry_bytes", s.entry_bytes},
                      {"total_bytes", s.total_bytes},
                      {"corrupt_kept", s.corrupt},
                      {"temporaries", s.temporaries}};
    const ordered_json totals = ordered_json::parse(spark::persistent_stats_json(s.stats));
    for (const auto& [name, value] : totals.items()) j[name] = value;
    std::cout << dump(j) << "\n";
    return 0;
  }
  fmt::print("cache        {}\n", cache.root().string());
  fmt::print("entries      {} ({}; {} on disk in all)\n", s.entries, human_bytes(s.entry_bytes), human_bytes(s.total_bytes));
  fmt::print("corrupt      {} moved aside in .corrupt/, {} temporaries\n", s.corrupt, s.temporaries);
  fmt::print("since        {} (every process that used this directory)\n", local_time(s.stats.since_unix_ms));
  fmt::print("hits         {}\nmisses       {}\ncompiles     {}\ncorrupt      {} entries found\n", c.hits, c.misses,
             c.compiles, c.corrupt_entries);
  fmt::print("evictions    {}\ncompile time {:.1f} ms\nload time    {:.1f} ms\n", c.evictions, c.compile_ms, c.load_ms);
  return 0;
}

int cmd_export(const spark::KernelCache& cache, const std::string& file) {
  const spark::ExportReport r = spark::export_cache(cache, file);
  for (const auto& s : r.skipped) std::cerr << "spark-cache export: skipped " << s << "\n";
  fmt::print("exported {} entries ({}) to {}\n", r.exported.size(), human_bytes(r.bytes), file);
  return r.skipped.empty() ? 0 : 1;
}

int cmd_import(const spark::KernelCache& cache, const std::string& file) {
  const spark::ImportReport r = spark::import_cache(cache, file);
  for (const auto& n : r.replaced) fmt::print("replaced corrupt {}\n", n);
  for (const auto& n : r.unreadable)
    std::cerr << "spark-cache import: left alone an entry this user cannot read: " << n << "\n";
  fmt::print("imported {} entries, {} already present, {} corrupt replaced, {} unreadable left alone, into {}\n",
             r.imported.size(), r.kept.size(), r.replaced.size(), r.unreadable.size(), cache.root().string());
  return r.unreadable.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spark-cache: inspect and maintain spark's kernel cache"};
  app.require_subcommand(1);
  app.fallthrough();  // --cache-dir may follow the subcommand
  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "cache root (default: $SPARK_CACHE_DIR, $XDG_CACHE_HOME/spark, ~/.cache/spark)");
  bool json = false, fix = false, source = false;
  std::string key, max_bytes, file;

  auto* list = app.add_subcommand("list", "list the entries: size, registers, shared/local memory, last use");
  list->add_flag("--json", json, "print JSON (each entry with its manifest)");
  auto* show = app.add_subcommand("show", "show one entry: manifest, files, resource usage, verification");
  show->add_option("KEY", key, "entry directory name, key name, or a unique prefix")->required();
  show->add_flag("--json", json, "print JSON");
  show->add_flag("--source", source, "also print the generated CUDA source");
  auto* verify = app.add_subcommand("verify", "check every entry's manifest, sizes and checksums");
  verify->add_flag("--fix", fix, "remove the entries that fail");
  verify->add_flag("--json", json, "print JSON");
  auto* prune = app.add_subcommand("prune", "remove least-recently-used entries until the cache fits a size");
  prune->add_option("--max-bytes", max_bytes, "size cap, e.g. 1073741824, 512M, 2G")->required();
  auto* clear = app.add_subcommand("clear", "remove every entry not in use, leftovers and stats");
  auto* stats = app.add_subcommand("stats", "hits, misses, compiles, corrupt entries, times (all processes), size");
  stats->add_flag("--json", json, "print JSON");
  auto* exp = app.add_subcommand("export", "write every sound entry into one archive file for other hosts");
  exp->add_option("FILE", file, "archive to write")->required();
  auto* imp = app.add_subcommand("import", "verify an archive and publish its entries into this cache");
  imp->add_option("FILE", file, "archive to read")->required();
  CLI11_PARSE(app, argc, argv);

  const std::filesystem::path root = cache_dir.empty() ? spark::default_cache_dir() : std::filesystem::path(cache_dir);
  const std::string command = app.get_subcommands().front()->get_name();
  // Only import creates a cache; every other command on a missing directory is a mistyped
  // path (an export of it would ship an empty archive), not an empty cache.
  std::error_code ec;
  if (!*imp && !std::filesystem::is_directory(root, ec)) {
    std::cerr << "spark-cache " << command << ": no cache directory at " << root.string()
              << " (argument '--cache-dir', or $SPARK_CACHE_DIR)\n";
    return 1;
  }
  const spark::KernelCache cache(root);
  try {
    if (*list) return cmd_list(cache, json);
    if (*show) return cmd_show(cache, key, json, source);
    if (*verify) return cmd_verify(cache, fix, json);
    if (*prune) return cmd_prune(cache, max_bytes);
    if (*clear) return cmd_clear(cache);
    if (*stats) return cmd_stats(cache, json);
    if (*exp) return cmd_export(cache, file);
    if (*imp) return cmd_import(cache, file);
  } catch (const std::exception& e) {
    std::cerr << "spark-cache " << command << ": " << e.what() << "\n";
    return 1;
  }
  return 1;
}
