#include "tools/spark-bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

namespace spark_bench {

namespace {

// A row's name; the pitch (oproj: the pad) only where out's rows are padded (so contiguous rows
// read as before).
std::string label(const Row& r) {
  std::string s = fmt::format("H={} {}={} M={} w={} out={}", r.heads, dim_name(r.op), r.dim, r.m,
                              to_string(r.weights), to_string(r.out));
  if (r.out_pitch != r.contiguous_pitch()) {
    s += r.op == Op::kQproj ? fmt::format(" pitch={}", r.out_pitch)
                            : fmt::format(" pad={}", r.out_pitch - r.contiguous_pitch());
  }
  return s;
}

std::string check_text(const Row& r) {
  std::string s = r.check_ok() ? "ok" : fmt::format("WARN {}+{} bad", r.pre.bad, r.post.bad);
  if (const auto pad = r.pre.pad_written + r.post.pad_written; pad > 0) s += fmt::format(" {} pad written", pad);
  if (r.host_starved) s += " starved";
  return s;
}

// v rounded to `digits` decimals (dividing by a power of ten keeps the JSON short: 0.3581,
// not 0.35810000000000003).
double rounded(double v, int digits) {
  const double p = std::pow(10.0, digits);
  return std::round(v * p) / p;
}

// The extreme of f over the measured rows that pass `keep`; null when there are none.
nlohmann::ordered_json extreme(const std::vector<Row>& rows, const std::function<bool(const Row&)>& keep,
                       const std::function<double(const Row&)>& f, bool want_max) {
  const Row* best = nullptr;
  double best_v = 0.0;
  size_t n = 0;
  for (const Row& r : rows) {
    if (!r.ok() || !keep(r)) continue;
    ++n;
    const double v = f(r);
    if (best == nullptr || (want_max ? v > best_v : v < best_v)) {
      best = &r;
      best_v = v;
    }
  }
  if (best == nullptr) return {{"value", nullptr}, {"rows", 0}};
  return {{"value", rounded(best_v, 4)}, {"at", label(*best)}, {"rows", n}};
}

// e with what it measures and, when given, its target (key "target_max" or "target_min").
nlohmann::ordered_json target(nlohmann::ordered_json e, const char* what, const char* bound = nullptr,
                              double value = 0.0) {
  e["what"] = what;
  if (bound != nullptr) e[bound] = value;
  return e;
}

// An FP8 row's BF16-weight twin has the same (H, K, M, out, pitch).
using TwinKey = std::tuple<int, int, int, int, int>;
TwinKey twin_key(const Row& r) { return {r.heads, r.dim, r.m, static_cast<int>(r.out), r.out_pitch}; }

// The largest spark_us(format) / spark_us(its BF16-weight twin) over the measured rows of
// `format` that pass keep and have a measured twin.
nlohmann::ordered_json max_over_bf16(const std::vector<Row>& rows, WeightFormat format,
                                     const std::function<bool(const Row&)>& keep) {
  std::map<TwinKey, const Row*> bf16;
  for (const Row& r : rows)
    if (r.ok() && r.weights == WeightFormat::kBf16) bf16[twin_key(r)] = &r;
  return extreme(
      rows, [&](const Row& r) { return r.weights == format && keep(r) && bf16.count(twin_key(r)) > 0; },
      [&](const Row& r) { return r.spark_us() / bf16.at(twin_key(r))->spark_us(); }, true);
}

}  // namespace

void Table::header() const {
  fmt::print(f_, "{:>4} {:>4} {:>5} {:<9} {:<4} {:>5} {:>4} | {:>9} {:>9} {:>6} | {:>8} {:>5} {:>7} | {}\n", "H",
             dim_name(op_), "M", "w", "out", "pitch", "L", "spark us", "staged us", "ratio", "floor us", "frac", "GB/s",
             "check");
  std::fflush(f_);
}

void Table::row(const Row& r, double ceiling_tbps) const {
  if (!r.ok()) {
    fmt::print(f_, "{:>4} {:>4} {:>5} {:<9} {:<4} {:>5} {:>4} | {}: {}\n", r.heads, r.dim, r.m,
               to_string(r.weights), to_string(r.out), r.out_pitch, r.layers, r.status, r.message);
  } else {
    fmt::print(f_,
               "{:>4} {:>4} {:>5} {:<9} {:<4} {:>5} {:>4} | {:>9.2f} {:>9.2f} {:>6.3f} | {:>8.2f} {:>5.2f} {:>7.0f} | "
               "{}\n",
               r.heads, r.dim, r.m, to_string(r.weights), to_string(r.out), r.out_pitch, r.layers, r.spark_us(),
               r.staged_us(), r.ratio(), r.floor_us(ceiling_tbps), r.fraction(ceiling_tbps),
               r.achieved_bytes_per_s() / 1e9, check_text(r));
  }
  std::fflush(f_);
}

void Table::skipped_plan(const Shape& s, WeightFormat w, OutDtype out, const std::string& status,
                         const std::string& message, size_t rows) const {
  fmt::print(f_, "{:>4} {:>4} {:>5} {:<9} {:<4} {:>5} {:>4} | {} ({} rows): {}\n", s.heads, s.dim, "*",
             to_string(w), to_string(out), "*", "-", status, rows, message);
  std::fflush(f_);
}

void Table::note(const std::string& line) const {
  fmt::print(f_, "# {}\n", line);
  std::fflush(f_);
}

nlohmann::ordered_json row_json(const Row& r, double ceiling_tbps) {
  nlohmann::ordered_json j;
  if (r.op == Op::kOproj) j["op"] = op_name(r.op);
  j["H"] = r.heads;
  j[dim_name(r.op)] = r.dim;
  j["M"] = r.m;
  j["weights"] = to_string(r.weights);
  j["out"] = to_string(r.out);
  j["out_pitch"] = r.out_pitch;
  if (r.op == Op::kOproj) j["out_pad"] = r.out_pitch - r.contiguous_pitch();
  j["status"] = r.status;
  if (!r.message.empty()) j["message"] = r.message;
  if (is_fp8(r.weights))
    j["staged_weights"] = fmt::format("bf16, dequantised from the {} weights at load",
                                      r.weights == WeightFormat::kMxfp8 ? "MXFP8" : "block-FP8");
  j["floor_bytes"] = r.bytes;
  j["floor_us"] = rounded(r.floor_us(ceiling_tbps), 4);
  if (!r.ok()) return j;
  j["layers"] = r.layers;
  j["spark_us"] = rounded(r.spark_us(), 4);
  j["spark_us_min"] = rounded(r.spark.min(), 4);
  j["spark_us_max"] = rounded(r.spark.max(), 4);
  j["staged_us"] = rounded(r.staged_us(), 4);
  j["staged_us_min"] = rounded(r.staged.min(), 4);
  j["staged_us_max"] = rounded(r.staged.max(), 4);
  if (!r.staged_bmm.empty()) j["staged_bmm"] = r.staged_bmm;  // which staged baseline the ratio is against
  if (!r.kernel.empty()) j["kernel"] = r.kernel;
  j["ratio"] = rounded(r.ratio(), 5);
  j["achieved_bytes_per_s"] = std::round(r.achieved_bytes_per_s());
  j["fraction_of_ceiling"] = rounded(r.fraction(ceiling_tbps), 5);
  j["staged_fraction_of_ceiling"] = rounded(r.floor_us(ceiling_tbps) / r.staged_us(), 5);
  j["replays"] = r.spark.us.size();
  j["host_starved"] = r.host_starved;
  auto counts = [](const CheckCounts& c) {
    return nlohmann::ordered_json{{"compared", c.compared},
                                  {"differ", c.differ},
                                  {"bad", c.bad},
                                  {"nan_spark", c.nan_spark},
                                  {"pad_written", c.pad_written}};
  };
  j["check"] = {{"ok", r.check_ok()}, {"before", counts(r.pre)}, {"after", counts(r.post)}};
  return j;
}

namespace {

// The query projection's targets (docs/benchmarks.md).
void qproj_targets(const std::vector<Row>& rows, double ceiling_tbps, nlohmann::ordered_json& s) {
  auto decode = [](const Row& r) {
    return (r.heads == 8 || r.heads == 11 || r.heads == 16) && r.m <= 32 && r.weights == WeightFormat::kBf16;
  };
  auto ratio = [](const Row& r) { return r.ratio(); };
  auto fraction = [&](const Row& r) { return r.fraction(ceiling_tbps); };
  auto over_floor = [&](const Row& r) { return r.spark_us() / r.floor_us(ceiling_tbps); };
  auto bf16_w = [](const Row& r) { return r.weights == WeightFormat::kBf16; };
  auto aligned = [](const Row& r) { return sector_aligned_pitch(r.out_pitch, r.out); };

  s["decode_max_ratio_bf16_out"] = target(
      extreme(rows, [&](const Row& r) { return decode(r) && r.out == OutDtype::kBf16; }, ratio, true),
      "H in {8,11,16}, M <= 32, bf16 weights: max spark/staged");
  s["decode_max_ratio_e4m3_out"] = target(
      extreme(rows, [&](const Row& r) { return decode(r) && r.out == OutDtype::kE4m3; }, ratio, true),
      "H in {8,11,16}, M <= 32, bf16 weights: max spark/staged", "target_max", 0.2);
  s["h128_small_m_max_time_over_floor"] = target(
      extreme(rows, [&](const Row& r) { return r.heads == 128 && r.m <= 32 && bf16_w(r); }, over_floor, true),
      "H = 128, M <= 32, bf16 weights: max spark_us / floor_us");
  s["bandwidth_min_fraction_of_ceiling"] = target(
      extreme(rows, [&](const Row& r) { return r.heads >= 64 && r.m >= 64 && bf16_w(r) && aligned(r); }, fraction,
              false),
      "H >= 64, M >= 64, bf16 weights, out rows whole 32-byte sectors apart: min floor_us / spark_us", "target_min",
      0.85);

  // Large M at the bandwidth limit, on every layout: a pitch that is not a whole number of
  // sectors makes each row start mid-sector, which costs the output stores partial sectors.
  auto large_m = [&](const Row& r) { return r.heads >= 32 && r.m >= 256 && bf16_w(r); };
  s["large_m_min_fraction_bf16_out_aligned"] = target(
      extreme(rows, [&](const Row& r) { return large_m(r) && r.out == OutDtype::kBf16 && aligned(r); }, fraction,
              false),
      "H >= 32, M >= 256, bf16 weights, bf16 out, pitch a whole number of sectors (576, 640): min fraction",
      "target_min", 0.85);
  s["large_m_min_fraction_bf16_out_unaligned"] = target(
      extreme(rows, [&](const Row& r) { return large_m(r) && r.out == OutDtype::kBf16 && !aligned(r); }, fraction,
              false),
      "H >= 32, M >= 256, bf16 weights, bf16 out, pitch not a whole number of sectors (584): min fraction",
      "target_min", 0.80);
  s["large_m_min_fraction_e4m3_out"] = target(
      extreme(rows, [&](const Row& r) { return large_m(r) && r.out == OutDtype::kE4m3; }, fraction, false),
      "H >= 32, M >= 256, bf16 weights, e4m3 out, any pitch: min fraction", "target_min", 0.75);

  // Each FP8 format against BF16 weights, row by row (same H, K, M, out and pitch).
  nlohmann::ordered_json fp8 = nlohmann::ordered_json::object();
  for (const WeightFormat f : spark::kWeightFormats) {
    if (!is_fp8(f)) continue;
    auto of = [f](const Row& r) { return r.weights == f; };
    nlohmann::ordered_json e;
    e["h128_m16_max_time_over_bf16"] = target(
        max_over_bf16(rows, f, [](const Row& r) { return r.heads == 128 && r.m <= 16; }),
        "H = 128, M <= 16: max spark_us(fp8) / spark_us(bf16)", "target_max", 0.65);
    e["h128_m16_max_time_over_floor"] = target(
        extreme(rows, [&](const Row& r) { return of(r) && r.heads == 128 && r.m <= 16; }, over_floor, true),
        "H = 128, M <= 16: max spark_us / its own floor_us", "target_max", 1.3);
    e["h64_m64_max_time_over_bf16"] = target(
        max_over_bf16(rows, f, [](const Row& r) { return r.heads >= 64 && r.m <= 64; }),
        "H >= 64, M <= 64: max spark_us(fp8) / spark_us(bf16)", "target_max", 0.75);
    e["decode_max_time_over_bf16"] = target(
        max_over_bf16(rows, f, [](const Row& r) { return r.heads < 32 && r.m <= 16; }),
        "H < 32, M <= 16: max spark_us(fp8) / spark_us(bf16)", "target_max", 1.0);
    e["large_m_max_time_over_bf16"] = target(max_over_bf16(rows, f, [](const Row& r) { return r.m >= 256; }),
                                             "M >= 256: max spark_us(fp8) / spark_us(bf16)", "target_max", 1.0);
    fp8[std::string(to_string(f))] = e;
  }
  s["fp8_weights"] = fp8;
}

// The value up-projection's targets (docs/benchmarks.md).
void oproj_targets(const std::vector<Row>& rows, double ceiling_tbps, nlohmann::ordered_json& s) {
  auto bf16_w = [](const Row& r) { return r.weights == WeightFormat::kBf16; };
  auto decode = [&](const Row& r) { return r.heads <= 16 && r.m <= 32 && bf16_w(r); };
  auto ratio = [](const Row& r) { return r.ratio(); };
  auto fraction = [&](const Row& r) { return r.fraction(ceiling_tbps); };
  auto over_floor = [&](const Row& r) { return r.spark_us() / r.floor_us(ceiling_tbps); };
  auto large_m = [&](const Row& r) { return r.heads >= 32 && r.m >= 256 && bf16_w(r); };
  for (const OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3}) {
    const std::string o(to_string(out));
    s["decode_max_ratio_" + o + "_out"] =
        target(extreme(rows, [&](const Row& r) { return decode(r) && r.out == out; }, ratio, true),
               "H <= 16, M <= 32, bf16 weights: max spark/staged", "target_max", 0.5);
  }
  s["h128_decode_max_time_over_floor"] = target(
      extreme(rows, [&](const Row& r) { return r.heads == 128 && r.m <= 32 && bf16_w(r); }, over_floor, true),
      "H = 128, M <= 32, bf16 weights: max spark_us / floor_us", "target_max", 1.3);
  for (const OutDtype out : {OutDtype::kBf16, OutDtype::kE4m3}) {
    const std::string o(to_string(out));
    s["large_m_min_fraction_" + o + "_out"] =
        target(extreme(rows, [&](const Row& r) { return large_m(r) && r.out == out; }, fraction, false),
               "H >= 32, M >= 256, bf16 weights, any pad: min fraction of the copy ceiling", "target_min", 0.80);
  }
  nlohmann::ordered_json fp8 = nlohmann::ordered_json::object();
  for (const WeightFormat f : spark::kWeightFormats) {
    if (!is_fp8(f)) continue;
    nlohmann::ordered_json e;
    auto h128_m16 = [f](const Row& r) { return r.weights == f && r.heads == 128 && r.m <= 16; };
    e["h128_m16_max_time_over_floor"] = target(extreme(rows, h128_m16, over_floor, true),
                                               "H = 128, M <= 16: max spark_us / its own floor_us", "target_max", 1.3);
    e["h128_m16_max_time_over_bf16"] =
        target(max_over_bf16(rows, f, [](const Row& r) { return r.heads == 128 && r.m <= 16; }),
               "H = 128, M <= 16: max spark_us(fp8) / spark_us(bf16)");
    fp8[std::string(to_string(f))] = e;
  }
  s["fp8_weights"] = fp8;
}

// The rows spark is slower on, and the counts of every kind of row.
void row_counts(const std::vector<Row>& rows, nlohmann::ordered_json& s) {
  nlohmann::ordered_json slower = nlohmann::ordered_json::array();
  size_t measured = 0, unsupported = 0, errors = 0, warnings = 0, starved = 0;
  for (const Row& r : rows) {
    if (r.status == "unsupported") ++unsupported;
    if (r.status == "error") ++errors;
    if (!r.ok()) continue;
    ++measured;
    if (!r.check_ok()) ++warnings;
    if (r.host_starved) ++starved;
    if (r.ratio() > 1.0) slower.push_back(fmt::format("{}: {:.3f}", label(r), r.ratio()));
  }
  s["rows_spark_slower_than_staged"] = {{"count", slower.size()}, {"rows", slower}};
  s["rows_measured"] = measured;
  s["rows_unsupported"] = unsupported;
  s["rows_error"] = errors;
  s["rows_check_warnings"] = warnings;
  s["rows_host_starved"] = starved;
}

}  // namespace

nlohmann::ordered_json summarize(Op op, const std::vector<Row>& rows, double ceiling_tbps) {
  nlohmann::ordered_json s;
  if (op == Op::kQproj) {
    qproj_targets(rows, ceiling_tbps, s);
  } else {
    oproj_targets(rows, ceiling_tbps, s);
  }
  row_counts(rows, s);
  return s;
}

void print_summary(std::FILE* f, Op op, const nlohmann::ordered_json& s) {
  auto line = [&](const std::string& title, const nlohmann::ordered_json& e) {
    if (e["value"].is_null()) {
      fmt::print(f, "  {:<46} n/a (no measured rows)\n", title);
      return;
    }
    std::string bound;
    if (e.contains("target_max")) bound = fmt::format("(<= {})", e["target_max"].get<double>());
    if (e.contains("target_min")) bound = fmt::format("(>= {})", e["target_min"].get<double>());
    fmt::print(f, "  {:<46} {:>8.3f}   {:<12} at {} ({} rows)\n", title, e["value"].get<double>(), bound,
               e["at"].get<std::string>(), e["rows"].get<size_t>());
  };
  fmt::print(f, "\nsummary (targets from docs/benchmarks.md)\n");
  if (op == Op::kOproj) {
    line("H<=16 M<=32 max ratio vs staged, bf16 out", s["decode_max_ratio_bf16_out"]);
    line("H<=16 M<=32 max ratio vs staged, e4m3 out", s["decode_max_ratio_e4m3_out"]);
    line("H=128 M<=32 max spark_us / floor_us", s["h128_decode_max_time_over_floor"]);
    line("H>=32 M>=256 bf16 w, bf16 out: min fraction", s["large_m_min_fraction_bf16_out"]);
    line("H>=32 M>=256 bf16 w, e4m3 out: min fraction", s["large_m_min_fraction_e4m3_out"]);
    for (const auto& [name, e] : s["fp8_weights"].items()) {
      line(name + ": H=128 M<=16 time / own floor", e["h128_m16_max_time_over_floor"]);
      line(name + ": H=128 M<=16 time / bf16 time", e["h128_m16_max_time_over_bf16"]);
    }
  } else {
    line("decode max ratio vs staged, bf16 out", s["decode_max_ratio_bf16_out"]);
    line("decode max ratio vs staged, e4m3 out", s["decode_max_ratio_e4m3_out"]);
    line("H=128 M<=32 max spark_us / floor_us", s["h128_small_m_max_time_over_floor"]);
    line("H>=64 M>=64 bf16 w: min fraction of ceiling", s["bandwidth_min_fraction_of_ceiling"]);
    line("H>=32 M>=256 bf16 w, bf16 out, aligned pitch", s["large_m_min_fraction_bf16_out_aligned"]);
    line("H>=32 M>=256 bf16 w, bf16 out, pitch 584 etc.", s["large_m_min_fraction_bf16_out_unaligned"]);
    line("H>=32 M>=256 bf16 w, e4m3 out", s["large_m_min_fraction_e4m3_out"]);
    for (const auto& [name, e] : s["fp8_weights"].items()) {
      line(name + ": H=128 M<=16 time / bf16 time", e["h128_m16_max_time_over_bf16"]);
      line(name + ": H=128 M<=16 time / own floor", e["h128_m16_max_time_over_floor"]);
      line(name + ": H>=64 M<=64 time / bf16 time", e["h64_m64_max_time_over_bf16"]);
      line(name + ": H<32 M<=16 time / bf16 time", e["decode_max_time_over_bf16"]);
      line(name + ": M>=256 time / bf16 time", e["large_m_max_time_over_bf16"]);
    }
  }
  const auto& slower = s["rows_spark_slower_than_staged"];
  fmt::print(f, "  {:<46} {:>8}\n", "rows where spark is slower than staged", slower["count"].get<size_t>());
  size_t shown = 0;
  for (const auto& r : slower["rows"]) {
    if (shown++ == 12) {
      fmt::print(f, "    ...\n");
      break;
    }
    fmt::print(f, "    {}\n", r.get<std::string>());
  }
  fmt::print(f, "  rows: {} measured, {} unsupported, {} errors, {} check warnings, {} host-starved\n",
             s["rows_measured"].get<size_t>(), s["rows_unsupported"].get<size_t>(), s["rows_error"].get<size_t>(),
             s["rows_check_warnings"].get<size_t>(), s["rows_host_starved"].get<size_t>());
  std::fflush(f);
}

}  // namespace spark_bench
