// spark-prewarm: fill the kernel cache for a model preset, explicit shapes or a JSON file,
// for one or more targets.  Works without a GPU when --arch is given (or when there is no
// GPU: sm_90a).  Exit codes (tools/common/cli.h): 0 every kernel cached, 1 one failed, 2 usage.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ops/mla_oproj/presets.h"
#include "ops/mla_qproj/presets.h"
#include "core/env.h"
#include "core/error.h"
#include "ops/mla_qproj/tiles.h"
#include "runtime/cuda_driver.h"
#include "tools/common/cli.h"

namespace {

using spark::OutDtype;
using spark::WeightFormat;

// The arch of device 0, or sm_90a where there is no GPU.
std::string local_arch(bool& from_gpu) {
  from_gpu = false;
  try {
    const spark::CudaDriver& cu = spark::cuda_driver();
    int count = 0;
    CUdevice dev = 0;
    int major = 0, minor = 0;
    if (cu.DeviceGetCount(&count) == CUDA_SUCCESS && count > 0 && cu.DeviceGet(&dev, 0) == CUDA_SUCCESS &&
        cu.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) == CUDA_SUCCESS &&
        cu.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) == CUDA_SUCCESS) {
      from_gpu = true;
      return spark::arch_for_compute_capability(major * 10 + minor);
    }
  } catch (const spark::Error&) {
  }
  return "sm_90a";
}

nlohmann::json result_json(const spark::PrewarmResult& r) {
  nlohmann::json j = {{"key", r.key}, {"ok", r.ok}, {"ms", r.ms}};
  if (r.ok) {
    j["source"] = std::string(spark::to_string(r.source));
    j["registers"] = r.resources.registers;
    j["spill_bytes"] = r.resources.spill_bytes;
  } else {
    j["error"] = r.error;
  }
  return j;
}

// The --spec file: heads and nope required; max_m, weights and out optional (the flags'
// defaults); any other key, or a value of the wrong type, is an error naming the file.
void read_spec_file(const std::string& path, spark::PrewarmSpec& spec, int& max_m, std::vector<std::string>& weights,
                    std::vector<std::string>& outs) {
  const auto fail = [&](const std::string& why) {
    throw spark::Error(SPARK_ERROR_INVALID_ARGUMENT, fmt::format("argument '--spec': {}: {}", path, why));
  };
  std::ifstream in(path);
  if (!in) fail("cannot read the file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(fmt::format("not JSON ({})", e.what()));
  }
  if (!j.is_object()) fail("must hold one JSON object");
  for (const auto& item : j.items())
    if (item.key() != "heads" && item.key() != "nope" && item.key() != "max_m" && item.key() != "weights" &&
        item.key() != "out")
      fail(fmt::format("unknown key '{}' (known: heads, nope, max_m, weights, out)", item.key()));
  if (!j.contains("heads") || !j.contains("nope")) fail("needs \"heads\" and \"nope\" lists");
  const auto field = [&](const char* name, auto& value) {
    if (!j.contains(name)) return;
    try {
      j.at(name).get_to(value);
    } catch (const nlohmann::json::exception&) {
      fail(fmt::format("\"{}\" has the wrong type ({})", name, j.at(name).dump()));
    }
  };
  field("heads", spec.heads);
  field("nope", spec.nope_dims);
  field("max_m", max_m);
  field("weights", weights);
  field("out", outs);
}

}  // namespace

int main(int argc, char** argv) {
  namespace tools = spark_tools;
  const std::string tool = "spark-prewarm";
  CLI::App app{"spark-prewarm: compile spark's MLA kernels (the query projection, and the value up-projection for a "
               "model or --v-head-dim) into the on-disk cache"};
  tools::apply_conventions(app, tool);
  std::string model, spec_file, cache_dir;
  std::vector<std::string> archs;
  int tp = 1, jobs = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))), max_m = spark::kMaxM;
  std::vector<int> heads, nope, v_dims;
  std::vector<std::string> weights{"bf16"}, outs{"bf16", "e4m3"};
  bool json = false, quiet = false;
  std::vector<std::string> model_names;
  for (const spark::ModelPreset& p : spark::model_presets()) model_names.emplace_back(p.name);

  // Three ways to name the shapes, one at a time: a preset, explicit lists, or a file.
  auto* model_opt = app.add_option("--model", model, "model preset")->check(CLI::IsMember(model_names));
  auto* tp_opt = app.add_option("--tp", tp, "tensor-parallel size for --model (heads per rank = heads / tp; "
                                            "glm5 also 6: 11 heads)")
                     ->check(CLI::PositiveNumber);
  auto* heads_opt =
      app.add_option("--heads", heads, "heads per rank, e.g. 8,16")->delimiter(',')->check(CLI::Range(1, 128));
  auto* nope_opt =
      app.add_option("--nope", nope, "nope dim K, e.g. 192")->delimiter(',')->check(CLI::IsMember({128, 192}));
  auto* max_m_opt =
      app.add_option("--max-m", max_m, "largest M (tokens per call) to prepare")->check(CLI::Range(1, spark::kMaxM));
  auto* weights_opt = app.add_option("--weights", weights, "weight formats")
                          ->delimiter(',')
                          ->check(CLI::IsMember({"bf16", "mxfp8", "fp8-block"}));
  auto* outs_opt =
      app.add_option("--out", outs, "output dtypes")->delimiter(',')->check(CLI::IsMember({"bf16", "e4m3"}));
  auto* v_opt = app.add_option("--v-head-dim", v_dims,
                               "with --heads: also the value up-projection (mla_oproj) for these V (128, 256); a "
                               "--model brings its own")
                   ->delimiter(',')
                   ->check(CLI::IsMember({128, 256}));
  auto* spec_opt = app.add_option(
      "--spec", spec_file, "JSON file: {\"heads\":[..],\"nope\":[..],\"max_m\":N,\"weights\":[..],\"out\":[..]}");
  tp_opt->needs(model_opt);
  model_opt->excludes(heads_opt)->excludes(nope_opt)->excludes(spec_opt)->excludes(v_opt);
  v_opt->needs(heads_opt);
  spec_opt->excludes(heads_opt)->excludes(nope_opt)->excludes(max_m_opt)->excludes(weights_opt)->excludes(outs_opt);
  app.add_option("--arch", archs,
                 fmt::format("targets, comma-separated, e.g. sm_90a,sm_100a (default: the local GPU's, or sm_90a "
                             "without one; known: {})",
                             spark::supported_arch_names()))
      ->delimiter(',');
  app.add_option("--cache-dir", cache_dir, "cache root (default: $SPARK_CACHE_DIR, $XDG_CACHE_HOME/spark, ~/.cache/spark)");
  app.add_option("-j,--jobs", jobs, "parallel compiles")->check(CLI::PositiveNumber);
  app.add_flag("--json", json, "print a JSON report instead of text (and a JSON error object on failure)");
  app.add_flag("-q,--quiet", quiet, "print only the summary");
  if (const auto rc = tools::parse_command_line(app, argc, argv, tool, tools::wants_json(argc, argv))) return *rc;

  // Everything up to the first compile is the command line's fault when it fails: exit 2.
  spark::PrewarmSpec spec;
  std::vector<spark::KernelKey> keys;
  std::vector<spark::PrewarmJob> all;  // both ops' kernels
  bool from_gpu = false;
  try {
    if (!model.empty()) {
      spec = spark::preset_spec(model, tp);
    } else if (!spec_file.empty()) {
      read_spec_file(spec_file, spec, max_m, weights, outs);
    } else if (!heads.empty() && !nope.empty()) {
      spec.heads = heads;
      spec.nope_dims = nope;
    } else {
      return tools::report_error(tool, "give --model NAME [--tp N], or --heads and --nope, or --spec FILE", "usage",
                                 tools::kExitUsage, json);
    }
    spec.max_m = max_m;
    // A preset brings its model's weight formats unless --weights names others.
    if (model.empty() || weights_opt->count() > 0) {
      spec.weights.clear();
      for (const auto& w : weights) spec.weights.push_back(spark::parse_weight_format(w));
    }
    spec.outs.clear();
    for (const auto& o : outs) spec.outs.push_back(spark::parse_out_dtype(o));
    if (archs.empty()) archs.push_back(local_arch(from_gpu));
    for (const std::string& a : archs) {
      try {
        spark::arch_info(a);
      } catch (const spark::Error& e) {
        throw spark::Error(SPARK_ERROR_INVALID_ARGUMENT, fmt::format("argument '--arch': {}", e.what()));
      }
    }
    for (const std::string& a : archs) {
      spec.arch = a;
      try {
        for (auto& k : spark::expand(spec)) keys.push_back(std::move(k));
      } catch (const spark::Error& e) {
        if (spec_file.empty()) throw;
        // The spec file's values are checked here: say which file.
        throw spark::Error(e.status(), fmt::format("argument '--spec': {}: {}", spec_file, e.what()));
      }
    }
    all = spark::prewarm_jobs(keys);
    // The value up-projection: a preset's V and heads per rank, or --v-head-dim with --heads.
    std::vector<int> oproj_heads = spec.heads, oproj_v = v_dims;
    if (!model.empty()) oproj_v = {spark::model_preset(model).v_head_dim};
    for (const std::string& a : archs)
      for (auto& job : spark::oproj::prewarm_jobs(
               spark::oproj::expand(oproj_heads, oproj_v, spec.max_m, spec.weights, spec.outs, a)))
        all.push_back(std::move(job));
  } catch (const spark::Error& e) {
    return tools::report_error(tool, e.what(), "usage", tools::kExitUsage, json);
  }

  try {
    spark::KernelStore store(cache_dir.empty() ? spark::default_cache_dir() : std::filesystem::path(cache_dir));
    const std::string arch_list = fmt::format("{}", fmt::join(archs, ","));
    const bool tty = !json && !quiet && isatty(STDOUT_FILENO);
    if (!json) {
      fmt::print("spark-prewarm: {} kernels for {}{} into {}\n", all.size(), arch_list,
                 from_gpu ? " (local GPU)" : archs.size() == 1 && archs[0] == "sm_90a" && !app.count("--arch")
                                                 ? " (no GPU found; default)"
                                                 : "",
                 store.cache().root().string());
      std::fflush(stdout);
    }
    const auto start = std::chrono::steady_clock::now();
    const auto results = spark::prewarm(store, all, jobs, [&](const spark::PrewarmResult& r, size_t done) {
      if (json || (quiet && r.ok)) return;  // failures are printed even with --quiet
      if (tty) fmt::print("\r\033[K");
      if (r.ok) {
        fmt::print("  {:<22} {:<58} {:8.1f} ms  {} regs\n", spark::to_string(r.source), r.key, r.ms,
                   r.resources.registers);
      } else {
        fmt::print("  {:<22} {}\n{}\n", "FAILED", r.key, r.error);
      }
      if (tty) fmt::print("[{}/{}]", done, all.size());
      std::fflush(stdout);
    });
    if (tty) fmt::print("\r\033[K");
    for (const auto& r : results)
      if (r.failed_after_report && !json) fmt::print("  {:<22} {}\n{}\n", "FAILED", r.key, r.error);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    size_t compiled = 0, cached = 0, failed = 0;
    for (const auto& r : results) {
      if (!r.ok) ++failed;
      else if (r.source == spark::BuildSource::kCacheHit) ++cached;
      else ++compiled;
    }
    if (json) {
      nlohmann::json j = {{"arch", arch_list}, {"archs", archs}, {"cache_dir", store.cache().root().string()},
                          {"compiled", compiled}, {"cached", cached}, {"failed", failed}, {"seconds", secs},
                          {"kernels", nlohmann::json::array()}};
      for (const auto& r : results) j["kernels"].push_back(result_json(r));
      std::cout << j.dump(2) << "\n";
    } else {
      fmt::print("spark-prewarm: {} compiled, {} cached, {} failed in {:.2f} s\n", compiled, cached, failed, secs);
    }
    return failed == 0 ? tools::kExitOk : tools::kExitProblem;
  } catch (const spark::Error& e) {
    return tools::report_error(tool, e.what(), tools::status_word(e.status()), tools::kExitProblem, json);
  } catch (const std::exception& e) {
    return tools::report_error(tool, e.what(), "error", tools::kExitProblem, json);
  }
}
