// The rows spark-bench measures, the table it prints as it goes, the summary against the
// targets of docs/benchmarks.md, and the JSON it writes.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/spark-bench/timing.h"
#include "tools/spark-bench/workload.h"

namespace spark_bench {

// Outcome of comparing spark's output with the staged arm's (see device_ops.h).
struct CheckCounts {
  unsigned long long compared = 0;
  unsigned long long differ = 0;     // bits differ
  unsigned long long bad = 0;        // > 1 ulp (and > the absolute tolerance) apart, or NaN
  unsigned long long nan_spark = 0;
  unsigned long long pad_written = 0;  // elements of spark's pad columns (past a row's columns) it wrote
};

struct Row {
  Op op = Op::kQproj;
  int heads = 0, dim = 0, m = 0;  // dim: K (qproj) or V (oproj)
  WeightFormat weights = WeightFormat::kBf16;
  OutDtype out = OutDtype::kBf16;
  int out_pitch = kOutCols;   // elements between out's rows ((m, h) for qproj, m for oproj)
  std::string status = "ok";  // "ok", "unsupported", "error"
  std::string message;
  int layers = 0;
  Samples spark, staged;
  bool host_starved = false;
  CheckCounts pre, post;  // layer 0 before timing; the graphs' last layer after timing
  double bytes = 0.0;     // floor_bytes(): the logical bytes, never a pitch's pad
  std::string staged_bmm;  // a measured oproj row: its staged arm's bmm, "copy" or "into"
  std::string kernel;      // a measured row: spark's kernel, "KEY: TILE" (kernel_info.h)

  bool ok() const { return status == "ok"; }
  // out_pitch when out's rows are unpadded: 576, or H*V.
  int contiguous_pitch() const { return op == Op::kQproj ? kOutCols : heads * dim; }
  bool check_ok() const {
    return pre.bad == 0 && post.bad == 0 && pre.pad_written == 0 && post.pad_written == 0;
  }
  double spark_us() const { return spark.median(); }
  double staged_us() const { return staged.median(); }
  double ratio() const { return spark_us() / staged_us(); }
  double floor_us(double ceiling_tbps) const { return bytes / (ceiling_tbps * 1e12) * 1e6; }
  double fraction(double ceiling_tbps) const { return floor_us(ceiling_tbps) / spark_us(); }
  double achieved_bytes_per_s() const { return bytes / (spark_us() * 1e-6); }
};

// The per-row lines, flushed as they are printed (the second column is K, or V for oproj).
class Table {
 public:
  explicit Table(std::FILE* f, Op op = Op::kQproj) : f_(f), op_(op) {}
  void header() const;
  void row(const Row& r, double ceiling_tbps) const;
  // One line for a plan whose rows are all skipped (unsupported or failed).
  void skipped_plan(const Shape& s, WeightFormat w, OutDtype out, const std::string& status,
                    const std::string& message, size_t rows) const;
  void note(const std::string& line) const;

 private:
  std::FILE* f_;
  Op op_;
};

// A row's JSON: H, K, M, ... for qproj (as ever); op "oproj", H, V, M, ..., out_pad for oproj.
nlohmann::ordered_json row_json(const Row& r, double ceiling_tbps);

// The figures of docs/benchmarks.md's targets for the run's op, computed over the measured rows.
nlohmann::ordered_json summarize(Op op, const std::vector<Row>& rows, double ceiling_tbps);
void print_summary(std::FILE* f, Op op, const nlohmann::ordered_json& summary);

}  // namespace spark_bench
