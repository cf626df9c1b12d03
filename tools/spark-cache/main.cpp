// spark-cache: inspect and maintain spark's kernel cache (list, show, verify, prune,
// clear, stats, export, import), say what this host runs (info) and whether the cache
// covers a model (check).  Thin: the work is done by cache/inspect, evict, prewarm and
// archive in the libraries; this file parses flags and prints.
//
// Exit codes (tools/common/cli.h): 0 fine, 1 a problem (bad entries, nothing matches,
// missing kernels, refused archive, a cap that could not be reached), 2 a usage error.
#include <unistd.h>

#include <ctime>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/about.h"
#include "cache/archive.h"
#include "cache/evict.h"
#include "cache/inspect.h"
#include "core/env.h"
#include "core/error.h"
#include "ops/mla_oproj/presets.h"
#include "ops/mla_qproj/presets.h"
#include "ops/mla_qproj/render.h"
#include "runtime/cuda_driver.h"
#include "tools/common/cli.h"

namespace {

using nlohmann::ordered_json;
using spark_tools::dump;
namespace tools = spark_tools;

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

// A usage error found after parsing (a value CLI11 cannot check): exit 2 naming the flag.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

int cmd_export(const spark::KernelCache& cache, const std::string& file, const spark::ExportFilter& filter,
               bool force) {
  const bool to_stdout = file == "-";
  if (to_stdout && isatty(STDOUT_FILENO))
    throw UsageError("argument 'FILE': '-' writes the archive to standard output, which is a terminal here; "
                     "redirect it or name a file");
  const spark::ExportReport r = to_stdout ? spark::export_cache_to_fd(cache, STDOUT_FILENO, "standard output", filter)
                                          : spark::export_cache(cache, file, filter, force);
  for (const auto& s : r.skipped) std::cerr << "spark-cache export: skipped " << s << "\n";
  // With the archive on stdout the summary goes to stderr.
  (to_stdout ? std::cerr : std::cout) << fmt::format("exported {} entries ({}) to {}\n", r.exported.size(),
                                                     human_bytes(r.bytes), to_stdout ? "standard output" : file);
  if (r.exported.empty() && (!filter.archs.empty() || !filter.prefix.empty()))
    std::cerr << "spark-cache export: no entry matches the filter\n";
  return r.skipped.empty() ? 0 : 1;
}

int cmd_import(const spark::KernelCache& cache, const std::string& file) {
  const spark::ImportReport r = file == "-" ? spark::import_cache_from_fd(cache, STDIN_FILENO, "standard input")
                                            : spark::import_cache(cache, file);
  for (const auto& n : r.replaced) fmt::print("replaced corrupt {}\n", n);
  for (const auto& n : r.unreadable)
    std::cerr << "spark-cache import: left alone an entry this user cannot read: " << n << "\n";
  fmt::print("imported {} entries, {} already present, {} corrupt replaced, {} unreadable left alone, into {}\n",
             r.imported.size(), r.kept.size(), r.replaced.size(), r.unreadable.size(), cache.root().string());
  return r.unreadable.empty() ? 0 : 1;
}

// The SPARK_* variables spark reads (core/env.h, core/log.h, jit/, ops/), with what an unset
// one means.
struct EnvVar {
  const char* name;
  const char* when_unset;
};
constexpr EnvVar kEnvVars[] = {
    {"SPARK_CACHE_DIR", "$XDG_CACHE_HOME/spark, else ~/.cache/spark"},
    {"SPARK_CACHE_MAX_BYTES", "no size cap"},
    {"SPARK_JIT", "1 (compile kernels missing from the cache)"},
    {"SPARK_LOG_LEVEL", "warn"},
    {"SPARK_DUMP_DIR", "no dumps"},
    {"SPARK_NVRTC_LIBRARY", "libnvrtc.so.<major> by the loader's search, else the build's toolkit"},
    {"SPARK_REGIMES", "the built-in regime table of each arch"},
    {"SPARK_OPROJ_SCHEDULE", "auto"},
    {"SPARK_OPROJ_TILES", "the value up-projection's built-in regimes and tiles"},
};

int cmd_info(const std::filesystem::path& root, bool json) {
  const spark::DriverInfo driver = spark::cuda_driver_info();
  const spark::NvrtcInfo nvrtc = spark::nvrtc_info();
  ordered_json gpus = ordered_json::array();
  for (const auto& g : driver.gpus) {
    std::string arch, problem;
    try {
      arch = spark::arch_for_compute_capability(g.compute_capability);
    } catch (const spark::Error& e) {
      problem = e.what();
    }
    ordered_json j = {{"ordinal", g.ordinal},
                      {"name", g.name},
                      {"compute_capability", fmt::format("{}.{}", g.compute_capability / 10, g.compute_capability % 10)},
                      {"arch", arch.empty() ? ordered_json(nullptr) : ordered_json(arch)}};
    if (!problem.empty()) j["problem"] = problem;
    gpus.push_back(j);
  }
  // The cache: looked at, never created (prepare() only adds working directories to a root
  // that exists and is trusted).
  std::error_code ec;
  const bool exists = std::filesystem::is_directory(root, ec);
  const spark::KernelCache cache(root);
  ordered_json c = {{"dir", cache.root().string()}, {"exists", exists}};
  if (exists) {
    const spark::CacheAccess access = cache.prepare();
    c["trusted"] = access.trusted;
    c["writable"] = access.writable;
    if (!access.problem.empty()) c["problem"] = access.problem;
    if (access.trusted) {
      const spark::CacheSummary s = spark::summarize(cache);
      c["entries"] = s.entries;
      c["entry_bytes"] = s.entry_bytes;
      c["total_bytes"] = s.total_bytes;
    }
  }
  ordered_json env = ordered_json::array();
  for (const EnvVar& v : kEnvVars) {
    const auto value = spark::env_string(v.name);
    env.push_back({{"name", v.name},
                   {"set", value.has_value()},
                   {"value", value ? ordered_json(*value) : ordered_json(nullptr)},
                   {"default", v.when_unset}});
  }
  ordered_json nv = {{"loaded", nvrtc.loaded},
                     {"version", nvrtc.loaded ? ordered_json(nvrtc.version) : ordered_json(nullptr)},
                     {"path", nvrtc.loaded ? ordered_json(nvrtc.path) : ordered_json(nullptr)},
                     {"built_with", spark::nvrtc_built_version()},
                     {"archs", nvrtc.archs}};
  if (!nvrtc.problem.empty()) nv["problem"] = nvrtc.problem;
  ordered_json drv = {{"found", driver.loaded},
                      {"path", driver.loaded ? ordered_json(driver.path) : ordered_json(nullptr)},
                      {"version", driver.version ? ordered_json(fmt::format("{}.{}", driver.version / 1000,
                                                                            driver.version % 1000 / 10))
                                                 : ordered_json(nullptr)},
                      {"gpus", gpus}};
  if (!driver.problem.empty()) drv["problem"] = driver.problem;
  if (json) {
    std::cout << dump(ordered_json{{"version", spark::version_json()},
                                   {"driver", drv},
                                   {"nvrtc", nv},
                                   {"cache", c},
                                   {"environment", env}})
              << "\n";
    return 0;
  }
  fmt::print("{}", spark::version_text("spark"));
  if (!driver.loaded) {
    fmt::print("driver         not found ({}): cached kernels cannot run here\n", driver.problem);
  } else {
    fmt::print("driver         {} ({})\n", drv["version"].is_null() ? "?" : drv["version"].get<std::string>(),
               driver.path);
    if (!driver.problem.empty()) fmt::print("               unusable: {}\n", driver.problem);
  }
  for (const auto& g : gpus)
    fmt::print("GPU {}          {}, compute capability {}, spark arch {}\n", g["ordinal"].get<int>(),
               g["name"].get<std::string>(), g["compute_capability"].get<std::string>(),
               g["arch"].is_null() ? "none (" + g.value("problem", std::string()) + ")" : g["arch"].get<std::string>());
  if (driver.loaded && driver.problem.empty() && gpus.empty()) fmt::print("GPUs           none\n");
  if (nvrtc.loaded) {
    std::string archs;
    for (int a : nvrtc.archs) archs += fmt::format("{}sm_{}", archs.empty() ? "" : " ", a);
    fmt::print("NVRTC          {} ({}); targets {}\n", nvrtc.version, nvrtc.path, archs.empty() ? "?" : archs);
  } else {
    fmt::print("NVRTC          not found ({}): only cached kernels can be used\n", nvrtc.problem);
  }
  fmt::print("cache          {}\n", cache.root().string());
  if (!exists) {
    fmt::print("               does not exist yet (created by the first compile, prewarm or import)\n");
  } else {
    fmt::print("               {}, {}{}\n", c["trusted"].get<bool>() ? "trusted" : "NOT trusted",
               c["writable"].get<bool>() ? "writable" : "NOT writable",
               c.contains("problem") ? ": " + c["problem"].get<std::string>() : "");
    if (c.contains("entries"))
      fmt::print("               {} entries, {} ({} on disk in all)\n", c["entries"].get<size_t>(),
                 human_bytes(c["entry_bytes"].get<uint64_t>()), human_bytes(c["total_bytes"].get<uint64_t>()));
  }
  fmt::print("environment\n");
  for (const auto& v : env)
    fmt::print("  {:<22} {}\n", v["name"].get<std::string>(),
               v["set"].get<bool>() ? v["value"].get<std::string>() : "(unset: " + v["default"].get<std::string>() + ")");
  return 0;
}

// Whether the cache holds, sound, every kernel spark-prewarm would build for the model.
int cmd_check(const spark::KernelCache& cache, const std::string& model, int tp, const std::vector<std::string>& archs,
              int max_m, bool json) {
  // Both ops' kernels, as spark-prewarm --model builds them.
  std::vector<spark::PrewarmJob> jobs;
  try {
    spark::PrewarmSpec spec = spark::preset_spec(model, tp);
    spec.max_m = max_m;
    const int v_head_dim = spark::model_preset(model).v_head_dim;
    for (const std::string& a : archs) {
      try {
        spark::arch_info(a);
      } catch (const spark::Error& e) {
        throw UsageError(fmt::format("argument '--arch': {}", e.what()));
      }
      spec.arch = a;
      for (auto& j : spark::prewarm_jobs(spark::expand(spec))) jobs.push_back(std::move(j));
      for (auto& j : spark::oproj::prewarm_jobs(
               spark::oproj::expand(spec.heads, {v_head_dim}, max_m, spec.weights, spec.outs, a)))
        jobs.push_back(std::move(j));
    }
  } catch (const spark::Error& e) {
    throw UsageError(e.what());
  }
  const std::vector<std::string> names = cache.entry_names();
  spark::Dir root;
  const bool readable = cache.open_root(root) == 0;
  const std::string nvrtc = spark::nvrtc_version();
  ordered_json missing = ordered_json::array();
  size_t present = 0;
  for (const spark::PrewarmJob& job : jobs) {
    // The entry a load would look for: the same id KernelStore computes.
    const spark::KernelSpec spec = job.spec();
    const spark::CacheId id = spark::cache_id(spec, spark::compile_options(spec.arch), nvrtc);
    std::string why;
    if (!readable) {
      why = "cache not readable";
    } else if (std::find(names.begin(), names.end(), id.name) == names.end()) {
      const std::string stem = job.key + "-";
      const bool other = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(stem, 0) == 0; });
      why = other ? "only built by another spark, generator or NVRTC" : "not in the cache";
    } else if (const spark::EntryCheck c = spark::check_entry(root, id.name, id.hash); !c.ok()) {
      why = c.missing ? "not in the cache" : "corrupt: " + c.problem;
    }
    if (why.empty()) {
      ++present;
      continue;
    }
    missing.push_back({{"key", job.key}, {"entry", id.name}, {"why", why}});
  }
  if (json) {
    std::cout << dump(ordered_json{{"model", model},
                                   {"tp", tp},
                                   {"archs", archs},
                                   {"max_m", max_m},
                                   {"cache_dir", cache.root().string()},
                                   {"kernels", jobs.size()},
                                   {"present", present},
                                   {"covered", missing.empty()},
                                   {"missing", missing}})
              << "\n";
  } else {
    for (const auto& m : missing)
      fmt::print("MISSING {} ({})\n", m["key"].get<std::string>(), m["why"].get<std::string>());
    fmt::print("{} --tp {} on {}: {} of {} kernels in {}{}\n", model, tp, fmt::join(archs, ","), present, jobs.size(),
               cache.root().string(),
               missing.empty() ? "; covered"
                               : fmt::format("; {} missing (spark-prewarm --model {} --tp {} --arch {} --max-m {} "
                                             "--cache-dir ... builds them)",
                                             missing.size(), model, tp, fmt::join(archs, ","), max_m));
  }
  return missing.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string tool = "spark-cache";
  CLI::App app{"spark-cache: inspect and maintain spark's kernel cache"};
  tools::apply_conventions(app, tool);
  app.require_subcommand(1);
  app.fallthrough();  // --cache-dir may follow the subcommand
  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "cache root (default: $SPARK_CACHE_DIR, $XDG_CACHE_HOME/spark, ~/.cache/spark)");
  bool json = false, fix = false, source = false, force = false;
  std::string key, max_bytes, file, model, prefix;
  std::vector<std::string> archs;
  int tp = 1, max_m = spark::kMaxM;
  std::vector<std::string> model_names;
  for (const spark::ModelPreset& p : spark::model_presets()) model_names.emplace_back(p.name);

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
  auto* info = app.add_subcommand("info", "what this host runs: driver, GPUs and their arch, NVRTC, the cache "
                                          "directory, SPARK_* variables");
  info->add_flag("--json", json, "print JSON");
  auto* check = app.add_subcommand("check", "does the cache hold every kernel spark-prewarm builds for a model?");
  check->add_option("--model", model, "model preset")->required()->check(CLI::IsMember(model_names));
  check->add_option("--tp", tp, "tensor-parallel size")->check(CLI::PositiveNumber);
  // One value split here: a list option would swallow export's PREFIX after it.
  std::string arch_list;
  check->add_option("--arch", arch_list, "targets, comma-separated (default: sm_90a)");
  check->add_option("--max-m", max_m, "largest M (tokens per call) served")->check(CLI::Range(1, spark::kMaxM));
  check->add_flag("--json", json, "print JSON");
  auto* exp = app.add_subcommand("export", "write the sound entries into one archive (tar + zstd) for other hosts");
  exp->add_option("FILE", file, "archive to write (.tar.zst), or - for standard output")->required();
  exp->add_option("PREFIX", prefix, "only entries whose name starts with this (e.g. mla_qproj.h8)");
  exp->add_option("--arch", arch_list, "only entries for these targets, comma-separated");
  exp->add_flag("--force", force, "replace FILE if it exists");
  auto* imp = app.add_subcommand("import", "verify an archive and publish its entries into this cache");
  imp->add_option("FILE", file, "archive to read, or - for standard input")->required();
  if (const auto rc = tools::parse_command_line(app, argc, argv, tool, tools::wants_json(argc, argv))) return *rc;

  const std::filesystem::path root = cache_dir.empty() ? spark::default_cache_dir() : std::filesystem::path(cache_dir);
  const std::string command = app.get_subcommands().front()->get_name();
  for (size_t at = 0; !arch_list.empty() && at != std::string::npos;) {
    const size_t comma = arch_list.find(',', at);
    archs.push_back(arch_list.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    at = comma == std::string::npos ? comma : comma + 1;
  }
  const auto fail = [&](const std::string& message, const std::string& status, int code) {
    return tools::report_error(tool + " " + command, message, status, code, json);
  };
  try {
    if (*info) return cmd_info(root, json);
    if (*prune && !spark::parse_byte_size(max_bytes))
      throw UsageError(fmt::format("argument '--max-bytes': '{}' is not a size (e.g. 1073741824, 512M, 2G)", max_bytes));
    if (*exp)
      for (const std::string& a : archs) {
        try {
          spark::arch_info(a);
        } catch (const spark::Error& e) {
          throw UsageError(fmt::format("argument '--arch': {}", e.what()));
        }
      }
    if (*check && archs.empty()) archs.push_back("sm_90a");
    // Only import creates a cache; every other command on a missing directory is a mistyped
    // path (an export of it would ship an empty archive), not an empty cache.
    std::error_code ec;
    if (!*imp && !std::filesystem::is_directory(root, ec))
      return fail(fmt::format("no cache directory at {} (argument '--cache-dir', or $SPARK_CACHE_DIR)", root.string()),
                  "cache", tools::kExitProblem);
    const spark::KernelCache cache(root);
    if (*list) return cmd_list(cache, json);
    if (*show) return cmd_show(cache, key, json, source);
    if (*verify) return cmd_verify(cache, fix, json);
    if (*prune) return cmd_prune(cache, max_bytes);
    if (*clear) return cmd_clear(cache);
    if (*stats) return cmd_stats(cache, json);
    if (*check) return cmd_check(cache, model, tp, archs, max_m, json);
    if (*exp) return cmd_export(cache, file, spark::ExportFilter{archs, prefix}, force);
    if (*imp) return cmd_import(cache, file);
  } catch (const UsageError& e) {
    return fail(e.what(), "usage", tools::kExitUsage);
  } catch (const spark::Error& e) {
    return fail(e.what(), tools::status_word(e.status()), tools::kExitProblem);
  } catch (const std::exception& e) {
    return fail(e.what(), "error", tools::kExitProblem);
  }
  return tools::kExitProblem;
}
