// spark-bench: times spark's fused MLA query projection (--op qproj) or value up-projection
// (--op oproj) against the staged cuBLAS path the way servers run it, in CUDA-graph replay over
// many layers' distinct weights, and writes a table and a JSON result file.  bench/README.md
// explains the method and the columns.
//
// Exits 77 with "spark-bench: no CUDA device (...)" where there is no GPU (as the GPU tests do);
// --help, --version and --dry-run need no GPU.  Usage errors exit 2 (tools/common/cli.h).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "jit/arch.h"
#include "spark/spark.h"
#include "tools/common/cli.h"
#include "tools/spark-bench/bench.h"
#include "tools/spark-bench/check.h"
#include "tools/spark-bench/cuda_objects.h"
#include "tools/spark-bench/device_info.h"
#include "tools/spark-bench/timing.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using namespace spark_bench;

namespace {

constexpr int kSkipCode = 77;        // "skipped": no GPU (the tests' convention)
// Every row ran, but spark's output differed from the staged path's.  (2 is a usage error, as
// for every spark tool: tools/common/cli.h.)
constexpr int kCheckFailedCode = 3;
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;  // what PyTorch gives cuBLAS on Hopper
constexpr size_t kCeilingCopyBytes = size_t{2} << 30;
constexpr int kCeilingReps = 10;
// The variables that replace spark's tile choices (docs/environment.md): printed and recorded
// in the JSON, since a run under one of them measures other kernels.
constexpr const char* kTilingVariables[] = {"SPARK_REGIMES", "SPARK_OPROJ_SCHEDULE", "SPARK_OPROJ_TILES"};
constexpr size_t kAssumedL2Bytes = size_t{50} << 20;  // --dry-run without a GPU (H100 / H200)
constexpr size_t kFreeMemoryMargin = size_t{1} << 30;
// The default --mem-gib.  H = 128, K = 192 at M = 8192 needs ~4.4 GiB of activations (out
// alone is 1.2 GB per arm) beside ~5.4 GiB of FP8 weights for 64 layers, and more with padded
// rows and --staged-quant eager; 32 GiB holds every default row on an 80 GB H100 or a 141 GB
// H200 (the budget is capped by the free memory anyway).
constexpr double kDefaultMemGib = 32.0;

const std::vector<int> kGridHeads = {8, 11, 16, 32, 64, 128};
const std::vector<int> kGridNope = {128, 192};
// Up to the API's largest M (SPARK_MLA_QPROJ_MAX_M): prefill chunks and big decode batches.
const std::vector<int> kGridM = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
const std::vector<int> kQuickHeads = {8, 16, 128};
const std::vector<int> kQuickNope = {192};
const std::vector<int> kQuickM = {1, 16, 64, 256};
// The value up-projection's grid (the M grid is the same: SPARK_MLA_OPROJ_MAX_M is 8192 too).
const std::vector<int> kOprojGridHeads = {8, 16, 32, 64, 128};
const std::vector<int> kGridV = {128, 256};
const std::vector<int> kQuickV = {128};
static_assert(SPARK_MLA_OPROJ_MAX_M == SPARK_MLA_QPROJ_MAX_M, "--m's range is both ops'");

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// The repository root (where bench/results/ belongs) when run from it.
bool in_repo_root() {
  std::error_code ec;
  return fs::is_regular_file("include/spark/spark.h", ec) && fs::is_directory("bench", ec);
}

std::string default_json_path(const DeviceInfo& info, Op op, StagedBmm bmm) {
  const std::string suffix = op == Op::kQproj ? "" : bmm == StagedBmm::kInto ? "-oproj-into" : "-oproj";
  if (!in_repo_root()) return "spark-bench" + suffix + ".json";
  const std::string stem = "bench/results/" + utc_date() + "-" + slug(info.name) + suffix;
  std::string path = stem + ".json";
  for (int i = 2; fs::exists(path); ++i) path = fmt::format("{}-{}.json", stem, i);
  return path;
}

// Writes the document with one row per line (readable, and diffs well), atomically.
void write_json(const std::string& path, const ordered_json& doc) {
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw BenchError("cannot write " + tmp);
    f << "{\n";
    bool first = true;
    for (const auto& [key, value] : doc.items()) {
      f << (first ? "" : ",\n") << "  " << ordered_json(key).dump() << ": ";
      first = false;
      if (key == "rows") {
        f << "[";
        for (size_t i = 0; i < value.size(); ++i) f << (i == 0 ? "\n    " : ",\n    ") << value[i].dump();
        f << (value.empty() ? "]" : "\n  ]");
      } else {
        f << value.dump();
      }
    }
    f << "\n}\n";
    if (!f) throw BenchError("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

// The names as spark's keys spell them (the CLI checks membership before these parse).
template <typename T, typename Parse>
std::vector<T> parse_list(const std::vector<std::string>& names, Parse parse) {
  std::vector<T> v;
  for (const std::string& n : names) v.push_back(parse(n));
  return v;
}

std::vector<std::string> weight_format_names() {
  std::vector<std::string> v;
  for (const WeightFormat f : spark::kWeightFormats) v.emplace_back(to_string(f));
  return v;
}

// A list flag's values, each checked by `problem` ("" when the value is fine).
CLI::Validator int_validator(std::string (*problem)(int), const char* name) {
  return CLI::Validator(
      [problem](std::string& v) {
        int x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (ec != std::errc() || end != v.data() + v.size()) return v + " is not an integer";
        return problem(x);
      },
      name);
}

// The flags that belong to the other op, given with this one: a usage error ("" when none).
std::string foreign_flag(Op op, const CLI::App& app) {
  const std::vector<const char*> qproj_only = {"--nope", "--out-pitch"};
  const std::vector<const char*> oproj_only = {"--v-head-dim", "--out-pad", "--staged-bmm"};
  for (const char* flag : op == Op::kQproj ? oproj_only : qproj_only) {
    if (app.count(flag) > 0)
      return fmt::format("{} is a flag of --op {}, not of --op {}", flag, op == Op::kQproj ? "oproj" : "qproj",
                         op_name(op));
  }
  return "";
}

// The method as the JSON records it; the op's layout, staged path and floor in its words.
ordered_json method_json(const BenchOptions& o, const std::string& staged_quant, const std::string& staged_bmm,
                         size_t budget_bytes) {
  const bool q = o.op == Op::kQproj;
  ordered_json m = {
      {"layers_min", o.layers},
      {"layers_l2_multiple", kL2Multiple},
      {"layers_note", std::string("per row: max(layers_min, enough layers for >= l2_multiple x L2 of weights), "
                                  "capped by mem_budget_bytes; each layer has its own weights ") +
                          (q ? "(slices of a [H, K+256, 512] pack)"
                             : "(the last V rows of each head of a [H*(128+V), 512] pack)")},
      {"replays", o.replays},
      {"warmup", o.warmup},
      {"alternated", true},
      {"order", "ABBA: spark,staged then staged,spark"},
      {"timer", "cudaEvent pair around each graph replay; the batch is queued behind a spin kernel"},
      {"per_layer", "replay time / layers"},
      {"statistic", "median over replays (min and max also given)"},
      {"shared_buffers", std::string(q ? "q" : "o") + ", out and the staged scratch tensors are shared by all "
                                                        "layers of a row"}};
  if (q) {
    m["out_pitches"] = o.out_pitches;
  } else {
    m["out_pads"] = o.out_pads;
  }
  m["out_layout"] = std::string("out is a view of a ") +
                    (q ? "[M, H, out_pitch] buffer (out_stride_h out_pitch, out_stride_m H * out_pitch)"
                       : "[M, out_pitch] buffer (out_stride_m out_pitch = H * V + out_pad)") +
                    " in both arms; the staged arm's last kernel writes it; only the " + (q ? "576" : "H * V") +
                    " columns are compared, and spark's pad columns must keep the poison bytes";
  m["check"] = "spark vs staged outputs compared on the GPU for layer 0 before timing and for the last layer "
               "after it; bad = NaN, or > 1 ulp and (bf16) > 1e-4 apart";
  m["staged"] = std::string("cublasGemmStridedBatchedEx (bf16, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) -> ") +
                (q ? "[H,M,512]; concat kernel -> [M,H,576]"
                   : (o.staged_bmm == StagedBmm::kCopy ? "[H,M,V]; transpose copy kernel -> [M,H*V]"
                                                       : "the transposed view of [M,H,V] (no copy)")) +
                " bf16; e4m3 out: quant kernel(s)";
  m["staged_quant"] = staged_quant;
  if (!q) m["staged_bmm"] = staged_bmm;
  m["staged_mxfp8"] = "servers dequantise MXFP8 weights to bf16 once at load: the staged arm of an mxfp8 row "
                      "runs the bf16 bmm on those dequantised weights";
  m["staged_fp8_block"] = "likewise for block-FP8 weights, dequantised as RN_bf16(float(e4m3) * scale) with the "
                          "fp32 product rounded to nearest; scales (1 + f) * 2^e, e in -8..-2";
  m["spark_pdl"] = o.pdl;
  m["cublas_workspace_bytes"] = kCublasWorkspaceBytes;
  m["mem_budget_bytes"] = budget_bytes;
  m[q ? "q_scale" : "out_scale"] = kQScale;
  m["floor"] = std::string("bytes (weights read + ") + (q ? "q_nope + q_pe + out's 576" : "o + out's H * V") +
               " columns, never the pad) / ceiling";
  return m;
}

std::string clocks_text(const ordered_json& s) {
  if (s.is_null()) return "NVML not available";
  auto get = [&](const char* k) { return s.contains(k) ? std::to_string(s[k].get<unsigned>()) : std::string("?"); };
  return fmt::format("SM {} MHz (max {}), memory {} MHz (max {}), {} C, {} mW of {} mW, clock event reasons 0x{:x}",
                     get("sm_clock_mhz"), get("max_sm_clock_mhz"), get("mem_clock_mhz"), get("max_mem_clock_mhz"),
                     get("temperature_c"), get("power_mw"), get("power_limit_mw"),
                     s.contains("clock_event_reasons") ? s["clock_event_reasons"].get<unsigned long long>() : 0ull);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "spark-bench: time spark's fused MLA query projection (--op qproj) or value up-projection (--op oproj) "
      "against the staged cuBLAS path (bmm -> concat or transpose [-> e4m3 quant]) in CUDA-graph replay over "
      "many layers' weights.  See bench/README.md."};
  std::vector<int> heads, nopes, vs, ms, pitches, pads;
  std::vector<std::string> weight_names, out_names;
  int layers = 64, replays = 30, warmup = 2, device = 0;
  double mem_gib = kDefaultMemGib;
  bool pdl = false, quick = false, dry_run = false;
  std::string op_text = "qproj", json_path, staged_quant = "fused", staged_bmm = "copy";
  spark_tools::apply_conventions(app, "spark-bench");

  app.add_option("--op", op_text, "the op: qproj (query projection) or oproj (value up-projection)")
      ->check(CLI::IsMember({"qproj", "oproj"}));
  app.add_option("--heads", heads, "heads per rank (default 8,11,16,32,64,128; oproj 8,16,32,64,128)")
      ->delimiter(',')
      ->check(CLI::Range(1, 128));
  app.add_option("--nope", nopes, "qproj: nope dim K (default 128,192)")
      ->delimiter(',')
      ->check(CLI::IsMember({128, 192}));
  app.add_option("--v-head-dim", vs, "oproj: v_head_dim V (default 128,256)")
      ->delimiter(',')
      ->check(CLI::IsMember({128, 256}));
  app.add_option("--m", ms, "tokens per call (default 1,2,4,...,8192)")->delimiter(',')->check(CLI::Range(1, SPARK_MLA_QPROJ_MAX_M));
  app.add_option("--weights", weight_names, "weight formats (default bf16,mxfp8,fp8-block)")
      ->delimiter(',')
      ->check(CLI::IsMember(weight_format_names()));
  app.add_option("--out", out_names, "output dtypes (default bf16,e4m3)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "e4m3"}));
  app.add_option("--out-pitch", pitches,
                 "qproj: out's row pitch in elements (out_stride_h; out_stride_m = H * pitch), each >= 576 and a "
                 "multiple of 8: 576 contiguous (default), 640 padded to whole 32-byte sectors, 584 padded but not")
      ->delimiter(',')
      ->check(int_validator(out_pitch_problem, "PITCH"));
  app.add_option("--out-pad", pads,
                 "oproj: elements past H*V in each row of out (out_stride_m = H*V + pad), each >= 0 and a multiple "
                 "of 8: 0 contiguous (default)")
      ->delimiter(',')
      ->check(int_validator(out_pad_problem, "PAD"));
  app.add_option("--layers", layers, "minimum layers with distinct weights per graph (raised so they hold >= 4x the L2)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--replays", replays, "timed graph replays per arm (median reported)")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "untimed replays per arm first")->check(CLI::Range(0, 1000));
  app.add_option("--json", json_path,
                 "result file (default bench/results/<date>-<gpu>.json from the repository root, else "
                 "./spark-bench.json; -oproj before .json for --op oproj)");
  app.add_flag("--pdl", pdl, "create spark's plans with enable_pdl (programmatic dependent launch)");
  app.add_flag("--quick", quick,
               "a small subset: H 8,16,128; K 192 (oproj: V 128); M 1,16,64,256; bf16 weights; both outputs");
  app.add_option("--staged-quant", staged_quant,
                 "staged e4m3 quantisation: fused (one kernel, default) or eager (four kernels like eager PyTorch)")
      ->check(CLI::IsMember({"fused", "eager"}));
  app.add_option("--staged-bmm", staged_bmm,
                 "oproj: the staged bmm writes [H, M, V] and a transpose copy makes [M, H*V] (copy, default), or "
                 "it writes the output's transposed view directly, as a server passing bmm an out= view does (into)")
      ->check(CLI::IsMember({"copy", "into"}));
  app.add_option("--mem-gib", mem_gib, "device memory budget for weights and activations, GiB")
      ->check(CLI::Range(0.25, 1024.0));
  app.add_option("--device", device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app.add_flag("--dry-run", dry_run, "print the rows, layers and memory per shape, then exit (no GPU needed)");
  // --json names a file here: errors stay text.
  if (const auto rc = spark_tools::parse_command_line(app, argc, argv, "spark-bench", false)) return *rc;

  BenchOptions o;
  o.op = op_text == "oproj" ? Op::kOproj : Op::kQproj;
  if (const std::string e = foreign_flag(o.op, app); !e.empty())
    return spark_tools::report_error("spark-bench", e + " (see --help)", "usage", spark_tools::kExitUsage, false);
  const bool qproj = o.op == Op::kQproj;
  o.heads = !heads.empty() ? heads : (quick ? kQuickHeads : (qproj ? kGridHeads : kOprojGridHeads));
  if (qproj) {
    o.dims = !nopes.empty() ? nopes : (quick ? kQuickNope : kGridNope);
  } else {
    o.dims = !vs.empty() ? vs : (quick ? kQuickV : kGridV);
  }
  o.ms = !ms.empty() ? ms : (quick ? kQuickM : kGridM);
  o.weights = !weight_names.empty()
                  ? parse_list<WeightFormat>(weight_names, spark::parse_weight_format)
                  : (quick ? std::vector<WeightFormat>{WeightFormat::kBf16}
                           : std::vector<WeightFormat>(std::begin(spark::kWeightFormats), std::end(spark::kWeightFormats)));
  o.outs = !out_names.empty() ? parse_list<OutDtype>(out_names, spark::parse_out_dtype)
                              : std::vector<OutDtype>{OutDtype::kBf16, OutDtype::kE4m3};
  if (!pitches.empty()) o.out_pitches = pitches;
  if (!pads.empty()) o.out_pads = pads;
  o.layers = layers;
  o.replays = replays;
  o.warmup = warmup;
  o.pdl = pdl;
  o.quant = staged_quant == "eager" ? StagedQuant::kEager : StagedQuant::kFused;
  o.staged_bmm = staged_bmm == "into" ? StagedBmm::kInto : StagedBmm::kCopy;
  o.mem_budget_bytes = static_cast<size_t>(mem_gib * static_cast<double>(size_t{1} << 30));
  const Table table(stdout, o.op);
  if (layers < 64 || replays < 20)
    table.note(fmt::format("below the method's minimum (64 layers, 20 replays): {} layers, {} replays", layers,
                           replays));

  int count = 0;
  const cudaError_t ce = cudaGetDeviceCount(&count);
  const bool have_gpu = ce == cudaSuccess && count > device;
  if (dry_run) {
    size_t l2 = kAssumedL2Bytes;
    int l2_attr = 0;
    if (have_gpu && cudaDeviceGetAttribute(&l2_attr, cudaDevAttrL2CacheSize, device) == cudaSuccess && l2_attr > 0)
      l2 = static_cast<size_t>(l2_attr);
    // The kernels of the device's arch; without a GPU (or one spark does not target), those
    // of the H100 / H200 that spark-bench times on.
    std::string arch = "sm_90a";
    int major = 0, minor = 0;
    if (have_gpu && cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess) {
      try {
        arch = spark::arch_for_compute_capability(major * 10 + minor);
      } catch (const spark::Error&) {
      }
    }
    describe_plan(o, l2, o.mem_budget_bytes, arch, table);
    return 0;
  }
  if (!have_gpu) {
    std::printf("spark-bench: no CUDA device (%s)\n",
                ce != cudaSuccess ? cudaGetErrorString(ce)
                                  : (count == 0 ? "cudaGetDeviceCount returned 0" : "no such device ordinal"));
    return kSkipCode;
  }

  const auto t_start = std::chrono::steady_clock::now();
  ordered_json doc;
  std::vector<Row> rows;
  std::string path;
  bool aborted = false;
  std::string abort_message;
  int exit_code = 0;
  try {
    BENCH_CUDA(cudaSetDevice(device));
    BENCH_CUDA(cudaFree(nullptr));  // create the primary context before spark retains it
    const DeviceInfo info = query_device(device);
    if (info.cc_major < 9) {
      std::printf("spark-bench: %s is sm_%d%d; this build's staged-path kernels need sm_90 or newer\n",
                  info.name.c_str(), info.cc_major, info.cc_minor);
      return 1;
    }
    spark_context_options copts = SPARK_CONTEXT_OPTIONS_INIT;
    copts.device = device;
    spark_context raw_ctx = nullptr;
    BENCH_SPARK(spark_context_create(&copts, &raw_ctx));
    const SparkContext ctx(raw_ctx);

    Stream stream;
    CublasHandle cublas;
    DeviceBuffer workspace(kCublasWorkspaceBytes), counters(4 * sizeof(unsigned long long));
    BENCH_CUBLAS(cublasSetStream(cublas.get(), stream.get()));
    // An explicit workspace: cuBLAS then allocates nothing while a graph is being captured.
    BENCH_CUBLAS(cublasSetWorkspace(cublas.get(), workspace.get(), workspace.bytes()));

    const CommitInfo commit = commit_info();
    const ordered_json nvml_before = nvml_snapshot(info.pci_bus_id);
    path = !json_path.empty() ? json_path : default_json_path(info, o.op, o.staged_bmm);

    std::printf("spark-bench: %s (%d SMs, sm_%d%d, L2 %zu MiB, %zu GiB), driver %s (CUDA %s), runtime %s, "
                "cuBLAS %d, spark %s\n",
                info.name.c_str(), info.sm_count, info.cc_major, info.cc_minor, info.l2_bytes >> 20,
                info.memory_bytes >> 30, info.driver_version.empty() ? "?" : info.driver_version.c_str(),
                version_text(info.driver_api_version).c_str(), version_text(info.runtime_version).c_str(),
                info.cublas_version, spark_version_string());
    std::printf("commit %s (%s%s), %s\n", commit.commit.c_str(), commit.source.c_str(),
                commit.dirty ? ", uncommitted changes" : "", utc_timestamp().c_str());
    std::printf("clocks: %s\n", clocks_text(nvml_before).c_str());
    for (const char* name : kTilingVariables)
      if (const char* value = std::getenv(name); value != nullptr)
        std::printf("%s=%s (tiles overridden)\n", name, value);
    std::fflush(stdout);

    const CopyCeiling ceiling = measure_copy_ceiling(stream.get(), kCeilingCopyBytes, kCeilingReps);
    std::printf("copy ceiling: %.3f TB/s (%zu MiB device-to-device copy, bytes read + written, median of %d)\n",
                ceiling.tbps, ceiling.copy_bytes >> 20, kCeilingReps);

    size_t free_b = 0, total_b = 0;
    BENCH_CUDA(cudaMemGetInfo(&free_b, &total_b));
    BenchEnv env;
    env.ctx = ctx.get();
    env.cublas = cublas.get();
    env.stream = stream.get();
    env.counters = counters.as<unsigned long long>();
    env.l2_bytes = info.l2_bytes;
    env.budget_bytes = std::min(o.mem_budget_bytes, free_b > kFreeMemoryMargin ? free_b - kFreeMemoryMargin : 0);
    env.ceiling_tbps = ceiling.tbps;
    env.arch = spark::arch_for_compute_capability(info.cc_major * 10 + info.cc_minor);

    std::printf("method: >= %d layers of distinct weights per graph (raised to hold >= %dx the L2), %d replays per "
                "arm after %d warm-ups, ABBA-alternated; staged e4m3 quant %s%s; spark PDL %s\n",
                o.layers, kL2Multiple, o.replays, o.warmup, staged_quant.c_str(),
                qproj ? "" : (o.staged_bmm == StagedBmm::kInto ? ", bmm into out's view" : ", bmm + transpose copy"),
                o.pdl ? "on" : "off");
    std::printf("%zu rows -> %s\n\n", row_count(o), path.c_str());
    std::fflush(stdout);

    doc["tool"] = "spark-bench";
    doc["schema_version"] = 1;
    doc["op"] = op_name(o.op);
    doc["gpu"] = {{"name", info.name},
                  {"sm_count", info.sm_count},
                  {"compute_capability", fmt::format("{}.{}", info.cc_major, info.cc_minor)},
                  {"l2_bytes", info.l2_bytes},
                  {"memory_bytes", info.memory_bytes},
                  {"pci_bus_id", info.pci_bus_id},
                  {"peak_sm_clock_mhz", info.peak_sm_clock_mhz},
                  {"peak_mem_clock_mhz", info.peak_mem_clock_mhz}};
    doc["driver_version"] = info.driver_version.empty() ? ordered_json(nullptr) : ordered_json(info.driver_version);
    doc["cuda_driver_api_version"] = info.driver_api_version;
    doc["cuda_runtime_version"] = info.runtime_version;
    doc["cublas_version"] = info.cublas_version;
    doc["spark_version"] = spark_version_string();
    const char* smi = std::getenv("SPARK_BENCH_NVIDIA_SMI");
    doc["clocks"] = {{"nvml_before", nvml_before},
                     {"nvml_after", nullptr},
                     {"nvidia_smi", smi != nullptr ? ordered_json(smi) : ordered_json(nullptr)}};
    // Settings that change what is measured (the tiling variables choose other kernels).
    ordered_json environment = ordered_json::object();
    for (const char* name : kTilingVariables)
      if (const char* v = std::getenv(name); v != nullptr) environment[name] = v;
    for (const char* name : {"SPARK_JIT", "SPARK_CACHE_DIR", "SPARK_LOG_LEVEL", "SPARK_DUMP_DIR",
                             "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG"}) {
      if (const char* v = std::getenv(name); v != nullptr) environment[name] = v;
    }
    doc["environment"] = environment;
    doc["commit"] = commit.commit;
    doc["commit_source"] = commit.source;
    doc["commit_dirty"] = commit.dirty;
    doc["date"] = utc_timestamp();
    std::string cmd;
    for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
    doc["command_line"] = cmd;
    doc["method"] = method_json(o, staged_quant, staged_bmm, env.budget_bytes);
    doc["ceiling_tbps"] = ceiling.tbps;
    doc["ceiling"] = {{"copy_bytes", ceiling.copy_bytes},
                      {"counts", "bytes read + bytes written"},
                      {"samples_tbps", ceiling.samples_tbps}};
    doc["complete"] = false;

    auto save = [&] {
      ordered_json rj = ordered_json::array();
      for (const Row& r : rows) rj.push_back(row_json(r, ceiling.tbps));
      doc["rows"] = rj;
      doc["summary"] = summarize(o.op, rows, ceiling.tbps);
      doc["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      write_json(path, doc);
    };

    table.header();
    try {
      for (const int h : o.heads) {
        for (const int d : o.dims) {
          run_shape(o, env, Shape{o.op, h, d}, table, rows);
          save();  // a run cut short still leaves its rows behind
        }
      }
    } catch (const BenchError& e) {
      aborted = true;
      abort_message = e.what();
      std::printf("\nspark-bench: aborted: %s\n", e.what());
    }
    doc["clocks"]["nvml_after"] = nvml_snapshot(info.pci_bus_id);
    doc["complete"] = !aborted;
    if (aborted) doc["error"] = abort_message;
    save();
    print_summary(stdout, o.op, doc["summary"]);
    std::printf("clocks after: %s\n", clocks_text(doc["clocks"]["nvml_after"]).c_str());
    std::printf("wrote %s (%.0f s)\n", path.c_str(), doc["elapsed_s"].get<double>());
    const auto& s = doc["summary"];
    if (aborted || s["rows_error"].get<size_t>() > 0) {
      exit_code = 1;
    } else if (s["rows_check_warnings"].get<size_t>() > 0) {
      exit_code = kCheckFailedCode;
    }
  } catch (const std::exception& e) {
    std::printf("spark-bench: %s\n", e.what());
    if (!path.empty() && !rows.empty()) std::printf("spark-bench: partial results may be in %s\n", path.c_str());
    return 1;
  }
  return exit_code;
}
